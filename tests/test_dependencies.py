"""Every third-party module replaykit imports (lazy imports included) comes from a
distribution pyproject.toml declares — in the dependencies, or in an extra when the
import is optional. A fresh ``pip install -e .`` must not depend on what happens to
be installed beside it (a module borrowed from another package's dependencies breaks
the README's first command on a new machine)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: imports that are not replaykit's own to declare, each with its reason
ELSEWHERE = {
    "mitmproxy": "envs/docker/network/addon.py runs inside mitmdump, in its own venv (scripts/setup-network.sh)",
    "matching": "addon.py's sibling module, imported by file inside mitmdump",
    "policy": "addon.py's sibling module (where the proxy may connect), imported by file inside mitmdump",
}
#: modules of an extra that ``pip install -e '.[dev]'`` does not bring (the engine's, built by
#: scripts/setup-engine.sh): where they are not installed, the distribution that provides them
NOT_IN_DEV = {"llama_cpp": "llama-cpp-python"}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~\[;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def imported_top_levels() -> dict[str, str]:
    """Top-level module -> a file that imports it, for every import under replaykit/."""
    found: dict[str, str] = {}
    for path in sorted((REPO / "replaykit").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(REPO)))
    return found


def test_every_imported_distribution_is_declared() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = {_name(r) for r in project["dependencies"]}
    for extra in project.get("optional-dependencies", {}).values():
        declared |= {_name(r) for r in extra}
    owners = packages_distributions()
    missing = []
    for module, where in imported_top_levels().items():
        if module in sys.stdlib_module_names or module in ("replaykit", "__future__") or module in ELSEWHERE:
            continue
        dists = {d.lower().replace("_", "-") for d in owners.get(module, [])}
        if not dists and module in NOT_IN_DEV:
            dists = {NOT_IN_DEV[module]}
        if not dists:
            missing.append(f"{module} (imported by {where}; not installed here)")
        elif not dists & declared:
            missing.append(f"{module} from {', '.join(sorted(dists))} (imported by {where})")
    assert not missing, "undeclared imports: " + "; ".join(missing)


def test_modules_outside_dev_are_in_an_extra_other_than_dev() -> None:
    """What ``NOT_IN_DEV`` excuses is declared in an extra, never in the dependencies or ``dev``
    (there it would be installed, and the excuse would hide a missing declaration)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    core_and_dev = {_name(r) for r in project["dependencies"] + extras.get("dev", [])}
    others = {_name(r) for name, reqs in extras.items() if name != "dev" for r in reqs}
    for module, dist in NOT_IN_DEV.items():
        assert dist in others and dist not in core_and_dev, (module, dist)
