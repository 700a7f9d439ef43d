"""``/tasks``: per task, across the stored runs, how many runs measured it, its task
instances, how many were solved, failed or infra, and its pass rate, hardest first; filters
as on ``/runs`` (model, harness SHA prefix). The store computes it (``store/tasks.py``: each
run's document read once per change to the store), so a page costs a look-up while nothing
is being recorded.

    page = task_rates(store, model="reference-weak")
    page["tasks"][0]  # {"task_id": "organize-files", "runs": 14, "instances": 28, "solved": 20, …}
"""

from __future__ import annotations

from replaykit.cassette.backend import BrowseStore
from replaykit.cassette.store.tasks import TaskRates


def task_rates(store: BrowseStore, model: str = "", harness: str = "") -> TaskRates:
    """Every task the runs (of ``model``, of harness commits starting ``harness``) measured,
    hardest first (the lowest pass rate; never graded last)."""
    return store.task_rates(model, harness)
