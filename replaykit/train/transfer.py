"""``replaykit transfer``: a training's harness, trained vs untrained, on other panels and models.

    doc = transfer(store, TRAINING, [config_a, config_b], ["m1", "m2"], agent="mini-swe-agent")

For each config (its panel, environment and model settings) × each model, the training's first
baseline (``untrained``), its final baseline (``trained``) and optionally a named agent are each
measured (or reused: every episode already recorded under the same key is) with the training's
own harness settings (entry, params), so a cell of the training's own config × its own model
is the training's own run. The result is stored as a ``transfer`` document
(``transfer_doc.py``: its shape, its id, its check on read; ``report`` redraws it, bundles
carry its runs and trees).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from replaykit.cassette.backend import BlobStore, StoreBackend
from replaykit.core.errors import ConfigError
from replaykit.core.modes import RecordMode
from replaykit.core.progress import Progress
from replaykit.core.run_doc import RunDoc
from replaykit.core.training_doc import TrainingDoc
from replaykit.episodes.compare import agent_config
from replaykit.episodes.config import RunConfig
from replaykit.episodes.run import measure
from replaykit.train import gitops
from replaykit.train.derived import verified_training
from replaykit.train.transfer_doc import (
    UNTRAINED,
    TransferCell,
    TransferConfig,
    TransferDoc,
    TransferHarness,
    put_transfer,
)
from replaykit.train.walk import training_config


def _labels(configs: list[RunConfig], paths: list[str]) -> list[str]:
    """Each config's label: its name, or its file's stem where two configs share a name."""
    names = [c.name for c in configs]
    out = []
    for i, (name, path) in enumerate(zip(names, paths, strict=True)):
        label = name if names.count(name) == 1 else Path(path).stem
        if label in out:
            label = f"{label}-{i + 1}"
        out.append(label)
    return out


@contextlib.contextmanager
def _harness_repo(store: BlobStore, doc: TrainingDoc) -> Iterator[Path]:
    """The training's harness repository: where it was recorded, else a scratch clone of its
    stored initial baseline (the trained commit's tree is in the store: measuring it needs no
    commit)."""
    recorded = Path(doc.harness_repo)
    if (recorded / ".git").exists():
        yield recorded
        return
    tmp = Path(tempfile.mkdtemp(prefix="replaykit-transfer-"))
    try:
        gitops.clone_bundle(
            store.get_blob(doc.initial_bundle or ""),
            tmp / "harness",
            doc.initial_sha,
            doc.branch,
            where=f"training {doc.training_id}",
        )
        yield tmp / "harness"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def with_training_harness(config: RunConfig, trained: RunConfig, repo: Path, store: str) -> RunConfig:
    """``config`` measuring the training's harness (its entry, branch and params, in ``repo``)
    into ``store``."""
    harness = trained.harness.model_copy(update={"repo": str(repo), "template": None, "agent": None})
    out = config.model_copy(update={"harness": harness, "store": store})
    out.base_dir = config.base_dir
    return out


def check_endpoints(given: list[str], models: list[str]) -> dict[str, str]:
    """``--endpoint MODEL=URL`` → {model: base URL}: where a model is served when it is not at
    each config's ``model.base_url`` (one engine serves one model). Where, never what: no key
    and no document holds it."""
    out: dict[str, str] = {}
    for one in given:
        name, sep, url = (part.strip() for part in one.partition("="))
        if not sep or not name or not url.startswith(("http://", "https://")):
            raise ConfigError(f"{one!r}: expected MODEL=URL, e.g. tiny=http://127.0.0.1:8081/v1")
        if name not in models:
            raise ConfigError(f"{one!r}: {name!r} is not one of --models ({', '.join(models)})")
        if name in out:
            raise ConfigError(f"{name!r} is given twice; give each model one endpoint")
        out[name] = url
    return out


def check_models(models: list[str]) -> list[str]:
    names = [m.strip() for m in models if m.strip()]
    if not names:
        raise ConfigError("--models is empty; name at least one model, e.g. --models reference-weak")
    twice = next((m for i, m in enumerate(names) if m in names[:i]), None)
    if twice is not None:
        raise ConfigError(f"--models names {twice!r} twice; give each model once")
    return names


def transfer(
    store: StoreBackend,
    training_id: str,
    configs: list[RunConfig],
    paths: list[str],
    models: list[str],
    agent: str | None = None,
    record_mode: RecordMode = RecordMode.ONCE,
    progress: Progress | None = None,
    endpoints: dict[str, str] | None = None,
) -> TransferDoc:
    """Measure (or reuse) every config × model × harness cell and store the transfer document
    (``endpoints``: a model's base URL where it is not at the config's, ``check_endpoints``)."""
    models = check_models(models)
    where = endpoints or {}
    if not configs:
        raise ConfigError("no --config given; name at least one config whose panel to measure on")
    doc = verified_training(store, training_id, bundle=False)
    trained_cfg = training_config(doc, store)
    labels = _labels(configs, paths)
    harnesses: list[TransferHarness] = [
        {"role": UNTRAINED, "sha": doc.initial_sha},
        {"role": "trained", "sha": doc.final_baseline},
    ]
    cells: list[TransferCell] = []
    rows: list[TransferConfig] = []
    if progress:
        progress("outer", {"total": len(configs) * len(models) * (3 if agent else 2), "label": "cell"})
    with _harness_repo(store, doc) as repo:
        for label, config in zip(labels, configs, strict=True):
            cfg = with_training_harness(config, trained_cfg, repo, str(store.location))
            agent_cfg = agent_config(cfg, f"agent:{agent}", record_mode)[0] if agent else None
            rows.append({"label": label, "name": config.name, "digest": cfg.digest(), "env": config.env.kind})
            for model_name in models:
                served = {"base_url": where[model_name]} if model_name in where else {}
                model = config.model.model_copy(update={"name": model_name, **served})
                for harness in harnesses:
                    result = measure(
                        cfg,
                        record_mode=record_mode,
                        sha=harness["sha"],
                        model=model,
                        store=store,
                        progress=progress,
                    )
                    cells.append(_cell(label, model_name, harness["role"], result.run))
                    _step(progress, label, model_name, harness["role"])
                if agent_cfg is not None:
                    result = measure(
                        agent_cfg, record_mode=record_mode, model=model, store=store, progress=progress
                    )
                    cells.append(_cell(label, model_name, f"agent:{agent}", result.run))
                    _step(progress, label, model_name, f"agent:{agent}")
    if agent:
        shas = {c["harness_sha"] for c in cells if c["harness"] == f"agent:{agent}"}
        harnesses.append({"role": f"agent:{agent}", "sha": sorted(shas)[0]})
    return put_transfer(store, doc, rows, models, harnesses, cells)


def _step(progress: Progress | None, label: str, model: str, role: str) -> None:
    if progress:
        progress("outer_step", {"label": f"{label} × {model} × {role}"})


def _cell(config: str, model: str, role: str, r: RunDoc) -> TransferCell:
    return {
        "config": config,
        "model": model,
        "harness": role,
        "harness_sha": r.harness_sha,
        "run_id": r.run_id,
        "solved": r.solved,
        "total": r.total,
    }
