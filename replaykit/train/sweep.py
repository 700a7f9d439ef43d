"""Sweeps: every (criterion × optimizer) counterfactual of one recorded training, in one table.

``replaykit audit TRAINING_ID --sweep criteria=strict_pareto,mean_reward --sweep
optimizers=greedy_monotonic,margin_greedy:margin=2`` → per cell: accepted epochs,
final baseline, its solve rate, the share of epochs computable offline, and ``p_value``: the
exact one-sided McNemar p that the final baseline solves more than the initial one (on the
same panel), with ``p_bh``, the Benjamini–Hochberg adjustment over the sweep's cells (a sweep
is many trainings; some look better by chance). The scratch clone, the recorded proposals and the measurement look-ups are shared by
all cells; nothing is written.
"""

from __future__ import annotations

from replaykit.cassette.backend import RunStore
from replaykit.core.errors import ConfigError
from replaykit.core.progress import Progress
from replaykit.train.audit_records import SweepCell, SweepReport
from replaykit.train.config import train_config
from replaykit.train.counterfactual import report
from replaykit.train.criteria import make_criterion
from replaykit.train.derived import verified_training
from replaykit.train.optimizers import make_optimizer
from replaykit.train.scratch import Scratch
from replaykit.train.significance import benjamini_hochberg
from replaykit.train.stats import paired
from replaykit.train.walk import (
    Measurements,
    parse_spec,
    recorded_criterion,
    recorded_optimizer,
    spec_text,
    training_config,
    walk,
)

AXES = {
    "criteria": "criteria",
    "criterion": "criteria",
    "optimizers": "optimizers",
    "optimizer": "optimizers",
}


def split_specs(text: str) -> list[str]:
    """``a,b:k=1,j=2,c`` → [``a``, ``b:k=1,j=2``, ``c``]: a ``key=value`` without a ``:`` continues the previous spec."""
    out: list[str] = []
    for token in (t.strip() for t in text.split(",")):
        if not token:
            continue
        if out and "=" in token and ":" not in token:
            out[-1] += "," + token
        else:
            out.append(token)
    return out


def parse_sweep(options: list[str]) -> dict[str, list[str]]:
    """``["criteria=a,b", "optimizers=c"]`` → {"criteria": [...], "optimizers": [...]}."""
    axes: dict[str, list[str]] = {"criteria": [], "optimizers": []}
    for option in options:
        axis, eq, values = option.partition("=")
        if not eq or axis.strip() not in AXES:
            raise ConfigError(
                f"bad --sweep {option!r}; use --sweep criteria=a,b and/or --sweep optimizers=c,d"
            )
        specs = split_specs(values)
        if not specs:
            raise ConfigError(f"--sweep {option!r} names nothing; list at least one name")
        for spec in specs:
            parse_spec(spec)
        axes[AXES[axis.strip()]].extend(specs)
    return axes


def final_p(measurements: Measurements, initial: str, final: str | None) -> float | None:
    """The exact one-sided McNemar p that ``final`` solves more than ``initial`` (None: unknown)."""
    base, cand = measurements.lookup(initial)[0], measurements.lookup(final)[0] if final else None
    if base is None or cand is None:
        return None
    return paired(base, cand)["mcnemar_p_better"]


def with_bh(cells: list[SweepCell]) -> None:
    """Each cell's ``p_bh``: Benjamini–Hochberg over the cells whose p is known."""
    known = [c for c in cells if c["p_value"] is not None]
    for cell, q in zip(known, benjamini_hochberg([float(c["p_value"] or 0.0) for c in known]), strict=True):
        cell["p_bh"] = q


def sweep(
    store: RunStore,
    training_id: str,
    criteria: list[str] | None = None,
    optimizers: list[str] | None = None,
    progress: Progress | None = None,
) -> SweepReport:
    """One counterfactual per (criterion, optimizer); an empty axis means "as recorded"."""
    doc = verified_training(store, training_id, bundle=False)
    config = training_config(doc, store)
    rec_crit = recorded_criterion(doc)
    rec_opt = recorded_optimizer(doc)
    crit_specs = [parse_spec(c) for c in criteria or []] or [rec_crit]
    opt_specs = [parse_spec(o) for o in optimizers or []] or [rec_opt]
    for name, params in crit_specs:
        make_criterion(name, **params)
    for name, params in opt_specs:
        make_optimizer(name, **params)
    measurements = Measurements(store, doc, config)
    cells: list[SweepCell] = []
    with Scratch(store, doc, config.harness.entry, train_config(config).patch_surface) as scratch:
        proposals = scratch.proposals()
        for cname, cparams in crit_specs:
            for oname, oparams in opt_specs:
                crit, opt = make_criterion(cname, **cparams), make_optimizer(oname, **oparams)
                result = walk(store, doc, scratch, proposals, measurements, crit, opt)
                rep = report(
                    doc,
                    result,
                    measurements,
                    proposals,
                    (crit.name, crit.params()),
                    (opt.name, opt.params()),
                    rec_crit,
                    rec_opt,
                )
                final = rep["final"]["counterfactual"]
                cells.append(
                    {
                        "criterion": rep["criterion"]["spec"],
                        "optimizer": rep["optimizer"]["spec"],
                        "recorded": rep["same_as_recorded"],
                        "accepted_epochs": [
                            r["epoch"] for r in rep["epochs"] if r["counterfactual_decision"] == "accepted"
                        ],
                        "accepted": rep["accepted"],
                        "flipped": rep["flipped"],
                        "complete": rep["complete"],
                        "final_baseline": final["sha"],
                        "last_known_baseline": final["last_known"],
                        "final_solved": final["solved"],
                        "final_total": final["total"],
                        "final_solve_rate": final["solve_rate"],
                        "offline_share": rep["offline_share"],
                        "needs_recording": len(rep["needs_recording"]),
                        "p_value": final_p(measurements, doc.initial_sha, final["sha"]),
                        "p_bh": None,
                    }
                )
                if progress:
                    progress("cell", {"epoch": len(cells)})
    with_bh(cells)
    return {
        "training_id": doc.training_id,
        "kind": "sweep",
        "criteria": [spec_text(*c) for c in crit_specs],
        "optimizers": [spec_text(*o) for o in opt_specs],
        "recorded_final": measurements.rate(doc.chain[-1]),
        "cells": cells,
    }


REPORT_CRITERIA = ("strict_pareto", "mean_reward")


def report_sweep(store: RunStore, training_id: str) -> SweepReport | None:
    """The sweep a training report shows: the recorded criterion and the built-in ones × every registered
    optimizer, all with their default parameters. None when the training cannot be swept (nothing is raised:
    a report never fails for its optional parts)."""
    from replaykit.core.errors import ReplaykitError
    from replaykit.train.optimizers import optimizer_names

    try:
        doc = verified_training(store, training_id, bundle=False)
        defaults = [spec_text(c.name, c.params()) for c in (make_criterion(n) for n in REPORT_CRITERIA)]
        criteria = list(dict.fromkeys([spec_text(doc.criterion["name"], doc.criterion["params"]), *defaults]))
        return sweep(store, training_id, criteria, optimizer_names())
    except ReplaykitError:
        return None
