"""Harbor task-format fidelity on the local environment: env tables (and host templating),
multi-step tasks, multi-key reward.json, partial credit, batch checks that go on."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from replaykit.core.errors import TaskError
from replaykit.envs.check import check_tasks
from replaykit.envs.local import LocalEnv, oracle
from replaykit.envs.results import Observation
from replaykit.envs.rewards import scalar_reward
from replaykit.envs.section import EnvConfig
from replaykit.envs.steps import combine, load_steps
from replaykit.envs.task_env import resolve, scrub
from replaykit.envs.tasks import load_task
from replaykit.envs.verifier import verifier_grade

HEAD = 'version = "2.0"\n'
REWARD = 'mkdir -p "$LOGS_DIR/verifier"\n'


def write(folder: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def simple_task(
    folder: Path, toml: str, test: str, solve: str = "true\n", instruction: str = "Do it.\n"
) -> Path:
    return write(
        folder,
        {
            "task.toml": HEAD + toml,
            "instruction.md": instruction,
            "tests/test.sh": REWARD + test,
            "solution/solve.sh": solve,
        },
    )


# -- env tables ---------------------------------------------------------------------------

ENV_TOML = """
[environment.env]
GREETING = "hello"
[verifier.env]
EXPECTED = "hello world"
[solution.env]
SUFFIX = "world"
"""


def test_env_tables_reach_their_processes(tmp_path: Path) -> None:
    task = load_task(
        simple_task(
            tmp_path / "env-task",
            ENV_TOML,
            'if [ "$(cat out.txt)" = "$EXPECTED" ] && [ -z "${SUFFIX:-}" ]; then echo 1; else echo 0; fi > "$LOGS_DIR/verifier/reward.txt"\n',
            solve='echo "$GREETING $SUFFIX" > out.txt\n',
        )
    )
    untouched, solved = oracle(task, EnvConfig())
    assert (untouched.reward, solved.reward) == (0, 1), (untouched.detail, solved.detail)
    with LocalEnv(task, tmp_path / "ws2") as env:
        assert env.run('echo "$GREETING/${EXPECTED:-unset}/${SUFFIX:-unset}"').stdout == "hello/unset/unset\n"


def test_host_templating_resolves_and_never_shows_the_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RK_TEST_TOKEN", "s3cr3t-value-42")
    toml = '[environment.env]\nTOKEN = "${RK_TEST_TOKEN}"\nMODE = "${RK_UNSET_MODE:-fast}"\n'
    task = load_task(
        simple_task(tmp_path / "t", toml, 'echo "token=$TOKEN"; echo 1 > "$LOGS_DIR/verifier/reward.txt"\n')
    )
    with LocalEnv(task, tmp_path / "ws") as env:
        obs = env.run('echo "$TOKEN $MODE"; echo "$TOKEN" >&2')
        assert obs.stdout == "<secret:TOKEN> fast\n" and obs.stderr == "<secret:TOKEN>\n"
        assert (
            env.run('[ "$TOKEN" = s3cr3t-value-42 ] && echo same').stdout == "same\n"
        )  # the process sees the value
        grade = env.grade()
        assert "s3cr3t" not in grade.detail and "<secret:TOKEN>" in grade.detail
        assert env.secrets == {"TOKEN": "s3cr3t-value-42"}
    assert "s3cr3t" not in json.dumps(env.metadata())


def test_unset_host_variable_without_default_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RK_NOT_SET", raising=False)
    with pytest.raises(
        TaskError, match=r"\[verifier.env\]: KEY = '\$\{RK_NOT_SET\}' needs the host variable RK_NOT_SET"
    ):
        resolve({"KEY": "${RK_NOT_SET}"}, "task.toml [verifier.env]", environ={})
    assert resolve({"A": "${X:-d}", "B": "lit ${X}"}, "t", environ={}).values == {"A": "d", "B": "lit ${X}"}
    assert (
        scrub("a abcd b", {"N": "abcd", "S": "ab"}) == "a <secret:N> b"
    )  # too-short values are not scrubbed


@pytest.mark.parametrize(
    "toml,match",
    [
        ('[verifier.env]\nAPP_DIR = "/x"\n', "set by replaykit itself"),
        ("[verifier.env]\nN = 3\n", "must be a string"),
        (
            '[environment]\nos = "windows"\n',
            "field 'environment.os' = 'windows' is not supported: replaykit runs Linux",
        ),
        ('[verifier]\nenvironment_mode = "separate"\n', "not supported"),
    ],
)
def test_bad_or_unsupported_fields_are_refused(tmp_path: Path, toml: str, match: str) -> None:
    with pytest.raises(TaskError, match=match):
        load_task(simple_task(tmp_path / "t", toml, "echo 1 > $LOGS_DIR/verifier/reward.txt\n"))


# -- reward.json ----------------------------------------------------------------------------


def test_reward_json_keys() -> None:
    assert scalar_reward({"reward": 0.5, "style": 1}) == (0.5, "key 'reward' (other keys: style)")
    assert scalar_reward({"accuracy": 0.25}) == (0.25, "key 'accuracy'")
    value, how = scalar_reward({"a": 1, "b": 0, "c": 0.5})
    assert value == 0.5 and how == "mean of keys a=1, b=0, c=0.5"
    assert (
        scalar_reward({"a": 1, "b": "x"})[0] is None
        and "keys found: a, b" in scalar_reward({"a": 1, "b": "x"})[1]
    )
    assert scalar_reward(0.75) == (0.75, "")


def test_reward_json_wins_and_errors_name_keys(tmp_path: Path) -> None:
    (tmp_path / "reward.txt").write_text("0\n")
    (tmp_path / "reward.json").write_text('{"tests": 1, "lint": 1}')
    grade = verifier_grade(Observation("", "", 0), tmp_path, 10)
    assert grade.passed and grade.reward == 1 and "mean of keys lint=1, tests=1" in grade.detail
    (tmp_path / "reward.json").write_text('{"tests": 1, "lint": null}')
    grade = verifier_grade(Observation("", "", 0), tmp_path, 10)
    assert grade.infra_failure and "key 'lint'" in grade.detail and "keys found: lint, tests" in grade.detail


# -- multi-step -----------------------------------------------------------------------------

STEPS_TOML = """
multi_step_reward_strategy = "mean"
[[steps]]
name = "write"
[[steps]]
name = "append"
min_reward = 1.0
"""


def steps_task(folder: Path, toml: str = STEPS_TOML) -> Path:
    return write(
        folder,
        {
            "task.toml": HEAD + toml,
            "steps/write/instruction.md": "Write a.txt containing one.\n",
            "steps/write/tests/test.sh": REWARD
            + 'grep -qx one a.txt && echo 1 > "$LOGS_DIR/verifier/reward.txt" || echo 0 > "$LOGS_DIR/verifier/reward.txt"\n',
            "steps/write/solution/solve.sh": "echo one > a.txt\n",
            "steps/append/instruction.md": "Append two to a.txt.\n",
            "steps/append/workdir/setup.sh": "echo staged > staged.txt\n",
            "steps/append/tests/test.sh": REWARD
            + '[ "$(cat a.txt)" = "$(printf "one\\ntwo")" ] && [ -f staged.txt ] && echo 1 > "$LOGS_DIR/verifier/reward.txt" || echo 0 > "$LOGS_DIR/verifier/reward.txt"\n',
            "steps/append/solution/solve.sh": "cat > /dev/null <<'EOF'\nheredoc\nEOF\necho two >> a.txt\n",
        },
    )


def test_multi_step_task_loads_and_passes_the_oracle(tmp_path: Path) -> None:
    task = load_task(steps_task(tmp_path / "steps-task"))
    assert [s.name for s in task.steps] == ["write", "append"] and task.instruction.startswith("Write a.txt")
    assert task.has_solution and task.reward_strategy == "mean"
    untouched, solved = oracle(task, EnvConfig())
    assert untouched.reward == 0 and not untouched.infra_failure
    assert solved.passed and "mean over 2 of 2 steps" in solved.detail


def test_multi_step_rewards_mean_final_and_min_reward(tmp_path: Path) -> None:
    from replaykit.envs.results import Grade

    steps = load_steps(
        steps_task(tmp_path / "t"), {"steps": [{"name": "write"}, {"name": "append", "min_reward": 1}]}
    )
    half = [(steps[0], Grade(1.0, True)), (steps[1], Grade(0.0, False))]
    assert combine(half, "mean", 2).reward == 0.5 and combine(half, "final", 2).reward == 0
    stopped = combine([(steps[0], Grade(0.0, False))], "mean", 2)
    assert stopped.reward == 0 and "1 of 2 steps" in stopped.detail
    assert combine([(steps[0], Grade(0.0, False, infra_failure=True))], "mean", 2).infra_failure


@pytest.mark.parametrize(
    "toml,match",
    [
        ('[[steps]]\nname = "nope"\n', r"steps/nope/instruction.md: missing"),
        ('[[steps]]\nname = "write"\nmin_reward = {tests = 1.0}\n', "per-key thresholds"),
        ('multi_step_reward_strategy = "max"\n[[steps]]\nname = "write"\n', "expected one of: mean, final"),
        ('[[steps]]\nname = "write"\n[[steps]]\nname = "write"\n', "repeats step"),
    ],
)
def test_malformed_steps_are_one_line(tmp_path: Path, toml: str, match: str) -> None:
    steps_task(tmp_path / "t")
    (tmp_path / "t" / "task.toml").write_text(HEAD + toml)
    with pytest.raises(TaskError, match=match):
        load_task(tmp_path / "t")


# -- tasks check: the batch goes on, partial credit is a warning ------------------------------


def test_check_batch_reports_broken_tasks_and_checks_the_rest(tmp_path: Path) -> None:
    simple_task(
        tmp_path / "suite" / "a-good",
        "",
        'test -f done && echo 1 > "$LOGS_DIR/verifier/reward.txt" || echo 0 > "$LOGS_DIR/verifier/reward.txt"\n',
        solve="touch done\n",
    )
    simple_task(tmp_path / "suite" / "b-broken", '[environment]\ncpus = "two"\n', "echo 1\n")
    simple_task(
        tmp_path / "suite" / "c-partial",
        "",
        'test -f done && echo 1 > "$LOGS_DIR/verifier/reward.json" || echo \'{"a": 1, "b": 0, "c": 0}\' > "$LOGS_DIR/verifier/reward.json"\n',
        solve="touch done\n",
    )
    steps_task(tmp_path / "suite" / "d-steps")
    report = check_tasks(["suite/*"], tmp_path, kind="local")
    rows = {r["task_id"]: r for r in report["tasks"]}
    assert list(rows) == ["a-good", "b-broken", "c-partial", "d-steps"]
    assert rows["a-good"]["ok"] and rows["d-steps"]["ok"]
    assert (
        not rows["b-broken"]["ok"]
        and "field 'environment.cpus' must be a integer > 0" in rows["b-broken"]["problem"]
    )
    assert "\n" not in rows["b-broken"]["problem"]
    assert rows["c-partial"]["ok"] and rows["c-partial"]["warning"].startswith(
        "untouched environment scores 0.333333"
    )
    assert (report["passed"], report["total"], report["warnings"], report["ok"]) == (3, 4, 1, False)


def test_check_cli_prints_warning_and_goes_on(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from replaykit.cli import app

    simple_task(tmp_path / "suite" / "b-broken", '[environment]\ncpus = "two"\n', "echo 1\n")
    simple_task(
        tmp_path / "suite" / "c-partial",
        "",
        'test -f done && echo 1 > "$LOGS_DIR/verifier/reward.txt" || echo 0.5 > "$LOGS_DIR/verifier/reward.txt"\n',
        solve="touch done\n",
    )
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(app, ["tasks", "check", "suite/*", "--env", "local", "--json"])
    finally:
        os.chdir(cwd)
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    assert [r["ok"] for r in report["tasks"]] == [False, True]
    assert (
        report["tasks"][1]["warning"] == "untouched environment scores 0.5 (partial credit without any work)"
    )


def test_multi_container_task_is_refused_locally_in_one_line(tmp_path: Path) -> None:
    folder = simple_task(tmp_path / "two", "", 'echo 1 > "$LOGS_DIR/verifier/reward.txt"\n')
    write(folder, {"environment/docker-compose.yaml": "services:\n  db:\n    image: x\n"})
    report = check_tasks([str(folder)], tmp_path, kind="local")
    (row,) = report["tasks"]
    assert not row["ok"] and "has several containers; it runs only in Docker" in row["problem"]
