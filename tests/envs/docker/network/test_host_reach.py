"""A frozen-network task container reaches the host only as the outside world (issue 29).

Through ``replaykit run``: the proxy refuses the host's loopback (a stand-in for the viewer,
hence the store), a raw CONNECT tunnel to a loopback port (a stand-in for PostgreSQL) and a
private or link-local address, each with a 403 naming the address and ``env.network_allow``;
a host service bound to every interface does not answer the container on its gateway
directly; the loopback upstream the config allows is fetched and recorded. Before, all
of them answered the container."""

from __future__ import annotations

import http.server
import json
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import git
import pytest

from replaykit.envs.docker.network import server
from replaykit.testing import write_config
from tests.cli_runner import cli

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

PROBE = r"""
import json, socket, sys, urllib.request
what, target = sys.argv[1], sys.argv[2]
try:
    if what == "get":
        with urllib.request.urlopen(target, timeout=20) as reply:
            print(what, target, reply.status, reply.read().decode()[:60])
    elif what == "connect":  # a raw tunnel through the proxy
        s = socket.create_connection(("replaykit-proxy", 3128), timeout=20)
        s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        print(what, target, s.recv(300).decode(errors="replace").splitlines()[0])
    else:  # straight to the host's address on the container's network, no proxy
        s = socket.create_connection(("replaykit-proxy", int(target)), timeout=10)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        print(what, target, "answered", s.recv(100)[:40])
except Exception as exc:
    said = exc.read().decode(errors="replace") if hasattr(exc, "read") else str(exc)  # an HTTP error's body
    print(what, target, "failed", getattr(exc, "code", ""), said.strip()[:400])
"""
HARNESS = "def solve(task, env, llm, ctx):\n    for action in {actions!r}:\n        env.run(action)\n"


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        port = cast(tuple[str, int], self.server.server_address)[1]
        body = f"host service {port}".encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class _Raw(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(b"RAW SERVICE\r\n")


def _serve(address: tuple[str, int], handler: Any) -> socketserver.TCPServer:
    srv = socketserver.ThreadingTCPServer(address, handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def host_services() -> Iterator[dict[str, int]]:
    servers = {
        "viewer": _serve(("127.0.0.1", 0), _Hello),  # the host's loopback
        "allowed": _serve(("127.0.0.1", 0), _Hello),  # a local test upstream the config names
        "raw": _serve(("127.0.0.1", 0), _Raw),  # a database port
        "everywhere": _serve(("0.0.0.0", 0), _Hello),  # bound to every interface
    }
    yield {name: int(srv.server_address[1]) for name, srv in servers.items()}
    for srv in servers.values():
        srv.shutdown()
        srv.server_close()


def _task(root: Path) -> Path:
    folder = root / "reach"
    for rel, text in {
        "task.toml": 'version = "2.0"\n[verifier]\ntimeout_sec = 60\n[environment]\nallow_internet = true\nworkdir = "/app"\n',
        "instruction.md": "Probe the network.\n",
        "environment/Dockerfile": "FROM replaykit/base:bookworm\nWORKDIR /app\n",
        "environment/probe.py": PROBE,
        "tests/test.sh": "mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n",
        "solution/solve.sh": "true\n",
    }.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    dockerfile = folder / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "COPY probe.py /probe.py\n")
    return folder


def test_the_task_container_reaches_the_host_only_where_the_config_allows(
    docker_base: str, tmp_path: Path, host_services: dict[str, int]
) -> None:
    problem = server.check()
    if problem:
        pytest.fail(problem, pytrace=False)
    ports = host_services
    actions = [
        f"python3 /probe.py get http://127.0.0.1:{ports['viewer']}/",
        f"python3 /probe.py connect 127.0.0.1:{ports['raw']}",
        "python3 /probe.py get http://169.254.169.254/latest/meta-data/",
        "python3 /probe.py get http://10.1.2.3/",
        f"python3 /probe.py direct {ports['everywhere']}",
        f"python3 /probe.py get http://127.0.0.1:{ports['allowed']}/",
    ]
    repo = git.Repo.init(tmp_path / "harness", initial_branch="main")
    (tmp_path / "harness" / "harness.py").write_text(HARNESS.format(actions=actions))
    repo.index.add(["harness.py"])
    sha = repo.index.commit("harness: probe").hexsha
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(_task(tmp_path))],
            "panel.seeds": [0],
            "harness.template": None,
            "env.timeout_sec": 60,
            "env.network_allow": [f"127.0.0.1:{ports['allowed']}"],
        },
        base="quickstart-docker.yaml",
    )
    run = json.loads(cli("run", str(config), "--harness", sha, "--json", cwd=tmp_path, check=True).stdout)
    (episode,) = run["episodes"]
    store = ["--store", str(tmp_path / "store")]
    shown = json.loads(cli("cassettes", "show", episode["cassette_id"], *store, "--json", check=True).stdout)
    said = [e["stdout"].strip() for e in shown["events"] if e["kind"] == "env"]
    assert len(said) == len(actions), said
    viewer, tunnel, metadata, private, direct, allowed = said
    allow_hint = "the frozen network refuses 127.0.0.1:{}: the host's loopback"
    assert viewer.startswith("get") and "403" in viewer, viewer
    assert allow_hint.format(ports["viewer"]) in viewer and "env.network_allow" in viewer, viewer
    assert "host service" not in viewer
    assert tunnel == f"connect 127.0.0.1:{ports['raw']} HTTP/1.1 403 Forbidden", tunnel
    assert "403" in metadata and "169.254.169.254:80: link-local" in metadata, metadata
    assert "403" in private and "10.1.2.3:80: a private address" in private, private
    assert "failed" in direct and "answered" not in direct, direct  # no route to the host but the proxy
    assert allowed == f"get http://127.0.0.1:{ports['allowed']}/ 200 host service {ports['allowed']}", allowed
    net = [e for e in shown["events"] if e["kind"] == "net"]
    assert [e["url"] for e in net] == [f"http://127.0.0.1:{ports['allowed']}/"], (
        net
    )  # refusals are no exchange
    assert not any(str(ports["viewer"]) in json.dumps(e) for e in net)


def test_rules_a_killed_process_left_on_a_gone_bridge_are_swept(docker_base: str) -> None:
    """kill -9 skips HostRoute.open: its two rules outlive the episode's network. The next
    episode's close sweeps replaykit's rules on bridges that no longer exist, and no other rule."""
    import shutil
    import subprocess

    from replaykit.envs.docker.network.wiring import RULE_MARK, sweep_stale_rules

    iptables = shutil.which("iptables") or "/usr/sbin/iptables"
    ours = ["-i", "br-rkgone0", "-m", "comment", "--comment", RULE_MARK, "-j", "REJECT"]
    theirs = ["-i", "br-rkgone1", "-j", "REJECT"]  # not marked: someone else's, never swept
    for rule in (ours, theirs):
        subprocess.run([iptables, "-w", "-A", "INPUT", *rule], check=True)
    try:
        assert sweep_stale_rules() >= 1
        listed = subprocess.run([iptables, "-w", "-S", "INPUT"], capture_output=True, text=True).stdout
        assert "br-rkgone0" not in listed and "br-rkgone1" in listed, listed
    finally:
        subprocess.run([iptables, "-w", "-D", "INPUT", *theirs], capture_output=True)
        subprocess.run([iptables, "-w", "-D", "INPUT", *ours], capture_output=True)
