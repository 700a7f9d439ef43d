"""Held-out panels: ``train.panels: {val: [...], test: [...]}`` beside the training panel.

``panel`` (the config's) is the *training* panel: the proposer sees its episodes and nothing
else. ``val``, when given, is what the criterion decides on (else the training panel); ``test``
is measured for every epoch's baseline and every accepted candidate, never shown to the
proposer, never deciding. All three take globs as ``panel.tasks`` does, with the same seeds; a
task belongs to one panel.

An epoch records each panel's run ids (``panels: {train: {baseline_run, candidate_run}, …}``);
the solve rates, the candidate's paired movement on each panel and the generalisation gaps
(val − train, test − val, each with its interval: ``intervals.py``) are computed from the runs
whenever they are shown (:func:`epoch_panels`), never stored. A format-1 training (recorded
before panels) has no ``panels``.
"""

from __future__ import annotations

from typing import TypedDict

from replaykit.cassette.backend import DocumentStore, RunStore
from replaykit.cassette.keys import CassetteKey
from replaykit.core.errors import TaskError
from replaykit.core.run_doc import RunDoc
from replaykit.core.training_doc import EpochRecord, PanelRuns, TrainingDoc
from replaykit.episodes.config import RunConfig
from replaykit.episodes.config_paths import first_tasks, task_folders
from replaykit.episodes.panel_keys import template_keys
from replaykit.train.config import SmokeConfig, TrainConfig, train_config
from replaykit.train.intervals import Movement, Rate, gap, paired, rate

TRAIN, VAL, TEST = "train", "val", "test"
PANELS = (TRAIN, VAL, TEST)


class PanelView(PanelRuns):
    """One panel of an epoch as shown: its runs, their rates and the candidate's paired movement."""

    baseline: Rate | None
    candidate: Rate | None
    movement: Movement | None  # candidate − baseline on this panel's instances


class Gaps(TypedDict):
    """The generalisation gaps of an epoch's baseline (None: a panel is missing)."""

    val_train: Movement | None  # its val solve rate − its train solve rate
    test_val: Movement | None  # its test solve rate − its val solve rate


def globs(cfg: TrainConfig, name: str) -> list[str] | None:
    return None if name == TRAIN else getattr(cfg.panels, name)


def configured(config: RunConfig) -> list[str]:
    """The panels this config measures: ``train``, then ``val`` and ``test`` when given."""
    cfg = train_config(config)
    return [p for p in PANELS if p == TRAIN or globs(cfg, p)]


def deciding(config: RunConfig) -> str:
    """The panel the criterion decides on: ``val`` when there is one, else ``train``."""
    return VAL if train_config(config).panels.val else TRAIN


def panel_config(config: RunConfig, name: str) -> RunConfig:
    """``config`` measuring panel ``name`` (the same seeds, environment, model and harness)."""
    found = globs(train_config(config), name)
    if not found:
        return config
    out = config.model_copy(update={"panel": config.panel.model_copy(update={"tasks": list(found)})})
    out.base_dir = config.base_dir
    return out


def recorded_deciding(doc: TrainingDoc) -> str:
    """The panel a recorded training decided on (``val`` when its epochs measured one)."""
    return VAL if any(VAL in (e.panels or {}) for e in doc.epochs) else TRAIN


def first_baseline_run(doc: TrainingDoc) -> str | None:
    """A recorded training's first run of its deciding panel (its first epoch's baseline): what
    keys the panel's episodes (its smoke and held-out runs hold other tasks)."""
    epochs = doc.epochs
    if epochs and epochs[0].baseline_run:
        return epochs[0].baseline_run
    return doc.runs[0] if doc.runs else None


def check_panels(config: RunConfig) -> None:
    """Bad panels, one line each before anything runs: a pattern matching no task folder, a
    task in two panels (``val`` and ``test`` emptiness is the section's own check)."""
    cfg = train_config(config)
    owners: dict[str, str] = {}
    for name in configured(config):
        patterns = config.panel.tasks if name == TRAIN else globs(cfg, name) or []
        field = ("panel", "tasks") if name == TRAIN else ("train", "panels", name)
        for i, pattern in enumerate(patterns):
            try:
                folders = task_folders([pattern], config.base_dir)
            except TaskError as exc:
                raise config.field_error((*field, i), str(exc)) from None
            for folder in folders:
                where = owners.setdefault(str(folder.resolve()), name)
                if where != name:
                    raise config.field_error(
                        (*field, i),
                        f"task {folder.name} is in the {where} panel too; a task belongs to one panel"
                        " (the proposer sees the training panel, val decides, test is held out)",
                    )


def smoke_config(config: RunConfig) -> RunConfig | None:
    """The training panel's first ``train.smoke.tasks`` tasks × first ``seeds`` seeds, or None
    (``tasks: 0``: no smoke run)."""
    smoke = train_config(config).smoke
    if smoke.tasks == 0:
        return None
    tasks = first_tasks(config.panel.tasks, config.base_dir, smoke.tasks)
    panel = config.panel.model_copy(
        update={"tasks": [str(t) for t in tasks], "seeds": config.panel.seed_list[: smoke.seeds]}
    )
    out = config.model_copy(update={"panel": panel})
    out.base_dir = config.base_dir
    return out


def shown_epochs(store: DocumentStore, epochs: list[EpochRecord]) -> list[dict[str, object]]:
    """Epochs as ``train --json`` shows them: each panel's runs with their solve rates and the
    candidate's movement (``panels: {train, val, test}``) and the baseline's ``gap``."""
    out: list[dict[str, object]] = []
    for e in epochs:
        views, gaps = epoch_panels(store, e)
        out.append({**e.to_json(), "panels": views, "gap": gaps} if views else e.to_json())
    return out


def recorded_templates(store: RunStore, doc: TrainingDoc) -> dict[str, list[CassetteKey]]:
    """A recorded training's keys per panel, as a replay looks them up: its first epoch's run of
    each panel (format 1: its first run's), which ``replace(key, harness_sha=…)`` turns into any
    SHA's keys (``episodes/panel_keys.py``)."""
    first = doc.epochs[0] if doc.epochs else None
    named = (first.panels if first else None) or {}
    runs = {p: r["baseline_run"] for p, r in named.items() if r["baseline_run"]}
    if not runs and doc.runs:
        runs = {TRAIN: first.baseline_run if first and first.baseline_run else doc.runs[0]}
    return {p: template_keys(store, store.get_run(r).cassettes) for p, r in runs.items()}


def smoke_keys(template: list[CassetteKey], smoke: SmokeConfig) -> list[CassetteKey]:
    """The smoke run's part of a panel's recorded keys (a replay's): its first tasks by id ×
    its first seeds, as :func:`smoke_config` chooses them."""
    tasks = sorted({k.task_id for k in template})[: smoke.tasks]
    seeds = list(dict.fromkeys(k.seed for k in template))[: smoke.seeds]
    return [k for k in template if k.task_id in tasks and k.seed in seeds]


def epoch_panels(store: DocumentStore, epoch: EpochRecord) -> tuple[dict[str, PanelView], Gaps | None]:
    """An epoch's panels as shown (rates, movements) and its baseline's gaps, from its runs
    (``{}, None`` for an epoch recorded before panels were)."""
    views: dict[str, PanelView] = {}
    for name, found in (epoch.panels or {}).items():
        base = store.get_run(b) if (b := found["baseline_run"]) else None
        cand = store.get_run(c) if (c := found["candidate_run"]) else None
        views[name] = {
            "baseline_run": found["baseline_run"],
            "candidate_run": found["candidate_run"],
            "baseline": rate(base) if base else None,
            "candidate": rate(cand) if cand else None,
            "movement": paired(base, cand) if base and cand else None,
        }
    if not views:
        return views, None

    def run(name: str) -> RunDoc | None:
        b = views[name]["baseline_run"] if name in views else None
        return store.get_run(b) if b else None

    train, val, test = run(TRAIN), run(VAL), run(TEST)
    return views, {
        "val_train": gap(train, val) if train and val else None,
        "test_val": gap(val, test) if val and test else None,
    }
