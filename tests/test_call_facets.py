"""Every model call classified from its bytes, through the real CLI (issue 37 item 6, done-when):
a loopback endpoint cuts one task's answer at the token limit (``finish_reason: "length"``) and
gives another an empty answer; ``run --json`` counts them as ``length`` and ``empty``, says the
episode ended on them, and ``cassettes show`` says the same, recorded and replayed."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replaykit.core.loopback import LoopbackHandler, LoopbackServer
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

TASKS = {"hello-file": "length", "fix-config-port": "empty"}


SOLVE = "mkdir -p greeting && printf 'Hello, replaykit!\\n' > greeting/hello.txt"
BASH_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "bash", "arguments": json.dumps({"command": SOLVE})},
}


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """A cut answer for hello-file (unless the system prompt says "Be concise.": then its solution,
    then "Done."), an empty one for fix-config-port, text for anything else."""
    text = json.dumps(body.get("messages"))
    message: dict[str, Any] = {"role": "assistant", "content": "All done."}
    finish = "stop"
    if "greeting/hello.txt" in text and "Be concise." in text:
        if '"role": "tool"' not in text:
            message, finish = {"role": "assistant", "content": "", "tool_calls": [BASH_CALL]}, "tool_calls"
    elif "greeting/hello.txt" in text:
        message, finish = {"role": "assistant", "content": "I will create the dir"}, "length"
    elif "config" in text and "port" in text:
        message = {"role": "assistant", "content": ""}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "m"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class Scripted(LoopbackServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(LoopbackHandler):
    def _dispatch(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if method == "GET" and self.path.rstrip("/").endswith("/models"):
            self.send_bytes(
                200, json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
            )
        elif method == "POST" and self.path.endswith("/chat/completions"):
            self.send_bytes(200, json.dumps(answer(json.loads(body))).encode())
        else:
            self.send_bytes(404, b'{"error": {"message": "not found"}}')


@pytest.fixture()
def endpoint() -> Iterator[Scripted]:
    server = Scripted()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.close_connections()
        server.server_close()


def test_length_and_empty_answers_are_counted_and_end_their_episodes(
    tmp_path: Path, endpoint: Scripted
) -> None:
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(REPO_ROOT / "envs" / t) for t in TASKS],
            "panel.seeds": [0],
            "model.name": "m",
            "model.base_url": endpoint.base_url,
            "model.api_key_env": "",
        },
    )
    run = json.loads(cli("run", str(config), "--json", check=True).stdout)
    by_task = {e["task_id"]: e for e in run["episodes"]}
    for task, facet in TASKS.items():
        episode = by_task[task]
        assert episode["call_facets"] == {facet: 1}, episode
        assert episode["ended_by"] == facet and episode["outcome"] == "no_valid_action"
        shown = cli(
            "cassettes", "show", episode["cassette_id"], "--store", str(tmp_path / "store"), check=True
        )
        assert f"calls: {facet} 1 · ended by {facet}" in shown.stdout
        doc = json.loads(
            cli(
                "cassettes", "show", episode["cassette_id"], "--json", "--store", str(tmp_path / "store")
            ).stdout
        )
        assert doc["call_facets"] == {facet: 1} and doc["events"][0]["response"]["facet"] == facet
        conversation = cli(
            "cassettes", "show", episode["cassette_id"], "--transcript", "--store", str(tmp_path / "store")
        )
        assert (
            f"calls: {facet} 1 · ended by {facet}" in conversation.stdout
            and f"15 tokens · {facet}\n" in conversation.stdout
        )
    report = tmp_path / "run.html"
    cli("report", run["run_id"], "-o", str(report), "--store", str(tmp_path / "store"), check=True)
    html = report.read_text()
    for facet in TASKS.values():
        assert f'<strong class="ended-by">ended by {facet}</strong>' in html and f"facet-{facet}" in html
    pages = viewer(tmp_path / "store", [f"/episodes/{by_task[t]['cassette_id']}" for t in TASKS])
    for (status, page), facet in zip(pages.values(), TASKS.values(), strict=True):
        assert status == 200 and 'id="call-facets"' in page and f"ended by {facet}" in page
    again = json.loads(cli("run", str(config), "--json", check=True).stdout)  # reused: derived again
    assert [e["call_facets"] for e in again["episodes"]] == [e["call_facets"] for e in run["episodes"]]
    assert all(e["reused"] for e in again["episodes"])


def test_a_verdict_says_how_the_calls_gone_wrong_moved(tmp_path: Path, endpoint: Scripted) -> None:
    """A candidate whose prompt gets answers where the baseline's were cut: the verdict's audit
    says length 1 → 0, and its new solve's failing (baseline) episode ended by length."""
    import difflib

    original = (REPO_ROOT / "replaykit" / "templates" / "quickstart" / "harness.py").read_text()
    changed = original.replace('"You are a shell agent. ', '"You are a shell agent. Be concise. ', 1)
    assert changed != original
    diff = "diff --git a/harness.py b/harness.py\n" + "".join(
        difflib.unified_diff(
            original.splitlines(True), changed.splitlines(True), "a/harness.py", "b/harness.py"
        )
    )
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(REPO_ROOT / "envs" / "hello-file")],
            "panel.seeds": [0],
            "model.name": "m",
            "model.base_url": endpoint.base_url,
            "model.api_key_env": "",
            "train.epochs": 1,
            "train.estimator": {"kind": "patch_queue", "diffs": [diff]},
        },
    )
    store = ["--store", str(tmp_path / "store")]
    training = json.loads(cli("train", str(config), "--json", check=True).stdout)
    verdict = training["epochs"][0]["verdict_id"]
    assert training["epochs"][0]["verdict"]["new_solves"] == ["hello-file#0"]
    audit = json.loads(cli("audit", verdict, "--json", *store, check=True).stdout)
    assert audit["facets"]["baseline"] == {"length": 1} and audit["facets"]["moved"] == "length 1 → 0"
    assert audit["facets"]["candidate"] == {"tool_calls": 1, "stop": 1}
    assert [f.get("ended_by") for f in audit["attribution"]["flips"]] == ["length"]
    text = cli("audit", verdict, *store, check=True, env={"COLUMNS": "80"}).stdout
    assert "calls gone wrong, baseline → candidate: length 1 → 0" in text
    assert "hello-file#0 new solve (ended by length)" in text
    assert max(len(row) for row in text.splitlines()) <= 80, text  # its prose wrapped into a pipe
    noise = json.loads(cli("audit", training["training_id"], "--noise", "--json", *store, check=True).stdout)
    assert noise["epochs"][0]["attribution"]["ended_by"] == {"length": 1}


def viewer(store: Path, paths: list[str]) -> dict[str, tuple[int, str]]:
    from starlette.testclient import TestClient

    from replaykit.cassette.stores import open_store
    from replaykit.view.app import create_app

    app = create_app(open_store(str(store), readonly=True), poll_seconds=0)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        return {p: (r.status_code, r.text) for p in paths if (r := client.get(p))}


def test_the_episode_list_filters_by_call_facet(
    tmp_path: Path, endpoint: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/episodes?facet=length`` lists the episode whose call was cut at the token limit, not the
    one whose answer was empty; an unknown facet is a 400 of one line (the facets are derived from
    the cassettes into the viewer's sidecar: an older store gets them too)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(REPO_ROOT / "envs" / t) for t in TASKS],
            "panel.seeds": [0],
            "model.name": "m",
            "model.base_url": endpoint.base_url,
            "model.api_key_env": "",
        },
    )
    run = json.loads(cli("run", str(config), "--json", check=True).stdout)
    by_task = {e["task_id"]: e["cassette_id"] for e in run["episodes"]}
    pages = viewer(
        tmp_path / "store",
        ["/episodes?facet=length", "/episodes?facet=empty", "/episodes?facet=refusal", "/episodes?facet=cut"],
    )
    status, page = pages["/episodes?facet=length"]
    assert status == 200 and by_task["hello-file"] in page and by_task["fix-config-port"] not in page
    assert "1 episode(s) with a length call" in page and "<option selected>length</option>" in page
    status, page = pages["/episodes?facet=empty"]
    assert status == 200 and by_task["fix-config-port"] in page and by_task["hello-file"] not in page
    assert "0 episode(s) with a refusal call" in pages["/episodes?facet=refusal"][1]
    status, page = pages["/episodes?facet=cut"]
    assert status == 400 and "facet=&#39;cut&#39; is not one of tool_calls, stop, length" in page


def test_an_older_store_is_filtered_by_call_facet_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store of format-1 cassettes (recorded before facets existed): the filter derives them from
    the calls' bytes, so each facet lists exactly the episodes whose calls had it."""
    from replaykit.cassette.facets import FACETS, facet_counts
    from replaykit.cassette.store import Store

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    store = tmp_path / "store"
    bundle = REPO_ROOT / "tests" / "data" / "format1" / "quickstart-training.tar.gz"
    cli("cassettes", "import", str(bundle), "--store", str(store), "--json", check=True)
    st = Store(store, readonly=True)
    having: dict[str, set[str]] = {f: set() for f in FACETS}
    for row in st.list_cassettes({"kind": "episode"}):
        for facet in facet_counts(st.get_episode(row["id"]).events):
            having[facet].add(row["id"])
    assert having["tool_calls"], having  # the fixture's calls are classified
    pages = viewer(store, [f"/episodes?facet={f}" for f in FACETS])
    for facet, (status, page) in zip(FACETS, pages.values(), strict=True):
        listed = set(re.findall(r'href="/episodes/([0-9a-f]+)"', page))
        assert status == 200 and listed <= having[facet], facet  # a page of 50 at most
        assert len(listed) == min(len(having[facet]), 50), facet
        assert f"{len(having[facet])} episode(s) with a {facet} call" in page
