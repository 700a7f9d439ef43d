"""The terminus harness template in Docker, through the real CLI: a task solved through one tmux
session in its container, recorded and replayed offline (no Docker daemon, no sockets) identical;
a malformed model answer gets Terminus-2's parse-error turn; task_complete is asked to be
confirmed; an image without tmux is one infra line; a process started with REPLAYKIT_KEEP=1
outlives the verifier while any other is killed then."""

from __future__ import annotations

import functools
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from replaykit.agents.registry import get_agent
from replaykit.core.loopback import LoopbackHandler, LoopbackServer
from replaykit.envs.docker.env import DockerEnv
from replaykit.envs.docker.image_build import ensure_task_image
from replaykit.envs.tasks import load_task
from replaykit.testing import write_config
from tests.cli_runner import cli as run_cli
from tests.offline import cut_off

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[3]
cli = functools.partial(run_cli, check=True, cwd=REPO)
CONFIRMATION = "Are you sure you want to mark the task as complete?"


def run_json(*args: str, env: dict[str, str] | None = None) -> Any:
    return json.loads(cli(*args, "--json", env=env).stdout)


def requests_of(store: Path, cassette: str) -> list[dict[str, Any]]:
    """The chat request bodies of one recorded episode, in order."""
    shown = run_json("cassettes", "show", cassette, "--store", str(store))
    return [json.loads(e["request"]["body"]) for e in shown["events"] if e["kind"] == "llm"]


def actions_of(store: Path, cassette: str) -> list[str]:
    shown = run_json("cassettes", "show", cassette, "--store", str(store))
    return [e["action"] for e in shown["events"] if e["kind"] == "env"]


@pytest.fixture(scope="module")
def recorded(docker_base: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("terminus")
    config = write_config(
        tmp,
        {
            "model.name": "reference-oracle",
            "panel.seeds": [0],
            "panel.tasks": [str(REPO / "envs" / "hello-file"), str(REPO / "envs" / "organize-files")],
        },
        base="terminus-docker.yaml",
    )
    return {"tmp": tmp, "store": tmp / "store", "run": run_json("run", str(config))}


def test_a_task_is_solved_through_the_tmux_session(recorded: dict[str, Any]) -> None:
    run, store = recorded["run"], recorded["store"]
    assert run["solved"] == run["total"] == 2, run
    for episode in run["episodes"]:
        actions = actions_of(store, episode["cassette_id"])
        assert "new-session -d" in actions[0] and "REPLAYKIT_KEEP=1" in actions[0]
        assert any("send-keys" in a for a in actions) and "kill-server" in actions[-1]
        # nothing but tmux: the model's commands reach the shell only as keystrokes
        assert all("tmux -L rk-" in a for a in actions)
        requests = requests_of(store, episode["cassette_id"])
        screens = [m["content"] for r in requests for m in r["messages"] if m["role"] == "user"]
        assert screens[0].startswith("You are an AI assistant tasked with solving command-line tasks")
        assert "Current Terminal Screen:\nroot@replaykit:/app#" in screens[0]
        assert any(s.startswith("New Terminal Output:\nroot@replaykit:/app# ") for s in screens)


def test_task_complete_is_asked_to_be_confirmed(recorded: dict[str, Any]) -> None:
    episode = recorded["run"]["episodes"][0]
    requests = requests_of(recorded["store"], episode["cassette_id"])
    answers = [json.loads(r["messages"][-2]["content"]) for r in requests[1:]]  # each call's previous answer
    last = requests[-1]["messages"]
    assert answers[-1]["task_complete"] is True and CONFIRMATION in last[-1]["content"]
    assert last[-1]["content"].startswith("Current terminal state:\n")
    assert sum(CONFIRMATION in m["content"] for m in last if m["role"] == "user") == 1  # asked once
    # the call after the confirmation was the last one: its answer (task_complete again) ended it
    assert len(requests) == len([a for a in answers if a["commands"]]) + 2


def test_the_run_replays_offline_identical(recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    attempts = cut_off(monkeypatch)
    report = run_json("replay", recorded["run"]["run_id"], "--store", str(recorded["store"]))
    assert report["identical"] is True, report
    assert [e["replayed_digest"] for e in report["episodes"]] == [
        e["digest"] for e in recorded["run"]["episodes"]
    ]
    assert attempts == []


# -- a model that answers badly first: a scripted endpoint on loopback -------------------------

SOLVE = "mkdir -p greeting && printf 'Hello, replaykit!\\n' > greeting/hello.txt\n"


def scripted_answer(messages: list[dict[str, Any]]) -> str:
    """By how many answers the conversation holds: prose (no JSON), the solution, complete twice."""
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    command = {"keystrokes": SOLVE, "duration": 1.0}
    answers: list[str] = [
        "I think I should create the folder first.",
        json.dumps({"analysis": "Nothing yet.", "plan": "Write the file.", "commands": [command]}),
        json.dumps({"analysis": "Written.", "plan": "Done.", "commands": [], "task_complete": True}),
    ]
    return answers[min(turn, 2)]


class Scripted(LoopbackHandler):
    server_version = "scripted/1"
    seen: ClassVar[list[dict[str, Any]]] = []

    def _dispatch(self, method: str) -> None:
        if method == "GET" and self.path.rstrip("/").endswith("/models"):
            self._send({"object": "list", "data": [{"id": "scripted", "object": "model"}]})
            return
        if method != "POST" or not self.path.endswith("/chat/completions"):
            self._send({"error": {"message": "not found"}}, 404)
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Scripted.seen.append(body)
        content = scripted_answer(body["messages"])
        self._send(
            {
                "id": f"chatcmpl-{len(Scripted.seen)}",
                "object": "chat.completion",
                "created": 0,
                "model": "scripted",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
            }
        )

    def _send(self, doc: dict[str, Any], status: int = 200) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def scripted() -> Iterator[str]:
    server = LoopbackServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Scripted.seen = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.close_connections()
        server.server_close()


def test_a_malformed_answer_gets_the_parse_error_turn(
    docker_base: str, scripted: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(
        tmp_path,
        {
            "model.name": "scripted",
            "model.base_url": scripted,
            "model.api_key_env": "",
            "panel.seeds": [0],
            "panel.tasks": [str(REPO / "envs" / "hello-file")],
        },
        base="terminus-docker.yaml",
    )
    run = run_json("run", str(config))
    assert run["solved"] == 1, run
    chats = [b["messages"] for b in Scripted.seen if "keystrokes" in b["messages"][0]["content"]]
    assert len(chats) == 4  # prose, the solution, complete, complete again
    assert chats[1][-1]["content"] == (
        "Previous response had parsing errors:\nERROR: No valid JSON found in response\n"
        "WARNINGS: - No valid JSON object found\n\n"
        "Please fix these issues and provide a proper JSON response."
    )
    assert chats[2][-1]["content"].startswith("New Terminal Output:\nroot@replaykit:/app# mkdir -p greeting")
    assert CONFIRMATION in chats[3][-1]["content"]
    # the parse-error turn ran nothing: the only keystrokes sent are the solution's
    actions = actions_of(tmp_path / "store", run["episodes"][0]["cassette_id"])
    assert sum("send-keys" in a for a in actions) == 1
    attempts = cut_off(monkeypatch)
    report = run_json("replay", run["run_id"], "--store", str(tmp_path / "store"))
    assert report["identical"] is True and attempts == []


# -- an image without tmux; what outlives the verifier ------------------------------------------


def test_an_image_without_tmux_is_one_infra_line(docker_base: str, tmp_path: Path) -> None:
    task = tmp_path / "tasks" / "no-tmux"
    shutil.copytree(REPO / "envs" / "hello-file", task)
    (task / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nRUN rm /usr/bin/tmux\nWORKDIR /app\n"
    )
    config = write_config(
        tmp_path,
        {"model.name": "reference-oracle", "panel.seeds": [0], "panel.tasks": [str(task)]},
        base="terminus-docker.yaml",
    )
    run = run_json("run", str(config), "--keep-going")
    episode = run["episodes"][0]
    assert episode["outcome"] == "infra", episode
    shown = run_json("cassettes", "show", episode["cassette_id"], "--store", str(tmp_path / "store"))
    grade = next(e for e in shown["events"] if e["kind"] == "grade")
    detail = grade["grade"]["detail"]
    assert "task 'no-tmux': its image has no tmux" in detail and "replaykit/base:bookworm" in detail
    assert "\n" not in detail and not [e for e in shown["events"] if e["kind"] == "llm"]  # no model call


def test_a_process_started_with_the_keep_mark_outlives_the_verifier(docker_base: str) -> None:
    task = load_task(REPO / "envs" / "hello-file")
    with DockerEnv(task, ensure_task_image(task, {}).id) as env:
        env.run("sleep 300 >/dev/null 2>&1 &\nREPLAYKIT_KEEP=1 setsid sleep 301 >/dev/null 2>&1 &\nsleep 0.2")
        listing = "for p in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $p; echo; done | grep '^sleep 30'"
        left = env.run(listing).stdout.split("\n")
        assert sorted(line.strip() for line in left if line) == [
            "sleep 300",
            "sleep 301",
        ]  # until the verifier
        env.grade()
        left = env.run(listing).stdout.split("\n")
        assert [line.strip() for line in left if line] == ["sleep 301"]


def test_the_named_agent_terminus_runs_the_template(
    docker_base: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(
        tmp_path,
        {
            "model.name": "reference-oracle",
            "panel.seeds": [0],
            "panel.tasks": [str(REPO / "envs" / "hello-file")],
        },
        base="quickstart-docker.yaml",  # a config of another harness: --agent puts terminus in its place
    )
    run = run_json("run", str(config), "--agent", "terminus")
    assert run["agent"] == {"name": "terminus", "version": "builtin"} and run["solved"] == 1
    harness = tmp_path / ".replaykit" / "agents" / get_agent("terminus").repo_name() / "harness.py"
    assert harness.read_bytes() == (REPO / "replaykit" / "templates" / "terminus" / "harness.py").read_bytes()
    assert any("send-keys" in a for a in actions_of(tmp_path / "store", run["episodes"][0]["cassette_id"]))
    attempts = cut_off(monkeypatch)
    report = run_json("replay", run["run_id"], "--store", str(tmp_path / "store"))
    assert report["identical"] is True and attempts == []
