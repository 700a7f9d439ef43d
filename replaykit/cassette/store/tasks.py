"""Per task across the stored measured runs (the viewer's ``/tasks``): how many runs and
harness commits measured it, its task instances (task#seed) over those runs, how many were
solved, failed or infra, and its pass rate (solved / graded: infra failures are not the
harness's). A named query: each run's document is read (and verified) once per change to
the store, whatever number of pages ask in between.

    rates = store.task_rates(model="reference-weak")
    rates["tasks"][0]  # {"task_id": "organize-files", "runs": 14, "instances": 28, "solved": 20, …}
"""

from __future__ import annotations

from typing import TypedDict

from replaykit.cassette.store.browsing import BrowsingMixin
from replaykit.cassette.store.documents import DocumentsMixin


class TaskRate(TypedDict):
    """One task across the runs counted."""

    task_id: str
    runs: int  # runs that measured it
    harnesses: int  # distinct harness commits among them
    instances: int  # its task instances (task#seed) over those runs
    solved: int
    failed: int
    infra: int  # not graded (never counted as a harness's failure)
    pass_rate: float | None  # solved / (solved + failed); None: nothing graded


class TaskRates(TypedDict):
    tasks: list[TaskRate]  # hardest first: the lowest pass rate; never graded last
    runs: int  # runs the rates are over (after the filters)
    models: list[str]  # every model a measured run used (the filter's choices)


def _new(task_id: str) -> TaskRate:
    return {
        "task_id": task_id,
        "runs": 0,
        "harnesses": 0,
        "instances": 0,
        "solved": 0,
        "failed": 0,
        "infra": 0,
        "pass_rate": None,
    }


class TasksMixin(DocumentsMixin, BrowsingMixin):
    """Per-task rates over the measured runs, kept until the store changes."""

    def task_rates(self, model: str = "", harness: str = "") -> TaskRates:
        """Every task the measured runs (of ``model``, of harness commits starting ``harness``)
        measured, hardest first; computed again only after a change to the store."""
        found = self._per_change(("task_rates", model, harness), lambda: self._task_rates(model, harness))
        tasks = [TaskRate(**t) for t in found["tasks"]]  # the caller's own rows: the cache stays as computed
        return {"tasks": tasks, "runs": found["runs"], "models": list(found["models"])}

    def _task_rates(self, model: str, harness: str) -> TaskRates:
        measured = self.doc_rows("measure")
        rows = [
            r
            for r in measured
            if (not model or r["model"] == model) and (not harness or r["harness_sha"].startswith(harness))
        ]
        per: dict[str, TaskRate] = {}
        runs: dict[str, set[str]] = {}
        shas: dict[str, set[str]] = {}
        for row in rows:
            for e in self.get_run(row["id"]).episodes:
                t = per.setdefault(e.task_id, _new(e.task_id))
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
        tasks = sorted(
            per.values(), key=lambda t: (t["pass_rate"] is None, t["pass_rate"] or 0.0, t["task_id"])
        )
        return {"tasks": tasks, "runs": len(rows), "models": sorted({r["model"] for r in measured})}
