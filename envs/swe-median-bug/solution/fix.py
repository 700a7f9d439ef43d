"""The fix: the mean of the two middle values for an even-length list."""

from pathlib import Path

path = Path("statkit/core.py")
source = path.read_text(encoding="utf-8")
buggy = "        return ordered[middle]\n    return ordered[middle]\n"
fixed = "        return ordered[middle]\n    return (ordered[middle - 1] + ordered[middle]) / 2\n"
assert buggy in source, "statkit/core.py is not the shipped version"
path.write_text(source.replace(buggy, fixed), encoding="utf-8")
