"""``replaykit init`` and ``replaykit tasks init`` produce things the rest of replaykit accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


def test_init_makes_a_harness_repo_and_config_that_run_accepts(tmp_path: Path) -> None:
    made = cli("init", "proj", "--json", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    report = json.loads(made.stdout)
    assert (tmp_path / "proj" / "harness" / ".git").is_dir()
    run = cli("run", report["config"], "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["harness_sha"] == report["harness_sha"] and doc["total"] == 1
    assert (tmp_path / "proj" / "cassettes" / "index.db").is_file()  # the store lives in the project
    again = cli("init", "proj", cwd=tmp_path)
    assert again.returncode == 1 and again.stderr.startswith("Error:") and "already exists" in again.stderr


def test_init_names_what_it_trains_with_and_says_the_model_plays_solution(tmp_path: Path) -> None:
    from replaykit.episodes.config import load_config
    from replaykit.train.config import DEFAULT_CRITERION, DEFAULT_ESTIMATOR, DEFAULT_OPTIMIZER, train_config

    made = cli("init", "proj", cwd=tmp_path, env={"COLUMNS": "80"})
    assert made.returncode == 0, made.stderr
    assert "plays each task's solution/solve.sh" in " ".join(made.stdout.split())
    text = (tmp_path / "proj" / "replaykit.yaml").read_text()
    config = load_config(tmp_path / "proj" / "replaykit.yaml")
    assert config.train is not None  # written out, not left to defaults
    assert {k: config.train[k] for k in ("estimator", "criterion", "optimizer")} == {
        "estimator": DEFAULT_ESTIMATOR,
        "criterion": DEFAULT_CRITERION,
        "optimizer": DEFAULT_OPTIMIZER,
    }
    trains = train_config(config)
    assert (trains.criterion["name"], trains.optimizer["name"], trains.estimator["kind"]) == (
        "strict_pareto",
        "greedy_monotonic",
        "agentic",
    )
    assert text.count("\n  # ") >= 3 and "knows only the quickstart" in text  # each one commented


def test_tasks_init_passes_the_local_oracle_check(tmp_path: Path) -> None:
    made = cli("tasks", "init", "count-words", "--dir", "tasks", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "tasks" / "count-words"
    assert {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} == {
        "task.toml",
        "instruction.md",
        "environment/Dockerfile",
        "environment/files/.gitkeep",  # the starting files' folder, which the local kind copies
        "tests/test.sh",
        "solution/solve.sh",
    }
    assert "COPY files/ /app/" in (folder / "environment" / "Dockerfile").read_text()  # and Docker too
    check = cli("tasks", "check", str(folder), "--env", "local", "--json", cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert json.loads(check.stdout)["passed"] == 1
    bad = cli("tasks", "init", "Bad Name", cwd=tmp_path)
    assert bad.returncode == 1 and "lowercase" in bad.stderr and bad.stderr.count("\n") == 1
    taken = cli("tasks", "init", "count-words", "--dir", "tasks", cwd=tmp_path)
    assert taken.returncode == 1 and "already exists" in taken.stderr


@pytest.mark.docker
def test_tasks_init_passes_the_docker_oracle_check(tmp_path: Path) -> None:
    assert cli("tasks", "init", "in-docker", "--dir", ".", cwd=tmp_path).returncode == 0
    check = cli("tasks", "check", "in-docker", "--json", cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert json.loads(check.stdout)["passed"] == 1


def test_init_refuses_an_unknown_template_before_making_anything(tmp_path: Path) -> None:
    bad = cli("init", "proj", "--template", "terminu", cwd=tmp_path)
    assert bad.returncode == 1 and not (tmp_path / "proj").exists()
    assert (
        bad.stderr.strip()
        == "Error: unknown harness template 'terminu'; known: quickstart, shell-text, terminus"
    )
    made = json.loads(cli("init", "tproj", "--template", "terminus", "--json", cwd=tmp_path).stdout)
    config = yaml.safe_load((tmp_path / made["config"]).read_text())
    assert config["env"]["kind"] == "docker"  # the terminus harness drives tmux in the task's container
    assert (tmp_path / made["harness"] / "prompt.txt").is_file()
