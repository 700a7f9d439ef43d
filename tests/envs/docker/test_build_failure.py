"""A task whose image does not build is that task's infra episodes, never the run's end
(issue 31 item 4): with ``--keep-going`` the rest of the panel runs and is graded; without
it the run stops with one line naming the task and the build step; ``tasks check`` reports
it per task and checks the others."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replaykit.testing import write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[3]
BROKEN_STEP = "RUN echo fetching && exit 7"


def _broken_task(root: Path) -> Path:
    folder = root / "broken-build"
    for rel, text in {
        "task.toml": 'version = "2.0"\n[metadata]\ntags = []\n[verifier]\ntimeout_sec = 30\n',
        "instruction.md": "Create done.txt.\n",
        "environment/Dockerfile": f"FROM debian:bookworm-slim\nWORKDIR /app\n{BROKEN_STEP}\n",
        "tests/test.sh": 'mkdir -p "$LOGS_DIR/verifier"; test -f /app/done.txt && echo 1 > "$LOGS_DIR/verifier/reward.txt" || echo 0 > "$LOGS_DIR/verifier/reward.txt"\n',
        "solution/solve.sh": "#!/bin/bash\ntouch /app/done.txt\n",
    }.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def test_a_failed_build_is_one_infra_episode_and_the_panel_runs(docker_base: str, tmp_path: Path) -> None:
    broken = _broken_task(tmp_path / "tasks")
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(broken), str(REPO / "envs" / "hello-file")],
            "panel.seeds": [0],
            "model.name": "reference-oracle",
        },
        base="quickstart-docker.yaml",
    )
    stopped = cli("run", str(config), cwd=tmp_path)  # no --keep-going: one line, nothing stored
    assert stopped.returncode == 1 and "Traceback" not in stopped.stderr, stopped.stderr
    line = stopped.stderr.strip()
    assert len(line.splitlines()) == 1 and "broken-build" in line and f"step `{BROKEN_STEP}`" in line, line

    proc = cli("run", str(config), "--keep-going", cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "broken-build" in proc.stdout
    jobs = tmp_path / "jobs"
    run = json.loads(
        cli(
            "run", str(config), "--keep-going", "--jobs-dir", str(jobs), "--json", cwd=tmp_path, check=True
        ).stdout
    )
    by_task = {e["task_id"]: e for e in run["episodes"]}
    assert by_task["hello-file"]["passed"] and not by_task["hello-file"]["infra_failure"], run
    assert by_task["broken-build"]["infra_failure"] and not by_task["broken-build"]["passed"], run
    assert run["reused_count"] == 1 and run["recorded_count"] == 1  # an infra episode is never reused

    (trial,) = list(Path(run["harbor_job"]["job_dir"]).glob("broken-build__*/result.json"))
    failed = json.loads(trial.read_text())  # Harbor's shape: an exception, no verifier result
    assert (
        failed["verifier_result"] is None
        and failed["exception_info"]["exception_type"] == "ReplaykitInfraFailure"
    )
    assert BROKEN_STEP in failed["exception_info"]["exception_message"]
    assert run["harbor_job"]["errors"] == 1 and run["harbor_job"]["trials"] == 2
    job = json.loads((Path(run["harbor_job"]["job_dir"]) / "config.json").read_text())
    assert job["environment"] == {"type": "docker"} and job["agents"][0]["model_name"] == "reference-oracle"
    assert (trial.parent / "agent" / "trajectory.json").is_file()  # an infra episode too: one system step
    store = str(tmp_path / "store")
    shown = json.loads(
        cli(
            "cassettes",
            "show",
            by_task["broken-build"]["cassette_id"],
            "--store",
            store,
            "--json",
            check=True,
        ).stdout
    )
    grade = json.dumps(shown)
    assert "environment not prepared" in grade and "broken-build" in grade and BROKEN_STEP in grade, grade[
        :2000
    ]
    replay = json.loads(cli("replay", run["run_id"], "--store", store, "--json", check=True).stdout)
    assert replay["identical"] is True, replay

    checked = cli("tasks", "check", str(broken), str(REPO / "envs" / "hello-file"), "--json", cwd=tmp_path)
    rows = {r["task_id"]: r for r in json.loads(checked.stdout)["tasks"]}
    assert rows["hello-file"]["ok"] and not rows["broken-build"]["ok"], rows
    assert f"image build failed at step `{BROKEN_STEP}`" in rows["broken-build"]["problem"], rows


def test_a_task_refused_at_load_is_one_infra_episode_with_its_reason(
    docker_base: str, tmp_path: Path
) -> None:
    """--keep-going: a task whose task.toml does not load and a compose task replaykit refuses
    are each one infra episode whose reason `run --json` carries, said before any image of theirs
    is built (the refused compose task's Dockerfile would fail its build); the rest is graded."""
    refused = _broken_task(tmp_path / "tasks")
    refused = refused.rename(refused.parent / "refused-compose")
    (refused / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main: {}\n  svc:\n    build: .\n    privileged: true\n"
    )
    unloadable = _broken_task(tmp_path / "tasks").rename(tmp_path / "tasks" / "bad-toml")
    (unloadable / "task.toml").write_text('version = "2.0"\n[verifier]\ntimeout_sec = "soon"\n')
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(refused), str(unloadable), str(REPO / "envs" / "hello-file")],
            "panel.seeds": [0],
            "model.name": "reference-oracle",
        },
        base="quickstart-docker.yaml",
    )
    run = json.loads(cli("run", str(config), "--keep-going", "--json", cwd=tmp_path, check=True).stdout)
    by_task = {e["task_id"]: e for e in run["episodes"]}
    assert by_task["hello-file"]["passed"], run
    compose_reason = by_task["refused-compose"]["reason"]
    assert (
        by_task["refused-compose"]["outcome"] == "infra"
        and "field 'privileged' is not supported" in compose_reason
    )
    assert BROKEN_STEP not in compose_reason  # refused before its image was built
    toml_reason = by_task["bad-toml"]["reason"]
    assert (
        by_task["bad-toml"]["outcome"] == "infra"
        and "refused at load" in toml_reason
        and "timeout_sec" in toml_reason
    )
    assert "reason" not in by_task["hello-file"]
