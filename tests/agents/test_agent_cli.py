"""``replaykit run --agent``'s wrong arguments and an agent process that fails or is interrupted:
one line each, never a traceback; a crash of the agent is the episode's ``crash``; Ctrl-C stops
the agent's process and the bridge."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replaykit.agents.registry import AGENTS
from replaykit.cassette.events import ErrorEvent
from replaykit.cassette.store import Store
from replaykit.testing import project_root, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e


def config_of(tmp: Path) -> Path:
    return write_config(
        tmp, {"panel.tasks": [str(project_root() / "envs" / "hello-file")], "panel.seeds": [0]}
    )


def fake_mini(folder: Path, body: str) -> str:
    """A ``mini`` that is not mini-swe-agent (a shell script): what its process does is the test's."""
    folder.mkdir()
    program = folder / "mini"
    program.write_text(f"#!/bin/sh\n{body}\n")
    program.chmod(0o755)
    return str(folder)


def test_an_unknown_agent_is_one_line_listing_the_registered_ones(tmp_path: Path) -> None:
    proc = cli("run", str(config_of(tmp_path)), "--agent", "mini-swe-agnet", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("Error: ") and "Traceback" not in line and "(got " not in line
    # the flag is named, not a config field
    assert "--agent mini-swe-agnet: unknown agent 'mini-swe-agnet'; known: " in line
    assert line.rsplit("; known: ", 1)[1].split(", ") == AGENTS.names()
    assert "mini-swe-agent" in AGENTS.names()
    assert not (tmp_path / "store").exists() and not (tmp_path / ".replaykit").exists()


def test_a_missing_agent_program_is_one_line_with_its_install_command(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {"REPLAYKIT_AGENTS_PATH": str(empty), "PATH": "/usr/bin:/bin"}  # no venv that has mini
    proc = cli("run", str(config_of(tmp_path)), "--agent", "mini-swe-agent", cwd=tmp_path, env=env)
    assert proc.returncode == 1 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert proc.stderr.strip() == (
        "Error: agent 'mini-swe-agent' needs the program 'mini', not found on $REPLAYKIT_AGENTS_PATH or "
        "PATH; install it: bash scripts/setup-agents.sh (or: pipx install mini-swe-agent==2.4.6)"
    )
    assert not (tmp_path / ".replaykit").exists()


def test_a_crash_of_the_agent_process_is_the_episode_crash_with_its_output_kept(tmp_path: Path) -> None:
    bin_dir = fake_mini(tmp_path / "bin", 'echo "starting"; echo "boom: the agent fell over" >&2; exit 3')
    proc = cli(
        "run", str(config_of(tmp_path)), "--agent", "mini-swe-agent", "--json",
        cwd=tmp_path, env={"REPLAYKIT_AGENTS_PATH": bin_dir},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    episode_row = json.loads(proc.stdout)["episodes"][0]
    assert episode_row["outcome"] == "crash" and episode_row["error"] == "RuntimeError"
    episode = Store(tmp_path / "store").get_episode(episode_row["cassette_id"])
    errors = [e.message for e in episode.events if isinstance(e, ErrorEvent)]
    assert errors == ["RuntimeError: mini-swe-agent exited with status 3: boom: the agent fell over"]
    notes = episode.meta["notes"]
    assert notes["returncode"] == 3 and notes["stdout"] == "starting\n"
    assert notes["stderr"] == "boom: the agent fell over\n"


def test_ctrl_c_stops_the_agent_process_and_the_run(tmp_path: Path) -> None:
    pid_file = tmp_path / "agent.pid"
    bin_dir = fake_mini(tmp_path / "bin", f"echo $$ > {pid_file}; exec sleep 300")
    proc = subprocess.Popen(
        [sys.executable, "-m", "replaykit.cli", "run", str(config_of(tmp_path)), "--agent", "mini-swe-agent"],
        cwd=tmp_path,
        env={**os.environ, "REPLAYKIT_AGENTS_PATH": bin_dir},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    agent = int(pid_file.read_text())
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    for _ in range(100):  # stopped with its group (reaped by init once replaykit is gone)
        try:
            os.kill(agent, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(agent, signal.SIGKILL)
        pytest.fail(f"the agent process {agent} outlived the interrupted run")


def test_replay_needs_the_agent_program_and_says_so_in_one_line(tmp_path: Path) -> None:
    bin_dir = fake_mini(tmp_path / "bin", 'echo "boom" >&2; exit 3')
    proc = cli(
        "run", str(config_of(tmp_path)), "--agent", "mini-swe-agent", "--json",
        cwd=tmp_path, env={"REPLAYKIT_AGENTS_PATH": bin_dir},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run_id, store = json.loads(proc.stdout)["run_id"], str(tmp_path / "store")
    again = cli(
        "replay", run_id, "--store", store, "--json", cwd=tmp_path, env={"REPLAYKIT_AGENTS_PATH": bin_dir}
    )
    assert again.returncode == 0 and json.loads(again.stdout)["identical"], again.stdout + again.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    absent = {"REPLAYKIT_AGENTS_PATH": str(empty), "PATH": "/usr/bin:/bin"}
    proc = cli("replay", run_id, "--store", store, cwd=tmp_path, env=absent)
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout
    assert proc.stderr.strip() == (
        "Error: agent 'mini-swe-agent' needs the program 'mini', not found on $REPLAYKIT_AGENTS_PATH or "
        "PATH; install it: bash scripts/setup-agents.sh (or: pipx install mini-swe-agent==2.4.6)"
    )


def test_doctor_checks_the_agent_program_of_a_config(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(project_root() / "envs" / "hello-file")],
            "harness.agent": "mini-swe-agent",
        },
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    absent = {"REPLAYKIT_AGENTS_PATH": str(empty), "PATH": "/usr/bin:/bin"}
    proc = cli("doctor", str(config), "--json", cwd=tmp_path, env=absent)
    (row,) = [c for c in json.loads(proc.stdout)["checks"] if c["name"] == "agent"]
    assert proc.returncode == 1 and row["status"] == "fail"
    assert row["fix"] == "bash scripts/setup-agents.sh (or: pipx install mini-swe-agent==2.4.6)"
    bin_dir = fake_mini(tmp_path / "bin", "exit 0")
    proc = cli("doctor", str(config), "--json", cwd=tmp_path, env={"REPLAYKIT_AGENTS_PATH": bin_dir})
    (row,) = [c for c in json.loads(proc.stdout)["checks"] if c["name"] == "agent"]
    assert row == {
        "name": "agent",
        "status": "ok",
        "detail": f"mini-swe-agent unknown at {bin_dir}/mini",
        "fix": "",
    }
