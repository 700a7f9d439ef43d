"""A canary key never reaches the store, a bundle or CLI output — even when the harness
puts it in a prompt, an environment action, its output and an exception — and a
replay (identical or diverging) never prints it. Through the real CLI and a real
reference server on loopback."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import git
import pytest

from replaykit.models.reference.server import ReferenceServer
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli as run_cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback

CANARY = "sk-canary-4b1d2e9f0c7a"

HARNESS = """import os


def solve(task, env, llm, ctx):
    key = os.environ.get("CANARY_API_KEY", "")
    reply = llm.chat.completions.create(messages=[{"role": "user", "content": task.instruction}], **ctx.llm_kwargs())
    obs = env.run("echo {action} " + key)
    raise RuntimeError("giving up with key " + key + " after " + obs.stdout.strip() + " / " + (reply.choices[0].message.content or "")[:10])
"""


cli = functools.partial(run_cli, env={"CANARY_API_KEY": CANARY})


def harness_repo(path: Path) -> git.Repo:
    repo = git.Repo.init(path, initial_branch="main")
    (path / "harness.py").write_text(HARNESS.replace("{action}", "first"))
    repo.index.add(["harness.py"])
    repo.index.commit("canary harness")
    return repo


def test_canary_key_reaches_no_store_bundle_or_output(tmp_path: Path) -> None:
    repo = harness_repo(tmp_path / "harness")
    outputs: list[str] = []
    with ReferenceServer() as server:
        config = write_config(
            tmp_path,
            {
                "panel.tasks": [str(REPO_ROOT / "envs" / "hello-file")],
                "panel.seeds": [0],
                "harness.template": None,
                "model.base_url": server.base_url,
                "model.api_key_env": "CANARY_API_KEY",
            },
        )
        run = cli("run", str(config), "--json")
        assert run.returncode == 0, run.stderr
        outputs += [run.stdout, run.stderr]
    doc = json.loads(run.stdout)
    store = str(tmp_path / "store")
    cassette = doc["cassettes"][0]
    show = cli("cassettes", "show", cassette, "--full", "--json", "--store", store)
    assert show.returncode == 0, show.stderr
    shown = json.loads(show.stdout)
    env_events = [e for e in shown["events"] if e["kind"] == "env"]
    assert env_events and "<secret:api_key>" in json.dumps(env_events)  # action and output, scrubbed
    assert "<secret:api_key>" in json.dumps(
        [e for e in shown["events"] if e["kind"] == "error"]
    )  # exception text
    outputs += [show.stdout, cli("cassettes", "show", cassette, "--full", "--store", store).stdout]
    replay = cli(
        "replay", doc["run_id"], "--json", "--store", store
    )  # the key is live in this process's environment
    assert replay.returncode == 0 and json.loads(replay.stdout)["identical"] is True, (
        replay.stdout + replay.stderr
    )
    outputs += [replay.stdout, replay.stderr]
    # a harness change that diverges on the action holding the key: the report never prints it
    (tmp_path / "harness" / "harness.py").write_text(HARNESS.replace("{action}", "second"))
    repo.index.add(["harness.py"])
    repo.index.commit("diverging canary harness")
    repo_at = ("--harness-repo", str(tmp_path / "harness"))
    diverged = cli("replay", doc["run_id"], "--harness", "main", *repo_at, "--json", "--store", store)
    assert diverged.returncode == 1 and json.loads(diverged.stdout)["divergence"]["kind"] == "env", (
        diverged.stdout + diverged.stderr
    )
    human = cli("replay", doc["run_id"], "--harness", "main", *repo_at, "--store", store)
    assert "<secret:api_key>" in diverged.stdout
    outputs += [diverged.stdout, diverged.stderr, human.stdout, human.stderr]
    bundle = tmp_path / "run.tar.gz"
    export = cli("cassettes", "export", doc["run_id"], "-o", str(bundle), "--store", store)
    assert export.returncode == 0, export.stderr
    outputs += [export.stdout, export.stderr]
    leaks = [
        str(p) for p in (tmp_path / "store").rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()
    ]
    assert leaks == []
    import gzip

    assert CANARY.encode() not in gzip.decompress(bundle.read_bytes())
    assert [o for o in outputs if CANARY in o] == []
