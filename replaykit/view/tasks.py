"""Per task, across the stored runs (``/tasks``): how many runs measured it, its task
instances (task#seed) over those runs, how many were solved, failed or infra, and its pass
rate (solved / graded: infra failures are not the harness's). Filters as on ``/runs``
(model, harness SHA prefix); each run's document is read once per page.

    page = task_rates(store, model="reference-weak")
    page["tasks"][0]  # {"task_id": "organize-files", "runs": 14, "instances": 28, "solved": 20, …}
"""

from __future__ import annotations

from replaykit.cassette.backend import BrowseStore
from replaykit.view.pages import TaskRate, TasksPage


def task_rates(store: BrowseStore, model: str = "", harness: str = "") -> TasksPage:
    """Every task the runs (of ``model``, of harness commits starting ``harness``) measured,
    hardest first (the lowest pass rate; never graded last)."""
    rows = [
        r
        for r in store.doc_rows("measure")
        if (not model or r["model"] == model) and (not harness or r["harness_sha"].startswith(harness))
    ]
    per: dict[str, TaskRate] = {}
    runs: dict[str, set[str]] = {}
    shas: dict[str, set[str]] = {}
    for row in rows:
        for e in store.get_run(row["id"]).episodes:
            t = per.setdefault(
                e.task_id,
                {
                    "task_id": e.task_id,
                    "runs": 0,
                    "harnesses": 0,
                    "instances": 0,
                    "solved": 0,
                    "failed": 0,
                    "infra": 0,
                    "pass_rate": None,
                },
            )
            runs.setdefault(e.task_id, set()).add(row["id"])
            shas.setdefault(e.task_id, set()).add(row["harness_sha"])
            t["instances"] += 1
            if e.infra_failure:
                t["infra"] += 1
            elif e.passed:
                t["solved"] += 1
            else:
                t["failed"] += 1
    for task, t in per.items():
        t["runs"], t["harnesses"] = len(runs[task]), len(shas[task])
        graded = t["solved"] + t["failed"]
        t["pass_rate"] = t["solved"] / graded if graded else None
    tasks = sorted(per.values(), key=lambda t: (t["pass_rate"] is None, t["pass_rate"] or 0.0, t["task_id"]))
    return {
        "tasks": tasks,
        "runs": len(rows),
        "models": sorted({r["model"] for r in store.doc_rows("measure")}),
    }
