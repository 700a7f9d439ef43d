"""A training that spends one error budget (issue 37 item 3), through the real CLI: each epoch's
verdict is judged by paired_test at the level the fallback procedure gives, the training
replays and audits identically, and a verdict at a level its budget does not give is
``store corrupt``."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.testing import write_config
from replaykit.train.error_budget import epoch_level
from replaykit.train.loss import verdict_id_of
from replaykit.train.paired_test import PairedTest
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

BUDGET = {"train.epochs": 3, "train.criterion": {"name": "paired_test"}, "train.error_budget": 0.05}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("budget")
    config = write_config(tmp, BUDGET)
    doc = json.loads(cli("train", str(config), "--json", check=True).stdout)
    return {"tmp": tmp, "doc": doc, "store": tmp / "store"}


def test_each_epoch_spends_its_share_and_passes_it_on(trained: dict[str, Any]) -> None:
    doc = trained["doc"]
    assert doc["criterion"] == {"name": "paired_test", "params": {"alpha": 0.05}}
    earlier: list[str] = []
    for e in doc["epochs"]:
        v = e["verdict"]
        if v is None:
            earlier.append("skipped")
            continue
        level = epoch_level(0.05, 3, earlier)
        assert v["params"] == {"alpha": 0.05, "level": level} and v["metrics"]["level"] == level
        assert v["accept"] == (v["metrics"]["p_value"] <= level)
        earlier.append("accepted" if v["accept"] else "rejected")
    assert doc["epochs"][0]["verdict"]["params"]["level"] == pytest.approx(0.05 / 3)
    store = ["--store", str(trained["store"])]
    assert json.loads(cli("replay", doc["training_id"], "--json", *store, check=True).stdout)["identical"]
    audit = json.loads(cli("audit", doc["training_id"], "--json", *store, check=True).stdout)
    assert audit["reproduces_recorded"] and audit["same_as_recorded"]


def test_a_verdict_at_a_level_its_budget_does_not_give_is_corrupt(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "store"
    shutil.copytree(trained["store"], path, ignore=shutil.ignore_patterns("cache"))
    store = Store(path)
    tid = trained["doc"]["training_id"]
    doc: dict[str, Any] = dict(store.get_doc(tid, kind="training"))
    rows: dict[str, Any] = {r["id"]: r for r in store.list_runs()}
    epoch: dict[str, Any] = next(e for e in doc["epochs"] if e["verdict"])
    vdoc: dict[str, Any] = dict(store.get_doc(epoch["verdict_id"], kind="verdict"))
    forged = PairedTest(0.05, level=0.5)(
        store.get_run(vdoc["candidate_run"]), store.get_run(vdoc["baseline_run"])
    )
    new = copy.deepcopy(vdoc)
    new["verdict"] = forged.to_dict()
    new["verdict_id"] = verdict_id_of(
        vdoc["baseline_run"], vdoc["candidate_run"], "paired_test", forged.params
    )
    columns = {
        k: rows[vdoc["verdict_id"]][k] for k in ("name", "harness_sha", "model", "endpoint", "config_digest")
    }
    store.put_doc(new["verdict_id"], "verdict", new, **columns)
    epoch["verdict"], epoch["verdict_id"] = new["verdict"], new["verdict_id"]
    doc["verdicts"] = [e["verdict_id"] for e in doc["epochs"] if e["verdict_id"]]
    tcols = {k: rows[tid][k] for k in ("name", "harness_sha", "model", "endpoint", "config_digest")}
    store.put_doc(tid, "training", doc, **tcols)
    store.close()
    proc = cli("audit", tid, "--store", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(
        f"Error: store corrupt: training {tid}: epoch {epoch['epoch']}'s verdict is not"
    )
