"""``train.certify: every_epoch`` through the real CLI (issue 33 item 5): a 2-epoch quickstart
training whose panel adds a task that prints the clock (re-executed, it forks). Without
certification its verdicts count that task; certifying every epoch, each epoch's baseline is
re-executed, every certificate of it is named by the verdict, and the forked task is left out,
derived from the certificates (a verdict that says otherwise is store corruption). A resume
re-executes nothing, the replay is identical, and a bundle carries the certificates."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.episodes.certificate_lookup import get_certificate, task_certificate_id
from replaykit.testing import QUICKSTART_TASKS, project_root, write_config
from replaykit.train.criteria import make_criterion
from replaykit.train.loss import verdict_id_of
from tests.cli_runner import cli
from tests.store_sql import raw_sql

pytestmark = pytest.mark.e2e

NOISY = "noisy-ticket"


def ok(*args: str, **kw: Any) -> Any:
    proc = cli(*args, **kw)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return (json.loads(proc.stdout) if "--json" in args else proc.stdout), proc.stderr


def one_line(proc: Any, contains: str) -> str:
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, (proc.stdout[-400:], proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and contains in lines[0], proc.stderr
    return str(lines[0])


def noisy_task(folder: Path) -> Path:
    """Solved by a script that prints the clock: its re-execution never matches."""
    for sub in ("tests", "solution", "environment"):
        (folder / sub).mkdir(parents=True)
    (folder / "task.toml").write_text('version = "2.0"\n[verifier]\ntimeout_sec = 20.0\n')
    (folder / "instruction.md").write_text(
        "Print the clock and write a random ticket number to ticket.txt.\n"
    )
    (folder / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (folder / "solution" / "solve.sh").write_text(
        '#!/usr/bin/env bash\necho start\ndate +%s%N\necho "ticket $RANDOM$RANDOM" > ticket.txt\n'
    )
    (folder / "tests" / "test.sh").write_text(
        'mkdir -p "$LOGS_DIR/verifier"; [ -s "$APP_DIR/ticket.txt" ] && r=1 || r=0; echo $r > "$LOGS_DIR/verifier/reward.txt"\n'
    )
    return folder


def verdicts(store: str, training: dict[str, Any]) -> list[dict[str, Any]]:
    s = Store(store, readonly=True)
    out = [dict(s.get_doc(e["verdict_id"], kind="verdict")) for e in training["epochs"] if e["verdict_id"]]
    s.close()
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("certify-every-epoch")
    tasks = [str(project_root() / "envs" / t) for t in QUICKSTART_TASKS] + [str(noisy_task(tmp / NOISY))]
    base = {"train.epochs": 2, "panel.tasks": tasks}
    never = write_config(tmp, {**base, "harness.repo": str(tmp / "harness-never")}, name="never.yaml")
    every = write_config(
        tmp,
        {**base, "harness.repo": str(tmp / "harness-every"), "train.certify": "every_epoch"},
        name="every.yaml",
    )
    plain, _ = ok("train", str(never), "--json")  # first: the store holds no certificate yet
    certified, log = ok("train", str(every), "--json")
    return {
        "tmp": tmp,
        "store": str(tmp / "store"),
        "never": plain,
        "every": certified,
        "every_config": str(every),
        "log": log,
    }


def test_every_epoch_certifies_the_baseline_and_leaves_its_forked_task_out(trained: dict[str, Any]) -> None:
    never, every, store = trained["never"], trained["every"], trained["store"]
    assert every["training_id"] != never["training_id"]  # train.certify is part of the training's identity
    assert every["epochs"][0]["baseline_sha"] == never["epochs"][0]["baseline_sha"]  # the same start
    for e in never["epochs"]:  # nothing certified: the clock-printing task is counted
        assert e["verdict"]["excluded"] == {}, e["verdict"]["reason"]
    assert "epoch 0: baseline" in trained["log"] and "certified 9 task(s) (9 re-executed" in trained["log"]
    assert f"1 forked ({NOISY}: left out of this epoch's verdict)" in trained["log"]
    s = Store(store, readonly=True)
    for e, doc in zip(every["epochs"], verdicts(store, every), strict=True):
        assert (
            list(e["verdict"]["excluded"]) == [NOISY]
            and "stdout differs at step 1" in e["verdict"]["excluded"][NOISY]
        )
        baseline = s.get_run(doc["baseline_run"])
        tasks = sorted({x.task_id for x in baseline.episodes})
        assert doc["certified"] == sorted(str(task_certificate_id(s, baseline, t)) for t in tasks)
        certs = [get_certificate(s, c) for c in doc["certified"]]
        statuses = {c.task_id: c.status for c in certs if c is not None}  # every one stored
        assert statuses == {t: "forked" if t == NOISY else "deterministic" for t in tasks}
        assert doc["certificates"] == [task_certificate_id(s, baseline, NOISY)]
    s.close()


def test_a_resume_reexecutes_nothing_and_the_replays_are_identical(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    again, log = ok("train", trained["every_config"], "--json")
    assert again["training_id"] == trained["every"]["training_id"]
    assert [e["verdict_id"] for e in again["epochs"]] == [e["verdict_id"] for e in trained["every"]["epochs"]]
    assert log.count("(0 re-executed, 9 by stored certificates)") == 2, log
    s = ["--store", trained["store"]]
    for training in (
        trained["every"],
        trained["never"],
    ):  # the uncertified one too, now that its runs have certificates
        replay, _ = ok("replay", training["training_id"], "--json", *s)
        assert replay["identical"], [e for e in replay["epochs"] if not e["identical"]]
    verify, _ = ok("cassettes", "verify", *s)
    assert verify.startswith("ok: checked")
    bundle = str(tmp_path / "every.tar.gz")
    exported, _ = ok("cassettes", "export", trained["every"]["training_id"], "-o", bundle, *s)
    named = {c for doc in verdicts(trained["store"], trained["every"]) for c in doc["certified"]}
    assert f"{len(named)} certificates" in exported, exported  # every one its verdicts name
    other = ["--store", str(tmp_path / "other")]
    ok("cassettes", "import", bundle, *other)
    replay, _ = ok("replay", trained["every"]["training_id"], "--json", *other)
    assert replay["identical"]


def forged(trained: dict[str, Any], tmp: Path, change: Any) -> tuple[list[str], str]:
    """A copy of the store whose first certified verdict ``change`` rewrites (under the id its
    fields give, as a forger would), and the training's epochs pointing at it."""
    path = tmp / "store"
    shutil.copytree(trained["store"], path, ignore=shutil.ignore_patterns("cache"))
    store = Store(path)
    doc = copy.deepcopy(verdicts(str(path), trained["every"])[0])
    change(store, doc)
    row = next(r for r in store.list_runs() if r["id"] == trained["every"]["epochs"][0]["verdict_id"])
    store.put_doc(
        doc["verdict_id"], "verdict", doc, **{k: row[k] for k in ("name", "harness_sha", "config_digest")}
    )
    store.close()
    return ["--store", str(path)], doc["verdict_id"]


def count_noisy(store: Store, doc: dict[str, Any]) -> None:
    """The verdict judged again counting the forked task, its exclusions emptied, its id recomputed."""
    v = doc["verdict"]
    judged = make_criterion(v["criterion"], **v["params"])(
        store.get_run(doc["candidate_run"]), store.get_run(doc["baseline_run"]), {}
    )
    doc["verdict"], doc["certificates"] = judged.to_dict(), []
    doc["verdict_id"] = verdict_id_of(
        doc["baseline_run"], doc["candidate_run"], v["criterion"], v["params"], [], doc["certified"]
    )


def test_a_verdict_that_counts_a_forked_task_is_store_corrupt(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    s, vid = forged(trained, tmp_path, count_noisy)
    one_line(
        cli("audit", vid, *s), "the tasks it excludes are not those its baseline's certificates say forked"
    )
    proc = cli("cassettes", "verify", *s)
    assert proc.returncode == 1 and f"verdict {vid}: the tasks it excludes" in proc.stdout + proc.stderr


def test_a_verdict_of_a_certifying_training_that_names_no_certificates_is_store_corrupt(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    def drop(store: Store, doc: dict[str, Any]) -> None:
        del doc["certified"]  # under the same id: the id covers the list

    s, vid = forged(trained, tmp_path, drop)
    one_line(cli("audit", vid, *s), "are not the ones its id names")


def test_a_deleted_certificate_is_store_corrupt(trained: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "store"
    shutil.copytree(trained["store"], path, ignore=shutil.ignore_patterns("cache"))
    gone = verdicts(str(path), trained["every"])[0]["certified"][0]
    store = Store(path)
    assert raw_sql(store).execute("DELETE FROM certificates WHERE id = ?", (gone,)).rowcount == 1
    store.close()
    one_line(
        cli("replay", trained["every"]["training_id"], "--store", str(path)),
        f"its baseline's certificate {gone} is not in the store",
    )


def test_a_certify_value_not_ours_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"train.certify": "always"})
    one_line(cli("train", str(config)), "train.certify")
    assert not (tmp_path / "store").exists() and not (tmp_path / "harness").exists()
