"""Harbor parity on the task format (issue 20), in-process: multi-step tasks see the
task-level tests/ under each step's /tests, network defaults and schema 1.4's
``network_mode``, unknown task.toml keys and the features a task uses, TB1 tasks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from replaykit.core.errors import TaskError
from replaykit.envs.check import check_tasks
from replaykit.envs.features import feature_report, unknown_keys
from replaykit.envs.local import oracle
from replaykit.envs.section import EnvConfig
from replaykit.envs.tasks import load_task
from tests.cli_runner import cli

pytestmark = pytest.mark.unit
REWARD = 'mkdir -p "$LOGS_DIR/verifier"\n'


def write(folder: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def shared_helper_steps(folder: Path) -> Path:
    """A [[steps]] task whose steps' test.sh source a helper of the task's tests/."""
    helper = 'grade() { if eval "$1"; then echo 1; else echo 0; fi > "$LOGS_DIR/verifier/reward.txt"; }\n'
    return write(
        folder,
        {
            "task.toml": 'version = "1.0"\n[[steps]]\nname = "one"\n[[steps]]\nname = "two"\n',
            "tests/helpers.sh": helper,
            "tests/test.sh": REWARD + '. "$TESTS_DIR/helpers.sh"\ngrade "[ -f b.txt ]"\n',
            "steps/one/instruction.md": "Write a.txt.\n",
            "steps/one/tests/test.sh": REWARD + '. "$TESTS_DIR/helpers.sh"\ngrade "[ -f a.txt ]"\n',
            "steps/one/solution/solve.sh": "touch a.txt\n",
            "steps/two/instruction.md": "Write b.txt.\n",
            "steps/two/solution/solve.sh": "touch b.txt\n",
        },
    )


def test_multi_step_tests_merge_the_task_level_tests(tmp_path: Path) -> None:
    task = load_task(shared_helper_steps(tmp_path / "shared-helper"))
    untouched, solved = oracle(task, EnvConfig())
    assert untouched.reward == 0 and not untouched.infra_failure, untouched.detail
    assert solved.passed and solved.reward == 1, solved.detail
    assert "No such file" not in solved.detail


def test_network_mode_follows_harbor(tmp_path: Path) -> None:
    def net(toml: str) -> str:
        folder = write(
            tmp_path / f"n{abs(hash(toml))}",
            {"task.toml": toml, "instruction.md": "x\n", "tests/test.sh": "true\n"},
        )
        return load_task(folder).network_mode

    assert net('version = "1.0"\n') == "public"  # Harbor's default
    assert net('version = "1.0"\n[environment]\nallow_internet = false\n') == "no-network"
    assert net('schema_version = "1.4"\n[environment]\nnetwork_mode = "no-network"\n') == "no-network"
    assert (
        net('schema_version = "1.4"\n[environment]\nnetwork_mode = "public"\nallow_internet = false\n')
        == "public"
    )
    with pytest.raises(TaskError, match=r"field 'environment.network_mode' = 'allowlist' is not supported"):
        net('schema_version = "1.4"\n[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["x.org"]\n')


def test_unknown_keys_and_features_are_named(tmp_path: Path) -> None:
    config = {
        "version": "1.0",
        "enviroment": {"cpus": 1},
        "agent": {"timeout_secs": 5, "user": "agent"},
        "environment": {"env": {"A": "b"}, "healthcheck": {"command": "true", "interval": 1}},
        "steps": [{"name": "one", "min_rewards": 1}],
    }
    assert unknown_keys(config) == [
        "enviroment",
        "agent.timeout_secs",
        "environment.healthcheck.interval",
        "steps[0].min_rewards",
    ]
    report = feature_report(config, tmp_path)
    assert "multi-step (1 steps)" in report["used"] and "env tables ([environment.env])" in report["used"]
    assert "network public" in report["used"] and "healthcheck" in report["used"]
    assert report["ignored"] == ["agent.user (actions run as the image's user)"]


def test_tasks_check_warns_on_an_unknown_key_and_prints_features(tmp_path: Path) -> None:
    write(
        tmp_path / "typo",
        {
            "task.toml": 'version = "1.0"\n[verifier]\ntimeout_secs = 5\n',
            "instruction.md": "Write done.\n",
            "tests/test.sh": REWARD
            + '[ -f done ] && echo 1 > "$LOGS_DIR/verifier/reward.txt" || echo 0 > "$LOGS_DIR/verifier/reward.txt"\n',
            "solution/solve.sh": "touch done\n",
        },
    )
    report = check_tasks(["typo"], tmp_path, kind="local")
    row = report["tasks"][0]
    assert row["ok"] and row["warnings"] == [
        "unknown task.toml key 'verifier.timeout_secs' (Harbor ignores it too; a typo?)"
    ]
    assert row["features"] == ["network public"]
    out = cli("tasks", "check", "typo", "--env", "local", cwd=tmp_path, env={"COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    assert "typo: warning: unknown task.toml key 'verifier.timeout_secs'" in out.stdout
    assert "typo: uses network public" in out.stdout


def tb1_task(folder: Path) -> Path:
    return write(
        folder,
        {
            "task.yaml": "instruction: Write done.txt.\ndifficulty: easy\nmax_test_timeout_sec: 30\n",
            "Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\n",
            "docker-compose.yaml": "services:\n  client:\n    build:\n      context: .\n    command: [sh, -c, sleep infinity]\n",
            "run-tests.sh": "#!/bin/bash\n[ -f /app/done.txt ]\n",
            "solution.sh": "#!/bin/bash\ntouch /app/done.txt\n",
        },
    )


def test_tb1_task_loads_as_harbor_tasks_migrate_maps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tb1_task(tmp_path / "tasks" / "tb1-done")
    task = load_task(tmp_path / "tasks" / "tb1-done")
    assert task.id == "tb1-done" and task.instruction == "Write done.txt.\n"
    assert task.verifier_timeout_sec == 30 and task.agent_timeout_sec == 360 and task.network_mode == "public"
    test_sh = (task.tests_dir / "test.sh").read_text()
    assert (
        test_sh.startswith("#!/bin/bash\n[ -f /app/done.txt ]\n")
        and "echo 1 > /logs/verifier/reward.txt" in test_sh
    )
    dockerfile = (task.environment_dir / "Dockerfile").read_text()
    assert dockerfile.endswith("# Mapped from docker-compose.yaml\nENV TEST_DIR=/tests\n")
    assert (task.solution_dir / "solve.sh").read_text() == "#!/bin/bash\ntouch /app/done.txt\n"
    assert load_task(tmp_path / "tasks" / "tb1-done").digest == task.digest  # converted once, same bytes
    report = check_tasks(["tasks/*"], tmp_path, kind="local")  # a glob finds it (no 'matches no task folder')
    assert report["total"] == 1 and report["tasks"][0]["features"][0].startswith("Terminal-Bench 1 layout")
    write(
        tmp_path / "tasks" / "tb1-two",
        {
            "task.yaml": "instruction: x\n",
            "run-tests.sh": "true\n",
            "docker-compose.yaml": "services:\n  client: {build: .}\n  db: {image: postgres}\n",
        },
    )
    two = load_task(tmp_path / "tasks" / "tb1-two")  # several services: Harbor's compose file, kept
    compose = yaml.safe_load((two.environment_dir / "docker-compose.yaml").read_text())
    assert list(compose["services"]) == ["main", "db"] and compose["services"]["db"] == {"image": "postgres"}
    assert compose["services"]["main"]["build"] == {"context": "${CONTEXT_DIR}"}
    write(
        tmp_path / "tasks" / "tb1-vol",
        {
            "task.yaml": "instruction: x\n",
            "run-tests.sh": "true\n",
            "docker-compose.yaml": "services:\n  client: {build: .}\n  db: {image: postgres, volumes: [/x:/y]}\n",
        },
    )
    from replaykit.envs.docker.compose_spec import load_compose  # what the docker kind reads, no engine

    with pytest.raises(TaskError, match=r"service 'db': field 'volumes': '/x:/y' mounts a host folder"):
        load_compose(load_task(tmp_path / "tasks" / "tb1-vol"), {})


def test_networked_episode_is_never_certified_deterministic() -> None:
    from replaykit.cassette.events import Episode
    from replaykit.cassette.keys import CassetteKey, ModelId
    from replaykit.episodes.certificate_lookup import FORKED
    from replaykit.episodes.reexecute import check_task

    key = CassetteKey("a" * 40, "t", "d" * 64, ModelId("m", "http://127.0.0.1:1"), 3, "c" * 64)
    episode = Episode(key, [], {"environment": {"kind": "docker", "network": "unfrozen"}})
    status, reason, first = check_task([episode], None)  # type: ignore[arg-type]  # nothing re-executes
    assert status == FORKED and "network unfrozen" in reason and first and first["field"] == "network"


BACKGROUND_SERVER = Path(__file__).resolve().parents[1] / "harbor" / "corpus" / "background-server"


@pytest.mark.e2e
def test_tasks_check_scores_a_server_left_running_for_the_verifier(tmp_path: Path) -> None:
    """`tasks check` on a task whose solution starts a server in the background and whose
    verifier queries it: 1, as Harbor scores it (0 before: the server was killed when solve.sh
    ended); the differential tier runs the same task in Docker beside Harbor."""
    import json

    done = cli("tasks", "check", str(BACKGROUND_SERVER), "--env", "local", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["tasks"]
    assert (row["untouched"], row["solved"], row["ok"]) == (0, 1, True), row
