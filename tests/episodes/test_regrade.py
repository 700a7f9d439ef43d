"""replaykit regrade through the real CLI: a run's verifiers again on its recorded final
states, no model, into a new run; the original untouched (quickstart config)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import git
import pytest

from replaykit.envs.registry import ENVIRONMENTS, get_env_kind, register_env
from replaykit.episodes.harness import commit_all
from replaykit.testing import project_root, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def ok(*args: str, **kw: Any) -> Any:
    proc = cli(*args, **kw)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout) if "--json" in args else proc.stdout


def zero_verifier(tmp: Path) -> Path:
    folder = tmp / "zero-tests"
    folder.mkdir()
    (folder / "test.sh").write_text(
        '#!/usr/bin/env bash\nmkdir -p "$LOGS_DIR/verifier"\necho 0 > "$LOGS_DIR/verifier/reward.txt"\n'
    )
    return folder


def store_files(store: str) -> list[tuple[str, int]]:
    return sorted(
        (p.name, p.stat().st_size) for p in Path(store).rglob("*") if p.is_file() and "cache" not in p.parts
    )


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("regrade")
    config = write_config(tmp)
    return {"tmp": tmp, "config": str(config), "run": ok("run", str(config), "--json")}


def test_regrade_reproduces_every_reward_and_a_zero_verifier_zeroes_hello_file(
    quickstart: dict[str, Any],
) -> None:
    run, config = quickstart["run"], quickstart["config"]
    same = ok("regrade", run["run_id"], "--json", "--config", config)
    assert same["reproduced"] and same["differs"] == [] and same["regraded_from"] == run["run_id"]
    assert [e["reward"] for e in same["episodes"]] == [e["reward"] for e in run["episodes"]]
    assert [e["regraded_from"] for e in same["episodes"]] == run["cassettes"]
    assert same["run_id"] != run["run_id"] and all(e["restored"] == "re-execution" for e in same["episodes"])
    assert (
        ok("regrade", run["run_id"], "--json", "--config", config) == same
    )  # the same run again, idempotent

    zero = ok(
        "regrade",
        run["run_id"],
        "--tests",
        f"hello-file={zero_verifier(quickstart['tmp'])}",
        "--json",
        "--config",
        config,
    )
    assert zero["run_id"] not in (run["run_id"], same["run_id"])
    hello = [e for e in zero["episodes"] if e["task_id"] == "hello-file"]
    assert len(hello) == 2 and all(e["reward"] == 0.0 and not e["passed"] for e in hello)
    others = [e for e in zero["episodes"] if e["task_id"] != "hello-file"]
    assert all(e["same"] for e in others)
    assert zero["differs"] == [f"hello-file#{e['seed']}" for e in hello if e["recorded_reward"] != 0.0]
    stored = ok("runs", "--json", "--config", config)
    assert {r["id"] for r in stored} >= {run["run_id"], same["run_id"], zero["run_id"]}
    for run_id in (
        run["run_id"],
        zero["run_id"],
        same["run_id"],
    ):  # the original replays as before, and so do they
        assert ok("replay", run_id, "--json", "--config", config)["identical"], run_id
    again = ok("run", config, "--json")  # the original run: the same episodes, the same rewards
    assert again["run_id"] == run["run_id"] and again["recorded_count"] == 0
    assert [e["reward"] for e in again["episodes"]] == [e["reward"] for e in run["episodes"]]


def test_a_task_not_in_the_run_is_one_line_and_writes_nothing(quickstart: dict[str, Any]) -> None:
    before = store_files(str(quickstart["tmp"] / "store"))
    (quickstart["tmp"] / "x").mkdir()
    tests = zero_verifier(quickstart["tmp"] / "x")
    proc = cli(
        "regrade", quickstart["run"]["run_id"], "--tests", f"nope={tests}", "--config", quickstart["config"]
    )
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith(
        f"Error: --tests nope=…: run {quickstart['run']['run_id']} has no task 'nope' (its tasks: checksum-release,"
    )
    for bad, message in (
        ("hello-file", "give TASK=DIR"),
        (f"hello-file={quickstart['tmp']}", "holds no test.sh"),
    ):
        proc = cli("regrade", quickstart["run"]["run_id"], "--tests", bad, "--config", quickstart["config"])
        assert proc.returncode == 1 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert store_files(str(quickstart["tmp"] / "store")) == before


@pytest.fixture
def no_reexecution() -> Iterator[str]:
    """A kind of local environments whose recorded actions cannot run again."""
    register_env("frozen-local", get_env_kind("local").factory, reexecutable=False)
    yield "frozen-local"
    ENVIRONMENTS.unregister("frozen-local")


def test_without_snapshots_a_kind_that_cannot_reexecute_is_one_line_then_full_snapshots_regrade(
    tmp_path: Path, no_reexecution: str
) -> None:
    tasks = [str(project_root() / "envs" / t) for t in ("hello-file", "checksum-release")]
    plain = write_config(tmp_path, {"env.kind": no_reexecution, "panel.tasks": tasks}, name="plain.yaml")
    run = ok("run", str(plain), "--json")
    before = store_files(str(tmp_path / "store"))
    proc = cli("regrade", run["run_id"], "--config", str(plain))
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert (
        "has no full snapshot and env kind 'frozen-local' cannot re-execute recorded actions" in proc.stderr
    )
    assert proc.stderr.strip().endswith("record the run with env.snapshot: full to regrade it")
    assert store_files(str(tmp_path / "store")) == before  # nothing stored
    full = write_config(
        tmp_path, {"env.kind": no_reexecution, "panel.tasks": tasks, "env.snapshot": "full"}, name="full.yaml"
    )
    snapped = ok("run", str(full), "--json")
    report = ok("regrade", snapped["run_id"], "--json", "--config", str(full))
    assert report["reproduced"] and {
        e["restored"] for e in report["episodes"] if e["outcome"] != "infra"
    } == {"snapshot"}
    zero = ok(
        "regrade",
        snapped["run_id"],
        "--tests",
        f"hello-file={zero_verifier(tmp_path)}",
        "--json",
        "--config",
        str(full),
    )
    assert all(e["reward"] == 0.0 for e in zero["episodes"] if e["task_id"] == "hello-file")


@pytest.mark.parametrize(
    ("bundle", "tasks"),
    [
        pytest.param(REPO / "cassettes" / "quickstart-training.tar.gz", (), id="its-own-tasks"),
        pytest.param(
            REPO / "tests" / "data" / "format1" / "quickstart-training.tar.gz",
            ("--tasks", str(REPO / "envs")),
            id="format-1-with-tasks",
        ),
    ],
)
def test_the_shipped_bundles_runs_regrade_as_recorded_from_any_folder(
    tmp_path: Path, bundle: Path, tasks: tuple[str, ...]
) -> None:
    """From a folder that is not a checkout: the shipped bundle's run regrades from the task
    folders the bundle carries; an older bundle (none carried) from ``--tasks``, and without it
    the line says what to pass."""
    store = str(tmp_path / "store")
    ok("cassettes", "import", str(bundle), "--store", store, cwd=tmp_path)
    runs = [r["id"] for r in ok("runs", "--kind", "measure", "--json", "--store", store, cwd=tmp_path)]
    if tasks:
        lacking = cli("regrade", runs[0], "--json", "--store", store, cwd=tmp_path)
        assert lacking.returncode == 1 and len(lacking.stderr.strip().splitlines()) == 1, lacking.stderr
        assert "is not in the store; pass --tasks DIR holding it" in lacking.stderr
    report = ok("regrade", runs[0], *tasks, "--json", "--store", store, cwd=tmp_path)
    assert report["reproduced"] and len(report["episodes"]) == 16


def test_a_run_served_by_prefix_reuse_regrades_into_a_store_that_verifies(tmp_path: Path) -> None:
    """A re-measure after a comment-only commit is served its donors' events (prefix reuse);
    its regrade is a copy of those events, served by no donor: the regraded cassettes carry
    no reuse claim (one naming a donor under another key was 'store corrupt'), and the run
    document's rows are derived the way a recorded run's are."""
    config = write_config(tmp_path)
    ok("run", str(config), "--json")
    harness = git.Repo(tmp_path / "harness")
    path = tmp_path / "harness" / "harness.py"
    path.write_text(path.read_text() + "\n# a comment only\n")
    sha = commit_all(harness, "a comment only")
    served = ok("run", str(config), "--harness", sha, "--json")
    assert served["reused_events"] > 0 and served["model_calls"] == 0
    report = ok("regrade", served["run_id"], "--json", "--config", str(config))
    assert report["reproduced"]
    store = str(tmp_path / "store")
    verify = cli("cassettes", "verify", "--store", store)
    assert verify.returncode == 0 and verify.stdout.startswith("ok: checked"), verify.stdout + verify.stderr
    assert ok("replay", report["run_id"], "--json", "--store", store)["identical"]
    shown = {r["id"]: r for r in ok("runs", "--json", "--store", store)}
    assert report["run_id"] in shown


def test_after_a_regrade_the_training_that_holds_its_run_replays_offline(tmp_path: Path) -> None:
    """A regraded run is a new run of new keys (lineage kept): the training that holds the
    original finds its cassettes as before, from any folder."""
    store = str(tmp_path / "store")
    bundle = str(REPO / "cassettes" / "quickstart-training.tar.gz")
    training = ok("cassettes", "import", bundle, "--store", store, "--json", cwd=tmp_path)["root"]["id"]
    doc = ok("runs", "--kind", "training", "--json", "--store", store, cwd=tmp_path)
    assert [r["id"] for r in doc] == [training]
    runs = [r["id"] for r in ok("runs", "--kind", "measure", "--json", "--store", store, cwd=tmp_path)]
    regraded = ok("regrade", runs[0], "--json", "--store", store, cwd=tmp_path)
    assert regraded["regraded_from"] == runs[0] and set(regraded["episodes"][0]) >= {"regraded_from"}
    replayed = ok("replay", training, "--json", "--store", store, cwd=tmp_path)
    assert replayed["identical"] and all(r["identical"] for r in replayed["runs"])
