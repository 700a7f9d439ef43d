"""Certificates are keyed by what was executed: two runs with different actions on the
same task are certified separately, and certification order never flips a verdict."""

from __future__ import annotations

from pathlib import Path

import git

from replaykit.cassette.store import Store
from replaykit.core.run_doc import RunDoc
from replaykit.episodes.certificate_lookup import DETERMINISTIC, FORKED, forked_tasks
from replaykit.episodes.certify import certify_run
from replaykit.episodes.certify_records import CertifyReport
from replaykit.episodes.run import measure
from replaykit.testing import REPO_ROOT, small_config

TASK = REPO_ROOT / "envs" / "hello-file"
HARNESS = """def solve(task, env, llm, ctx):
    env.run({action!r})
"""
CALM = "printf 'ticket 42\\n' > ticket.txt; cat ticket.txt"
NOISY = "echo ticket $RANDOM$RANDOM$RANDOM > ticket.txt; cat ticket.txt"


def two_runs(tmp: Path) -> tuple[Store, RunDoc, RunDoc]:
    """One task, one harness commit per action sequence: calm, then noisy."""
    repo = git.Repo.init(tmp / "harness", initial_branch="main")
    shas = []
    for action in (CALM, NOISY):
        (tmp / "harness" / "harness.py").write_text(HARNESS.format(action=action))
        repo.index.add(["harness.py"])
        shas.append(repo.index.commit(f"harness running {action[:12]}").hexsha)
    config = small_config(tmp, tasks=["hello-file"], seeds=[0, 1], **{"harness.template": None})
    store = Store(config.store_path)
    calm = measure(config, harness_ref=shas[0], store=store).run
    noisy = measure(config, harness_ref=shas[1], store=store).run
    assert set(calm.cassettes).isdisjoint(noisy.cassettes)
    return store, calm, noisy


def status(report: CertifyReport) -> tuple[str, bool]:
    (row,) = report["tasks"]
    return row["status"], row["reused"]


def test_certifying_one_run_never_certifies_another_with_different_actions(tmp_path: Path) -> None:
    store, calm, noisy = two_runs(tmp_path)
    tasks = [str(TASK)]
    assert status(certify_run(store, calm.run_id, tasks=tasks)) == (DETERMINISTIC, False)
    # the same task, other actions: re-executed, not "deterministic (reused)"
    assert status(certify_run(store, noisy.run_id, tasks=tasks)) == (FORKED, False)
    assert forked_tasks(store, calm) == {} and set(forked_tasks(store, noisy)) == {"hello-file"}
    # each run keeps its own verdict, whatever was certified last
    assert status(certify_run(store, calm.run_id, tasks=tasks)) == (DETERMINISTIC, True)
    assert forked_tasks(store, calm) == {} and set(forked_tasks(store, noisy)) == {"hello-file"}
    assert status(certify_run(store, noisy.run_id, tasks=tasks)) == (FORKED, True)
    assert forked_tasks(store, calm) == {}


def test_verdicts_do_not_depend_on_certification_order(tmp_path: Path) -> None:
    store, calm, noisy = two_runs(tmp_path)
    tasks = [str(TASK)]
    certify_run(store, noisy.run_id, tasks=tasks)  # the other order
    assert forked_tasks(store, calm) == {}  # never certified: absent, not borrowed from the noisy run
    assert status(certify_run(store, calm.run_id, tasks=tasks)) == (DETERMINISTIC, False)
    assert forked_tasks(store, calm) == {} and set(forked_tasks(store, noisy)) == {"hello-file"}
