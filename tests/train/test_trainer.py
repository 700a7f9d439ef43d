"""Training end to end: git moves, reproducibility, skipped epochs, resume, replay, audit, compare."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import git
import pytest

import replaykit.models.endpoint as endpoint
from replaykit.cassette.store import Store
from replaykit.core.errors import TrainError
from replaykit.episodes.compare import compare
from replaykit.episodes.config import RunConfig
from replaykit.testing import small_config
from replaykit.train.audit import audit, replay_training
from replaykit.train.estimators import PatchQueue
from replaykit.train.gitops import fast_forward
from replaykit.train.trainer import Trainer

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


TASKS = ["hello-file", "fix-config-port", "csv-active-emails", "organize-files"]


def config(tmp: Path, **overrides: Any) -> RunConfig:
    return small_config(tmp, tasks=TASKS, seeds=[0, 1], **{"model.name": "reference-weak", **overrides})


def train(cfg: RunConfig, epochs: int, **kw: Any) -> Trainer:
    trainer = Trainer(config=cfg, **kw)
    for loss in trainer.epochs(epochs):
        loss.backward()
        trainer.optimizer.step()
    return trainer


def no_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(cfg: Any) -> Any:
        raise AssertionError(f"a model endpoint was opened for {cfg.name}")

    monkeypatch.setattr(endpoint, "open_endpoint", refuse)
    import replaykit.episodes.run
    import replaykit.train.proposal

    monkeypatch.setattr(replaykit.episodes.run, "open_endpoint", refuse)
    monkeypatch.setattr(replaykit.train.proposal, "open_endpoint", refuse)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("train")
    cfg = config(tmp)
    trainer = train(cfg, 5)
    return {"tmp": tmp, "cfg": cfg, "summary": trainer.summary().to_json(), "trainer": trainer}


def test_epochs_accept_and_reject_and_git_holds_exactly_the_accepted(trained: dict[str, Any]) -> None:
    summary = trained["summary"]
    decisions = [e["decision"] for e in summary["epochs"]]
    assert len(decisions) == 5 and "accepted" in decisions and "rejected" in decisions
    repo = git.Repo(trained["cfg"].repo_path)
    accepted = [e["candidate_sha"] for e in summary["epochs"] if e["decision"] == "accepted"]
    on_branch = [c.hexsha for c in repo.iter_commits(f"{summary['initial_sha']}..main", reverse=True)]
    assert on_branch == accepted
    tid = summary["training_id"]
    for e in summary["epochs"]:
        if e["candidate_sha"]:
            assert (
                repo.commit(f"refs/replaykit/candidates/{tid}/epoch-{e['epoch']:03d}").hexsha
                == e["candidate_sha"]
            )
        if e["decision"] == "rejected":
            assert (
                repo.commit(f"refs/replaykit/rejected/{tid}/epoch-{e['epoch']:03d}").hexsha
                == e["candidate_sha"]
            )
            assert e["candidate_sha"] not in on_branch
    for e in summary["epochs"]:  # every candidate is exactly one child commit of its baseline
        if e["candidate_sha"]:
            assert [p.hexsha for p in repo.commit(e["candidate_sha"]).parents] == [e["baseline_sha"]]


def test_fresh_repo_same_store_reproduces_without_model_calls(
    trained: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(trained["cfg"].store_path)
    before = store.count_cassettes()
    fresh = trained["cfg"].model_copy(
        update={
            "harness": trained["cfg"].harness.model_copy(update={"repo": str(trained["tmp"] / "harness2")})
        }
    )
    fresh.base_dir = trained["cfg"].base_dir
    no_endpoint(monkeypatch)
    again = train(fresh, 5).summary()
    first = trained["summary"]
    assert [e.candidate_sha for e in again.epochs] == [e["candidate_sha"] for e in first["epochs"]]
    assert [e.verdict for e in again.epochs] == [e["verdict"] for e in first["epochs"]]
    assert again.final_baseline == first["final_baseline"]
    assert store.count_cassettes() == before


def test_training_replays_offline_identically(
    trained: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    no_endpoint(monkeypatch)
    report = replay_training(Store(trained["cfg"].store_path), trained["summary"]["training_id"])
    assert report["identical"], report
    assert report["final_baseline"] == trained["summary"]["final_baseline"]
    assert len(report["runs"]) >= 3 and all(r["identical"] for r in report["runs"])


def test_audit_reproduces_every_verdict_and_counterfactual(trained: dict[str, Any]) -> None:
    store = Store(trained["cfg"].store_path)
    verdicts = trained["summary"]["verdicts"]
    assert len(verdicts) >= 3
    for vid in verdicts:
        report = audit(store, vid, "mean_reward")
        assert report["reproduced"]
        cf = report["counterfactual"]
        assert cf["criterion"] == "mean_reward" and cf["differs"] == (
            cf["verdict"]["accept"] != report["recorded"]["accept"]
        )


def test_compare_trained_vs_untrained_across_models(trained: dict[str, Any]) -> None:
    s = trained["summary"]
    report = compare(trained["cfg"], ["reference-weak", "reference-strong"], [s["initial_sha"], "main"])
    cells = {(c["harness"], c["model"]): c for c in report.cells}
    assert len(cells) == 4
    assert cells[("main", "reference-weak")]["solved"] > cells[(s["initial_sha"], "reference-weak")]["solved"]
    assert cells[("main", "reference-weak")]["reused"] == 8  # measured during training


def test_step_before_backward_and_promoted_before_step(tmp_path: Path) -> None:
    trainer = Trainer(
        config=config(tmp_path, **{"panel.tasks": [str(Path(__file__).parents[2] / "envs" / "hello-file")]}),
        estimator=PatchQueue([]),
    )
    loss = next(iter(trainer.epochs(1)))
    with pytest.raises(TrainError, match=r"before loss.backward"):
        trainer.optimizer.step()
    with pytest.raises(TrainError, match=r"defined after optimizer.step"):
        _ = loss.promoted
    loss.backward()
    trainer.optimizer.step()
    assert loss.promoted is False and loss.skipped and "empty diff" in loss.skipped


def test_skipped_epochs_outside_surface_and_broken_import(tmp_path: Path) -> None:
    outside = "diff --git a/NOTES.md b/NOTES.md\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.md\n@@ -0,0 +1 @@\n+notes\n"
    from replaykit.episodes.config_paths import TEMPLATES
    from replaykit.models.reference.proposer import unified_diff

    source = (TEMPLATES / "quickstart" / "harness.py").read_text()
    broken = unified_diff(
        "harness.py",
        source,
        source.replace("import json\n", "import json\nimport module_that_does_not_exist\n"),
    )
    cfg = config(
        tmp_path,
        **{
            "panel.tasks": [str(Path(__file__).parents[2] / "envs" / "hello-file")],
            "panel.seeds": [0],
            "train.max_consecutive_skips": 3,  # three skips in a row: the circuit breaker allows them
        },
    )
    trainer = train(cfg, 3, estimator=PatchQueue([outside, broken]))
    reasons = [lo.skipped or "" for lo in trainer.losses]
    assert reasons[0].startswith("edits outside the patch surface") and "NOTES.md" in reasons[0]
    assert reasons[1].startswith("harness no longer imports") and "module_that_does_not_exist" in reasons[1]
    assert reasons[2].startswith("empty diff")
    repo = git.Repo(cfg.repo_path)
    assert repo.commit("main").hexsha == trainer.initial_sha  # nothing promoted


def test_optimizer_never_moves_the_branch_except_by_fast_forward(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    from replaykit.episodes.harness import commit_all
    from replaykit.episodes.run import open_harness

    repo = open_harness(cfg).repo
    base = repo.head.commit.hexsha
    repo.git.checkout("-b", "side")
    (cfg.repo_path / "x.txt").write_text("side\n")
    side = commit_all(repo, "side commit")
    repo.git.checkout("main")
    (cfg.repo_path / "y.txt").write_text("main\n")
    ahead = commit_all(repo, "main commit")
    with pytest.raises(TrainError, match="not a fast-forward"):
        fast_forward(repo, "main", side)
    assert repo.commit("main").hexsha == ahead
    fast_forward(repo, "main", base)  # already contained: no move
    assert repo.commit("main").hexsha == ahead


RESUME_SCRIPT = """
import os, sys
from replaykit.testing import small_config
from replaykit.train.trainer import Trainer
from pathlib import Path
cfg = small_config(Path(sys.argv[1]), tasks={tasks!r}, seeds=[0, 1], **{{"model.name": "reference-weak"}})
trainer = Trainer(config=cfg)
crash = int(sys.argv[2])
for loss in trainer.epochs(2):
    loss.backward()
    if loss.epoch == crash:
        os._exit(17)   # killed between backward() and step()
    trainer.optimizer.step()
print(trainer.summary().final_baseline)
"""


def test_resume_after_kill_between_backward_and_step(tmp_path: Path, trained: dict[str, Any]) -> None:
    script = tmp_path / "train.py"
    script.write_text(RESUME_SCRIPT.format(tasks=TASKS))
    killed = subprocess.run(
        [sys.executable, str(script), str(tmp_path), "0"], capture_output=True, text=True, timeout=600
    )
    assert killed.returncode == 17, killed.stderr
    store = Store(tmp_path / "store")
    ids_before = {r["id"] for r in store.list_cassettes()}
    repo = git.Repo(tmp_path / "harness")
    tid = next(r for r in store.list_runs() if r["kind"] == "training")["id"]
    candidate0 = repo.commit(
        f"refs/replaykit/candidates/{tid}/epoch-000"
    ).hexsha  # the candidate was not lost
    assert repo.commit("main").hexsha != candidate0  # step() never ran

    # the resume needs no process of its own: the same training, here, from what the store and repo hold
    trainer = Trainer(config=config(tmp_path))
    for loss in trainer.epochs(2):
        loss.backward()
        trainer.optimizer.step()
    resumed_final = trainer.summary().final_baseline
    new = [r for r in Store(tmp_path / "store").list_cassettes() if r["id"] not in ids_before]
    # nothing of epoch 0 was measured again: only epoch 1's proposal and candidate episodes are new
    assert all(r["harness_sha"] != trained["summary"]["initial_sha"] for r in new)
    assert not any(r["harness_sha"] == candidate0 and r["kind"] == "episode" for r in new)
    assert len([r for r in new if r["kind"] == "proposal"]) == 1
    # and the outcome equals the uninterrupted training's first two epochs
    first_two = trained["summary"]["epochs"][:2]
    expected_final = [e["candidate_sha"] for e in first_two if e["decision"] == "accepted"][-1]
    assert resumed_final == expected_final == repo.commit("main").hexsha
