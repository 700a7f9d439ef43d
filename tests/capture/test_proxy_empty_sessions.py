"""A proxy session that recorded no call is not stored, never "identical", never reused;
``proxy``, ``serve reference`` and ``run`` exit 130 on Ctrl-C (a real process, a real SIGINT)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import openai
import pytest

from replaykit.cassette.events import Episode
from replaykit.cassette.store import Store
from replaykit.episodes.proxy_keys import proxy_key
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

MESSAGES: list[Any] = [  # the wire form: plain dicts
    {"role": "user", "content": "Say something about replay."}
]


def proxy(store: Path, *args: str, client: Callable[[str], None] | None = None) -> tuple[int, dict[str, Any]]:
    """``replaykit proxy --json`` until Ctrl-C: ``client`` (if any) talks to it first."""
    argv = [sys.executable, "-m", "replaykit.cli", "proxy", "--name", "s", "--store", str(store), "--json"]
    proc = subprocess.Popen(
        [*argv, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "400"},
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"(http://\S+/v1)", line)
        assert found, line + proc.stderr.read()
        if client is not None:
            client(found.group(1))
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert "Traceback" not in err, err
    return proc.returncode, json.loads(out)


def one_call(url: str) -> None:
    openai.OpenAI(base_url=url, api_key="none", max_retries=0).chat.completions.create(
        model="reference-strong", messages=MESSAGES
    )


def proxy_sessions(store: Path) -> list[Any]:
    if not (store / "index.db").exists():
        return []
    return Store(store).list_cassettes({"kind": "proxy"})


def test_empty_session_is_not_stored_and_ctrl_c_exits_130(tmp_path: Path) -> None:
    store = tmp_path / "store"
    code, empty = proxy(store, "--upstream", "builtin")
    assert code == 130
    assert empty["mode"] == "record" and empty["llm_calls"] == 0 and empty["stored"] is False
    assert empty["cassette_id"] is None and proxy_sessions(store) == []
    code, recorded = proxy(store, "--upstream", "builtin", client=one_call)  # once: nothing to reuse
    assert code == 130 and recorded["mode"] == "record" and recorded["llm_calls"] == 1
    assert [r["id"] for r in proxy_sessions(store)] == [recorded["cassette_id"]]
    code, replayed = proxy(store, "--upstream", "builtin", client=one_call)
    assert code == 130 and replayed["mode"] == "replay" and replayed["identical"] is True


def test_replay_that_served_nothing_is_not_identical(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proxy(store, "--upstream", "builtin", client=one_call)
    code, idle = proxy(store, "--record-mode", "none")  # the client never came
    assert code == 130 and idle["mode"] == "replay" and idle["served"] == 0
    assert idle["identical"] is False


def test_empty_session_stored_by_an_older_version_is_rerecorded_not_replayed(tmp_path: Path) -> None:
    store = tmp_path / "store"
    upstream = "builtin"
    Store(store).put_episode(
        Episode(key=proxy_key("s", upstream, ()), events=[], meta={"proxy": {"name": "s"}})
    )
    code, again = proxy(store, "--upstream", upstream, client=one_call)  # once
    assert code == 130 and again["mode"] == "record" and again["llm_calls"] == 1
    # the new recording names its model (the old empty one, keyed by no model, is left as it was)
    assert again["models"] == ["reference-strong"]
    assert Store(store).get_episode(again["cassette_id"]).digest == again["digest"]
    code, replayed = proxy(store, client=one_call)  # once, no upstream: the newest session, replayed
    assert code == 130 and replayed["mode"] == "replay" and replayed["cassette_id"] == again["cassette_id"]
    assert replayed["identical"]


def test_record_mode_none_refuses_a_stored_empty_session(tmp_path: Path) -> None:
    store = tmp_path / "store"
    Store(store).put_episode(
        Episode(key=proxy_key("s", "builtin", ()), events=[], meta={"proxy": {"name": "s"}})
    )
    proc = cli("proxy", "--name", "s", "--store", str(store), "--record-mode", "none", timeout=60)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "recorded no call" in proc.stderr and "--record-mode all" in proc.stderr


def test_serve_reference_exits_130_on_ctrl_c() -> None:
    argv = [sys.executable, "-m", "replaykit.cli", "serve", "reference", "--port", "0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"(http://\S+/v1)", line)
        assert found, line
        one_call(found.group(1))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "reference model server stopped"


def test_run_exits_130_on_ctrl_c_and_the_rerun_completes(tmp_path: Path) -> None:
    from replaykit.commands.shell import INTERRUPTED
    from replaykit.testing import write_config

    config = write_config(tmp_path, {"panel.seeds": list(range(8))})  # 64 episodes: seconds of work
    argv = [sys.executable, "-m", "replaykit.cli", "run", str(config), "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "store" / "index.db").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # recording is under way
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == INTERRUPTED
    again = cli("run", str(config), "--json", check=True)
    assert json.loads(again.stdout)["total"] == 64
