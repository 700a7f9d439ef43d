"""The progress callback every long operation takes: ``progress(event, data)``.

Library functions report ``("plan", {"total": n})``, then one event per unit done;
the CLI turns them into a rich progress bar (``render.progress``). None: silent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Progress = Callable[[str, dict[str, Any]], None]
