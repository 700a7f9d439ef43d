"""A replaykit run in Harbor's job layout (``run --jobs-dir``, ``cassettes export --format
harbor``), read by Harbor 0.25 itself: its models parse every ``config.json`` and
``result.json``, its own pass@k and job statistics over our trial results equal ours, and
``harbor view`` serves the job and each trial (issue 31 item 7)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from replaykit.testing import write_config
from tests.cli_runner import cli
from tests.harbor import harbor_cli

pytestmark = [pytest.mark.harbor, pytest.mark.e2e]
HARBOR_PY = harbor_cli.HOME / "venv" / "bin" / "python"
CHECK = r"""
import json, sys
from pathlib import Path
from harbor.viewer.scanner import JobScanner
from harbor.models.job.result import JobStats
from harbor.utils.pass_at_k import compute_pass_at_k_by_evals
scanner = JobScanner(Path(sys.argv[1]))
(job,) = scanner.list_jobs()
result = scanner.get_job_result(job)
assert result is not None and scanner.get_job_config(job) is not None, "job files unreadable"
trials = [scanner.get_trial_result(job, t) for t in scanner.list_trials(job)]
configs = [scanner.get_trial_config(job, t) for t in scanner.list_trials(job)]
assert all(t is not None for t in trials) and all(c is not None for c in configs), "trial files unreadable"
stats = JobStats.from_trial_results(trials)
print(json.dumps({
    "job": job,
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


def test_harbor_reads_a_replaykit_run_as_its_own_job(tmp_path: Path) -> None:
    reason = harbor_cli.missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the Harbor layout test must run in CI: {reason}", pytrace=False)
        pytest.skip(reason)
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

    proc = subprocess.run(
        [str(HARBOR_PY), "-c", CHECK, str(jobs)],
        capture_output=True,
        text=True,
        timeout=120,
        env=harbor_cli.environ(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = json.loads(proc.stdout)
    assert len(seen["trials"]) == run["total"]
    assert seen["pass_at_k"] == seen["ours_pass_at_k"] and seen["pass_at_k"], seen  # pass@2 over 2 seeds
    assert seen["n_errored"] == seen["ours_n_errored"] and seen["exceptions"] == seen["ours_exceptions"]
    assert seen["rewards"] == seen["ours_rewards"] and seen["tokens"] == seen["ours_tokens"], seen
    solved = {e["cassette_id"][:8] for e in run["episodes"] if e["passed"]}
    ones = next(iter(seen["rewards"].values())).get("1.0", [])
    assert {t.rsplit("__", 1)[1] for t in ones} == solved

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
        listed = _get(f"{base}/api/jobs")
        assert [j["name"] for j in listed["items"]] == [seen["job"]], listed
        trials = _get(f"{base}/api/jobs/{seen['job']}/trials?page_size=100")
        assert len(trials["items"]) == run["total"], trials
        one = _get(f"{base}/api/jobs/{seen['job']}/trials/{seen['trials'][0]}")
        assert one["trial_name"] == seen["trials"][0] and one["agent_info"]["version"] == run["harness_sha"]
    finally:
        viewer.terminate()
        viewer.wait(timeout=20)
