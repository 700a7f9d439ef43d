"""``replaykit fork`` end to end through the real CLI: a fork names its parent and step, is its
own cassette, verifies and replays offline; forks of forks; another model, a message given at
the step; ``cassettes show`` lists an episode's forks and ``cassettes diff`` marks the fork
point; every bad input is one line and writes nothing."""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replaykit.testing import write_config
from tests.cli_runner import cli as run_cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback

cli = functools.partial(run_cli, check=True)


def run_json(*args: str) -> Any:
    return json.loads(cli(*args, "--json").stdout)


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("fork")
    config = write_config(tmp)
    run = run_json("run", str(config))
    parent = max(run["episodes"], key=lambda e: e["llm_calls"])  # the most model calls: room for forks
    return {"tmp": tmp, "config": config, "store": str(tmp / "store"), "run": run, "parent": parent}


def test_fork_at_1_names_its_parent_verifies_and_replays_offline(
    recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    parent, store = recorded["parent"], recorded["store"]
    fork = run_json("fork", parent["cassette_id"], "--at", "1", "--store", store)
    assert fork["forked_from"] == parent["cassette_id"] != fork["cassette_id"] and fork["fork_step"] == 1
    assert fork["recorded"] and fork["reused_events"] >= 2 and fork["model_calls"] == parent["llm_calls"] - 1
    assert fork["digest"] == parent["digest"]  # nothing changed, a deterministic engine: the same episode
    again = run_json("fork", parent["cassette_id"][:12], "--at", "1", "--store", store)
    assert again["cassette_id"] == fork["cassette_id"] and not again["recorded"] and again["model_calls"] == 0
    verify = cli("cassettes", "verify", "--store", store).stdout
    assert verify.startswith("ok: checked")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a fork's replay tried to open a socket")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    replay = run_json("replay", fork["cassette_id"], "--store", store)
    assert replay["identical"] and replay["of"] == "cassette" and replay["claims_checked"] == 1
    shown = run_json("cassettes", "show", parent["cassette_id"], "--store", store)
    assert fork["cassette_id"] in [f["cassette_id"] for f in shown["forks"]]
    mine = run_json("cassettes", "show", fork["cassette_id"], "--store", store)
    assert mine["forked_from"] == parent["cassette_id"] and mine["fork_step"] == 1
    assert mine["reused"]["donor"] == parent["cassette_id"] and mine["reused"]["status"] == "checked"
    assert mine["reused"]["parted"] == f"event {mine['fork_position']} is model call 2, the fork point"
    human = cli("cassettes", "show", fork["cassette_id"], "--store", store).stdout
    n = parent["llm_calls"]  # a fork point names its call of the parent's, counted from 1 everywhere
    said = f"forked from cassette {parent['cassette_id']} at call 2 of {n}: its first 1 model call(s) served from it"
    assert said in " ".join(human.split())  # the calls below count from 1 too
    listed = cli("cassettes", "show", parent["cassette_id"], "--store", store).stdout
    assert f"  {fork['cassette_id']} at call 2 of {n} · model" in listed  # the parent's forks
    told = cli("fork", parent["cassette_id"], "--at", "1", "--store", store).stdout
    assert f"of cassette {parent['cassette_id']} at call 2 of {n}: already recorded" in " ".join(told.split())
    assert fork["parent_calls"] == n
    runs = {r["id"]: r for r in run_json("runs", "--kind", "fork", "--store", store)}
    assert fork["cassette_id"] in runs  # kept with its parent and tree (bundles, gc)
    paid = runs[fork["cassette_id"]]  # what it paid, derived from its cassette (checked)
    assert (paid["model_calls"], paid["reused_events"]) == (fork["model_calls"], fork["reused_events"])


def test_a_fork_of_a_fork_with_other_models_and_the_diff_marks_it(recorded: dict[str, Any]) -> None:
    parent, store = recorded["parent"], recorded["store"]
    strong = run_json(
        "fork", parent["cassette_id"], "--at", "1", "--model", "reference-strong", "--store", store
    )
    assert strong["model"] == "reference-strong" and strong["forked_from"] == parent["cassette_id"]
    shown = run_json("cassettes", "show", strong["cassette_id"], "--full", "--store", store)
    calls = [e for e in shown["events"] if e["kind"] == "llm"]
    assert (
        '"reference-weak"' in calls[0]["request"]["body"]
        and '"reference-strong"' in calls[1]["request"]["body"]
    )
    again = run_json(
        "fork", strong["cassette_id"], "--at", "2", "--model", "reference-oracle", "--store", store
    )
    assert again["forked_from"] == strong["cassette_id"] and again["reused_events"] >= 4
    for fork in (strong, again):
        assert run_json("replay", fork["cassette_id"], "--store", store)["identical"]
    diff = run_json("cassettes", "diff", parent["cassette_id"], strong["cassette_id"], "--store", store)
    assert diff["fork_point"]["fork"] == "b" and diff["fork_point"]["step"] == 1
    assert diff["fork_point"]["at"] == f"call 2 of {parent['llm_calls']}"
    assert (
        diff["first_difference"]["position"] == diff["fork_point"]["position"]
    )  # it parts where it went live
    human = cli("cassettes", "diff", parent["cassette_id"], strong["cassette_id"], "--store", store).stdout
    position, label = diff["fork_point"]["position"], diff["first_difference"]["label"]
    n = parent["llm_calls"]
    assert f"fork point: b forked from a at call 2 of {n} (event {position}): its first 1" in human
    assert label.startswith("call 2: ")  # the call the fork point names is the first that differs
    assert cli("cassettes", "verify", "--store", store).stdout.startswith("ok: checked")


def test_a_message_given_at_the_step_stays_in_the_history_and_replays(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    parent, store = recorded["parent"], recorded["store"]
    message = tmp_path / "message.txt"
    message.write_text("Check the result once more before you finish.")
    fork = run_json("fork", parent["cassette_id"], "--at", "1", "--message", str(message), "--store", store)
    shown = run_json("cassettes", "show", fork["cassette_id"], "--full", "--store", store)
    bodies = [e["request"]["body"] for e in shown["events"] if e["kind"] == "llm"]
    assert "Check the result once more" not in bodies[0]
    assert all("Check the result once more" in b for b in bodies[1:])
    assert run_json("replay", fork["cassette_id"], "--store", store)["identical"]


def ambiguous_prefix(ids: list[str]) -> str:
    ids = sorted(ids)
    pairs = [(a, b) for a, b in itertools.pairwise(ids) if a[0] == b[0]]
    a, b = pairs[0]  # 16+ cassettes: two share a first character
    n = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    return a[:n]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--at", "-1"], "Invalid value for '--at': Input should be greater than or equal to 0 (got -1)"),
        (["--at", "99"], "--at 99 is beyond the episode's end: cassette "),
        (["--at", "CALLS"], "is beyond the episode's end"),
        (["--at", "1", "--id", "ffffffffffffzz"], "no cassette 'ffffffffffffzz' in store"),
        (["--at", "1", "--id", "AMBIGUOUS"], "is ambiguous in store"),
        (
            ["--at", "1", "--message", "/nonexistent/message.txt"],
            "--message /nonexistent/message.txt: no such file",
        ),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    recorded: dict[str, Any], args: list[str], expected: str
) -> None:
    parent, store = recorded["parent"], recorded["store"]
    target = parent["cassette_id"]
    if "--id" in args:
        i = args.index("--id")
        target = args[i + 1]
        if target == "AMBIGUOUS":
            target = ambiguous_prefix([c["id"] for c in run_json("cassettes", "ls", "--store", store)])
        args = args[:i] + args[i + 2 :]
    args = [str(parent["llm_calls"]) if a == "CALLS" else a for a in args]
    before = snapshot(Path(store))
    proc = run_cli("fork", target, *args, "--store", store)
    usage = "Invalid value" in expected  # the option's own range: a usage error
    assert proc.returncode == (2 if usage else 1) and proc.stderr.startswith("Error: "), proc.stderr
    assert expected in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""
    assert snapshot(Path(store)) == before


def read_only(store: Path, command: list[str]) -> list[str]:
    """``command`` run where ``store`` cannot be written: as root (which permissions do not stop)
    under a read-only bind mount of it in a mount namespace of its own, else with its modes cleared."""
    if os.geteuid() != 0:
        for path in [store, *store.rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        return command
    quoted = " ".join(shlex.quote(c) for c in command)
    mount = f"mount --bind {store} {store} && mount -o remount,bind,ro {store} && exec {quoted}"
    return ["unshare", "--mount", "sh", "-c", mount]


def test_a_read_only_store_is_one_line_before_any_model_call(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    shutil.copytree(recorded["store"], store)
    before = snapshot(store)
    command = [sys.executable, "-m", "replaykit.cli", "fork", recorded["parent"]["cassette_id"], "--at", "1"]
    try:
        proc = subprocess.run(
            read_only(store, [*command, "--store", str(store)]), capture_output=True, text=True, timeout=300
        )
    finally:
        for path in [store, *store.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    assert proc.returncode == 1 and proc.stderr.startswith("Error: ") and "Traceback" not in proc.stderr, (
        proc.stderr
    )
    assert len(proc.stderr.strip().splitlines()) == 1 and str(store) in proc.stderr
    assert snapshot(store) == before


def test_a_read_only_store_is_read_as_any_other(recorded: dict[str, Any], tmp_path: Path) -> None:
    """A store on a read-only mount (or of another user) holds no shared-memory file a WAL
    reader needs, and none can be made there: show, verify and replay read it all the same."""
    store = tmp_path / "store"
    shutil.copytree(recorded["store"], store)
    assert not (store / "index.db-shm").exists()
    before, parent = snapshot(store), recorded["parent"]["cassette_id"]
    command = [sys.executable, "-m", "replaykit.cli"]
    outputs = []
    try:
        for args in (
            ["cassettes", "show", parent, "--json"],
            ["cassettes", "verify"],
            ["replay", parent, "--json"],
        ):
            proc = subprocess.run(
                read_only(store, [*command, *args, "--store", str(store)]),
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert proc.returncode == 0, (args, proc.stderr)
            outputs.append(proc.stdout)
    finally:
        for path in [store, *store.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    assert json.loads(outputs[0])["id"] == parent and outputs[1].startswith("ok: checked")
    assert json.loads(outputs[2])["identical"]
    assert snapshot(store) == before


def test_the_viewer_and_the_report_show_the_fork_point_and_what_was_paid(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    import re
    import urllib.request

    from tests.view.conftest import Viewer

    parent, store = recorded["parent"], recorded["store"]
    fork = run_json("fork", parent["cassette_id"], "--at", "1", "--store", store)
    viewer = Viewer(Path(store), tmp_path / "cache")
    try:

        def text(path: str) -> str:
            with urllib.request.urlopen(viewer.url + path, timeout=30) as r:
                return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", r.read().decode()))

        page = text(f"/episodes/{fork['cassette_id']}")
        n = parent["llm_calls"]
        assert (
            f"fork of {parent['cassette_id']} at call 2 of {n}:" in page
            and f"fork point: call 2 of {n}, live from here" in page
        )
        assert "served from" in page and "checked against it" in page
        forks = text(f"/episodes/{parent['cassette_id']}")
        assert "fork(s):" in forks and f"{fork['cassette_id'][:12]} at call 2 of {n} (" in forks
        run = text(f"/runs/{recorded['run']['run_id']}")
        paid = sum(e["llm_calls"] for e in recorded["run"]["episodes"])
        assert f"{paid} paid calls" in run and "0 reused events" in run
    finally:
        viewer.stop()
    out = tmp_path / "run.html"
    cli("report", recorded["run"]["run_id"], "-o", str(out), "--store", store)
    html = re.sub(r"<[^>]+>", "", out.read_text())
    assert f"{paid} model call(s) paid" in html and "reuse none: every event recorded live" in html


def contents(store: str) -> dict[str, set[str]]:
    from replaykit.cassette.stores import open_store

    st = open_store(store, readonly=True)
    out = {
        t: {str(r[0]) for r in st.index_rows(t, c)}
        for t, c in (("cassettes", "id"), ("runs", "id"), ("trees", "sha"), ("blobs", "hash"))
    }
    st.close()
    return out


def commit(harness: Path, old: str, new: str, message: str) -> str:
    import git

    from replaykit.episodes.harness import commit_all

    path = harness / "harness.py"
    path.write_text(path.read_text().replace(old, new, 1))
    return commit_all(git.Repo(harness), message)


def test_a_fork_under_another_harness_keeps_its_tree_and_a_harness_that_differs_early_is_refused(
    recorded: dict[str, Any],
) -> None:
    parent, store, harness = recorded["parent"], recorded["store"], recorded["tmp"] / "harness"
    quiet = commit(harness, "def solve(", "# a comment only\ndef solve(", "a comment")
    before = contents(store)
    unsaid = run_cli("fork", parent["cassette_id"], "--at", "1", "--harness", quiet, "--store", store)
    assert unsaid.returncode == 2 and len(unsaid.stderr.strip().splitlines()) == 1, unsaid.stderr
    assert "needs the harness repository to find it in: add --harness-repo PATH or --config" in unsaid.stderr
    assert contents(store) == before  # never the repository the run recorded (another checkout's)
    where = ("--harness-repo", str(harness))
    fork = run_json("fork", parent["cassette_id"], "--at", "1", "--harness", quiet, *where, "--store", store)
    assert fork["harness_sha"] == quiet and fork["forked_from"] == parent["cassette_id"]
    gc = run_json("gc", "--dry-run", "--store", store)
    assert quiet not in gc["trees"]  # the fork document keeps its tree
    assert run_json("replay", fork["cassette_id"], "--store", store)["identical"]
    loud = commit(harness, "You are a shell agent.", "You are a careful shell agent.", "another prompt")
    before = contents(store)
    proc = run_cli("fork", parent["cassette_id"], "--at", "1", "--harness", loud, *where, "--store", store)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    n = parent["llm_calls"]
    assert (
        f"cassette {parent['cassette_id']} cannot be forked at call 2 of {n} with this change" in proc.stderr
    )
    assert "fork at an earlier call (a smaller --at)" in proc.stderr
    assert contents(store) == before  # no cassette, tree, blob or document (a lease came and went)
