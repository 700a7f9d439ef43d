"""Comparisons travel: a compare document exported alone, or with the training whose harnesses it
measured, imports elsewhere, replays, and draws the same chart (same SVG bytes); a forged one is
refused, because a compare is derived from its runs (recomputed on import and on read)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from replaykit.episodes.config_paths import TEMPLATES
from replaykit.models.reference.proposer import CURRICULUM, ENTRY, unified_diff
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli as run_cli
from tests.exchange.test_bundle import Members, members_of, remanifest, write_tar

pytestmark = pytest.mark.e2e  # drives the CLI


def cli(*args: str, cwd: Path, ok: bool = True) -> Any:
    proc = run_cli(*args, "--json", cwd=cwd)
    if ok:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads(proc.stdout)
    return proc


def a_diff() -> str:
    source = (TEMPLATES / "quickstart" / "harness.py").read_text()
    change = next(c for c in CURRICULUM if c.path == ENTRY and c.search and c.search in source)
    return unified_diff(ENTRY, source, source.replace(change.search, change.replace))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A one-epoch patch-queue training (one task, one seed), then its untrained and trained
    harnesses compared on two models."""
    root = tmp_path_factory.mktemp("comparisons")
    (root / "patches").mkdir()
    (root / "patches" / "0001.diff").write_text(a_diff())
    config = write_config(
        root,
        {
            "panel.tasks": [
                str(REPO_ROOT / "envs" / "hello-file"),
                str(REPO_ROOT / "envs" / "organize-files"),
            ],
            "panel.seeds": [0],
            "train.epochs": 1,
            "train.estimator": {"kind": "patch_queue", "diffs": ["patches/0001.diff"], "descriptions": ["p"]},
        },
    )
    trained = cli("train", str(config), cwd=root)
    harnesses = f"untrained={trained['initial_sha']},trained={trained['epochs'][0]['candidate_sha']}"
    compared = cli(
        "compare",
        str(config),
        "--models",
        "reference-weak,reference-strong",
        "--harness",
        harnesses,
        cwd=root,
    )
    moved = cli(
        "transfer",
        trained["training_id"],
        "--config",
        str(config),
        "--models",
        "reference-weak,reference-strong",
        cwd=root,
    )
    return {
        "root": root,
        "store": str(root / "store"),
        "training": trained,
        "compare": compared,
        "transfer": moved,
    }


def svgs(html: Path) -> list[str]:
    return re.findall(r"<svg.*?</svg>", html.read_text(), flags=re.S)


def test_a_compare_travels_alone_and_draws_the_same_chart(recorded: dict[str, Any], tmp_path: Path) -> None:
    cid = recorded["compare"]["compare_id"]
    bundle = tmp_path / "compare.tar.gz"
    exported = cli("cassettes", "export", cid, "-o", str(bundle), "--store", recorded["store"], cwd=tmp_path)
    assert exported["root"] == {"table": "runs", "id": cid, "kind": "compare"}
    assert exported["counts"]["runs"] == 5  # the compare and its four cells' runs
    cli("cassettes", "import", str(bundle), "--store", str(tmp_path / "other"), cwd=tmp_path)
    here, there = tmp_path / "here.html", tmp_path / "there.html"
    cli("report", cid, "-o", str(here), "--store", recorded["store"], cwd=tmp_path)
    cli("report", cid, "-o", str(there), "--store", str(tmp_path / "other"), cwd=tmp_path)
    assert svgs(here) and svgs(here) == svgs(there)  # the same chart, byte for byte
    replayed = cli("replay", cid, "--store", str(tmp_path / "other"), cwd=tmp_path)
    assert replayed["identical"] is True and replayed["kind"] == "compare"
    assert sorted(r["run_id"] for r in replayed["runs"]) == sorted(recorded["compare"]["runs"])


def test_a_training_carries_the_comparisons_of_its_harnesses(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    tid, cid = recorded["training"]["training_id"], recorded["compare"]["compare_id"]
    bundle = tmp_path / "training.tar.gz"
    cli("cassettes", "export", tid, "-o", str(bundle), "--store", recorded["store"], cwd=tmp_path)
    imported = cli("cassettes", "import", str(bundle), "--store", str(tmp_path / "other"), cwd=tmp_path)
    assert imported["root"]["id"] == tid
    listed = cli("runs", "--kind", "compare", "--store", str(tmp_path / "other"), cwd=tmp_path)
    assert [r["id"] for r in listed] == [cid]
    tfid = recorded["transfer"]["transfer_id"]
    listed = cli("runs", "--kind", "transfer", "--store", str(tmp_path / "other"), cwd=tmp_path)
    assert [r["id"] for r in listed] == [tfid]  # transfer documents travel the same way
    here, there = tmp_path / "here.html", tmp_path / "there.html"
    cli("report", cid, "-o", str(here), "--store", recorded["store"], cwd=tmp_path)
    cli("report", cid, "-o", str(there), "--store", str(tmp_path / "other"), cwd=tmp_path)
    assert svgs(here) == svgs(there)


def forge_compare(members: Members) -> Members:
    """The compare's document with one cell's solved count moved (its blob renamed, its row and
    the manifest rewritten to match: a forger who knows the format)."""
    runs_at = next(i for i, (m, _) in enumerate(members) if m.name == "index/runs.json")
    rows = json.loads(members[runs_at][1])
    row = next(r for r in rows if r["kind"] == "compare")
    blob_at = next(i for i, (m, _) in enumerate(members) if m.name == f"blobs/{row['doc']}")
    doc = json.loads(members[blob_at][1])
    doc["cells"][0]["solved"] += 1
    doc["cells"][0]["solve_rate"] = doc["cells"][0]["solved"] / doc["cells"][0]["total"]
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(data).hexdigest()
    info = members[blob_at][0]
    info.name = f"blobs/{digest}"
    members[blob_at] = (info, data)
    row["doc"] = digest
    members[runs_at] = (members[runs_at][0], json.dumps(rows).encode())
    return remanifest(members)


def test_a_forged_compare_is_refused_and_nothing_is_written(recorded: dict[str, Any], tmp_path: Path) -> None:
    cid = recorded["compare"]["compare_id"]
    bundle = tmp_path / "compare.tar.gz"
    cli("cassettes", "export", cid, "-o", str(bundle), "--store", recorded["store"], cwd=tmp_path)
    forged = write_tar(tmp_path / "forged.tar.gz", forge_compare(members_of(bundle)))
    for command in ("import", "verify"):
        proc = cli(
            "cassettes", command, str(forged), "--store", str(tmp_path / "other"), cwd=tmp_path, ok=False
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and f"compare {cid}" in lines[0] and "field(s) solved" in lines[0], lines
        assert "do not follow from run" in lines[0]
    assert not (tmp_path / "other").exists()


def test_reproduce_replays_the_training_and_the_comparison_it_carries(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    tid, cid = recorded["training"]["training_id"], recorded["compare"]["compare_id"]
    bundle = tmp_path / "training.tar.gz"
    cli("cassettes", "export", tid, "-o", str(bundle), "--store", recorded["store"], cwd=tmp_path)
    done = cli("reproduce", str(bundle), cwd=tmp_path)
    assert done["identical"] is True
    tfid = recorded["transfer"]["transfer_id"]
    assert [(r["id"], r["kind"]) for r in done["roots"]] == sorted(
        [(tid, "training"), (cid, "compare"), (tfid, "transfer")], key=lambda r: (r[0] != tid, r[0])
    )
    compare = next(r for r in done["roots"] if r["kind"] == "compare")
    transfer = next(r for r in done["roots"] if r["kind"] == "transfer")
    assert transfer["identical"] and transfer["charts"]
    assert compare["replayed"] == 4 and [c["name"] for c in compare["charts"]] == ["compare"]
