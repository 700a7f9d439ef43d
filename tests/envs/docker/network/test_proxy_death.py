"""The frozen network's proxy killed mid-episode (issue 29): what the container fetched
after that is the proxy's absence, not the agent's doing. The episode is an
infrastructure failure naming the proxy, never a graded failure, and the next ``run``
records it again instead of reusing it."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import git
import pytest

from replaykit.envs.docker.network import server
from replaykit.testing import write_config

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

# the container fetches through the proxy (urllib honours HTTP_PROXY) into a file of /app
FETCH = "python3 -c \"import urllib.request,sys; open('/app/{name}','wb').write(urllib.request.urlopen(sys.argv[1], timeout=20).read())\" {url}"
HARNESS = """import os, time

def solve(task, env, llm, ctx):
    env.run({first!r})
    open({fetched!r}, "w").close()  # the test kills the proxy now
    deadline = time.time() + 120
    while not os.path.exists({go!r}) and time.time() < deadline:
        time.sleep(0.1)
    env.run({second!r})
"""


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello\n"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def _task(root: Path) -> Path:
    folder = root / "fetch-twice"
    for rel, text in {
        "task.toml": 'version = "2.0"\n[verifier]\ntimeout_sec = 60\n[agent]\ntimeout_sec = 300\n'
        '[environment]\nallow_internet = true\nworkdir = "/app"\n',
        "instruction.md": "Fetch the file twice.\n",
        "environment/Dockerfile": "FROM replaykit/base:bookworm\nWORKDIR /app\n",
        "tests/test.sh": "mkdir -p /logs/verifier; if grep -q hello /app/second; then echo 1; else echo 0; fi"
        " > /logs/verifier/reward.txt\n",
        "solution/solve.sh": "true\n",
    }.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def _mitmdumps(parent: int) -> list[int]:
    """The mitmdump processes ``parent`` started (the episode's frozen-network proxy)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"mitmdump" in cmdline:
            found.append(int(entry.name))
    return found


def _run(config: Path, sha: str, tmp: Path, kill: bool) -> dict[str, Any]:
    fetched, go = tmp / "fetched", tmp / "go"
    fetched.unlink(missing_ok=True)
    go.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "replaykit.cli",
            "run",
            str(config),
            "--harness",
            sha,
            "--keep-going",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp,
    )
    try:
        deadline = time.monotonic() + 600
        while not fetched.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if kill:
            proxies = _mitmdumps(proc.pid)
            assert len(proxies) == 1, proxies
            os.kill(proxies[0], signal.SIGKILL)
        go.touch()
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    return dict(json.loads(out))


def test_a_proxy_killed_mid_episode_is_infra_and_never_reused(
    docker_base: str, tmp_path: Path, upstream: str
) -> None:
    problem = server.check()
    if problem:
        pytest.fail(problem, pytrace=False)
    repo = git.Repo.init(tmp_path / "harness", initial_branch="main")
    (tmp_path / "harness" / "harness.py").write_text(
        HARNESS.format(
            first=FETCH.format(name="first", url=upstream),
            second=FETCH.format(name="second", url=upstream),
            fetched=str(tmp_path / "fetched"),
            go=str(tmp_path / "go"),
        )
    )
    repo.index.add(["harness.py"])
    sha = repo.index.commit("harness: fetch twice").hexsha
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(_task(tmp_path))],
            "panel.seeds": [0],
            "harness.template": None,
            "env.timeout_sec": 60,
            "env.network_allow": [upstream.removeprefix("http://")],
        },
        base="quickstart-docker.yaml",
    )
    killed = _run(config, sha, tmp_path, kill=True)
    (episode,) = killed["episodes"]
    assert episode["infra_failure"] and not episode["passed"], episode
    assert killed["solved"] == 0
    store = ["--store", str(tmp_path / "store")]
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "replaykit.cli",
            "cassettes",
            "show",
            episode["cassette_id"],
            *store,
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    grade = [e for e in json.loads(shown.stdout)["events"] if e["kind"] == "grade"][-1]
    assert "the frozen network's proxy died mid-episode (killed by signal 9)" in json.dumps(grade), grade
    again = _run(config, sha, tmp_path, kill=False)  # the proxy lives: recorded again, never reused
    assert again["recorded_count"] == 1 and again["reused_count"] == 0, again
    (episode,) = again["episodes"]
    assert episode["passed"] and not episode["infra_failure"], episode
