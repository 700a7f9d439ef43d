"""A transfer document's report section: the table (each config × model: every harness role's
solve rate, its interval, its paired difference against the untrained harness) and the grouped
chart, the seed's headline figure (one group per config × model, one bar per harness)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from replaykit.cassette.backend import DocumentStore
from replaykit.report import charts
from replaykit.report.documents import TransferSection, TransferSectionCell, TransferSectionRow
from replaykit.train.transfer_doc import TransferDoc, transfer_table

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def transfer_section(
    store: DocumentStore, doc: TransferDoc, run_anchor: Callable[[str], str]
) -> tuple[TransferSection, Figure]:
    """The section and its chart, every number computed from the runs (``transfer_table``);
    ``run_anchor``: a run's grid in the report (collected by the caller)."""
    roles = [h["role"] for h in doc.harnesses]
    rows: list[TransferSectionRow] = []
    for row in transfer_table(store, doc):
        cells: list[TransferSectionCell | None] = []
        for role in roles:
            found = row["rates"].get(role)
            cells.append(
                None
                if found is None
                else {
                    **found,
                    "role": role,
                    "run": run_anchor(found["run_id"]),
                    "against_untrained": row["against_untrained"].get(role),
                }
            )
        rows.append({"config": row["config"], "model": row["model"], "cells": cells})
    one_config = len(doc.configs) == 1
    groups = [r["model"] if one_config else f"{r['config']}\n{r['model']}" for r in rows]
    series = {
        f"{role} ({h['sha'][:7]})": [c["rate"] if (c := r["cells"][i]) else 0.0 for r in rows]
        for i, (role, h) in enumerate(zip(roles, doc.harnesses, strict=True))
    }
    intervals: dict[str, list[tuple[float, float] | None]] = {
        name: [(c["low"], c["high"]) if (c := r["cells"][i]) else None for r in rows]
        for i, name in enumerate(series)
    }
    figure = charts.grouped_bars(
        groups, series, "solve rate: trained vs untrained", "solve rate", "transfer-bars", intervals
    )
    section: TransferSection = {
        "transfer_id": doc.transfer_id,
        "training_id": doc.training_id,
        "harnesses": doc.harnesses,
        "rows": rows,
    }
    return section, figure
