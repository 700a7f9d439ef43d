"""LocalEnv: oracle checks, state digests, timeouts, output caps, pins, grading."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from replaykit.core.determinism import ENV_PINS
from replaykit.core.errors import EnvError
from replaykit.envs.base import Environment
from replaykit.envs.local import LocalEnv, oracle
from replaykit.envs.output import TIMEOUT_EXIT_CODE, truncation_marker
from replaykit.envs.results import Grade, Observation
from replaykit.envs.section import EnvConfig
from replaykit.envs.tasks import Task, load_task

REPO = Path(__file__).resolve().parents[2]
ENVS = REPO / "envs"


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


SAMPLE_IDS = sorted(p.name for p in ENVS.iterdir() if (p / "task.toml").is_file())
#: Tasks tagged "docker-only" need their image (a verifier shim, a sidecar service): not run locally.
LOCAL_IDS = [t for t in SAMPLE_IDS if "docker-only" not in _list(load_task(ENVS / t).metadata.get("tags"))]
#: Single-step tasks: the simulator plays their solve.sh (line by line, or as one script).
SINGLE_IDS = [t for t in LOCAL_IDS if not load_task(ENVS / t).steps]

TOML = 'version = "2.0"\n\n[verifier]\ntimeout_sec = {verifier_timeout}\n'


def make_task(
    folder: Path, test_sh: str, files: dict[str, str] | None = None, verifier_timeout: float = 10.0
) -> Task:
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(TOML.format(verifier_timeout=verifier_timeout))
    (folder / "instruction.md").write_text("Do it.\n")
    (folder / "tests" / "test.sh").write_text(test_sh)
    for rel, text in (files or {}).items():
        path = folder / "environment" / "files" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return load_task(folder)


PASS_IF_DONE = 'mkdir -p "$LOGS_DIR/verifier"\n[ -f "$APP_DIR/done" ] && r=1 || r=0\necho $r > "$LOGS_DIR/verifier/reward.txt"\n'


@pytest.fixture
def env(tmp_path: Path) -> Iterator[LocalEnv]:
    task = make_task(tmp_path / "task", PASS_IF_DONE, files={"a.txt": "alpha\n", "sub/b.txt": "beta\n"})
    with LocalEnv(task, tmp_path / "ws", timeout_sec=10) as local:
        yield local


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


# -- the sample tasks ------------------------------------------------------------


@pytest.mark.parametrize("task_id", LOCAL_IDS)
def test_oracle_check(task_id: str, tmp_path: Path) -> None:
    untouched, solved = oracle(load_task(ENVS / task_id), EnvConfig())
    assert (untouched.reward, untouched.passed, untouched.infra_failure) == (0.0, False, False), untouched
    assert (solved.reward, solved.passed, solved.infra_failure) == (1.0, True, False), solved
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("task_id", SINGLE_IDS)
def test_solution_replays_line_by_line_deterministically(task_id: str, tmp_path: Path) -> None:
    """The simulator replays solve.sh one line per bash call (one call for a script whose
    lines depend on each other); two replays are identical."""
    from replaykit.models.reference.scripts import script_steps, solution_env

    task = load_task(ENVS / task_id)
    steps = script_steps(task.solution_dir, solution_env(task.path, None))
    transcripts = []
    for _ in range(2):
        with LocalEnv(task, tmp_path / "ws") as local:
            start = local.state_digest()
            record = [(local.run(step), local.state_digest()) for step in steps]
            assert all(obs.exit_code == 0 for obs, _ in record), record
            assert record[-1][1] != start
            transcripts.append((start, record, local.grade()))
    assert transcripts[0] == transcripts[1]
    assert transcripts[0][2].passed


# -- protocol and lifecycle ------------------------------------------------------


def test_implements_protocol(env: LocalEnv) -> None:
    assert isinstance(env, Environment)
    assert env.kind == "local"
    meta = env.metadata()
    assert meta["kind"] == "local" and meta["pins"] == ENV_PINS


def test_start_layout_and_close(tmp_path: Path) -> None:
    task = make_task(tmp_path / "task", PASS_IF_DONE, files={"a.txt": "alpha\n"})
    local = LocalEnv(task, tmp_path / "ws")
    local.start()
    for name in ("app", "tests", "logs", "home"):
        assert (tmp_path / "ws" / name).is_dir()
    assert (tmp_path / "ws" / "app" / "a.txt").read_text() == "alpha\n"
    (tmp_path / "ws" / "app" / "junk").write_text("x")
    local.start()  # start again: a fresh workspace
    assert not (tmp_path / "ws" / "app" / "junk").exists()
    local.close()
    assert not (tmp_path / "ws").exists()
    with pytest.raises(EnvError, match="not started"):
        local.run("true")


def test_refuses_to_delete_foreign_folder(tmp_path: Path) -> None:
    task = make_task(tmp_path / "task", PASS_IF_DONE)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "precious.txt").write_text("keep")
    with pytest.raises(EnvError, match="refusing to delete"):
        LocalEnv(task, tmp_path / "mine").start()
    assert (tmp_path / "mine" / "precious.txt").exists()


def test_run_basic(env: LocalEnv) -> None:
    obs = env.run("pwd; cat a.txt; echo oops >&2; exit 3")
    assert obs == Observation(stdout=f"{env.app_dir}\nalpha\n", stderr="oops\n", exit_code=3)


def test_pins_and_dirs_visible_and_env_minimal(env: LocalEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAYKIT_LEAK_PROBE", "secret")
    obs = env.run('echo "$TZ|$PYTHONHASHSEED|$SOURCE_DATE_EPOCH|$APP_DIR|$TESTS_DIR|$LOGS_DIR|$HOME"')
    assert obs.stdout.strip() == "|".join(
        [
            ENV_PINS["TZ"],
            ENV_PINS["PYTHONHASHSEED"],
            ENV_PINS["SOURCE_DATE_EPOCH"],
            str(env.app_dir),
            str(env.tests_dir),
            str(env.logs_dir),
            str(env.home_dir),
        ]
    )
    py = env.run('python3 -c \'import os; print(os.environ["PYTHONHASHSEED"], os.environ["TZ"])\'')
    assert py.stdout == "0 UTC\n"
    names = set(env.run("env -0 | tr '\\0' '\\n' | cut -d= -f1").stdout.split())
    assert "REPLAYKIT_LEAK_PROBE" not in names
    assert names <= set(env.env_vars()) | {"PWD", "SHLVL", "_", "OLDPWD"}


def test_stdin_is_devnull(env: LocalEnv) -> None:
    obs = env.run("cat; echo end", timeout_sec=5)
    assert obs.stdout == "end\n" and not obs.timed_out


def test_invalid_utf8_is_replaced(env: LocalEnv) -> None:
    assert env.run("printf 'a\\xffb'").stdout == "a\ufffdb"


# -- timeouts and process groups ---------------------------------------------------


def test_timeout_kills_sleep_and_children(env: LocalEnv) -> None:
    started = time.monotonic()
    obs = env.run("sleep 30 & echo $! > child.pid; echo before; sleep 30", timeout_sec=0.5)
    assert time.monotonic() - started < 5
    assert obs.timed_out and obs.exit_code == TIMEOUT_EXIT_CODE
    assert obs.stdout == "before\n"
    child = int((env.app_dir / "child.pid").read_text())
    deadline = time.monotonic() + 2
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child)


def test_background_child_is_not_waited_for_and_runs_until_the_verifier(env: LocalEnv) -> None:
    """As in Harbor: what an action starts in the background runs on (the action does not wait
    for it, nor records what it prints later) until the verifier has run; then it is ended."""
    started = time.monotonic()
    obs = env.run("(sleep 1; echo late; sleep 30) & echo $! > child.pid; echo done", timeout_sec=10)
    assert time.monotonic() - started < 1
    assert obs == Observation(stdout="done\n", stderr="", exit_code=0)
    child = int((env.app_dir / "child.pid").read_text())
    time.sleep(1.2)
    assert alive(child) and env.run("echo next").stdout == "next\n"  # its "late" is nobody's output
    assert env.grade().reward == 0.0
    deadline = time.monotonic() + 2
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child)


SERVER_SOLUTION = """cd "$APP_DIR"
python3 - <<'PY' &
import http.server, pathlib
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"pong")
server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
pathlib.Path("port.tmp").write_text(str(server.server_port)); pathlib.Path("port.tmp").rename("port")
server.serve_forever()
PY
for _ in $(seq 100); do [ -s port ] && break; sleep 0.05; done
echo "serving on $(cat port)"
"""
SERVER_TEST = """mkdir -p "$LOGS_DIR/verifier"
got=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen("http://127.0.0.1:" + open(sys.argv[1]).read() + "/", timeout=5).read().decode())' "$APP_DIR/port" 2>&1)
echo "got: $got"
[ "$got" = pong ] && echo 1 > "$LOGS_DIR/verifier/reward.txt" || echo 0 > "$LOGS_DIR/verifier/reward.txt"
"""


def test_a_server_the_solution_starts_in_the_background_answers_the_verifier(tmp_path: Path) -> None:
    """tasks check (the oracle): the solution starts a server and returns; the verifier queries
    it: solved, as in Harbor (0 before: the server was killed when solve.sh ended)."""
    task = make_task(tmp_path / "server", SERVER_TEST)
    (task.path / "solution").mkdir()
    (task.path / "solution" / "solve.sh").write_text(SERVER_SOLUTION)
    untouched, solved = oracle(load_task(task.path), EnvConfig(kind="local"))
    assert untouched.reward == 0.0 and not untouched.infra_failure, untouched.detail
    assert solved.passed and solved.reward == 1.0, solved.detail


def test_default_timeout_applies(tmp_path: Path) -> None:
    task = make_task(tmp_path / "task", PASS_IF_DONE)
    with LocalEnv(task, tmp_path / "ws", timeout_sec=0.3) as local:
        assert local.run("sleep 10").timed_out


# -- output cap ----------------------------------------------------------------------


def test_output_cap(tmp_path: Path) -> None:
    task = make_task(tmp_path / "task", PASS_IF_DONE)
    with LocalEnv(task, tmp_path / "ws", max_output_bytes=1000) as local:
        obs = local.run("head -c 300000 /dev/zero | tr '\\0' a; head -c 5000 /dev/zero | tr '\\0' b >&2")
        assert obs.exit_code == 0
        assert obs.stdout == "a" * 1000 + truncation_marker("stdout", 1000)
        assert obs.stderr == "b" * 1000 + truncation_marker("stderr", 1000)
        small = local.run("printf '%01000d' 0")
        assert small.stdout == "0" * 1000  # exactly at the cap: not truncated


# -- state digest ----------------------------------------------------------------------


def test_state_digest(env: LocalEnv, tmp_path: Path) -> None:
    d0 = env.state_digest()
    assert env.state_digest() == d0
    env.run("cat a.txt > /dev/null; ls -R > /dev/null")
    assert env.state_digest() == d0
    os.utime(env.app_dir / "a.txt", (1, 1))
    env.run("touch sub/b.txt")
    assert env.state_digest() == d0  # mtimes never count
    env.run("echo changed > a.txt")
    d1 = env.state_digest()
    assert d1 != d0
    env.run("echo alpha > a.txt")
    assert env.state_digest() == d0  # content-addressed: same bytes, same digest
    env.run("chmod +x a.txt")
    assert env.state_digest() not in (d0, d1)
    env.run("chmod -x a.txt; mkdir empty")
    d_dir = env.state_digest()
    assert d_dir != d0
    env.run("rmdir empty; ln -s a.txt link")
    assert env.state_digest() not in (d0, d_dir)
    env.run("rm link; mv sub/b.txt sub/c.txt")
    assert env.state_digest() != d0
    env.run("mv sub/c.txt sub/b.txt")
    assert env.state_digest() == d0
    (env.logs_dir / "x").write_text("outside app/")
    assert env.state_digest() == d0


def test_state_digest_independent_of_workspace_path(tmp_path: Path) -> None:
    task = make_task(tmp_path / "task", PASS_IF_DONE, files={"a.txt": "alpha\n"})
    with LocalEnv(task, tmp_path / "ws1") as one, LocalEnv(task, tmp_path / "other" / "ws2") as two:
        assert one.state_digest() == two.state_digest()


# -- grading ---------------------------------------------------------------------------


def test_grade_pass_fail_and_stale_reward(env: LocalEnv) -> None:
    failed = env.grade()
    assert (failed.reward, failed.passed, failed.infra_failure) == (0.0, False, False)
    env.run("touch done")
    assert env.grade().passed
    env.run("rm done")
    assert not env.grade().passed


def grade_with(tmp_path: Path, test_sh: str, verifier_timeout: float = 10.0) -> Grade:
    task = make_task(tmp_path / "task", test_sh, verifier_timeout=verifier_timeout)
    with LocalEnv(task, tmp_path / "ws") as local:
        local.run('mkdir -p "$LOGS_DIR/verifier"; echo 1 > "$LOGS_DIR/verifier/reward.txt"')
        return local.grade()


def test_grade_reward_json(tmp_path: Path) -> None:
    grade = grade_with(
        tmp_path,
        'mkdir -p "$LOGS_DIR/verifier"; echo \'{"reward": 0.5}\' > "$LOGS_DIR/verifier/reward.json"\n',
    )
    assert (grade.reward, grade.passed, grade.infra_failure) == (0.5, False, False)
    assert "reward.json" in grade.detail


def test_grade_missing_reward_is_infra_failure(tmp_path: Path) -> None:
    grade = grade_with(tmp_path, "echo no reward written\n")  # the agent's stale reward is ignored
    assert grade == Grade(reward=0.0, passed=False, infra_failure=True, detail=grade.detail)
    assert "no reward" in grade.detail


def test_grade_unparseable_reward_is_infra_failure(tmp_path: Path) -> None:
    grade = grade_with(
        tmp_path, 'mkdir -p "$LOGS_DIR/verifier"; echo yes > "$LOGS_DIR/verifier/reward.txt"\n'
    )
    assert grade.infra_failure and not grade.passed and "not a number" in grade.detail


def test_grade_verifier_timeout_is_infra_failure(tmp_path: Path) -> None:
    grade = grade_with(tmp_path, "sleep 30\n", verifier_timeout=0.3)
    assert grade.infra_failure and grade.reward == 0.0 and "timed out" in grade.detail


def test_grade_is_deterministic(env: LocalEnv) -> None:
    assert env.grade() == env.grade()
