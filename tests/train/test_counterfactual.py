"""Counterfactual training audits on the quickstart training: reproduce, flip, re-apply, name the
missing episodes exactly, --record them, then audit again with no model call (sockets blocked)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import git
import pytest

from replaykit.cassette.store import Store
from replaykit.envs.tasks import load_panel
from replaykit.episodes.config import load_config
from replaykit.episodes.panel_keys import episode_keys
from replaykit.testing import write_config
from replaykit.train.audit import replay_training
from replaykit.train.counterfactual import counterfactual
from replaykit.train.counterfactual_record import record_counterfactual, recorded_audit
from replaykit.train.significance import benjamini_hochberg
from replaykit.train.trainer import Trainer
from replaykit.train.walk import parse_spec
from tests.cli_runner import cli as run_cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


def cli(*args: str) -> dict[str, Any]:
    proc = run_cli(
        "audit",
        *args,
        "--json",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The quickstart training (configs/quickstart.yaml, builtin reference model and proposer)."""
    tmp = tmp_path_factory.mktemp("cf")
    cfg = load_config(write_config(tmp))
    trainer = Trainer(config=cfg)
    for loss in trainer.epochs():
        loss.backward()
        trainer.optimizer.step()
    return {"tmp": tmp, "cfg": cfg, "summary": trainer.summary().to_json(), "store": tmp / "store"}


def test_parse_spec() -> None:
    assert parse_spec("mean_reward") == ("mean_reward", {})
    assert parse_spec("margin_greedy:margin=2,alpha=0.05") == ("margin_greedy", {"margin": 2, "alpha": 0.05})
    assert parse_spec("strict_pareto:secondary_metrics=[steps,tokens]") == (
        "strict_pareto",
        {"secondary_metrics": ["steps", "tokens"]},
    )


def test_recorded_criterion_and_optimizer_reproduce_every_decision(
    quickstart: dict[str, Any], no_network: Callable[[], None], store_state: Callable[[Store], dict[str, Any]]
) -> None:
    s = quickstart["summary"]
    store = Store(quickstart["store"])
    before = store_state(store)
    no_network()
    rep = counterfactual(store, s["training_id"])
    assert rep["same_as_recorded"] and rep["reproduces_recorded"] and rep["complete"]
    assert [e["counterfactual_decision"] for e in rep["epochs"]] == [e["decision"] for e in s["epochs"]]
    assert [e["counterfactual_candidate"] for e in rep["epochs"]] == [e["candidate_sha"] for e in s["epochs"]]
    assert rep["final"]["counterfactual"]["sha"] == rep["final"]["recorded"]["sha"] == s["final_baseline"]
    assert rep["offline_share"] == 1.0 and rep["needs_recording"] == [] and rep["reapplied"] == []
    assert store_state(store) == before  # reading never writes


def test_mean_reward_flips_nothing_but_a_stricter_alpha_flips_epoch_0(quickstart: dict[str, Any]) -> None:
    s = quickstart["summary"]
    store = Store(quickstart["store"])
    decisions = [e["decision"] for e in s["epochs"]]
    assert (
        decisions[0] == "accepted" and decisions.count("accepted") == 1
    )  # the quickstart accepts once, at epoch 0
    same = counterfactual(store, s["training_id"], "mean_reward")
    assert same["flipped"] == [] and same["reproduces_recorded"]  # p=1/64 ≤ 0.1: every decision agrees
    strict = counterfactual(store, s["training_id"], "mean_reward:alpha=0.01")  # p=1/64 > 0.01: epoch 0 flips
    assert strict["flipped"] == [0] and strict["diverged_at"] == 1 and not strict["complete"]
    assert strict["epochs"][1]["counterfactual_decision"] == "unknown"
    assert all(e["counterfactual_decision"] == "undetermined" for e in strict["epochs"][2:])


def test_margin_optimizer_diverges_reapplies_and_names_exactly_the_missing_episodes(
    quickstart: dict[str, Any], no_network: Callable[[], None], store_state: Callable[[Store], dict[str, Any]]
) -> None:
    s, cfg = quickstart["summary"], quickstart["cfg"]
    store = Store(quickstart["store"])
    no_network()
    rep = counterfactual(
        store, s["training_id"], optimizer="margin_greedy:margin=7"
    )  # epoch 0 solves 6 more: below the margin
    assert rep["flipped"] == [0] and rep["reapplied"] == [1] and not rep["complete"]
    e1 = rep["epochs"][1]
    assert e1["counterfactual_baseline"] == s["initial_sha"] != e1["recorded_baseline"]
    cand = e1["counterfactual_candidate"]
    assert (
        cand and cand != s["epochs"][1]["candidate_sha"]
    )  # the recorded proposal re-applied to another baseline
    # exactly the panel's episodes of that candidate, none stored, all keyed like a live run would key them
    expected = {
        k.id for k, _ in episode_keys(cfg, cand, load_panel(cfg.panel.tasks, cfg.base_dir), cfg.model)
    }
    needed = {m["cassette_id"] for m in rep["needs_recording"]}
    assert needed == expected and len(needed) == 16 and not any(store.has(i) for i in needed)
    assert {
        (m["task_id"], m["seed"], m["harness_sha"], m["role"], m["epoch"]) for m in rep["needs_recording"]
    } == {
        (t, seed, cand, "candidate", 1)
        for t in {m["task_id"] for m in rep["needs_recording"]}
        for seed in (0, 1)
    }


def test_record_completes_the_counterfactual_and_a_second_audit_needs_no_model(
    quickstart: dict[str, Any], no_network: Callable[[], None], store_state: Callable[[Store], dict[str, Any]]
) -> None:
    s = quickstart["summary"]
    store = Store(quickstart["store"])
    before = counterfactual(store, s["training_id"], optimizer="margin_greedy:margin=7")
    needed = {m["cassette_id"] for m in before["needs_recording"]}
    repo = git.Repo(quickstart["cfg"].repo_path)
    main_before = repo.commit("main").hexsha
    cassettes_before = {r["id"] for r in store.list_cassettes()}

    live = record_counterfactual(store, s["training_id"], optimizer="margin_greedy:margin=7")
    training = live["training"]
    new_id = training.training_id
    link = training.counterfactual_of
    assert new_id != s["training_id"] and link is not None and link.training_id == s["training_id"]
    recorded_now = {r["id"] for r in store.list_cassettes()} - cassettes_before
    assert needed <= recorded_now  # the named episodes were recorded ...
    first_cf_id = training.epochs[1].candidate_run
    assert first_cf_id is not None
    first_cf_run = store.get_run(first_cf_id).to_json()
    assert set(first_cf_run["cassettes"]) == needed  # ... and they are exactly epoch 1's candidate run
    assert repo.commit("main").hexsha == main_before  # the user's baseline branch never moves
    shared = training.epochs[0].verdict_id  # epoch 0: the same runs and criterion, so the same verdict
    assert shared is not None
    assert (
        shared == s["epochs"][0]["verdict_id"]
        and store.get_doc(shared, kind="verdict")["training_id"] == s["training_id"]
    )
    assert (
        repo.commit(f"refs/replaykit/candidates/{new_id}/epoch-001").hexsha
        == before["epochs"][1]["counterfactual_candidate"]
    )
    assert [e.decision if not e.skipped else "skipped" for e in training.epochs][3] == "skipped"
    assert link.branch  # the counterfactual's own branch
    shown = recorded_audit(live)  # `audit --record --json`: the audit, the training recorded, its branch
    assert shown == {**live["audit"], "recorded_training": new_id, "recorded_branch": link.branch}

    no_network()
    state = store_state(store)
    again = counterfactual(store, s["training_id"], optimizer="margin_greedy:margin=7")
    assert again["complete"] and again["offline_share"] == 1.0 and again["needs_recording"] == []
    assert again["flipped"] == [0] and again["reapplied"] == [1, 2, 3, 4]  # every later proposal re-applied
    assert [e["counterfactual_candidate"] for e in again["epochs"]] == [
        e.candidate_sha for e in training.epochs
    ]
    assert again["final"]["counterfactual"]["sha"] == training.final_baseline == s["initial_sha"]
    solved = again["final"]["counterfactual"]["solved"], again["final"]["recorded"]["solved"]
    assert solved[0] is not None and solved[1] is not None and solved[0] < solved[1]
    assert store_state(store) == state
    assert replay_training(store, new_id, episodes=False)["identical"]  # a real, replayable training


def test_cli_counterfactual_sweep_and_seed_robustness_json(quickstart: dict[str, Any]) -> None:
    s, store = quickstart["summary"], str(quickstart["store"])
    rep = cli(s["training_id"], "--store", store, "--criterion", "mean_reward:alpha=0.01")
    assert rep["kind"] == "counterfactual" and rep["flipped"] == [0]
    record_counterfactual(
        Store(store), s["training_id"], optimizer="margin_greedy:margin=7"
    )  # no-op if the test above ran
    sweep = cli(
        s["training_id"],
        "--store",
        store,
        "--sweep",
        "criteria=strict_pareto,mean_reward:alpha=0.01",
        "--sweep",
        "optimizers=greedy_monotonic,pareto_frontier",
    )
    cells = {
        (
            c["criterion"].split(":")[0]
            + (":" + c["criterion"].split(":")[1] if "alpha" in c["criterion"] else ""),
            c["optimizer"],
        ): c
        for c in sweep["cells"]
    }
    assert len(sweep["cells"]) == 4
    recorded = cells[("strict_pareto", "greedy_monotonic")]
    assert (
        recorded["recorded"]
        and recorded["accepted_epochs"] == [0]
        and recorded["final_baseline"] == s["final_baseline"]
    )
    assert (
        recorded["offline_share"] == 1.0
        and recorded["final_solve_rate"] == sweep["recorded_final"]["solve_rate"]
    )
    strict = cells[("mean_reward:alpha=0.01", "greedy_monotonic")]
    # its path keeps the initial baseline like margin_greedy:margin=7's, whose --record (above) recorded those
    # candidates: measurements recorded by another training are reused, so this cell is complete offline
    assert strict["accepted_epochs"] == [] and strict["complete"] and strict["offline_share"] == 1.0
    assert strict["final_baseline"] == s["initial_sha"] and strict["final_solved"] < recorded["final_solved"]
    verdict = s["epochs"][0]["verdict_id"]
    # issue 37 item 2: each cell's p (final vs initial baseline), Benjamini-Hochberg over the cells
    first = cli(verdict, "--store", store)[
        "paired"
    ]  # epoch 0: the initial baseline vs its accepted candidate
    assert recorded["p_value"] == first["mcnemar_p_better"] and strict["p_value"] == 1.0
    known = [c for c in sweep["cells"] if c["p_value"] is not None]
    assert [c["p_bh"] for c in known] == benjamini_hochberg([c["p_value"] for c in known])
    rob = cli(verdict, "--store", store, "--resample-seeds", "1")
    assert (
        rob["total"] == 2
        and rob["recorded_accept"]
        and rob["summary"] == f"this acceptance survives {rob['holds']} of 2 subsets of 1 of 2 seed(s)"
    )
    boot = cli(verdict, "--store", store, "--resample-seeds", "2", "--bootstrap", "7")
    assert boot["total"] == 7 and boot["method"] == "bootstrap"


def test_cli_errors_are_one_line(quickstart: dict[str, Any]) -> None:
    s, store = quickstart["summary"], str(quickstart["store"])
    cases = [
        ([s["training_id"], "--optimizer", "nope"], "unknown optimizer 'nope'"),
        ([s["training_id"], "--criterion", "mean_reward:alpha"], "bad parameter"),
        ([s["training_id"], "--sweep", "crit=a"], "bad --sweep"),
        ([s["training_id"], "--resample-seeds", "1"], "on a training goes with --noise"),
        ([s["epochs"][0]["verdict_id"], "--optimizer", "greedy_monotonic"], "needs a training id"),
        ([s["epochs"][0]["verdict_id"], "--resample-seeds", "3"], "use 1..2"),
    ]
    for args, message in cases:
        proc = run_cli("audit", *args, "--store", store, timeout=120)
        assert proc.returncode == 1 and proc.stderr.startswith("Error: ") and message in proc.stderr, (
            proc.stderr
        )
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_training_report_shows_the_sweep(
    quickstart: dict[str, Any], tmp_path: Any, store_state: Callable[[Store], dict[str, Any]]
) -> None:
    from replaykit.report.html import write_report

    s, store = quickstart["summary"], Store(quickstart["store"])
    before = store_state(store)
    write_report(store, s["training_id"], tmp_path / "report.html", None)
    html = (tmp_path / "report.html").read_text()
    assert 'id="sweep-table"' in html and html.count('class="sweep-row') == 2 * 3  # 2 criteria × 3 optimizers
    assert html.count('class="sweep-row recorded"') == 1
    # accepted epochs are named (e0), never a bare 0 that reads as "none accepted"
    recorded_row = html.split('class="sweep-row recorded"', 1)[1].split("</tr>", 1)[0]
    assert "<td>e0</td>" in recorded_row and "<td>0</td>" not in recorded_row
    assert recorded_row.count('<td class="p-bh">') == 1  # issue 37: BH q beside each cell's p
    assert store_state(store) == before


def test_cli_sweep_names_accepted_epochs(quickstart: dict[str, Any]) -> None:
    s, store = quickstart["summary"], str(quickstart["store"])
    proc = run_cli(
        "audit",
        s["training_id"],
        "--store",
        store,
        "--sweep",
        "criteria=strict_pareto",
        "--sweep",
        "optimizers=greedy_monotonic",
        env={"COLUMNS": "200"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    row = next(r for r in proc.stdout.splitlines() if r.startswith("strict_pareto"))
    assert row.split()[3] == "e0", row  # criterion (recorded) optimizer accepted-epochs ...


def test_record_needs_the_harness_repository_and_writes_nothing_without_it(
    quickstart: dict[str, Any], store_state: Callable[[Store], dict[str, Any]]
) -> None:
    from replaykit.core.errors import HarnessError

    s, store = quickstart["summary"], Store(quickstart["store"])
    repo = Path(s["harness_repo"])
    before = store_state(store)
    moved = repo.with_name(repo.name + ".away")
    repo.rename(moved)
    try:
        with pytest.raises(HarnessError, match="--record needs the training's harness repository"):
            record_counterfactual(store, s["training_id"], criterion="mean_reward:alpha=0.001")
    finally:
        moved.rename(repo)
    assert store_state(store) == before


def test_seed_robustness_with_another_criterion(quickstart: dict[str, Any]) -> None:
    s, store = quickstart["summary"], str(quickstart["store"])
    verdict = s["epochs"][0]["verdict_id"]
    rob = cli(verdict, "--store", store, "--resample-seeds", "1", "--criterion", "mean_reward:alpha=0.1")
    # seed 0 alone: 2 new solves (p=1/4 > 0.1) → reject; seed 1 alone: 4 (p=1/16) → accept; both seeds: accept
    assert rob["criterion"]["name"] == "mean_reward" and rob["accept"] is True
    assert [(x["seeds"], x["accept"]) for x in rob["samples"]] == [([0], False), ([1], True)]
    assert rob["summary"] == "this acceptance survives 1 of 2 subsets of 1 of 2 seed(s)"
