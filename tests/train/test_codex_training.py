"""The quickstart training with the Codex CLI as proposer records and replays offline."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import replaykit.episodes.run
import replaykit.train.proposal
from replaykit.cassette.store import Store
from replaykit.models.codex import INSTALL_HINT
from replaykit.testing import small_config
from replaykit.train.audit import replay_training
from replaykit.train.trainer import Trainer

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


@pytest.mark.codex
def test_quickstart_training_with_codex_proposer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not shutil.which(os.environ.get("REPLAYKIT_CODEX_BIN", "codex")):
        if os.environ.get("REPLAYKIT_ALLOW_CODEX_SKIP") == "1" and not os.environ.get("CI"):
            pytest.skip("Codex CLI not installed")
        pytest.fail(f"the Codex CLI is not installed; run `bash scripts/setup-codex.sh` ({INSTALL_HINT})")
    cfg = small_config(
        tmp_path,
        tasks=["hello-file", "fix-config-port", "csv-active-emails"],
        seeds=[0, 1],
        **{
            "model.name": "reference-weak",
            "train.estimator": {
                "kind": "agentic",
                "backend": {"kind": "codex", "model": "reference-proposer", "base_url": "builtin"},
            },
        },
    )
    trainer = Trainer(config=cfg)
    for loss in trainer.epochs(2):
        loss.backward()
        trainer.optimizer.step()
    summary = trainer.summary()
    assert summary.epochs[0].decision == "accepted" and "retry" in summary.epochs[0].description.lower()
    assert all(e.proposal_cassette for e in summary.epochs)
    store = Store(cfg.store_path)
    cassette = summary.epochs[0].proposal_cassette
    assert cassette is not None
    proposal = store.get_episode(cassette)
    assert proposal.key.kind == "proposal" and any(e.path == "/v1/responses" for e in proposal.llm_events)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("replay opened a model endpoint")

    monkeypatch.setattr(replaykit.episodes.run, "open_endpoint", refuse)
    monkeypatch.setattr(replaykit.train.proposal, "open_endpoint", refuse)
    report = replay_training(store, summary.training_id)
    assert report["identical"], report
    assert [e["replayed_candidate_sha"] for e in report["epochs"]] == [
        e.candidate_sha for e in summary.epochs
    ]
