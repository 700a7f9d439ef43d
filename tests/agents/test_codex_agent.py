"""``replaykit run CONFIG --agent codex``: the real Codex CLI as the policy of docker-kind episodes
with the built-in reference simulator. Codex's own shell and patch tools are off; its one tool
(an MCP ``run``) is a recorded step in the task's container; its Responses calls are the episode's
``llm`` events. A replay with no route but loopback and no Docker socket is identical; another
Codex version is refused in one line, and its replay says so; a missing Codex is one line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from replaykit.agents.codex.driver import CODEX_VERSION, FEATURES_OFF, INSTALL, TEMP_PREFIX
from replaykit.cassette.events import EnvEvent, LlmEvent
from replaykit.cassette.store import Store
from tests.cli_runner import cli

pytestmark = [pytest.mark.e2e, pytest.mark.codex, pytest.mark.docker]

REPO = Path(__file__).resolve().parents[2]
TASKS = ["hello-file", "organize-files"]  # organize-files' inbox/ exists only in its container
OWN_TOOLS = {"exec_command", "write_stdin", "shell", "shell_command", "apply_patch", "view_image"}


def codex_cli() -> str:
    """The Codex CLI; CI installs it (scripts/setup-codex.sh). Skipped only with REPLAYKIT_ALLOW_CODEX_SKIP=1, never under CI."""
    found = shutil.which("codex")
    if found is None:
        if os.environ.get("REPLAYKIT_ALLOW_CODEX_SKIP") == "1" and not os.environ.get("CI"):
            pytest.skip("the Codex CLI is not installed")
        pytest.fail(f"the Codex CLI is not installed; run `bash scripts/setup-codex.sh` ({INSTALL})")
    return found


def write_config(folder: Path, name: str, tasks: list[str], extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    panel = json.dumps([str(REPO / "envs" / t) for t in tasks])
    config = folder / f"{name}.yaml"
    config.write_text(
        f"name: {name}\nstore: ./store\nmodel: {{name: reference-oracle, base_url: builtin}}\n"
        f"panel: {{tasks: {panel}, seeds: [0]}}\nenv: {{kind: docker, timeout_sec: 60}}\n{extra}"
    )
    return config


def run_json(*args: str, cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = cli(*args, "--json", cwd=cwd, env=env, process=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def offline_replay(run_id: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """``replaykit replay`` in a network namespace of its own (loopback up, no other route) with
    the Docker socket masked by a plain file: what serves it must be the store."""
    missing = [t for t in ("unshare", "ip", "mount") if shutil.which(t) is None]
    if os.geteuid() != 0 or missing:
        why = f"an offline replay needs root and {', '.join(missing) or 'unshare'} (a namespace without network and Docker)"
        if os.environ.get("CI"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    masked = folder / "no-docker"
    masked.write_text("")
    socket = "/var/run/docker.sock"
    script = (
        f"ip link set lo up && {{ [ ! -e {socket} ] || mount --bind {masked} {socket}; }} && "
        f"[ ! -S {socket} ] && exec {sys.executable} -m replaykit.cli replay {run_id} --store store --json"
    )
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    return subprocess.run(
        ["unshare", "-n", "--mount", "sh", "-c", script],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    codex_cli()
    folder = tmp_path_factory.mktemp("codex-agent")
    config = write_config(folder, "codex", TASKS)
    report = run_json("run", str(config), "--agent", "codex", cwd=folder)
    return {"folder": folder, "config": config, "report": report}


def episodes(folder: Path, run_id: str) -> list[Any]:
    store = Store(folder / "store", readonly=True)
    return [store.get_episode(cid) for cid in store.get_run(run_id).cassettes]


def test_codex_solves_docker_tasks_acting_only_through_container_steps(recorded: dict[str, Any]) -> None:
    report = recorded["report"]
    assert report["agent"] == {"name": "codex", "version": CODEX_VERSION}
    assert (report["solved"], report["total"], report["recorded_count"]) == (2, 2, 2), report
    for episode in episodes(recorded["folder"], report["run_id"]):
        meta = episode.meta
        assert meta["environment"]["kind"] == "docker" and meta["agent"]["name"] == "codex"
        assert {"uuids", "timestamps", "codex-session"} <= set(meta["rules"])
        llm = [e for e in episode.events if isinstance(e, LlmEvent)]
        env = [e for e in episode.events if isinstance(e, EnvEvent)]
        solution = (REPO / "envs" / episode.key.task_id / "solution" / "solve.sh").read_text()
        assert env and all(e.action in solution for e in env)  # each command ran as a container step
        assert len(llm) == len(env) + 1 and all(e.path == "/v1/responses" for e in llm)
        assert all(e.body["parallel_tool_calls"] is False for e in llm)  # one call a reply: in order
        tools = llm[0].body["tools"]
        names = {t["name"] for t in tools}
        assert not names & OWN_TOOLS, names  # Codex's own actuators are off
        (mcp,) = [t for t in tools if t["type"] == "namespace"]
        assert mcp["name"] == "mcp__replaykit" and [t["name"] for t in mcp["tools"]] == ["run"]
        assert set(FEATURES_OFF) >= {"shell_tool", "unified_exec"}


def test_a_second_run_reuses_every_episode(recorded: dict[str, Any]) -> None:
    again = run_json("run", str(recorded["config"]), "--agent", "codex", cwd=recorded["folder"])
    assert again["run_id"] == recorded["report"]["run_id"]
    assert (again["reused_count"], again["recorded_count"], again["model_calls"]) == (2, 0, 0)


def test_replay_without_network_or_docker_is_identical(recorded: dict[str, Any]) -> None:
    proc = offline_replay(recorded["report"]["run_id"], recorded["folder"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["identical"] and len(report["episodes"]) == 2, report
    assert "agent_note" not in report


def fake_codex(folder: Path, version: str) -> Path:
    """A ``codex`` reporting another version (running the real one otherwise)."""
    bin_dir = folder / f"codex-{version}"
    bin_dir.mkdir(exist_ok=True)
    real = codex_cli()
    wrapper = bin_dir / "codex"
    wrapper.write_text(
        f'#!/bin/sh\n[ "$1" = "--version" ] && echo "codex-cli {version}" && exit 0\nexec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    return bin_dir


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_another_codex_version_is_refused_in_one_line_and_its_replay_says_so(
    recorded: dict[str, Any],
) -> None:
    folder = recorded["folder"]
    env = {"REPLAYKIT_AGENTS_PATH": str(fake_codex(folder, "0.170.0"))}
    before = tree(folder / "store")
    proc = cli(
        "run",
        str(recorded["config"]),
        "--agent",
        "codex",
        "--model",
        "reference-strong",
        cwd=folder,
        env=env,
        process=True,
    )
    assert (
        proc.returncode == 1
        and proc.stderr.startswith("Error: ")
        and len(proc.stderr.strip().splitlines()) == 1
    )
    assert f"drives codex {CODEX_VERSION}" in proc.stderr and "is 0.170.0" in proc.stderr
    assert "setup-codex.sh" in proc.stderr and tree(folder / "store") == before  # nothing made
    replay = cli(
        "replay",
        recorded["report"]["run_id"],
        "--store",
        "store",
        "--json",
        cwd=folder,
        env=env,
        process=True,
    )
    report = json.loads(replay.stdout)
    assert replay.returncode == 1 and not report["identical"]
    assert report["agent_note"] == (
        f"replayed 2 episode(s) of agent 'codex' recorded under version {CODEX_VERSION} (2); "
        "installed here: 0.170.0"
    )


def test_a_limit_stops_codex_and_replays(tmp_path: Path) -> None:
    codex_cli()
    config = write_config(tmp_path, "capped", ["organize-files"], "limits: {max_steps: 1}\n")
    report = run_json("run", str(config), "--agent", "codex", cwd=tmp_path)
    (episode,) = episodes(tmp_path, report["run_id"])
    assert [type(e).__name__ for e in episode.events][-2:] == ["LimitEvent", "GradeEvent"]
    assert sum(isinstance(e, EnvEvent) for e in episode.events) == 1 and report["solved"] == 0
    replay = run_json("replay", report["run_id"], "--store", "store", cwd=tmp_path)
    assert replay["identical"], replay
    assert TEMP_PREFIX not in ps_args()  # Codex and its MCP server were stopped with the episode


def test_a_missing_codex_is_one_line_with_its_install_command(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git",):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    config = write_config(tmp_path, "nocodex", ["hello-file"])
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{bin_dir}", "REPLAYKIT_AGENTS_PATH": ""}
    proc = cli("run", str(config), "--agent", "codex", cwd=tmp_path, env=env, process=True)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "'codex'" in proc.stderr and "bash scripts/setup-codex.sh" in proc.stderr
    assert not (tmp_path / "store").exists() and not (tmp_path / ".replaykit").exists()


def test_ctrl_c_while_codex_runs_stops_it_and_a_rerun_records_the_rest(tmp_path: Path) -> None:
    codex_cli()
    config = write_config(tmp_path, "interrupted", TASKS)
    argv = [sys.executable, "-m", "replaykit.cli", "run", str(config), "--agent", "codex"]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while TEMP_PREFIX not in ps_args() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before Codex started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err
    time.sleep(0.5)
    assert TEMP_PREFIX not in ps_args()  # Codex and its MCP server went with the episode
    again = run_json("run", str(config), "--agent", "codex", cwd=tmp_path)
    assert again["solved"] == again["total"] == 2 and again["recorded_count"] >= 1


def ps_args() -> str:
    return subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout
