"""Verdicts that know their noise, through the real CLI on a 3-epoch quickstart training:
audit TRAINING --noise (offline, and --resample-seeds live once then offline), audit VERDICT's
noise and attribution, runs' replicate statistics."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.testing import write_config
from replaykit.train.significance import holm
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e


def ok(*args: str) -> Any:
    proc = cli(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout) if "--json" in args else proc.stdout


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("noise")
    config = write_config(tmp, {"train.epochs": 3})  # configs/quickstart.yaml
    doc = ok("train", str(config), "--json")
    return {"tmp": tmp, "config": config, "doc": doc, "store": str(tmp / "store")}


def counts(store: str) -> tuple[int, int]:
    s = Store(store, readonly=True)
    out = (s.count_cassettes(), len(s.list_runs()))
    s.close()
    return out


def test_audit_training_noise_gives_every_epoch_its_floor_offline(trained: dict[str, Any]) -> None:
    before = sorted((p.name, p.stat().st_size) for p in Path(trained["store"]).rglob("*") if p.is_file())
    report = ok("audit", trained["doc"]["training_id"], "--noise", "--json", "--store", trained["store"])
    assert [e["epoch"] for e in report["epochs"]] == [0, 1, 2]
    for e in report["epochs"]:
        assert isinstance(e["noise_floor"], float) and e["noise_floor"] >= 0
        assert isinstance(e["within_noise"], bool)
        assert e["within_noise"] == (abs(e["margin"]) <= e["noise_floor"])
        assert e["interval"]["low"] <= e["margin"] <= e["interval"]["high"] and e["interval"]["seed"] == 0
        assert e["seeds"] == [0, 1] and e["baseline"]["pass_at_k"]
        flips = e["attribution"]["flips"]
        assert all(f["label"] in ("attributed", "incidental") for f in flips)
    judged = [e for e in report["epochs"] if e["p_value"] is not None]  # issue 37: Holm over the epochs
    assert judged and all(e["p_value"] == e["paired"]["mcnemar_p_better"] for e in judged)
    assert [e["p_holm"] for e in judged] == holm([e["p_value"] for e in judged])
    assert all(e["p_holm"] >= e["p_value"] for e in judged)
    assert report["accepted_significant"] == [
        e["epoch"] for e in judged if e["decision"] == "accepted" and e["p_holm"] <= 0.05
    ]
    decisions = [e["decision"] for e in report["epochs"]]
    assert report["accepted"] == [i for i, d in enumerate(decisions) if d == "accepted"]
    assert report["accepted_within_noise"] == [
        e["epoch"] for e in report["epochs"] if e["decision"] == "accepted" and e["within_noise"]
    ]
    assert (
        ok("audit", trained["doc"]["training_id"], "--noise", "--json", "--store", trained["store"]) == report
    )
    after = sorted((p.name, p.stat().st_size) for p in Path(trained["store"]).rglob("*") if p.is_file())
    assert after == before  # read-only
    table = ok("audit", trained["doc"]["training_id"], "--noise", "--store", trained["store"])
    assert "floor" in table and "accepted epoch(s) within noise" in table and "Holm p" in table


def test_resample_seeds_records_extra_seeds_once_then_replays(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    store = str(tmp_path / "store")
    shutil.copytree(trained["store"], store)
    tid = trained["doc"]["training_id"]
    cassettes, runs = counts(store)
    first = ok("audit", tid, "--noise", "--resample-seeds", "1", "--json", "--store", store)
    assert first["resampled_seeds"] == [2] and all(e["seeds"] == [0, 1, 2] for e in first["epochs"])
    shas = {e["baseline_sha"] for e in trained["doc"]["epochs"]} | {
        e["candidate_sha"] for e in trained["doc"]["epochs"]
    }
    grown = counts(store)
    assert grown[0] == cassettes + 8 * len(shas)  # one new seed of 8 tasks per harness measured
    again = ok("audit", tid, "--noise", "--resample-seeds", "1", "--json", "--store", store)
    assert again == first and counts(store) == grown  # replayed: nothing recorded the second time
    assert runs < grown[1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--noise", "--criterion", "mean_reward"],
            "Error: --noise audits the training as recorded; drop --criterion",
        ),
        (  # a usage error (the option's range): exit 2
            ["--noise", "--resample-seeds", "0"],
            "Error: Invalid value for '--resample-seeds': Input should be greater than or equal to 1 (got 0)",
        ),
        (["--resample-seeds", "1"], "Error: --resample-seeds on a training goes with --noise"),
    ],
)
def test_bad_noise_flags_are_one_line(trained: dict[str, Any], args: list[str], message: str) -> None:
    proc = cli("audit", trained["doc"]["training_id"], *args, "--store", trained["store"])
    assert (
        proc.returncode == (2 if "Invalid value" in message else 1)
        and proc.stderr.startswith(message)
        and len(proc.stderr.strip().splitlines()) == 1
    )


def test_audit_verdict_labels_every_flip_with_its_first_differing_event(trained: dict[str, Any]) -> None:
    for epoch in trained["doc"]["epochs"]:
        report = ok("audit", epoch["verdict_id"], "--json", "--store", trained["store"])
        flips = report["attribution"]["flips"]
        verdict = report["recomputed"]
        assert sorted(f["unit"] for f in flips) == sorted(verdict["new_solves"] + verdict["regressions"])
        for flip in flips:
            assert flip["label"] in ("attributed", "incidental")
            parted = flip["parted"]
            assert parted["position"] >= 0 and parted["kind"] in (
                "llm",
                "env",
                "error",
                "grade",
                "net",
                "end",
            )
            assert parted["baseline"] != parted["candidate"] or parted["part"] != "kind"
        assert report["noise"]["interval"]["samples"] == 1000
        assert set(report["replicates"]) == {"baseline", "candidate"}
    proc = cli("audit", trained["doc"]["verdicts"][0], "--noise", "--store", trained["store"])
    assert proc.returncode == 1 and proc.stderr.startswith("Error: --noise needs a training id")


def test_audit_verdict_gives_every_verdict_its_paired_comparison(trained: dict[str, Any]) -> None:
    """Done-when of issue 37: ``paired`` with difference, interval, mcnemar_p and mde for each
    verdict of the quickstart training, following from the verdict's own movement."""
    from replaykit.train.significance import mcnemar_exact

    for vid in trained["doc"]["verdicts"]:
        report = ok("audit", vid, "--json", "--store", trained["store"])
        pair, verdict = report["paired"], report["recomputed"]
        m = verdict["metrics"]
        assert pair["units"] == m["units"] == 16 and pair["tasks"] == 8
        assert pair["difference"] == (m["solved_candidate"] - m["solved_baseline"]) / 16
        assert pair["discordant"] == [len(verdict["regressions"]), len(verdict["new_solves"])]
        assert (pair["mcnemar_p"], pair["mcnemar_p_better"]) == mcnemar_exact(*pair["discordant"])
        low, high = pair["interval"]
        assert low <= pair["difference"] <= high and 6 / 16 <= pair["mde"] <= 1
        assert pair["detectable"] == (abs(pair["difference"]) >= pair["mde"])
        shown = cli("audit", vid, "--store", trained["store"], env={"COLUMNS": "80"})
        assert shown.returncode == 0 and max(len(r) for r in shown.stdout.splitlines()) <= 80, shown.stdout
        text = " ".join(shown.stdout.split())  # its prose is wrapped at words into a pipe
        assert "exact McNemar p" in text
        too_small = verdict["accept"] and not pair["detectable"]
        assert ("this panel is too small for the change it accepted" in text) == too_small


def test_runs_shows_each_measured_runs_replicates(trained: dict[str, Any]) -> None:
    rows = ok("runs", "--json", "--store", trained["store"])
    measured = [r for r in rows if r["kind"] == "measure"]
    assert measured and all(
        r["stats"]["seeds"] == 2 and set(r["stats"]["pass_at_k"]) == {"1", "2"} for r in measured
    )
    assert all(r["stats"]["pass_hat_k"]["2"] <= r["stats"]["pass_at_k"]["2"] for r in measured)
    assert "stats" not in next(r for r in rows if r["kind"] == "training")
    assert "pass@k" in ok("runs", "--store", trained["store"])  # k is its own column (7f55e4c)


def test_a_verdict_is_recomputed_on_a_regraded_run(trained: dict[str, Any], tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    shutil.copytree(trained["store"], store)
    epoch = trained["doc"]["epochs"][0]
    zero = tmp_path / "zero"
    zero.mkdir()
    (zero / "test.sh").write_text(
        '#!/usr/bin/env bash\nmkdir -p "$LOGS_DIR/verifier"\necho 0 > "$LOGS_DIR/verifier/reward.txt"\n'
    )
    regraded = ok(
        "regrade", epoch["candidate_run"], "--tests", f"hello-file={zero}", "--json", "--store", store
    )
    report = ok("audit", epoch["verdict_id"], "--regraded", regraded["run_id"], "--json", "--store", store)
    assert report["reproduced"] and report["regraded"]["replaced"] == {"candidate": regraded["run_id"]}
    on_regraded = report["regraded"]["verdict"]
    assert not any(u.startswith("hello-file#") for u in on_regraded["new_solves"])
    assert set(on_regraded["new_solves"]) == {
        u for u in epoch["verdict"]["new_solves"] if not u.startswith("hello-file#")
    }
    proc = cli("audit", epoch["verdict_id"], "--regraded", epoch["baseline_run"], "--store", store)
    assert proc.returncode == 1 and "is not a regraded run" in proc.stderr
