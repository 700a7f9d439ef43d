"""The seed's Python API, exactly as the README shows it."""

from __future__ import annotations

from pathlib import Path

from replaykit.testing import write_config


def test_readme_loop(tmp_path: Path) -> None:
    from replaykit import AgenticEstimator, GreedyMonotonic, OpenAIBackend, StrictPareto, Trainer

    config_path = write_config(
        tmp_path,
        {
            "panel.tasks": [
                str(Path(__file__).parents[1] / "envs" / t) for t in ("hello-file", "fix-config-port")
            ]
        },
    )
    criterion = StrictPareto()
    optimizer = GreedyMonotonic()
    trainer = Trainer(
        config_path=config_path,
        estimator=AgenticEstimator(backend=OpenAIBackend(model="reference-proposer", base_url="builtin")),
        criterion=criterion,
        optimizer=optimizer,
    )
    decisions = []
    for loss in trainer.epochs(2):
        loss.backward()
        optimizer.step()
        decisions.append((loss.epoch, loss.promoted, loss.item()))
    assert [d[0] for d in decisions] == [0, 1]
    assert decisions[0][1] is True and decisions[0][2] < 0  # the retry nudge solves more: negative loss
    assert trainer.summary()["final_baseline"] == trainer.losses[0].candidate_sha
