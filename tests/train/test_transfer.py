"""``replaykit transfer``: a training's harness, trained vs untrained, on other panels × models,
through the real CLI: the table, the stored document (checked on read), its report, its bundle."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.core.glossary import SHORT
from replaykit.episodes.config_paths import TEMPLATES
from replaykit.models.reference.proposer import CURRICULUM, ENTRY, unified_diff
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback

TASKS = ["hello-file", "fix-config-port", "csv-active-emails", "organize-files"]
OTHER = ["json-release-tag", "count-error-lines"]


def retry_nudge() -> str:
    source = (TEMPLATES / "quickstart" / "harness.py").read_text()
    change = next(c for c in CURRICULUM if c.id == "retry-nudge")
    return unified_diff(ENTRY, source, source.replace(change.search, change.replace))


def ok(*args: str, cwd: Path | None = None) -> Any:
    proc = cli(*args, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("transfer")
    (tmp / "nudge.diff").write_text(retry_nudge())
    config = write_config(
        tmp,
        {
            "panel.tasks": [str(REPO_ROOT / "envs" / t) for t in TASKS],
            "train.epochs": 1,
            "train.estimator": {"kind": "patch_queue", "diffs": ["nudge.diff"]},
        },
    )
    other = write_config(
        tmp,
        {"name": "other-panel", "panel.tasks": [str(REPO_ROOT / "envs" / t) for t in OTHER]},
        name="other.yaml",
    )
    doc = ok("train", str(config))
    assert doc["epochs"][0]["decision"] == "accepted", doc["epochs"][0]
    return {"tmp": tmp, "config": config, "other": other, "training": doc}


def test_transfer_table_reuses_the_training_and_stores_a_document_report_draws(
    trained: dict[str, Any],
) -> None:
    t = trained["training"]
    args = (
        "transfer",
        t["training_id"],
        "--config",
        str(trained["config"]),
        "--config",
        str(trained["other"]),
    )
    doc = ok(*args, "--models", "reference-weak,reference-strong")
    assert doc["kind"] == "transfer" and doc["training_id"] == t["training_id"]
    assert [h["role"] for h in doc["harnesses"]] == ["untrained", "trained"]
    assert [h["sha"] for h in doc["harnesses"]] == [t["initial_sha"], t["final_baseline"]]
    assert [c["label"] for c in doc["configs"]] == ["quickstart", "other-panel"]
    assert len(doc["cells"]) == 2 * 2 * 2 and len(doc["table"]) == 4
    cells = {(c["config"], c["model"], c["harness"]): c for c in doc["cells"]}
    epoch = t["epochs"][0]  # the training's own config × model: its own runs, reused
    assert cells[("quickstart", "reference-weak", "untrained")]["run_id"] == epoch["baseline_run"]
    assert cells[("quickstart", "reference-weak", "trained")]["run_id"] == epoch["candidate_run"]
    assert {c["total"] for c in doc["cells"] if c["config"] == "other-panel"} == {4}
    row = next(r for r in doc["table"] if (r["config"], r["model"]) == ("quickstart", "reference-weak"))
    moved = row["against_untrained"]["trained"]
    assert moved["units"] == 8 and moved["low"] <= moved["diff"] <= moved["high"]
    assert moved["diff"] == pytest.approx(
        (
            cells[("quickstart", "reference-weak", "trained")]["solved"]
            - cells[("quickstart", "reference-weak", "untrained")]["solved"]
        )
        / 8
    )
    # the same command again: every cell reused, the same document
    again = cli(*args, "--models", "reference-weak,reference-strong", env={"COLUMNS": "80"})
    assert again.returncode == 0, again.stderr
    assert f"transfer {doc['transfer_id']}" in again.stdout and "trained − untrained" in again.stdout
    assert "recorded 0" not in again.stdout  # no episode recorded: nothing said about recording
    said = " ".join(again.stdout.split())  # the legend names the column it explains (it wraps at 80)
    assert f"trained − untrained = {SHORT['− untrained']}" in said and "vs untrained" not in said
    report = ok(
        "report", doc["transfer_id"], "-o", str(trained["tmp"] / "t.html"), "--config", str(trained["config"])
    )
    assert report["kind"] == "transfer" and report["charts"] == ["transfer"] and report["runs"] == 8
    html = (trained["tmp"] / "t.html").read_text()
    assert 'id="transfer-table"' in html and "vs untrained" in html and 'id="transfer-figure"' in html
    trained["transfer"] = doc


def test_transfer_travels_in_a_bundle_and_is_checked_on_read(trained: dict[str, Any]) -> None:
    doc = trained.get("transfer") or pytest.skip("needs the first test's transfer")
    tmp, config = trained["tmp"], str(trained["config"])
    bundle = tmp / "transfer.tar.gz"
    ok("cassettes", "export", doc["transfer_id"], "-o", str(bundle), "--config", config)
    fresh = tmp / "fresh-store"
    imported = ok("cassettes", "import", str(bundle), "--store", str(fresh))
    assert imported["root"]["kind"] == "transfer"
    assert ok("report", doc["transfer_id"], "-o", str(tmp / "t2.html"), "--store", str(fresh))["runs"] == 8
    assert (tmp / "t2.html").read_text().count("vs untrained") == (tmp / "t.html").read_text().count(
        "vs untrained"
    )
    # a forged cell (one more solved) is store corruption, never drawn
    store = Store(fresh)
    forged: dict[str, Any] = dict(store.get_doc(doc["transfer_id"], kind="transfer"))
    cells = [dict(c) for c in forged["cells"]]
    cells[0]["solved"] = int(cells[0]["solved"]) + 1
    store.put_doc(doc["transfer_id"], "transfer", {**forged, "cells": cells})
    store.close()
    out = cli("report", doc["transfer_id"], "-o", str(tmp / "t3.html"), "--store", str(fresh))
    assert out.returncode == 1 and "store corrupt" in out.stderr and not (tmp / "t3.html").exists()
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.fixture
def reference_server() -> Iterator[str]:
    """The reference model served on loopback (another endpoint than the config's ``builtin``)."""
    argv = [sys.executable, "-m", "replaykit.cli", "serve", "reference", "--port", "0", "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        text = ""
        while not text.rstrip().endswith("}"):
            line = proc.stdout.readline()
            assert line, "the server exited before listening"
            text += line
        yield str(json.loads(text)["base_url"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_model_served_elsewhere_is_measured_at_its_endpoint(
    trained: dict[str, Any], reference_server: str
) -> None:
    """One engine serves one model: ``--endpoint MODEL=URL`` says where a model is that is not
    at the config's base_url. Where, never what: the document and every key name the model as
    it is served, never its URL or port."""
    t = trained["training"]
    proc = cli(
        "transfer", t["training_id"], "--config", str(trained["config"]), "--json",
        "--models", "reference-weak,reference-strong", "--endpoint", f"reference-strong={reference_server}",
        env={"OPENAI_API_KEY": "no-key"},  # the config's key variable: the reference server takes any
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    store = Store(trained["tmp"] / "store", readonly=True)
    served = {c["model"]: store.get_run(c["run_id"]).model.endpoint for c in doc["cells"]}
    assert served["reference-weak"] == "builtin"  # the config's base_url
    assert served["reference-strong"] != "builtin"  # measured where --endpoint said
    port = reference_server.rsplit(":", 1)[1].split("/")[0]
    assert port not in json.dumps(doc) and port not in json.dumps(served)


def test_transfer_bad_input_is_one_line(trained: dict[str, Any]) -> None:
    config = str(trained["config"])
    empty = cli("transfer", trained["training"]["training_id"], "--config", config, "--models", " , ")
    assert (
        empty.returncode == 2 and "--models" in empty.stderr and len(empty.stderr.strip().splitlines()) == 1
    )
    for given, says in (
        ("reference-weak", "expected MODEL=URL"),
        ("reference-weak=ftp://127.0.0.1/v1", "expected MODEL=URL"),
        ("tiny=http://127.0.0.1:8081/v1", "'tiny' is not one of --models"),
    ):
        bad = cli(
            "transfer", trained["training"]["training_id"], "--config", config,
            "--models", "reference-weak", "--endpoint", given,
        )  # fmt: skip
        assert bad.returncode == 2 and "--endpoint" in bad.stderr and says in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr
    unknown = cli("transfer", "0123456789abcdef", "--config", config, "--models", "reference-weak")
    assert unknown.returncode == 1 and "0123456789abcdef" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1 and "Traceback" not in unknown.stderr
