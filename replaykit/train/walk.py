"""Walking a training's recorded epochs with a criterion and an optimizer: the machinery
shared by the counterfactual audit (``counterfactual.py``), sweeps and the verification of a
recorded training (``derived.py``, with the recorded policy).

``walk`` steps through every recorded epoch: while the walked baseline equals the recorded
one, the recorded candidate and both runs come from cassettes (``Measurements``: runs by
harness SHA, from stored cassettes only); where a decision differs, the scratch clone
re-applies the recorded proposal to the new baseline. It stops at the first epoch whose
episodes were never recorded and names them. Reading only: the store is never written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from replaykit.cassette.backend import RunStore, StoreHandle
from replaykit.cassette.keys import CassetteKey
from replaykit.core.errors import ConfigError
from replaykit.core.progress import Progress
from replaykit.core.records import JSON
from replaykit.core.run_doc import RunDoc
from replaykit.core.training_doc import EpochRecord, TrainingDoc
from replaykit.episodes.config import RunConfig
from replaykit.episodes.run_document import run_document
from replaykit.train import adaptive, exclusions
from replaykit.train.audit_records import CounterfactualRow, NeededEpisode, SolveRate, WalkResult
from replaykit.train.criteria import make_criterion
from replaykit.train.error_budget import epoch_criterion, training_budget, verdict_decision
from replaykit.train.optim.base import StepInput
from replaykit.train.optimizers import Optimizer, make_optimizer
from replaykit.train.panels import first_baseline_run
from replaykit.train.scratch import Proposal, Scratch
from replaykit.train.verdicts import Criterion


def parse_spec(text: str) -> tuple[str, dict[str, JSON]]:
    """``NAME[:key=value,key=value]`` (values are YAML scalars or [lists]) → (name, params)."""
    name, _, rest = text.strip().partition(":")
    if not name:
        raise ConfigError(f"empty name in {text!r}; use NAME or NAME:key=value,...")
    params: dict[str, JSON] = {}
    parts, depth, cur = [], 0, ""
    for ch in rest:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for part in (p.strip() for p in parts if p.strip()):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"bad parameter {part!r} in {text!r}; use NAME:key=value,key=value")
        params[key.strip()] = yaml.safe_load(value)
    return name, params


def spec_text(name: str, params: Mapping[str, JSON]) -> str:
    shown = {k: v for k, v in params.items() if v is not None}

    def fmt(v: Any) -> str:
        return "[" + ",".join(map(str, v)) + "]" if isinstance(v, (list, tuple)) else str(v)

    return name + (":" + ",".join(f"{k}={fmt(v)}" for k, v in sorted(shown.items())) if shown else "")


def recorded_optimizer(doc: TrainingDoc) -> tuple[str, dict[str, JSON]]:
    if doc.optimizer:
        return doc.optimizer["name"], dict(doc.optimizer.get("params", {}))
    opt = dict(((doc.config or {}).get("train") or {}).get("optimizer") or {"name": "greedy_monotonic"})
    return opt.pop("name", "greedy_monotonic"), opt


def recorded_criterion(doc: TrainingDoc) -> tuple[str, dict[str, JSON]]:
    return doc.criterion["name"], dict(doc.criterion["params"])


def chosen(doc: TrainingDoc, criterion: str | None, optimizer: str | None) -> tuple[Criterion, Optimizer]:
    """The criterion and optimizer to judge with (``NAME[:k=v,...]``; default: as recorded), built
    (and so validated) before anything runs."""
    crit_name, crit_params = parse_spec(criterion) if criterion else recorded_criterion(doc)
    opt_name, opt_params = parse_spec(optimizer) if optimizer else recorded_optimizer(doc)
    return make_criterion(crit_name, **crit_params), make_optimizer(opt_name, **opt_params)


def training_config(doc: TrainingDoc, store: StoreHandle) -> RunConfig:
    data = dict(doc.config)
    data["store"] = str(store.location)
    config = RunConfig.recorded(data, f"training {doc.training_id}")
    config.base_dir = Path(doc.config_base_dir)
    return config


class Measurements:
    """Runs by harness SHA, assembled from stored cassettes only (nothing is written)."""

    def __init__(self, store: RunStore, doc: TrainingDoc, config: RunConfig) -> None:
        self.store, self.config = store, config
        named = first_baseline_run(doc)  # the deciding panel's (val, when the training has one)
        first = store.get_run(named) if named else None
        if first is None:
            raise ConfigError(f"training {doc.training_id} has no measured run; nothing to audit")
        self.template = adaptive.base_template(  # an adaptive verdict's run holds more seeds
            [
                CassetteKey.from_canonical(json.loads(store.cassette_row(c)["key_json"]))
                for c in first.cassettes
            ],
            config,
        )
        self.repo = first.harness_repo
        self.cache: dict[str, tuple[RunDoc | None, list[CassetteKey]]] = {}

    def lookup(self, sha: str) -> tuple[RunDoc | None, list[CassetteKey]]:
        """(run, []) when every episode of ``sha`` on the panel is stored, else (None, missing keys)."""
        if sha not in self.cache:
            keys = [replace(k, harness_sha=sha) for k in self.template]
            missing = [k for k in keys if not self.store.has(k.id)]
            pairs: list[Any] = [(k, None) for k in keys]  # run_document reads only the keys
            run = (
                None
                if missing
                else run_document(self.config, self.store, sha, self.config.model, pairs, self.repo)
            )
            if run is not None:  # verify-on-read of the columns verdicts use
                self.store.check_run(run)
            self.cache[sha] = (run, missing)
        return self.cache[sha]

    def adaptive(self, base: RunDoc, cand: RunDoc, judge: Criterion) -> tuple[RunDoc, RunDoc]:
        """Both runs as an adaptive panel's rounds extend them (as they are, for a fixed panel)."""
        if self.config.panel.adaptive is None:
            return base, cand
        rounds = adaptive.stored_round(self.store, self.config, self.template, self.repo)
        extended = adaptive.extend(self.store, self.config, base, cand, adaptive.level(judge), rounds)
        return extended[0], extended[1]

    def rate(self, sha: str | None) -> SolveRate:
        run = self.lookup(sha)[0] if sha else None
        if run is None:
            return {"sha": sha, "solved": None, "total": len(self.template), "solve_rate": None}
        return {
            "sha": sha,
            "solved": run.solved,
            "total": run.total,
            "solve_rate": run.solved / max(run.total, 1),
        }


def _excluded(store: RunStore, rec: EpochRecord, base: RunDoc, cand: RunDoc) -> dict[str, str]:
    """What a verdict on these two runs leaves out: the recorded epoch's own exclusions when it
    judged these very runs (its verdict is verified, so they follow from the certificates it
    names), else the forked certificates the store holds for them now."""
    verdict = rec.verdict
    same = (rec.baseline_run, rec.candidate_run) == (base.run_id, cand.run_id)
    if same and verdict is not None:
        return dict(verdict.get("excluded") or {})
    return exclusions.reasons(exclusions.forked(store, base, cand))


def recorded_decision(rec: EpochRecord) -> str:
    """What the recorded optimizer did: accepted = the baseline branch moved to the candidate."""
    if rec.skipped:
        return "skipped"
    if rec.promoted is not None:
        return "accepted" if rec.promoted else "rejected"
    return str(rec.decision)


def _missing(keys: list[CassetteKey], epoch: int, role: str) -> list[NeededEpisode]:
    return [
        {
            "epoch": epoch,
            "role": role,
            "task_id": k.task_id,
            "seed": k.seed,
            "harness_sha": k.harness_sha,
            "cassette_id": k.id,
        }
        for k in keys
    ]


def walk(
    store: RunStore,
    doc: TrainingDoc,
    scratch: Scratch,
    proposals: list[Proposal],
    measurements: Measurements,
    criterion: Criterion,
    optimizer: Optimizer,
    progress: Progress | None = None,
) -> WalkResult:
    """Step the counterfactual through every recorded epoch (see the module docstring)."""
    head = doc.initial_sha
    rows: list[CounterfactualRow] = []
    needs: list[NeededEpisode] = []
    blocked: int | None = None
    budget, planned = training_budget(doc)  # its error budget's levels follow the walked decisions
    decided: list[str] = []
    for rec, prop in zip(doc.epochs, proposals, strict=True):
        epoch = rec.epoch
        row: CounterfactualRow = {
            "epoch": epoch,
            "description": rec.description,
            "recorded_decision": recorded_decision(rec),
            "recorded_baseline": rec.baseline_sha,
            "recorded_candidate": rec.candidate_sha,
            "counterfactual_baseline": None,
            "counterfactual_candidate": None,
            "counterfactual_decision": "undetermined",
            "reapplied": False,
            "offline": False,
            "flipped": None,
            "reason": f"depends on epoch {blocked}" if blocked is not None else "",
            "verdict": None,
        }
        rows.append(row)
        if blocked is not None:
            continue
        parent = optimizer.parent(head)
        row["counterfactual_baseline"] = parent
        if parent == rec.baseline_sha:
            cand, skipped = rec.candidate_sha, rec.skipped
        else:
            cand, skipped = scratch.apply(parent, prop)
            row["reapplied"] = True
        row["counterfactual_candidate"] = cand
        base_run, base_missing = measurements.lookup(parent)
        cand_run, cand_missing = measurements.lookup(cand) if cand and not skipped else (None, [])
        missing = _missing(base_missing, epoch, "baseline") + _missing(cand_missing, epoch, "candidate")
        if missing:
            blocked, needs = epoch, missing
            row["counterfactual_decision"], row["reason"] = (
                "unknown",
                f"{len(missing)} episode(s) never recorded",
            )
            continue
        verdict = None
        if not skipped and base_run is not None and cand_run is not None:
            judge = epoch_criterion(criterion, budget, planned, decided)
            try:  # adaptive seeds: the same rounds the training took, from stored cassettes only
                base_run, cand_run = measurements.adaptive(base_run, cand_run, judge)
            except adaptive.Unrecorded as exc:
                blocked, needs = epoch, _missing(exc.keys, epoch, "adaptive round")
                row["counterfactual_decision"], row["reason"] = "unknown", str(exc)
                continue
            verdict = judge(cand_run, base_run, _excluded(store, rec, base_run, cand_run))
        decided.append(verdict_decision(verdict, skipped))
        step = StepInput(
            epoch,
            head,
            parent,
            cand,
            verdict,
            skipped,
            base_run,
            cand_run,
        )
        promote = bool(optimizer.decide(step) and step.measurable)
        if promote and cand:
            head = cand
        decision = "skipped" if skipped else ("accepted" if promote else "rejected")
        row["counterfactual_decision"] = decision
        row["offline"] = True
        row["flipped"] = decision != row["recorded_decision"]
        row["reason"] = skipped or (verdict.reason if verdict else "")
        row["verdict"] = verdict.to_dict() if verdict else None
        if progress:
            progress("epoch", {"epoch": epoch})
    return {
        "rows": rows,
        "head": head,
        "blocked_at": blocked,
        "needs_recording": needs,
        "optimizer_state": optimizer.state(),
    }
