"""Certification: re-execute recorded actions, classify tasks deterministic or forked,
store and reuse certificates, and feed forked tasks to training verdicts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from replaykit.cassette.store import Store
from replaykit.core.run_doc import RunDoc
from replaykit.envs.tasks import load_task
from replaykit.episodes.certificate_lookup import (
    DETERMINISTIC,
    ERROR,
    FORKED,
    certificate_id,
    forked_tasks,
    get_certificate,
)
from replaykit.episodes.certify import certify_run
from replaykit.episodes.certify_records import CertifyReport, CertifyRow
from replaykit.episodes.config import load_config
from replaykit.episodes.observation_scrub import scrub
from replaykit.episodes.run import measure

REPO = Path(__file__).resolve().parent.parent


# -- scrubbing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<object at 0x7f3a2b1c9d40>", "<object at 0x<addr>>"),
        ("id 123e4567-e89b-12d3-a456-426614174000 ok", "id <uuid> ok"),
        ("1 passed in 0.03s", "1 passed in <duration>"),
        ("took 12ms, then 1.5 seconds", "took <duration>, then <duration>"),
        ("at 2024-05-01T12:30:45.123Z done", "at <timestamp> done"),
        ("at 2024-05-01 12:30:45 UTC", "at <timestamp>"),
        ("Thu Nov 30 04:36:12 UTC 2026", "<timestamp>"),
        ("-rw-r--r-- 1 root root 6 Nov 30 04:36 a.txt", "-rw-r--r-- 1 root root 6 <date> a.txt"),
        ("t=12:30:45.123456", "t=<time>"),
    ],
)
def test_scrub_volatile_shapes(text: str, expected: str) -> None:
    assert scrub(text) == expected


@pytest.mark.parametrize(
    "text",
    ["1700000000123456789", "ticket 1234567", "sha256 " + "ab" * 32, "port = 9090", "3 modules", "v3.4.1"],
)
def test_scrub_leaves_content_alone(text: str) -> None:
    assert scrub(text) == text


@pytest.mark.parametrize(
    ("recorded", "again"),
    [  # the same bytes served, another speed: the same after scrubbing (issue 31 item 2)
        ("Fetched 15.0 MB in 22s (690 kB/s)", "Fetched 15.0 MB in 11s (1,380 kB/s)"),
        (
            "   ━━━━━━━━━━━━ 1.2/3.4 MB 5.6 MB/s eta 0:00:01",
            "   ━━━━━━━━━━━━ 1.2/3.4 MB 12.1 MB/s eta 0:00:03",
        ),
        (
            "100  1234  100  1234    0     0   5678      0 --:--:-- --:--:-- --:--:--  5678",
            "100  1234  100  1234    0     0  12034      0 --:--:-- --:--:-- --:--:-- 12034",
        ),
        (
            "    50K .......... .......... .......... .......... .......... 50% 1.21M 0s",
            "    50K .......... .......... .......... .......... .......... 50% 12.1M 1s",
        ),
        (
            "2026-12-01 23:44:37 (5.43 MB/s) - 'f' saved [1234/1234]",
            "2026-12-01 23:44:39 (15.4 MB/s) - 'f' saved [1234/1234]",
        ),
        ("f.txt  100%[=====>]  1.21K  --.-KB/s    in 0s", "f.txt  100%[=====>]  1.21K  --.-KB/s    in 0.01s"),
    ],
)
def test_download_progress_speeds_never_fork(recorded: str, again: str) -> None:
    assert scrub(recorded) == scrub(again) != recorded


def test_download_progress_keeps_what_was_fetched() -> None:
    assert scrub("Fetched 15.0 MB in 22s (690 kB/s)") != scrub("Fetched 16.0 MB in 22s (690 kB/s)")
    curl = "100  {}  100  {}    0     0   5678      0 --:--:-- --:--:-- --:--:--  5678"
    assert scrub(curl.format(1234, 1234)) != scrub(curl.format(999, 999))


def test_certificate_ids_follow_task_env_image_and_what_was_executed() -> None:
    base = certificate_id("d" * 64, "docker", "sha256:1", ["a", "b"])
    assert base == certificate_id("d" * 64, "docker", "sha256:1", ["b", "a"])
    assert (
        len(
            {
                base,
                certificate_id("e" * 64, "docker", "sha256:1", ["a", "b"]),
                certificate_id("d" * 64, "docker", "sha256:2", ["a", "b"]),
                certificate_id("d" * 64, "local", "", ["a", "b"]),
                certificate_id("d" * 64, "docker", "sha256:1", ["a", "c"]),
            }
        )
        == 5
    )


# -- helpers -----------------------------------------------------------------------------------

NOISY_SOLVE = '#!/usr/bin/env bash\necho start\ndate +%s%N\necho "ticket $RANDOM$RANDOM" > ticket.txt\n'
CALM_SOLVE = "#!/usr/bin/env bash\necho start\nprintf 'ticket 42\\n' > ticket.txt\ncat ticket.txt\n"


def write_task(folder: Path, solve: str, instruction: str) -> Path:
    for sub in ("tests", "solution", "environment"):
        (folder / sub).mkdir(parents=True)
    (folder / "task.toml").write_text('version = "2.0"\n[verifier]\ntimeout_sec = 20.0\n')
    (folder / "instruction.md").write_text(instruction)
    (folder / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (folder / "solution" / "solve.sh").write_text(solve)
    (folder / "tests" / "test.sh").write_text(
        'mkdir -p "$LOGS_DIR/verifier"; [ -s "$APP_DIR/ticket.txt" ] && r=1 || r=0; echo $r > "$LOGS_DIR/verifier/reward.txt"\n'
    )
    return folder


@pytest.fixture(scope="module")
def task_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    suite = tmp_path_factory.mktemp("certify-tasks")
    write_task(
        suite / "noisy-ticket",
        NOISY_SOLVE,
        "Print the clock and write a random ticket number to ticket.txt.\n",
    )
    write_task(suite / "calm-ticket", CALM_SOLVE, "Write the fixed ticket number 42 to ticket.txt.\n")
    return suite


@pytest.fixture(scope="module")
def reference(task_suite: Path) -> Iterator[str]:
    from replaykit.models.reference.server import ReferenceServer

    with ReferenceServer(task_dirs=[task_suite]) as server:
        yield server.base_url


def record(
    tmp: Path, kind: str, tasks: list[Path], base_url: str, seeds: list[int] | None = None
) -> tuple[Store, RunDoc]:
    tmp.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = yaml.safe_load((REPO / "configs" / "quickstart.yaml").read_text())
    data.update(store=str(tmp / "store"), train=None)
    data["harness"]["repo"] = str(tmp / "harness")
    data["panel"] = {"tasks": [str(t) for t in tasks], "seeds": seeds or [0]}
    data["model"].update(
        base_url=base_url, name="reference-oracle", api_key_env=""
    )  # the loopback simulator needs no key
    data["env"]["kind"] = kind
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    run = measure(load_config(path)).run
    return Store(tmp / "store"), run


def by_task(report: CertifyReport) -> dict[str, CertifyRow]:
    return {row["task_id"]: row for row in report["tasks"]}


# -- local environment (no Docker) ----------------------------------------------------------------


def test_local_certification_noisy_forked_calm_deterministic(
    task_suite: Path, reference: str, tmp_path: Path
) -> None:
    store, run = record(
        tmp_path, "local", [task_suite / "noisy-ticket", task_suite / "calm-ticket"], reference, seeds=[0, 1]
    )
    report = certify_run(store, run.run_id, tasks=[str(task_suite / "*")], root=tmp_path)
    rows = by_task(report)
    assert rows["calm-ticket"]["status"] == DETERMINISTIC
    noisy = rows["noisy-ticket"]
    assert noisy["status"] == FORKED and noisy["env"] == "local"
    first = noisy["first_difference"]
    assert first is not None
    assert (first["step"], first["field"], first["action"]) == (1, "stdout", "date +%s%N")
    assert first["recorded"] != first["reexecuted"]
    assert "stdout differs at step 1" in noisy["reason"]
    assert set(forked_tasks(store, run)) == {"noisy-ticket"}
    store.close()


def test_missing_or_changed_task_is_an_error_not_a_certificate(
    task_suite: Path, reference: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run recorded before runs kept their task folders (no copy in the store): its task is
    found by id and content under --tasks only, never at the path it was recorded at."""
    import shutil

    import replaykit.episodes.run as run_module

    copy = tmp_path / "tasks" / "calm-ticket"
    shutil.copytree(task_suite / "calm-ticket", copy)
    with monkeypatch.context() as older:
        older.setattr(run_module, "task_trees", lambda store, tasks: [])
        store, run = record(tmp_path / "rec", "local", [copy], reference)
    at_recorded_path = certify_run(
        store, run.run_id, tasks=[str(tmp_path / "elsewhere" / "*")], root=tmp_path
    )
    assert by_task(at_recorded_path)["calm-ticket"]["status"] == ERROR  # its recorded path is not looked at
    assert "is not in the store, " in by_task(at_recorded_path)["calm-ticket"]["reason"]
    moved = tmp_path / "moved" / "calm-ticket"
    shutil.move(str(copy), moved)
    missing = certify_run(store, run.run_id, tasks=[str(tmp_path / "elsewhere" / "*")], root=tmp_path)
    assert by_task(missing)["calm-ticket"]["status"] == ERROR and not missing["certified"]
    shutil.move(str(moved), copy)
    (copy / "instruction.md").write_text("Write the fixed ticket number 42 to ticket.txt, please.\n")
    changed = certify_run(store, run.run_id, tasks=[str(tmp_path / "tasks" / "*")], root=tmp_path)
    assert "changed since it was recorded" in by_task(changed)["calm-ticket"]["reason"]
    assert forked_tasks(store, run) == {}
    store.close()


def test_a_run_keeps_its_task_folders_and_certifies_from_them_anywhere(
    task_suite: Path, reference: str, tmp_path: Path
) -> None:
    """A run keeps its task folders in the store (trees named by the run document): certify finds
    them there by content, with the folders gone and nothing passed."""
    import shutil

    copy = tmp_path / "tasks" / "calm-ticket"
    shutil.copytree(task_suite / "calm-ticket", copy)
    store, run = record(tmp_path / "rec", "local", [copy], reference)
    assert run.trees == [f"task-{load_task(copy).digest}-calm-ticket"]
    shutil.rmtree(copy)
    report = certify_run(store, run.run_id)
    assert by_task(report)["calm-ticket"]["status"] == DETERMINISTIC, report
    store.close()


# -- Docker --------------------------------------------------------------------------------------


@pytest.mark.docker
def test_quickstart_in_docker_certifies_deterministic(docker_quickstart: dict[str, Any]) -> None:
    store, run = docker_quickstart["store"], RunDoc.read(docker_quickstart["run"])
    report = certify_run(store, run.run_id, root=REPO)
    assert report["certified"] and report["forked"] == 0 and report["error"] == 0
    assert sorted(by_task(report)) == sorted(run.panel.tasks)
    assert all(
        r["status"] == DETERMINISTIC and r["env"] == "docker" and r["image"].startswith("recipe:")
        for r in report["tasks"]
    )
    assert not any(r["reused"] for r in report["tasks"])
    again = certify_run(store, run.run_id, root=REPO)  # certificates reused: nothing re-executed
    assert all(r["reused"] for r in again["tasks"]) and again["deterministic"] == report["deterministic"]
    assert forked_tasks(store, run) == {}


@pytest.mark.docker
def test_cli_certify_table_and_json(docker_quickstart: dict[str, Any]) -> None:
    args = [
        sys.executable,
        "-m",
        "replaykit.cli",
        "certify",
        docker_quickstart["run"]["run_id"],
        "--store",
        str(docker_quickstart["tmp"] / "store"),
    ]
    human = subprocess.run(args, capture_output=True, text=True, cwd=REPO, env=dict(os.environ), timeout=600)
    assert human.returncode == 0, human.stderr
    assert "deterministic" in human.stdout and "forked 0" in human.stdout
    doc = json.loads(
        subprocess.run([*args, "--json"], capture_output=True, text=True, cwd=REPO, timeout=600).stdout
    )
    assert doc["run_id"] == docker_quickstart["run"]["run_id"] and doc["forked"] == 0


@pytest.mark.docker
def test_noisy_task_in_docker_is_forked_and_excluded_from_verdicts(
    docker_base: str, task_suite: Path, reference: str, tmp_path: Path
) -> None:
    store, run = record(
        tmp_path, "docker", [task_suite / "noisy-ticket", task_suite / "calm-ticket"], reference
    )
    report = certify_run(store, run.run_id, tasks=[str(task_suite / "*")], root=tmp_path)
    rows = by_task(report)
    assert rows["calm-ticket"]["status"] == DETERMINISTIC
    noisy = rows["noisy-ticket"]
    assert noisy["status"] == FORKED and noisy["env"] == "docker"
    assert noisy["first_difference"] is not None
    assert noisy["first_difference"]["step"] == 1 and noisy["first_difference"]["field"] == "stdout"
    forked = forked_tasks(store, run)
    assert list(forked) == ["noisy-ticket"] and "date +%s%N" in forked["noisy-ticket"]
    digest, episodes = noisy_digest(store, run)
    cert = get_certificate(store, certificate_id(digest, "docker", noisy["image"], episodes))
    assert cert is not None and cert.status == FORKED and cert.run_id == run.run_id
    again = certify_run(store, run.run_id, tasks=[str(task_suite / "*")], root=tmp_path)
    assert all(r["reused"] for r in again["tasks"])
    refreshed = certify_run(store, run.run_id, tasks=[str(task_suite / "*")], root=tmp_path, refresh=True)
    assert (
        not any(r["reused"] for r in refreshed["tasks"])
        and by_task(refreshed)["noisy-ticket"]["status"] == FORKED
    )

    from replaykit.train.criteria import StrictPareto

    verdict = StrictPareto()(run, run, forked)
    assert "noisy-ticket" in verdict.excluded
    store.close()


def noisy_digest(store: Store, run: RunDoc) -> tuple[str, list[str]]:
    """The noisy task's digest and the digests of its episodes in the run."""
    rows = [store.cassette_row(cid) for cid in run.cassettes]
    rows = [r for r in rows if r["task_id"] == "noisy-ticket"]
    assert rows, "no noisy-ticket cassette"
    return str(rows[0]["task_digest"]), [str(r["digest"]) for r in rows]
