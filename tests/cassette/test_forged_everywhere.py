"""A forged derived document is ``store corrupt: …`` everywhere it is read (issue 29).

The attack of the outside campaign: a rejected verdict (3 regressions) whose ``excluded`` set
is set to the three regressed tasks and the verdict recomputed for it — now *accepted*, every
field consistent with its runs under those exclusions, stored under the same id as a forger
would. Its exclusions are derived from certificates (it names none), so it does not hold:
``cassettes verify --store``, ``cassettes verify BUNDLE``, ``cassettes import``, ``audit``,
``cassettes diff VERDICT``, ``report`` and the viewer all say so. And a training whose
``final_baseline`` names a rejected candidate: ``audit TRAINING`` never "reproduces" it.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.testing import REPO_ROOT, write_config
from replaykit.train.criteria import make_criterion
from replaykit.train.derived import read_verdict
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

TASKS = ("hello-file", "fix-config-port", "csv-active-emails", "organize-files")


@pytest.fixture(scope="module")
def training(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("forged")
    config = write_config(
        tmp, {"panel.tasks": [str(REPO_ROOT / "envs" / t) for t in TASKS], "panel.seeds": [1]}
    )
    summary = json.loads(cli("train", str(config), "--json", cwd=tmp, check=True).stdout)
    store = Store(tmp / "store", readonly=True)
    doc = store.get_training(summary["training_id"]).to_json()  # as stored, to forge
    verdicts = {v: read_verdict(store, v).to_json() for v in doc["verdicts"]}
    rows = {r["id"]: r for r in store.list_runs()}
    store.close()
    regressed = [v for v in verdicts.values() if len(v["verdict"]["regressions"]) == 3]
    assert regressed, [v["verdict"]["reason"] for v in verdicts.values()]
    return {"root": tmp, "doc": doc, "verdict": regressed[0], "rows": rows}


def columns(row: dict[str, Any]) -> dict[str, str]:
    return {k: row[k] for k in ("name", "harness_sha", "model", "endpoint", "config_digest")}


def forged_store(t: dict[str, Any], tmp: Path) -> tuple[Path, str]:
    """A copy of the store whose verdict excludes its regressions, recomputed to accept."""
    path = tmp / "store"
    shutil.copytree(t["root"] / "store", path, ignore=shutil.ignore_patterns("cache"))
    store = Store(path)
    doc = copy.deepcopy(t["verdict"])
    v = doc["verdict"]
    excluded = {unit.split("#")[0]: "forked" for unit in v["regressions"]}
    crit = make_criterion(v["criterion"], **v["params"])
    forged = crit(store.get_run(doc["candidate_run"]), store.get_run(doc["baseline_run"]), excluded).to_dict()
    assert forged["accept"] and not v["accept"], forged["reason"]  # the rejected candidate turns accepted
    doc["verdict"] = forged
    vid = doc["verdict_id"]
    store.put_doc(vid, "verdict", doc, **columns(t["rows"][vid]))
    store.close()
    return path, vid


def one_line(proc: Any, start: str) -> str:
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, (proc.stdout[-400:], proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), proc.stderr
    return str(lines[0])


def test_a_forged_exclusion_is_store_corrupt_everywhere(training: dict[str, Any], tmp_path: Path) -> None:
    store, vid = forged_store(training, tmp_path)
    s = ["--store", str(store)]
    fsck = cli("cassettes", "verify", *s)
    assert fsck.returncode == 1 and f"damaged run {vid}: store corrupt: verdict {vid}" in fsck.stdout, (
        fsck.stdout
    )
    said = f"Error: store corrupt: verdict {vid}: field(s) "
    assert "excluded" in one_line(cli("audit", vid, *s), said)
    one_line(cli("audit", vid, "--criterion", "mean_reward", *s), said)
    one_line(cli("audit", vid, "--resample-seeds", "1", *s), said)
    one_line(cli("cassettes", "diff", vid, *s), said)
    one_line(cli("report", vid, "-o", str(tmp_path / "r.html"), *s), said)
    assert not (tmp_path / "r.html").exists()
    bundle = tmp_path / "verdict.tar.gz"
    cli("cassettes", "export", vid, "-o", str(bundle), *s, check=True)
    refused = f"Error: bundle {bundle}: store corrupt: verdict {vid}: field(s) "
    verify = one_line(cli("cassettes", "verify", str(bundle)), refused)
    target = tmp_path / "target"
    assert one_line(cli("cassettes", "import", str(bundle), "--store", str(target)), refused) == verify
    assert not (target / "index.db").exists() or not Store(target, readonly=True).list_runs()
    pages = viewer(store, ["/verdicts", f"/verdicts/{vid}", f"/trainings/{training['doc']['training_id']}"])
    assert pages["/verdicts"][0] == 200 and f"store corrupt: verdict {vid}" in pages["/verdicts"][1]
    assert "accepted" not in pages["/verdicts"][1].split(vid, 2)[-1].split("</tr>")[0]
    for path in (f"/verdicts/{vid}", f"/trainings/{training['doc']['training_id']}"):
        status, text = pages[path]
        assert status == 500 and f"store corrupt: verdict {vid}" in text, (path, status)


def test_audit_of_a_training_never_reproduces_a_forged_final_baseline(
    training: dict[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "store"
    shutil.copytree(training["root"] / "store", path, ignore=shutil.ignore_patterns("cache"))
    doc = copy.deepcopy(training["doc"])
    rejected = next(e["candidate_sha"] for e in doc["epochs"] if e["candidate_sha"] and not e["promoted"])
    doc["final_baseline"] = rejected
    tid = doc["training_id"]
    store = Store(path)
    store.put_doc(tid, "training", doc, **columns(training["rows"][tid]))
    store.close()
    audit = cli("audit", tid, "--store", str(path))
    line = one_line(
        audit, f"Error: store corrupt: training {tid}: final_baseline {rejected[:10]} is not where"
    )
    assert "reproduces" not in audit.stdout, line
    one_line(cli("audit", tid, "--criterion", "mean_reward", "--store", str(path)), "Error: store corrupt: ")
    one_line(
        cli("audit", tid, "--sweep", "criteria=strict_pareto,mean_reward", "--store", str(path)),
        "Error: store corrupt: ",
    )


def viewer(store: Path, paths: list[str]) -> dict[str, tuple[int, str]]:
    from starlette.testclient import TestClient

    from replaykit.cassette.stores import open_store
    from replaykit.view.app import create_app

    app = create_app(open_store(str(store), readonly=True), poll_seconds=0)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        return {p: (r.status_code, r.text) for p in paths if (r := client.get(p))}


def test_exclusions_come_from_the_certificates_a_verdict_names(
    training: dict[str, Any], tmp_path: Path
) -> None:
    """The honest path: the regressed tasks certified ``forked`` (certificates keyed by their
    very episodes), a verdict naming them accepts, verifies, and travels in a bundle with its
    certificates; naming a certificate that is gone, not forked, or of other episodes, or
    changing the set under the same id, is store corruption."""
    from replaykit.cassette.certificates import Certificate
    from replaykit.core.errors import StoreCorrupt
    from replaykit.core.verdict_doc import VerdictDoc
    from replaykit.episodes.certificate_lookup import task_certificate_id
    from replaykit.train.derived import verify_verdict
    from replaykit.train.loss import verdict_id_of

    path = tmp_path / "store"
    shutil.copytree(training["root"] / "store", path, ignore=shutil.ignore_patterns("cache"))
    store = Store(path)
    old = training["verdict"]
    base, cand = store.get_run(old["baseline_run"]), store.get_run(old["candidate_run"])
    tasks = sorted({unit.split("#")[0] for unit in old["verdict"]["regressions"]})
    certs = []
    for task in tasks:
        cert_id = task_certificate_id(store, cand, task)
        assert cert_id is not None
        certs.append(cert_id)
        row = {"id": cert_id, "task_id": task, "task_digest": "d", "env_kind": "local", "image_id": "",
               "status": "forked", "reason": "step 1 stdout differs", "run_id": cand.run_id, "episodes": 1,
               "doc": "{}", "created_at": "2026-12-01T00:00:00Z"}  # fmt: skip
        store.put_certificate(Certificate.from_row(row))
    v = old["verdict"]
    excluded = dict.fromkeys(tasks, "step 1 stdout differs")
    judged = make_criterion(v["criterion"], **v["params"])(cand, base, excluded).to_dict()
    assert judged["accept"]
    vid = verdict_id_of(base.run_id, cand.run_id, v["criterion"], v["params"], certs)
    assert vid != old["verdict_id"]  # the id covers the certificates
    doc = VerdictDoc(
        verdict_id=vid,
        training_id="",
        epoch=2,
        baseline_run=base.run_id,
        candidate_run=cand.run_id,
        baseline_sha=base.harness_sha,
        candidate_sha=cand.harness_sha,
        verdict=judged,
        certificates=certs,
    )
    store.put_doc(vid, "verdict", doc.to_json(), harness_sha=cand.harness_sha)
    verify_verdict(store, read_verdict(store, vid))  # holds: derived from its certificates
    bundle = tmp_path / "v.tar.gz"
    cli("cassettes", "export", vid, "-o", str(bundle), "--store", str(path), check=True)
    checked = json.loads(cli("cassettes", "verify", str(bundle), "--json", check=True).stdout)
    assert checked["version"] == 2 and checked["counts"]["certificates"] == 3
    imported = json.loads(
        cli("cassettes", "import", str(bundle), "--store", str(tmp_path / "t"), "--json", check=True).stdout
    )
    assert imported["imported"]["certificates"] == 3
    other_task = next(t for t in TASKS if t not in tasks)
    forgeries = {
        "same id, one certificate fewer": doc.replaced(certificates=certs[:2]),
        "a certificate of another task": doc.replaced(certificates=[*certs[:2], str(task_certificate_id(store, cand, other_task))]),
        "a certificate that is not there": doc.replaced(certificates=[*certs[:2], "0" * 24]),
    }  # fmt: skip
    for what, forged in forgeries.items():
        with pytest.raises(StoreCorrupt, match=f"store corrupt: verdict {vid}"):
            verify_verdict(store, forged)
            raise AssertionError(what)
    store.put_certificate(Certificate.from_row({**row, "status": "deterministic"}))
    with pytest.raises(StoreCorrupt, match="says deterministic, not forked"):
        verify_verdict(store, read_verdict(store, vid))
    legacy = {k: val for k, val in doc.to_json().items() if k != "certificates"}
    with pytest.raises(
        StoreCorrupt, match="do not follow from its runs"
    ):  # older: the store's certificates now
        unnamed = verdict_id_of(base.run_id, cand.run_id, v["criterion"], v["params"])
        verify_verdict(store, VerdictDoc.read({**legacy, "verdict_id": unnamed}))
