"""Paying once, end to end through the real CLI on the quickstart (the built-in reference
server, a deterministic engine): a comment-only commit re-measures with no model call; a
training with ``--reuse prefix`` pays fewer calls than ``--reuse none`` and decides the
same; both replay offline; what each new cassette was served is checked by replay and
``cassettes verify``; a damaged donor is one warning line and its episode goes live."""

from __future__ import annotations

import functools
import json
import socket
from pathlib import Path
from typing import Any

import git
import pytest

from replaykit.cassette.store import Store
from replaykit.episodes.harness import commit_all
from replaykit.testing import write_config
from tests.cli_runner import cli as run_cli
from tests.store_sql import raw_sql

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback

cli = functools.partial(run_cli, check=True)


def run_json(*args: str, **kw: Any) -> Any:
    return json.loads(cli(*args, "--json", **kw).stdout)


def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("an offline replay tried to open a socket")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def shown_reuse(episode: dict[str, Any], store: str) -> Any:
    return run_json("cassettes", "show", episode["cassette_id"], "--store", store).get("reused")


def comment_commit(harness: Path) -> str:
    repo = git.Repo(harness)
    path = harness / "harness.py"
    path.write_text(path.read_text() + "\n# a comment: no behaviour changes\n")
    return commit_all(repo, "a comment only")


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("reuse")
    config = write_config(tmp)
    first = run_json("run", str(config))
    return {"tmp": tmp, "config": config, "store": str(tmp / "store"), "first": first}


def test_a_comment_only_commit_makes_no_model_call_and_replays(
    measured: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = comment_commit(measured["tmp"] / "harness")
    second = run_json("run", str(measured["config"]), "--harness", sha)
    first = measured["first"]
    assert second["harness_sha"] == sha != first["harness_sha"]
    paying = [e for e in second["episodes"] if e.get("model_calls", e["llm_calls"])]
    why = [  # what made an episode go live (derived by cassettes show from it and its donor)
        (e["task_id"], e["seed"], e.get("model_calls"), shown_reuse(e, measured["store"])) for e in paying
    ]
    assert second["recorded_count"] == 16 and second["model_calls"] == 0, why  # new cassettes, nothing paid
    assert second["reuse"]["policy"] == "prefix" and "deterministic" in second["reuse"]["reason"]
    assert second["reused_events"] == sum(e["reused_events"] for e in second["episodes"]) > 0
    assert set(second["cassettes"]).isdisjoint(first["cassettes"])  # keyed by their own SHA
    assert [e["digest"] for e in second["episodes"]] == [e["digest"] for e in first["episodes"]]
    assert second["reuse_basis"] == "exact" and all(e["model_calls"] == 0 for e in second["episodes"])
    human = cli("run", str(measured["config"]), "--harness", sha).stdout  # again: every cassette reused
    assert "reused 16 cassette(s) (no model calls)" in human
    offline(monkeypatch)
    replay = run_json("replay", second["run_id"], "--store", measured["store"])
    assert replay["identical"] and replay["claims_checked"] == 16 and replay["claims_unchecked"] == []
    runs = {r["id"]: r for r in run_json("runs", "--store", measured["store"])}
    assert runs[second["run_id"]]["model_calls"] == 0 and runs[first["run_id"]]["reused_events"] == 0
    assert runs[first["run_id"]]["model_calls"] == sum(e["llm_calls"] for e in first["episodes"])
    verify = cli("cassettes", "verify", "--store", measured["store"]).stdout
    assert verify.startswith("ok: checked") and "16 claims" in verify
    out = measured["tmp"] / "second.html"
    cli("report", second["run_id"], "-o", str(out), "--store", measured["store"])
    html = out.read_text()
    assert "0 model call(s) paid" in html
    assert f"reuse prefix: {second['reused_events']} event(s) served from donor cassettes (exact" in html


def test_a_damaged_donor_is_one_warning_line_and_its_episode_goes_live(
    measured: dict[str, Any], tmp_path: Path
) -> None:
    import shutil

    store_dir, harness = tmp_path / "store", tmp_path / "harness"
    shutil.copytree(measured["store"], store_dir)
    shutil.copytree(measured["tmp"] / "harness", harness)
    config = write_config(tmp_path)
    donor = measured["first"]["episodes"][0]
    store = Store(store_dir)  # every recording of that task and seed (another test may have made more)
    damaged = [
        r["id"]
        for r in store.list_cassettes()
        if (r["task_id"], r["seed"]) == (donor["task_id"], donor["seed"])
    ]
    for cid in damaged:
        raw_sql(store).execute(
            "UPDATE blobs SET data = ? WHERE hash = ?", (b'{"damaged": 1}', store.cassette_row(cid)["doc"])
        )
    store.close()
    path = harness / "harness.py"
    path.write_text(path.read_text() + "\n# another comment\n")
    sha = commit_all(git.Repo(harness), "another comment")
    proc = cli("run", str(config), "--harness", sha, "--json")
    doc = json.loads(proc.stdout)
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: donor cassette")]
    assert sorted(w.split()[3] for w in warnings) == sorted(damaged)  # one line per damaged donor
    assert all("fails verification, not reused" in w for w in warnings)
    assert "Traceback" not in proc.stderr
    paid = {(e["task_id"], e["seed"]): e.get("model_calls", e["llm_calls"]) for e in doc["episodes"]}
    assert paid.pop((donor["task_id"], donor["seed"])) == donor["llm_calls"]  # live: it had no other donor
    assert set(paid.values()) == {0} and doc["model_calls"] == donor["llm_calls"]


def went_live(store: str, sha: str) -> list[str]:
    """Why each episode of harness ``sha`` served a donor's first events went live (its
    ``cassettes show`` line), checked against both: the requests there really differ."""
    found = []
    for row in run_json("cassettes", "ls", "--store", store):
        if row["harness_sha"] != sha:
            continue
        mine = run_json("cassettes", "show", row["id"], "--full", "--store", store)
        reused = mine["reused"]
        if not reused or not reused["parted"]:
            continue
        donor = run_json("cassettes", "show", reused["donor"], "--full", "--store", store)
        k = reused["events"]
        assert mine["events"][k]["kind"] == donor["events"][k]["kind"] == "llm"
        assert mine["events"][k]["request"] != donor["events"][k]["request"]
        assert mine["events"][k - 1] == donor["events"][k - 1]
        found.append(reused["parted"].replace(f" {k} ", " N "))
    return found


def train(tmp: Path, policy: str) -> dict[str, Any]:
    tmp.mkdir()
    config = write_config(tmp)
    return {"config": config, **run_json("train", str(config), "--epochs", "3", "--reuse", policy)}


def test_a_training_with_reuse_pays_fewer_calls_decides_the_same_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reuse = train(tmp_path / "prefix", "prefix")
    none = train(tmp_path / "none", "none")
    assert reuse["model_calls"] < none["model_calls"] and none["reused_events"] == 0 < reuse["reused_events"]
    assert reuse["proposer_calls"] == none["proposer_calls"] == 3
    decided = ("epoch", "decision", "candidate_sha", "verdict_id", "loss")
    assert [[e[k] for k in decided] for e in reuse["epochs"]] == [
        [e[k] for k in decided] for e in none["epochs"]
    ]
    assert reuse["final_baseline"] == none["final_baseline"] and reuse["training_id"] == none["training_id"]
    store = str(tmp_path / "prefix" / "store")
    parted = went_live(store, reuse["epochs"][0]["candidate_sha"])
    assert parted and all(why == "the request at event N is not the donor's" for why in parted), parted
    offline(monkeypatch)
    replay = run_json("replay", reuse["training_id"], "--store", store)
    assert replay["identical"] and replay["final_baseline"] == reuse["final_baseline"]
    verified = cli("cassettes", "verify", "--store", store).stdout
    assert verified.startswith("ok: checked")  # its claims: those of every episode in the store
    assert f" {replay['claims_checked']} claims," in verified and replay["claims_unchecked"] == []
    human = cli("replay", reuse["training_id"], "--store", store).stdout
    assert (
        f"reuse claims: {replay['claims_checked']} episode(s) served a donor's events, each checked" in human
    )
    bundle, other = tmp_path / "training.tar.gz", str(tmp_path / "imported")
    cli("cassettes", "export", reuse["training_id"], "-o", str(bundle), "--store", store)
    cli("cassettes", "import", str(bundle), "--store", other)  # its claims travel and verify
    verify = cli("cassettes", "verify", "--store", other).stdout
    assert verify.startswith("ok: checked") and " 0 claims" not in verify and "unchecked" not in verify
    assert run_json("replay", reuse["training_id"], "--store", other)["identical"]


def test_compare_reuses_across_its_cells_and_counts_what_it_paid(measured: dict[str, Any]) -> None:
    sha = comment_commit(measured["tmp"] / "harness")
    initial = measured["first"]["harness_sha"]
    report = run_json(
        "compare", str(measured["config"]), "--models", "reference-strong", "--harness", f"{initial},{sha}"
    )
    first, second = report["cells"]
    assert first["recorded"] == 16 and first["model_calls"] > 0 and first["reused_events"] == 0
    assert second["recorded"] == 16 and second["model_calls"] == 0 and second["reused_events"] > 0
    assert (
        report["model_calls"] == first["model_calls"] and report["reused_events"] == second["reused_events"]
    )
    none = run_json(
        "compare",
        str(measured["config"]),
        "--models",
        "reference-oracle",
        "--harness",
        f"{initial},{sha}",
        "--reuse",
        "none",
    )
    assert none["cells"][1]["model_calls"] > 0 and none["reused_events"] == 0
