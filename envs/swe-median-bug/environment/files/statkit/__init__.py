"""statkit: tiny descriptive statistics."""

from statkit.core import mean, median, mode

__all__ = ["mean", "median", "mode"]
