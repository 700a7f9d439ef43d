"""Harbor's timeout multipliers and resource overrides (``envs/limits.py``): applied to a
loaded task, carried by the config (and its digest), and by ``tasks check``'s flags."""

from __future__ import annotations

import json
from pathlib import Path

from replaykit.envs.limits import with_limits
from replaykit.envs.tasks import load_task
from replaykit.episodes.config import load_config
from replaykit.testing import write_config
from tests.cli_runner import cli

TOML = """version = "1.0"
[verifier]
timeout_sec = 1.0
[agent]
timeout_sec = 10.0
[environment]
build_timeout_sec = 100.0
cpus = 1
memory = "2G"
"""
SLOW_VERIFIER = (
    'echo started; sleep 3; mkdir -p "$LOGS_DIR/verifier"\n'
    '[ -f "$APP_DIR/done" ] && echo 1 > "$LOGS_DIR/verifier/reward.txt" || echo 0 > "$LOGS_DIR/verifier/reward.txt"\n'
)


def _task(folder: Path, toml: str = TOML) -> Path:
    for rel, text in {
        "task.toml": toml,
        "instruction.md": "Wait.\n",
        "tests/test.sh": SLOW_VERIFIER,
        "solution/solve.sh": 'touch "$APP_DIR/done"\n',
    }.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def test_multipliers_scale_and_overrides_replace(tmp_path: Path) -> None:
    task = load_task(_task(tmp_path / "t"))
    assert with_limits(task, {}) is task
    scaled = with_limits(task, {"timeout_multiplier": 2, "verifier_timeout_multiplier": 5, "memory_mb": 512})
    assert (scaled.agent_timeout_sec, scaled.verifier_timeout_sec, scaled.build_timeout_sec) == (20, 5, 200)
    assert scaled.memory_mb == 512 and scaled.cpus == 1  # "2G" replaced; cpus untouched
    assert scaled.digest == task.digest and scaled.path == task.path  # the same task
    assert task.memory_mb == 2048 and task.verifier_timeout_sec == 1  # the loaded one unchanged
    assert with_limits(task, {"cpus": 0.5}).cpus == 0.5


def test_step_timeouts_scale_too(tmp_path: Path) -> None:
    folder = _task(
        tmp_path / "s", 'version = "1.0"\n[[steps]]\nname = "one"\n[steps.verifier]\ntimeout_sec = 4\n'
    )
    (folder / "steps" / "one" / "tests").mkdir(parents=True)
    (folder / "steps" / "one" / "instruction.md").write_text("Step one.\n")
    (folder / "steps" / "one" / "tests" / "test.sh").write_text(SLOW_VERIFIER)
    task = load_task(folder)
    assert with_limits(task, {"timeout_multiplier": 3}).steps[0].verifier_timeout_sec == 12


def test_limits_enter_the_config_digest_only_when_set(tmp_path: Path) -> None:
    for name in "abc":
        (tmp_path / name).mkdir()
    plain = load_config(write_config(tmp_path / "a", {}))
    again = load_config(write_config(tmp_path / "b", {}))
    scaled = load_config(write_config(tmp_path / "c", {"env.timeout_multiplier": 2}))
    assert plain.digest() == again.digest() != scaled.digest()
    assert "timeout_multiplier" not in plain.env.table() and scaled.env.table()["timeout_multiplier"] == 2


def test_tasks_check_takes_harbors_flags(tmp_path: Path) -> None:
    folder = _task(tmp_path / "slow-verifier")
    short = cli("tasks", "check", str(folder), "--env", "local", "--json")
    (row,) = json.loads(short.stdout)["tasks"]
    assert short.returncode == 1 and "verifier timed out after 1 s; output: started" in row["problem"], row
    long = cli(
        "tasks", "check", str(folder), "--env", "local", "--verifier-timeout-multiplier", "8", "--json"
    )
    (row,) = json.loads(long.stdout)["tasks"]
    assert long.returncode == 0 and row["solved"] == 1, row
    bad = cli("tasks", "check", str(folder), "--timeout-multiplier", "0")
    assert bad.returncode == 2 and "--timeout-multiplier" in bad.stderr


def test_a_solution_stopped_by_the_agent_timeout_is_graded_and_named(tmp_path: Path) -> None:
    """As Harbor does (AgentTimeoutError, then the verifier): graded, and the timeout said first."""
    folder = _task(tmp_path / "slow-solution", TOML.replace("timeout_sec = 10.0", "timeout_sec = 1.0"))
    (folder / "tests" / "test.sh").write_text(SLOW_VERIFIER.replace("sleep 3; ", ""))
    (folder / "solution" / "solve.sh").write_text('sleep 4; touch "$APP_DIR/done"\n')
    short = cli("tasks", "check", str(folder), "--env", "local", "--json")
    (row,) = json.loads(short.stdout)["tasks"]
    assert short.returncode == 1 and row["solved"] == 0, row
    assert row["problem"].startswith("solution scored 0: solution timed out after 1 s; reward 0"), row
    long = cli("tasks", "check", str(folder), "--env", "local", "--agent-timeout-multiplier", "8", "--json")
    (row,) = json.loads(long.stdout)["tasks"]
    assert long.returncode == 0 and row["solved"] == 1 and "timed out" not in row["problem"], row
