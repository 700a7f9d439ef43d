"""A replaykit run in Harbor's job layout (``run --jobs-dir``, ``cassettes export --format
harbor``), read by Harbor 0.25 itself: its models parse every ``config.json`` and
``result.json``, its own pass@k, mean metric and job statistics over our trial results equal
ours, every trial's ``agent/trajectory.json`` passes its ATIF validator, and ``harbor view``
lists the job with the harness as agent, the model, no foreign environment and its mean score,
and serves each trial, its verifier output and its trajectory (issue 31 item 7, issue 40 item 1).
A second run keeps a multi-key reward's keys, gives a multi-step task its ``step_results`` and
prices its tokens from ``model.pricing``."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli
from tests.harbor import harbor_cli

pytestmark = [pytest.mark.harbor, pytest.mark.e2e]
HARBOR_PY = harbor_cli.HOME / "venv" / "bin" / "python"
CHECK = r"""
import json, sys
from pathlib import Path
from harbor.viewer.scanner import JobScanner
from harbor.metrics.mean import Mean
from harbor.models.job.result import JobStats
from harbor.models.trajectories import Trajectory
from harbor.utils.pass_at_k import compute_pass_at_k_by_evals
from harbor.utils.trajectory_validator import TrajectoryValidator
scanner = JobScanner(Path(sys.argv[1]))
(job,) = scanner.list_jobs()
result = scanner.get_job_result(job)
config = scanner.get_job_config(job)
assert result is not None and config is not None, "job files unreadable"
names = scanner.list_trials(job)
trials = [scanner.get_trial_result(job, t) for t in names]
configs = [scanner.get_trial_config(job, t) for t in names]
assert all(t is not None for t in trials) and all(c is not None for c in configs), "trial files unreadable"
invalid = {}
for name in names:
    path = Path(sys.argv[1]) / job / name / "agent" / "trajectory.json"
    validator = TrajectoryValidator()
    if not validator.validate(path):
        invalid[name] = validator.errors
    Trajectory.model_validate_json(path.read_text())
stats = JobStats.from_trial_results(trials)
print(json.dumps({
    "job": job,
    "invalid_trajectories": invalid,
    "agents": [[a.name, a.model_name] for a in config.agents],
    "environment": [config.environment.type and config.environment.type.value, config.environment.import_path],
    "metrics": [Mean().compute([t.verifier_result.rewards if t.verifier_result else None for t in trials])],
    "ours_metrics": {k: e.metrics for k, e in result.stats.evals.items()},
    "cost": [stats.cost_usd, result.stats.cost_usd],
    "rewards_keys": sorted({k for t in trials if t.verifier_result for k in t.verifier_result.rewards}),
    "step_results": {t.trial_name: [s.step_name for s in t.step_results] for t in trials if t.step_results},
    "trials": [t.trial_name for t in trials],
    "pass_at_k": {k: {str(n): v for n, v in d.items()} for k, d in compute_pass_at_k_by_evals(trials).items()},
    "ours_pass_at_k": {k: {str(n): v for n, v in e.pass_at_k.items()} for k, e in result.stats.evals.items()},
    "n_errored": stats.n_errored_trials, "ours_n_errored": result.stats.n_errored_trials,
    "exceptions": {k: dict(e.exception_stats) for k, e in stats.evals.items()},
    "ours_exceptions": {k: dict(e.exception_stats) for k, e in result.stats.evals.items()},
    "rewards": {k: {str(r): sorted(v) for r, v in e.reward_stats["reward"].items()} for k, e in stats.evals.items()},
    "ours_rewards": {k: {str(r): sorted(v) for r, v in e.reward_stats["reward"].items()} for k, e in result.stats.evals.items()},
    "tokens": [stats.n_input_tokens, stats.n_output_tokens],
    "ours_tokens": [result.stats.n_input_tokens, result.stats.n_output_tokens],
}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.loads(reply.read())


def _harbor_sees(jobs: Path) -> dict[str, Any]:
    """What Harbor's own models, statistics and ATIF validator make of the job folder."""
    proc = subprocess.run(
        [str(HARBOR_PY), "-c", CHECK, str(jobs)],
        capture_output=True,
        text=True,
        timeout=120,
        env=harbor_cli.environ(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen: dict[str, Any] = json.loads(proc.stdout)
    assert not seen["invalid_trajectories"], seen["invalid_trajectories"]  # Harbor's ATIF validator
    (ours,) = seen["ours_metrics"].values()
    assert ours == seen["metrics"], seen  # the mean metric, as Harbor computes it
    return seen


@contextlib.contextmanager
def _harbor_view(jobs: Path) -> Iterator[str]:
    """``harbor view JOBS`` on loopback; its base URL."""
    port = _free_port()
    viewer = subprocess.Popen(
        [str(harbor_cli.HARBOR), "view", str(jobs), "--port", str(port), "--host", "127.0.0.1", "--no-build"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=harbor_cli.environ(),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(150):
            try:
                _get(f"{base}/api/health")
                break
            except OSError:
                time.sleep(0.2)
        yield base
    finally:
        viewer.terminate()
        viewer.wait(timeout=20)


def _skip_without_harbor() -> None:
    reason = harbor_cli.missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the Harbor layout test must run in CI: {reason}", pytrace=False)
        pytest.skip(reason)


def test_harbor_reads_a_replaykit_run_as_its_own_job(tmp_path: Path) -> None:
    _skip_without_harbor()
    config = write_config(tmp_path, {"panel.seeds": [0, 1]})  # the quickstart panel, local, reference model
    jobs = tmp_path / "jobs"
    run = json.loads(
        cli("run", str(config), "--jobs-dir", str(jobs), "--json", cwd=tmp_path, check=True).stdout
    )
    assert run["harbor_job"]["trials"] == run["total"] == len(run["episodes"]) >= 16, run["harbor_job"]
    job_dir = Path(run["harbor_job"]["job_dir"])
    first = {p: p.read_bytes() for p in sorted(job_dir.rglob("*")) if p.is_file()}
    again = tmp_path / "again"
    exported = cli(
        "cassettes",
        "export",
        run["run_id"],
        "--format",
        "harbor",
        "-o",
        str(again),
        "--store",
        str(tmp_path / "store"),
        "--json",
        check=True,
    )
    assert json.loads(exported.stdout)["trials"] == run["total"]
    second = {p.relative_to(again): p.read_bytes() for p in sorted(again.rglob("*")) if p.is_file()}
    same = {p.relative_to(jobs): data for p, data in first.items()}
    assert {k: v for k, v in second.items() if not k.name.endswith(".json")} == {
        k: v for k, v in same.items() if not k.name.endswith(".json")
    }
    assert sorted(second) == sorted(same)  # the same files (paths inside differ by the folder given)
    trial = next(p for p in job_dir.iterdir() if p.is_dir())
    assert {"agent/trajectory.json", "agent/transcript.json", "verifier/test-stdout.txt"} <= {
        str(p.relative_to(trial)) for p in trial.rglob("*")
    }

    seen = _harbor_sees(jobs)
    assert len(seen["trials"]) == run["total"]
    harness = Path(run["harness_repo"]).name  # the harness repo's folder names the agent
    assert seen["agents"] == [[harness, "reference-weak"]], seen["agents"]  # the harness, the model
    assert seen["environment"] == [None, "replaykit.envs.local:LocalEnv"], seen["environment"]
    assert seen["pass_at_k"] == seen["ours_pass_at_k"] and seen["pass_at_k"], seen  # pass@2 over 2 seeds
    assert seen["n_errored"] == seen["ours_n_errored"] and seen["exceptions"] == seen["ours_exceptions"]
    assert seen["rewards"] == seen["ours_rewards"] and seen["tokens"] == seen["ours_tokens"], seen
    assert seen["cost"] == [None, None]  # no model.pricing: no cost, never 0
    solved = {e["cassette_id"][:8] for e in run["episodes"] if e["passed"]}
    ones = next(iter(seen["rewards"].values())).get("1.0", [])
    assert {t.rsplit("__", 1)[1] for t in ones} == solved
    mean = len(solved) / run["total"]
    assert seen["metrics"] == [{"mean": mean}] and run["harbor_job"]["metrics"] == [{"mean": mean}]

    with _harbor_view(jobs) as base:
        (listed,) = _get(f"{base}/api/jobs")["items"]
        assert listed["name"] == seen["job"] and listed["agents"] == [harness], listed
        assert listed["models"] == ["reference-weak"], listed
        # Harbor 0.25's job list takes its Environment column only from environment.type
        # (viewer/server.py: `if config.environment.type: environment_type = ....value`), an
        # EnvironmentType with no `local` member; a type outside it fails JobConfig, and the
        # scanner then drops the whole config (agents, models). So the column shows none, and
        # the job's and each trial's Config name the kind: import path and kwargs.
        assert listed["environment_type"] is None, listed
        local = {"type": None, "import_path": "replaykit.envs.local:LocalEnv"}
        job_env = _get(f"{base}/api/jobs/{seen['job']}/config")["environment"]
        assert {k: job_env[k] for k in local} == local and job_env["kwargs"] == {"replaykit_kind": "local"}
        assert listed["evals"] and next(iter(listed["evals"].values()))["metrics"] == [{"mean": mean}], listed
        trials = _get(f"{base}/api/jobs/{seen['job']}/trials?page_size=100")
        assert len(trials["items"]) == run["total"], trials
        name = seen["trials"][0]
        one = _get(f"{base}/api/jobs/{seen['job']}/trials/{name}")
        assert one["trial_name"] == name and one["agent_info"]["version"] == run["harness_sha"]
        assert one["config"]["environment"]["kwargs"] == {"replaykit_kind": "local"}, one["config"]
        verifier = _get(f"{base}/api/jobs/{seen['job']}/trials/{name}/verifier-output")
        assert verifier["stdout"] and verifier["stderr"] is not None, verifier
        steps = _get(f"{base}/api/jobs/{seen['job']}/trials/{name}/trajectory")["steps"]
        assert [s["source"] for s in steps[:3]] == ["system", "user", "agent"] and steps[2]["tool_calls"], (
            steps[:3]
        )


MULTI_KEY_TEST = """mkdir -p "$LOGS_DIR/verifier"
c=0; [ -f "$APP_DIR/done" ] && c=1
echo "checked done: $c"
echo "{\\"correctness\\": $c, \\"style\\": 0.5}" > "$LOGS_DIR/verifier/reward.json"
"""


def test_multi_key_rewards_steps_and_cost(tmp_path: Path) -> None:
    """A task writing two named rewards keeps both (Harbor's per-key mean, no pass@k); a
    multi-step task's trial has its step_results and each step's verifier output; with a price for
    the model, each trial's cost_usd is its tokens at that price, Harbor's total equals ours."""
    _skip_without_harbor()
    task = tmp_path / "tasks" / "two-rewards"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text('version = "2.0"\n[verifier]\ntimeout_sec = 10\n')
    (task / "instruction.md").write_text("Create the file done.\n")
    (task / "tests" / "test.sh").write_text(MULTI_KEY_TEST)
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(task), str(REPO_ROOT / "envs" / "inventory-steps")],
            "panel.seeds": [0],
            "model.pricing": {"reference-weak": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}},
        },
    )
    jobs = tmp_path / "jobs"
    run = json.loads(
        cli("run", str(config), "--jobs-dir", str(jobs), "--json", cwd=tmp_path, check=True).stdout
    )
    seen = _harbor_sees(jobs)
    assert seen["rewards_keys"] == ["correctness", "reward", "style"], seen  # both named rewards kept
    assert seen["pass_at_k"] == {} and not any(seen["ours_pass_at_k"].values())  # no pass@k of named rewards
    (metrics,) = seen["metrics"]
    assert set(metrics) == {"correctness", "reward", "style"} and metrics["style"] == 0.25, metrics
    (stepped,) = seen["step_results"].values()
    assert stepped[0] == "record", seen["step_results"]
    cost, ours = seen["cost"]
    assert cost is not None and cost == pytest.approx(ours) and cost > 0, seen["cost"]
    job = Path(run["harbor_job"]["job_dir"])
    two = next(job.glob("two-rewards__*"))
    assert json.loads((two / "verifier" / "reward.json").read_text()) == {"correctness": 0.0, "style": 0.5}
    assert "checked done: 0" in (two / "verifier" / "test-stdout.txt").read_text()
    steps = next(job.glob("inventory-steps__*"))
    assert (steps / "steps" / "record" / "verifier" / "test-stdout.txt").is_file()
    usage = json.loads((two / "result.json").read_text())["agent_result"]
    assert usage["cost_usd"] == pytest.approx(
        (usage["n_input_tokens"] * 2 + usage["n_output_tokens"] * 8) / 1e6
    )
