"""Randomised: for random recorded trainings (patch queues over small panels, random criterion and
optimizer), the counterfactual with the recorded criterion and optimizer equals the recorded training,
and no counterfactual makes a model call or opens a socket."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.episodes.config_paths import TEMPLATES
from replaykit.models.reference.proposer import CURRICULUM, ENTRY, unified_diff
from replaykit.testing import small_config
from replaykit.train.counterfactual import counterfactual
from replaykit.train.trainer import Trainer

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


TASKS = ["hello-file", "fix-config-port", "csv-active-emails", "organize-files", "count-error-lines"]
CRITERIA: list[dict[str, Any]] = [
    {"name": "strict_pareto"},
    {"name": "mean_reward", "alpha": 0.5},
    {"name": "mean_reward", "alpha": 0.1},
]
SEEN: dict[str, list[str]] = {"optimizers": [], "decisions": []}
OPTIMIZERS: list[dict[str, Any]] = [
    {"name": "greedy_monotonic"},
    {"name": "margin_greedy", "margin": 1},
    {"name": "pareto_frontier"},
]


def diff_pool() -> list[str]:
    source = (TEMPLATES / "quickstart" / "harness.py").read_text()
    pool = []
    for change in CURRICULUM:
        if change.path == ENTRY and change.search:
            pool.append(unified_diff(ENTRY, source, source.replace(change.search, change.replace)))
        elif not change.search:
            pool.append(unified_diff(change.path, None, change.replace))  # outside the patch surface
    # edits the same line as retry-nudge: does not apply once retry-nudge is in the baseline
    tool = next(c for c in CURRICULUM if c.id == "retry-nudge").search
    pool.append(
        unified_diff(
            ENTRY,
            source,
            source.replace(tool, tool.replace("format_observation(obs)", "format_observation(obs)[:2000]")),
        )
    )
    return pool


@pytest.mark.parametrize("trial", range(6))
def test_same_criterion_and_optimizer_reproduce_random_trainings(
    trial: int,
    tmp_path_factory: pytest.TempPathFactory,
    no_network: Callable[[], None],
    store_state: Callable[[Store], dict[str, Any]],
) -> None:
    rng = random.Random(1000 + trial)
    shared = (
        tmp_path_factory.getbasetemp() / "cf-random-store"
    )  # one store: later trials reuse earlier measurements
    tmp = tmp_path_factory.mktemp(f"cf-random-{trial}")
    diffs = rng.sample(diff_pool(), k=rng.randint(3, 5))
    criterion, optimizer = dict(CRITERIA[(trial + trial // 3) % 3]), dict(OPTIMIZERS[trial % 3])
    cfg = small_config(
        tmp,
        tasks=rng.sample(TASKS, 2),
        seeds=rng.choice([[0], [0, 1]]),
        **{
            "store": str(shared),
            "model.name": rng.choice(["reference-weak", "reference-strong"]),
            "train.estimator": {"kind": "patch_queue", "diffs": diffs},
            "train.criterion": criterion,
            "train.optimizer": optimizer,
            "train.epochs": len(diffs),
        },
    )
    trainer = Trainer(config=cfg)
    for loss in trainer.epochs():
        loss.backward()
        trainer.optimizer.step()
    recorded = trainer.summary()
    store = Store(shared)
    before = store_state(store)
    no_network()
    rep = counterfactual(store, recorded.training_id)
    assert rep["same_as_recorded"] and rep["complete"] and rep["reproduces_recorded"], (
        criterion,
        optimizer,
        rep["epochs"],
    )
    promoted = [
        "skipped" if e.skipped else ("accepted" if e.promoted else "rejected") for e in recorded.epochs
    ]
    assert [e["counterfactual_decision"] for e in rep["epochs"]] == promoted
    SEEN["optimizers"].append(optimizer["name"])
    SEEN["decisions"].extend(promoted)
    assert [e["counterfactual_baseline"] for e in rep["epochs"]] == [e.baseline_sha for e in recorded.epochs]
    assert [e["counterfactual_candidate"] for e in rep["epochs"]] == [
        e.candidate_sha for e in recorded.epochs
    ]
    assert rep["final"]["counterfactual"]["sha"] == recorded.final_baseline
    # another criterion and optimizer: whatever is computable, still no socket and no write
    other = counterfactual(
        store, recorded.training_id, "strict_pareto:secondary_metrics=[tokens]", "margin_greedy:margin=2"
    )
    assert len(other["epochs"]) == len(recorded.epochs)
    assert other["complete"] or other["needs_recording"]
    assert store_state(store) == before


def test_the_trials_are_not_vacuous() -> None:
    """Across the trials: every optimizer ran, and accepted, rejected and skipped epochs all occurred."""
    if len(SEEN["optimizers"]) < 6:
        pytest.skip("runs after the six trials above")
    assert set(SEEN["optimizers"]) == {o["name"] for o in OPTIMIZERS}
    assert {"accepted", "rejected", "skipped"} <= set(SEEN["decisions"])


def test_frontier_proposes_from_a_kept_candidate_and_the_audit_follows_it(
    tmp_path: Path, no_network: Callable[[], None], store_state: Callable[[Store], dict[str, Any]]
) -> None:
    """A trade-off candidate (retry-nudge, but gives up on one task) is rejected by strict_pareto yet kept by
    the frontier, which proposes the next epoch from it; the counterfactual follows the same parents, and
    under greedy_monotonic the next proposal is re-applied to the head instead."""
    source = (TEMPLATES / "quickstart" / "harness.py").read_text()
    retry = next(c for c in CURRICULUM if c.id == "retry-nudge")
    give_up = "def solve(task, env, llm, ctx):\n"
    trade = source.replace(retry.search, retry.replace).replace(
        give_up, give_up + '    if task.id == "count-error-lines":\n        return None\n'
    )
    stderr = next(c for c in CURRICULUM if c.id == "stderr-first")
    diffs = [
        unified_diff(ENTRY, source, trade),
        unified_diff(ENTRY, source, source.replace(stderr.search, stderr.replace)),
    ]
    cfg = small_config(
        tmp_path,
        tasks=["count-error-lines", "csv-active-emails", "fix-config-port"],
        seeds=[0],
        **{
            "model.name": "reference-weak",
            "train.estimator": {"kind": "patch_queue", "diffs": diffs},
            "train.optimizer": {"name": "pareto_frontier"},
            "train.epochs": 2,
        },
    )
    trainer = Trainer(config=cfg)
    for loss in trainer.epochs():
        loss.backward()
        trainer.optimizer.step()
    s = trainer.summary()
    e0, e1 = s.epochs
    assert e0.verdict is not None
    assert (
        e0.verdict["regressions"] == ["count-error-lines#0"] and e0.verdict["new_solves"] and not e0.promoted
    )
    assert e1.baseline_sha == e0.candidate_sha != s.initial_sha  # proposed from the kept candidate
    assert s.final_baseline == s.initial_sha  # the branch never moved (only fast-forwards of the HEAD)
    store = Store(cfg.store_path)
    before = store_state(store)
    no_network()
    same = counterfactual(store, s.training_id)
    assert same["reproduces_recorded"] and [e["counterfactual_baseline"] for e in same["epochs"]] == [
        e0.baseline_sha,
        e0.candidate_sha,
    ]
    greedy = counterfactual(store, s.training_id, optimizer="greedy_monotonic")
    assert greedy["epochs"][1]["counterfactual_baseline"] == s.initial_sha and greedy["reapplied"] == [1]
    assert store_state(store) == before
