"""Replay at the openai client's floor: what is computed once is still right.

One client per process and endpoint (never a parent's in a forked child), the
harness compiled once but run in a fresh module every episode, task digests
remembered only while a folder is unchanged, each episode's shared ``meta`` stored
once (and format-1 documents still readable), ``cassettes ls --limit``, and a
local pool capped at the core count.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.codec import decode_episode, encode_episode
from replaykit.cassette.store import Store
from replaykit.core.determinism import canonical_json
from replaykit.episodes.harness import load_solve
from replaykit.episodes.replay import replay_run
from replaykit.episodes.run import measure
from replaykit.execution.executor import LocalExecutor, capped_workers
from replaykit.models.clients import openai_client
from replaykit.testing import small_config
from tests.test_run import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


def test_one_client_per_process_and_endpoint() -> None:
    a = openai_client("http://127.0.0.1:9/v1", "k")
    assert openai_client("http://127.0.0.1:9/v1", "k") is a
    assert openai_client("http://127.0.0.1:9/v2", "k") is not a
    assert openai_client("http://127.0.0.1:9/v1", "other") is not a
    a.close()
    assert openai_client("http://127.0.0.1:9/v1", "k") is not a  # a closed client is replaced
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a forked worker builds its own client
        os.write(w, b"1" if openai_client("http://127.0.0.1:9/v1", "k") is not a else b"0")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(r, 1) == b"1"


def test_a_new_client_reuses_the_process_ssl_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every client shares one SSL context (parsing the CA bundle costs ~25 ms a client): a
    client made after ``clear_clients`` costs well under a millisecond; a changed
    ``SSL_CERT_FILE`` gets its own context."""
    import certifi

    from replaykit.models import clients

    url = "http://127.0.0.1:9/v1"
    clients.openai_client(url, "k")  # the process's context, built once
    start = time.process_time()
    for _ in range(20):
        clients.clear_clients()
        clients.openai_client(url, "k")
    per_client = (time.process_time() - start) / 20
    assert per_client < 0.008, per_client  # ~0.0003 s shared; ~0.025 s with a context each
    default = clients._ssl_context(*clients._ssl_env())
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    assert clients._ssl_context(*clients._ssl_env()) is not default
    clients.clear_clients()


def test_harness_compiled_once_runs_in_a_fresh_module(tmp_path: Path) -> None:
    (tmp_path / "harness.py").write_text(
        "CALLS = []\ndef solve(task, env, llm, ctx):\n    CALLS.append(1)\n    return len(CALLS)\n"
    )
    first, second = load_solve(tmp_path), load_solve(tmp_path)
    assert (
        first(None, None, None, None) == 1 and second(None, None, None, None) == 1
    )  # no state leaks between episodes
    (tmp_path / "harness.py").write_text("def solve(task, env, llm, ctx):\n    return 'edited'\n")
    assert load_solve(tmp_path)(None, None, None, None) == "edited"  # new content, new code


def test_task_digest_follows_every_edit(tmp_path: Path) -> None:
    from replaykit.envs.tasks import _task_digest, task_digest

    folder = tmp_path / "t"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test.sh").write_text("a")
    old = time.time() - 60
    os.utime(folder / "tests" / "test.sh", (old, old))
    first = task_digest(folder)
    assert task_digest(folder) == first == _task_digest(folder)
    (folder / "tests" / "test.sh").write_text("b")  # same size, same second
    assert task_digest(folder) == _task_digest(folder) != first


def test_meta_is_stored_once_and_old_documents_still_read(tmp_path: Path) -> None:
    config = small_config(tmp_path, tasks=["hello-file"], seeds=[0, 1])
    result = measure(config)
    store = Store(config.store_path)
    docs = [store.get_json(store.cassette_row(i)["doc"]) for i in result.run.cassettes]
    assert all(d["format"] == 2 for d in docs)
    shared = [name for name in ("pins", "versions", "task", "env") if "b" in docs[0]["meta"][name]]
    assert shared and all(
        docs[0]["meta"][n] == docs[1]["meta"][n] for n in shared
    )  # one blob, referenced twice
    episode = store.get_episode(result.run.cassettes[0])
    assert episode.meta["seed"] == 0 and episode.meta["task"]["id"] == "hello-file"
    # a format-1 document (meta inline) decodes to the same episode
    blobs: dict[str, bytes] = {}
    old: dict[str, Any] = dict(encode_episode(episode, blobs))
    old.update(format=1, meta=episode.meta)
    again = decode_episode(json.loads(canonical_json(old)), lambda h: blobs[h])
    assert again.meta == episode.meta and again.digest == episode.digest
    assert replay_run(store, result.run.run_id)["identical"]


def test_cassettes_ls_limit(tmp_path: Path) -> None:
    config = small_config(tmp_path, tasks=["hello-file", "fix-config-port"], seeds=[0, 1])
    run = measure(config).run
    store = str(config.store_path)
    every = json.loads(cli("cassettes", "ls", "--store", store, "--json").stdout)
    assert len(every) == 4
    newest = json.loads(cli("cassettes", "ls", "--store", store, "--json", "--limit", "2").stdout)
    assert newest == every[-2:]
    of_run = json.loads(
        cli("cassettes", "ls", "--store", store, "--run", run.run_id, "--json", "-n", "1").stdout
    )
    assert [r["id"] for r in of_run] == run.cassettes[-1:]
    table = cli("cassettes", "ls", "--store", store, "--limit", "3").stdout
    assert "newest 3 of 4" in table
    bad = cli("cassettes", "ls", "--store", store, "--limit", "-1", check=False)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr


def test_workers_above_the_core_count_are_capped(capsys: object) -> None:
    cores = os.cpu_count() or 1
    assert LocalExecutor(cores + 6).workers == cores
    assert capped_workers(cores + 6, oversubscribe=True) == cores + 6
    assert capped_workers(1) == 1
