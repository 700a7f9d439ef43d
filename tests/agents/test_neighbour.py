"""The neighbour attack on an agent's bridge, through the real CLI (issue 38 item 2).

A harness runs an outside agent (a small Python program, standard library only) through the
recording bridge, as the named agents do. The agent's second step is a task command that does
what a hostile task could: it finds the agent's process, reads the bridge's token from
``/proc/<agent>/environ`` and its address, and posts ``/exec`` and ``/v1/chat/completions`` with
it. Both answer 401 (the connection is not the agent's), the command's output reaches the agent
and the store with the token hidden, the agent's next model call quotes it, and the episode
replays identically. No form of either token (recording's, replay's) is anywhere in the store.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import git
import pytest

from replaykit.episodes.config import load_config
from replaykit.episodes.harness import commit_all
from replaykit.episodes.run import open_harness
from replaykit.testing import project_root, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

HARNESS = """
import os
import sys

from replaykit.agents.bridge import Bridge
from replaykit.agents.process import agent_scratch, run_process

AGENT = {agent!r}


def solve(task, env, llm, ctx):
    with agent_scratch("replaykit-test-agent-") as work, Bridge(llm, env, ctx) as bridge:
        (work / "agent.py").write_text(AGENT)
        environ = {{
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "REPLAYKIT_BRIDGE_URL": bridge.url,
            "REPLAYKIT_BRIDGE_TOKEN": bridge.token,
            "TOKEN_OUT": os.environ.get("TOKEN_OUT", ""),
        }}
        done = run_process([sys.executable, str(work / "agent.py")], environ, work, 120, bridge.failed, bridge.gate)
    ctx.notes.update(stdout=done.stdout, stderr=done.stderr, returncode=done.returncode, refused=bridge.gate.refused)
    if bridge.failure is not None:
        raise bridge.failure
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "agent failed")
"""

AGENT = r"""
import json, os, urllib.request

URL, TOKEN = os.environ["REPLAYKIT_BRIDGE_URL"], os.environ["REPLAYKIT_BRIDGE_TOKEN"]
if os.environ.get("TOKEN_OUT"):  # for the test to look for it in the store
    with open(os.path.join(os.environ["TOKEN_OUT"], f"token-{os.getpid()}"), "w") as fh:
        fh.write(TOKEN)
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post(path, body):
    request = urllib.request.Request(URL + path, json.dumps(body).encode(), method="POST",
        headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"})
    with OPENER.open(request, timeout=60) as answer:
        return json.loads(answer.read())


post("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "start"}]})
out = post("/exec", {"command": ATTACK})
post("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": out["stdout"]}]})
print("agent done")
"""

#: the task command a hostile task runs: steal the token from the agent's environ and use it
ATTACK = r"""python3 - <<'EOF'
import json, os, urllib.error, urllib.request
found = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        continue
    pairs = dict(e.decode(errors="replace").split("=", 1) for e in env if b"=" in e)
    if "REPLAYKIT_BRIDGE_TOKEN" in pairs:
        found = pairs
        break
token, url = found.get("REPLAYKIT_BRIDGE_TOKEN", ""), found.get("REPLAYKIT_BRIDGE_URL", "")
print("own environment holds it:", any(k.startswith("REPLAYKIT_BRIDGE") for k in os.environ))
print("stolen:", token, "b64:", __import__("base64").b64encode(token.encode()).decode())
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
for path, body in (("/exec", {"command": "touch pwned"}), ("/v1/chat/completions", {"messages": []})):
    request = urllib.request.Request(url + path, json.dumps(body).encode(), method="POST",
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with opener.open(request, timeout=30) as answer:
            print(path, answer.status)
    except urllib.error.HTTPError as exc:
        print(path, exc.code)
EOF"""


def config_with_agent(tmp: Path) -> Path:
    config = write_config(
        tmp, {"panel.tasks": [str(project_root() / "envs" / "hello-file")], "panel.seeds": [0]}
    )
    repo = open_harness(load_config(config)).path
    agent = AGENT.replace("ATTACK", repr(ATTACK))
    (repo / "harness.py").write_text(HARNESS.format(agent=agent))
    commit_all(git.Repo(repo), "an outside agent under attack")
    return config


def forms(token: str) -> list[bytes]:
    raw = token.encode()
    return [raw, base64.b64encode(raw), raw.hex().encode()]


def test_a_neighbour_holding_the_token_is_refused_and_the_token_is_stored_nowhere(tmp_path: Path) -> None:
    config = config_with_agent(tmp_path)
    out = tmp_path / "tokens"
    out.mkdir()
    proc = cli("run", str(config), "--json", env={"TOKEN_OUT": str(out)})
    assert proc.returncode == 0, proc.stderr
    doc: Any = json.loads(proc.stdout)
    (episode,) = doc["episodes"]
    assert episode["outcome"] != "crash", episode
    shown = json.loads(
        cli("cassettes", "show", episode["cassette_id"], "--json", "--full", "--config", str(config)).stdout
    )
    (attack,) = [
        e for e in shown["events"] if e["kind"] == "env"
    ]  # the agent's one command: the neighbour's never ran
    assert "/exec 401" in attack["stdout"] and "/v1/chat/completions 401" in attack["stdout"], attack
    assert "stolen: <secret:bridge_token> b64: <secret:bridge_token_b64" in attack["stdout"], attack["stdout"]
    assert "own environment holds it: False" in attack["stdout"]  # only the agent's process had it
    calls = [e for e in shown["events"] if e["kind"] == "llm"]
    assert len(calls) == 2 and "<secret:bridge_token>" in json.dumps(calls[1]["request"])
    assert shown["meta"]["notes"]["refused"] == 2
    replay = cli("replay", doc["run_id"], "--config", str(config), "--json", env={"TOKEN_OUT": str(out)})
    assert json.loads(replay.stdout)["identical"] is True, replay.stdout + replay.stderr
    tokens = [p.read_text() for p in out.iterdir()]
    assert len(tokens) == 2 and tokens[0] != tokens[1]  # the recording's and the replay's
    store = Path(load_config(config).store_location)
    for path in (p for p in store.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for token in tokens:
            assert not any(form in data for form in forms(token)), (path, token)
    assert not (tmp_path / "harness" / "pwned").exists()
