"""SQLite failures on read are one line: random bytes in a text column of ``index.db``
(SQLite fails while fetching the row) and a damaged database file are ``store corrupt``,
never a ``sqlite3`` traceback — through the library and the real CLI."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.core.errors import StoreCorrupt
from replaykit.episodes.replay import replay_run
from replaykit.episodes.run import measure
from replaykit.exchange.fsck import StoreCheck, verify_store
from replaykit.testing import small_config
from tests.cli_runner import cli

TEXT_COLUMNS = {
    "cassettes": ("digest", "task_id", "harness_sha", "key_json", "doc", "model", "config_digest"),
    "runs": ("doc", "harness_sha", "model", "kind", "name"),
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("sqlite-errors")
    config = small_config(tmp, tasks=["hello-file"], seeds=[0])
    run = measure(config).run.to_json()  # the stored form
    return {"path": Path(config.store_path), "run": run}


def damaged_copy(recorded: dict[str, Any], dest: Path, table: str, column: str, rng: random.Random) -> Path:
    shutil.copytree(recorded["path"], dest, ignore=shutil.ignore_patterns("cache"))
    garbage = bytes([0xFF, 0xFE]) + bytes(rng.randrange(256) for _ in range(6))
    with sqlite3.connect(dest / "index.db") as conn:
        conn.execute(f"UPDATE [{table}] SET [{column}] = CAST(? AS TEXT)", (garbage,))
    return dest


@pytest.mark.unit
def test_non_utf8_text_columns_are_store_corrupt_in_the_library(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    rng = random.Random(21)
    run_id = recorded["run"]["run_id"]
    for table, columns in TEXT_COLUMNS.items():
        for column in columns:
            path = damaged_copy(recorded, tmp_path / f"{table}-{column}", table, column, rng)
            with pytest.raises(StoreCorrupt, match="store corrupt: "):
                replay_run(Store(path, readonly=True), run_id)
            report = verify_store_or_corrupt(path)
            assert report is None or not report["ok"], (table, column, report)


def verify_store_or_corrupt(path: Path) -> StoreCheck | None:
    try:
        return verify_store(Store(path, readonly=True))
    except StoreCorrupt:
        return None  # the listing itself could not be read: that is the one line


@pytest.mark.e2e
def test_non_utf8_and_a_damaged_file_are_one_line_through_the_cli(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    rng = random.Random(7)
    run_id = recorded["run"]["run_id"]
    path = damaged_copy(recorded, tmp_path / "digest", "cassettes", "digest", rng)
    for args in (["replay", run_id], ["cassettes", "ls"], ["runs"]):
        proc = cli(*args, "--store", str(path))
        lines = proc.stderr.strip().splitlines()
        if proc.returncode == 0:  # a listing that never reads the damaged column
            assert "Traceback" not in proc.stderr and args != ["replay", run_id], (args, proc.stderr)
            continue
        assert len(lines) == 1 and lines[0].startswith("Error: store corrupt: "), (
            args,
            proc.stdout,
            proc.stderr,
        )
        assert "'digest'" in lines[0], lines[0]
    verify = cli("cassettes", "verify", "--store", str(path))  # the fsck names the damaged cassette
    assert verify.returncode == 1 and "Traceback" not in verify.stderr + verify.stdout
    assert "store corrupt: a text column 'digest' of index.db holds bytes that are not UTF-8" in verify.stdout

    broken = tmp_path / "malformed"
    shutil.copytree(recorded["path"], broken, ignore=shutil.ignore_patterns("cache"))
    with sqlite3.connect(broken / "index.db") as conn:  # every page in index.db itself
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray((broken / "index.db").read_bytes())
    data[4096:] = bytes(rng.randrange(256) for _ in range(len(data) - 4096))  # every page but the header's
    (broken / "index.db").write_bytes(bytes(data))
    for args in (["replay", run_id], ["cassettes", "verify"]):
        proc = cli(*args, "--store", str(broken))
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("Error: "), proc.stderr


@pytest.mark.unit
def test_a_read_only_store_names_permissions_not_the_disk(tmp_path: Path) -> None:
    """SQLite's own read-only failure (here: a connection opened mode=ro) is a line about
    permissions and the mount, never "(59.4 GB free); check the disk"."""
    from replaykit.cassette.store.guard import translate

    (tmp_path / "index.db").touch()
    sqlite3.connect(tmp_path / "index.db").execute("CREATE TABLE t (x)").connection.close()
    conn = sqlite3.connect(f"file:{tmp_path / 'index.db'}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as caught:
        conn.execute("INSERT INTO t VALUES (1)")
    conn.close()
    message = str(translate(caught.value, tmp_path))
    assert message.startswith(f"store {tmp_path / 'index.db'} is read-only for this process (")
    assert "permissions and owner" in message and "read-only" in message and "free" not in message
