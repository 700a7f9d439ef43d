"""``/trainings`` and ``/trainings/ID``: what a training's listing row and page show, from the
store's training documents (reads only).

A training is read through ``train.derived`` (recomputed, as every command reads it; its git
bundle is checked where it is used): a forged one is listed, and its page shown, as
``store corrupt: …``. Its row carries the decisions per epoch and the curve (``curve.py``);
its page adds the train/val/test panels per epoch (``train/panels.py``) when it has more
than one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replaykit.cassette.backend import BrowseStore, RunStore
from replaykit.core.errors import StoreCorrupt
from replaykit.core.training_doc import EpochRecord
from replaykit.train.derived import verified_training
from replaykit.train.panels import PANELS, epoch_panels
from replaykit.view.curve import curve
from replaykit.view.pages import DecisionCount, Decisions, PanelRow, TrainingPage, TrainingRow, TrainingsPage

if TYPE_CHECKING:
    from replaykit.cassette.store.schema import RunsRow


def _accepted(epochs: list[EpochRecord]) -> Decisions:
    """Counts per decision and which epochs had each (``accepted 1 (e0)``)."""

    def count(decision: str) -> DecisionCount:
        which = [e.epoch for e in epochs if e.decision == decision]
        return {"count": len(which), "epochs": which}

    return {"accepted": count("accepted"), "rejected": count("rejected"), "skipped": count("skipped")}


def training_row(store: RunStore, row: RunsRow) -> TrainingRow:
    """A training as listed, verified first (its git bundle is checked where it is used: replay
    clones it; ``cassettes verify`` and import verify it); a forged one is listed as store corrupt."""
    try:
        doc = verified_training(store, row["id"], bundle=False)
    except StoreCorrupt as exc:
        return {**_blank_training(row), "corrupt": str(exc)}
    epochs = doc.epochs
    metrics = [v["metrics"] for e in epochs if (v := e.verdict)]
    units = next((u for m in metrics if isinstance(u := m.get("units"), int) and u), None)
    return {
        "id": row["id"],
        "name": row.get("name") or doc.name,
        "model": doc.model.name or row["model"],
        "created_at": row["created_at"],
        "initial_sha": doc.initial_sha,
        "final_baseline": doc.final_baseline,
        "branch": doc.branch,
        "criterion": doc.criterion["name"],
        "epochs": epochs,
        "n_epochs": len(epochs),
        "decisions": _accepted(epochs),
        "units": units,
        "curve": curve(epochs, units),
        "corrupt": "",
    }


def _blank_training(row: RunsRow) -> TrainingRow:
    return {
        "id": row["id"],
        "name": row.get("name") or "",
        "model": row.get("model") or "",
        "created_at": row["created_at"],
        "initial_sha": "",
        "final_baseline": "",
        "branch": "",
        "criterion": "",
        "epochs": [],
        "n_epochs": 0,
        "decisions": _accepted([]),
        "units": None,
        "curve": curve([], None),
        "corrupt": "",
    }


def trainings(store: BrowseStore) -> TrainingsPage:
    return {"trainings": [training_row(store, r) for r in store.doc_rows("training")]}


def training(store: BrowseStore, training_id: str) -> TrainingPage:
    full = store.resolve_id("runs", training_id, what="training")
    row = next((r for r in store.doc_rows("training") if r["id"] == full), None)
    if row is None:
        store.get_doc(full, kind="training")  # raises the one-line "… is a run, not a training"
        raise AssertionError(full)
    doc = verified_training(store, full, bundle=False)  # a forged training's page is its one line
    rows: list[PanelRow] = []
    for e in doc.epochs:
        views, gaps = epoch_panels(store, e)  # train/val/test rates, from the runs
        rows.append({"epoch": e.epoch, "panels": views, "gap": gaps})
    panels = [p for p in PANELS if any(p in r["panels"] for r in rows)]
    return {
        "training": training_row(store, row),
        "panels": panels if len(panels) > 1 else [],
        "panel_rows": rows if len(panels) > 1 else [],
    }
