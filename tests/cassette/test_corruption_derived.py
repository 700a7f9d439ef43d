"""The randomised corruption campaign, extended to derived documents (issue 21): forged
verdicts (accept, loss, metrics, reason, runs, SHAs, criterion), forged trainings
(final baseline, chain, decisions, promotions, candidate SHAs, embedded verdicts,
verdict lists) and forged git bundles of the initial baseline — each re-hashed and
stored as a well-formed document, as a forger would. Every one is recomputed and refused
as ``store corrupt`` (library, most mutations), by ``replay``/``report`` through the real
CLI (every 12th) and by ``cassettes import`` of its exported bundle (every 12th, offset), which
``cassettes verify BUNDLE`` refuses with the same line (it said OK on 8 of them before):
0 accepted, 0 tracebacks. One recorded training and one scratch copy of its store are
shared by all mutations (each writes its forgery, is checked, and puts the original back)."""

from __future__ import annotations

import copy
import json
import random
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from replaykit.cassette.store import Store
from replaykit.core.errors import StoreCorrupt
from replaykit.exchange.bundle import export_bundle
from replaykit.testing import REPO_ROOT, write_config
from replaykit.train.derived import verify_document
from tests.cli_runner import cli

MUTATIONS = 108
CLI_EVERY = 12


@pytest.fixture(scope="module")
def training(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("derived")
    tasks = [str(REPO_ROOT / "envs" / t) for t in ("hello-file", "fix-config-port")]
    config = write_config(tmp, {"panel.tasks": tasks, "panel.seeds": [0]})
    proc = cli("train", str(config), "--epochs", "3", "--json", cwd=tmp, check=True)
    summary = json.loads(proc.stdout)
    store = Store(tmp / "store", readonly=True)
    doc = store.get_training(summary["training_id"]).to_json()  # as stored, to forge
    verdicts = {v: store.get_doc(v, kind="verdict") for v in doc["verdicts"]}
    store.close()
    decisions = [e["promoted"] for e in doc["epochs"]]
    assert True in decisions and False in decisions, decisions  # both kinds of step to forge
    return {"root": tmp, "path": tmp / "store", "doc": doc, "verdicts": verdicts}


Forgery = tuple[str, str, dict[str, Any], bytes | None]  # (what, doc id, forged doc, new bundle bytes)


def forge_verdict(rng: random.Random, t: dict[str, Any]) -> Forgery:
    vid = rng.choice(sorted(t["verdicts"]))
    doc = copy.deepcopy(t["verdicts"][vid])
    v = doc["verdict"]
    shas = [s for s in t["doc"]["trees"] if s not in (doc["baseline_sha"], doc["candidate_sha"])]
    runs = [r for r in t["doc"]["runs"] if r not in (doc["baseline_run"], doc["candidate_run"])]
    choices: dict[str, Callable[[], object]] = {
        "accept": lambda: v.update(accept=not v["accept"]),
        "loss": lambda: v.update(loss=v["loss"] + rng.choice([-1.0, -0.25, 0.5, 2.0])),
        "reason": lambda: v.update(reason=v["reason"] + " (checked)"),
        "metrics": lambda: v["metrics"].update(
            solved_candidate=int(v["metrics"].get("solved_candidate", 0)) + 1
        ),
        "new_solves": lambda: v.update(
            new_solves=v["new_solves"] + ["hello-file#0"] if not v["new_solves"] else []
        ),
        "regressions": lambda: v.update(regressions=v["regressions"] + ["hello-file#0"]),
        "criterion": lambda: v.update(criterion="mean_reward", params={"alpha": 0.1}),
        "params": lambda: v.update(params={"secondary_metrics": ["tokens"]}),
        "swap runs": lambda: doc.update(baseline_run=doc["candidate_run"], candidate_run=doc["baseline_run"]),
        "candidate_sha": lambda: doc.update(candidate_sha=rng.choice(shas) if shas else "0" * 40),
        "baseline_run": lambda: doc.update(baseline_run=rng.choice(runs) if runs else doc["candidate_run"]),
    }
    field = rng.choice(sorted(choices))
    choices[field]()
    return f"verdict {vid[:8]} {field}", vid, doc, None


def forge_training(rng: random.Random, t: dict[str, Any]) -> Forgery:
    doc = copy.deepcopy(t["doc"])
    epochs = doc["epochs"]
    i = rng.randrange(len(epochs))
    e = epochs[i]
    rejected = [x["candidate_sha"] for x in epochs if x["candidate_sha"] and not x["promoted"]]
    others = [v for v in doc["verdicts"] if v != e["verdict_id"]]
    choices: dict[str, Callable[[], object]] = {
        "final_baseline": lambda: doc.update(final_baseline=rng.choice([*rejected, doc["initial_sha"]])),
        "chain": lambda: doc.update(chain=doc["chain"] + rejected[:1] if rejected else doc["chain"][:-1]),
        "decision": lambda: e.update(decision="rejected" if e["decision"] == "accepted" else "accepted"),
        "promoted": lambda: e.update(promoted=not e["promoted"]),
        "promoted+chain": lambda: (
            e.update(promoted=not e["promoted"]),
            doc.update(chain=[doc["initial_sha"]] + [x["candidate_sha"] for x in epochs if x["promoted"]]),
            doc.update(
                final_baseline=([doc["initial_sha"]] + [x["candidate_sha"] for x in epochs if x["promoted"]])[
                    -1
                ]
            ),
        ),
        "candidate_sha": lambda: e.update(
            candidate_sha=rng.choice([s for s in doc["trees"] if s != e["candidate_sha"]])
        ),
        "embedded verdict": lambda: e["verdict"].update(accept=not e["verdict"]["accept"]),
        "verdict_id": lambda: e.update(verdict_id=rng.choice(others)),
        "verdicts list": lambda: doc.update(verdicts=list(reversed(doc["verdicts"]))),
        "drop verdict": lambda: doc.update(verdicts=doc["verdicts"][:-1]),
        "initial_bundle": lambda: doc.update(
            initial_bundle=rng.choice([b for b in t["blobs"] if b != doc["initial_bundle"]])
        ),
    }
    field = rng.choice(sorted(choices))
    choices[field]()
    return f"training epoch {i} {field}", doc["training_id"], doc, None


def forge_bundle(rng: random.Random, t: dict[str, Any]) -> Forgery:
    data = bytearray(t["bundle"])
    how = rng.choice(["flip", "truncate", "garbage", "empty", "header", "splice"])
    if how == "flip":
        pos = rng.randrange(len(data))
        data[pos] ^= 1 << rng.randrange(8)
    elif how == "truncate":
        data = data[: rng.randrange(len(data))]
    elif how == "garbage":
        data = bytearray(rng.randbytes(rng.randrange(1, 400)))
    elif how == "empty":
        data = bytearray()
    elif how == "header":
        data = bytearray(
            data.replace(b"# v2 git bundle", b"# v9 git bundle", 1).replace(
                b"# v3 git bundle", b"# v9 git bundle", 1
            )
        )
    else:
        pos = rng.randrange(len(data))
        data[pos:pos] = rng.randbytes(rng.randrange(1, 64))
    return f"git bundle {how}", t["doc"]["training_id"], copy.deepcopy(t["doc"]), bytes(data)


def plant(store: Store, forgery: Forgery, t: dict[str, Any]) -> None:
    """Store the forged document as a forger would: well-formed, re-hashed, row and document agreeing."""
    _, doc_id, doc, bundle = forgery
    if bundle is not None:
        digest = store.put_blob(bundle)
        doc["initial_bundle"] = digest
        doc["blobs"] = [digest, *doc["blobs"][1:]]
    kind = doc["kind"]
    store.put_doc(doc_id, kind, doc, **t["columns"][doc_id])


def restore(store: Store, forgery: Forgery, t: dict[str, Any]) -> None:
    doc_id = forgery[1]
    original = t["verdicts"].get(doc_id) or t["doc"]
    store.put_doc(doc_id, original["kind"], original, **t["columns"][doc_id])


def refused_by_the_cli(
    scratch: Path, copy_dir: Path, kind: str, doc_id: str, t: dict[str, Any], what: str
) -> None:
    """A copy of the forged store: replay (a training) or report (a verdict) refuses it in one line,
    writing no report."""
    shutil.copytree(scratch, copy_dir, ignore=shutil.ignore_patterns("cache"))
    args = (
        ["replay", t["doc"]["training_id"]]
        if kind != "verdict"
        else ["report", doc_id, "-o", str(copy_dir / "r.html")]
    )
    proc = cli(*args, "--store", str(copy_dir), "--json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, (what, proc.stdout[-300:], proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: store corrupt: "), (what, proc.stderr)
    assert not (copy_dir / "r.html").exists(), what
    shutil.rmtree(copy_dir)


def refused_on_import(store: Store, tmp_path: Path, i: int, t: dict[str, Any], what: str) -> None:
    """The forged training exported: import refuses the bundle in one line, importing nothing,
    and verify refuses it with the same line."""
    bundle = tmp_path / f"b{i}.tar.gz"
    export_bundle(store, t["doc"]["training_id"], bundle)
    target = tmp_path / f"import{i}"
    proc = cli("cassettes", "import", str(bundle), "--store", str(target), "--json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, (what, proc.stdout[-300:], proc.stderr)
    assert proc.stderr.startswith("Error: bundle ") and "refusing (nothing was imported)" in proc.stderr, (
        what,
        proc.stderr,
    )
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (target / "index.db").exists() or not Store(target, readonly=True).list_runs(), what
    checked = cli("cassettes", "verify", str(bundle), "--json")  # refuses what import refuses
    tmpname = re.compile(r"replaykit-bundle-check-[\w-]+")  # its own temporary clone (pid, random)
    assert checked.returncode == 1 and tmpname.sub("", checked.stderr) == tmpname.sub("", proc.stderr), (
        what,
        checked.stdout[-300:],
    )
    shutil.rmtree(target, ignore_errors=True)
    bundle.unlink()


def test_forged_derived_documents_are_never_accepted(training: dict[str, Any], tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    shutil.copytree(training["path"], scratch, ignore=shutil.ignore_patterns("cache"))
    store = Store(scratch)
    t = dict(training)
    t["bundle"] = store.get_blob(t["doc"]["initial_bundle"])
    t["blobs"] = [r[0] for r in store.index_rows("blobs", "hash")]
    t["columns"] = {
        r["id"]: {k: r[k] for k in ("name", "harness_sha", "model", "endpoint", "config_digest")}
        for r in store.list_runs()
    }
    for doc_id in (t["doc"]["training_id"], *t["verdicts"]):  # the healthy documents recompute
        verify_document(store, doc_id, store.doc_kind(doc_id))
    rng = random.Random(20261201)
    outcomes = {"library": 0, "cli": 0, "import": 0}
    through_cli: set[str] = set()
    kinds = {"verdict": 0, "training": 0, "bundle": 0}
    for i in range(MUTATIONS):
        kind = ("verdict", "training", "bundle")[(i + i // CLI_EVERY) % 3]  # each kind reaches the CLI
        forgery = {"verdict": forge_verdict, "training": forge_training, "bundle": forge_bundle}[kind](rng, t)
        what, doc_id, doc, _ = forgery
        original = t["verdicts"].get(doc_id) or t["doc"]
        assert doc != original or forgery[3] is not None, what  # every mutation changes something
        kinds[kind] += 1
        plant(store, forgery, t)
        if i % CLI_EVERY == 0:
            refused_by_the_cli(scratch, tmp_path / f"cli{i}", kind, doc_id, t, what)
            outcomes["cli"] += 1
            through_cli.add(kind)
        elif i % CLI_EVERY == 6:
            refused_on_import(store, tmp_path, i, t, what)
            outcomes["import"] += 1
        else:
            with pytest.raises(StoreCorrupt, match="store corrupt: "):
                verify_document(store, doc_id, doc["kind"])
                raise AssertionError(f"{what}: accepted")
            outcomes["library"] += 1
        restore(store, forgery, t)
    verify_document(store, t["doc"]["training_id"], "training")  # the originals are back and whole
    assert sum(outcomes.values()) == MUTATIONS >= 100 and min(kinds.values()) >= 30, (outcomes, kinds)
    assert through_cli == set(kinds), through_cli
