"""A harness tree whose manifest names a path outside its folder (planted in the store by
anyone who can write it: every machine of a shared PostgreSQL store) is store corruption:
never materialised, named by ``cassettes verify --store``, and replay writes nothing outside
its workspace. The bundle border refuses the same paths with the same check
(``cassette.integrity.tree_manifest``)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.integrity import safe_path
from replaykit.cassette.store.driver import Row
from replaykit.cassette.stores import open_store
from replaykit.core.errors import StoreCorrupt
from replaykit.exchange.fsck import verify_store
from tests.store_sql import rewrite

SHA = "b" * 40


def plant(store: StoreBackend, sha: str, extra: dict[str, str]) -> None:
    """Add ``extra`` entries (path → an existing file's blob) to a stored tree's manifest."""

    def planted(row: Row) -> Row:
        manifest = json.loads(str(row["manifest"]))
        (mode, blob) = next(iter(manifest.values()))
        manifest.update({path: [mode, blob] for path in extra})
        return {**row, "manifest": json.dumps(manifest)}

    assert rewrite(store, "trees", {"sha": sha}, planted) == 1


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("harness.py", True),
        ("pkg/mod.py", True),
        ("../escape.py", False),
        ("pkg/../../escape.py", False),
        ("/etc/cron.d/x", False),
        ("C:/x", False),
        ("a\\..\\b", False),
        ("./x", False),
        ("a//b", False),
        ("", False),
        ("a\x00b", False),
    ],
)
def test_a_safe_path_stays_inside_its_folder(name: str, safe: bool) -> None:
    assert safe_path(name) is safe


def test_a_planted_tree_path_is_store_corrupt_and_never_written(store_location: str, tmp_path: Path) -> None:
    store = open_store(store_location)
    store.put_tree(SHA, {"harness.py": (0o644, b"def solve(*a): pass\n")})
    assert (store.materialise_tree(SHA) / "harness.py").exists()  # materialised (and cached) once
    name = f"rk-planted-{uuid.uuid4().hex[:8]}.txt"
    outside = tmp_path / f"abs-{name}"
    plant(store, SHA, {f"../../../{name}": "", str(outside): ""})
    reader = open_store(store_location, readonly=True)
    for target in (store, reader):  # the cached copy and a fresh (scratch) materialisation alike
        with pytest.raises(StoreCorrupt, match=r"unsafe file path .*\.\./\.\./\.\./rk-planted"):
            target.materialise_tree(SHA)
        with pytest.raises(StoreCorrupt, match="harness tree bbbbbbbbbbbb"):
            target.get_tree(SHA)
    report = verify_store(reader)
    assert not report["ok"] and [d["table"] for d in report["damaged"]] == ["trees"], report
    assert "unsafe file path" in report["damaged"][0]["error"]
    assert not outside.exists()
    root = Path(str(getattr(store, "root", tmp_path)))
    for folder in {tmp_path, tmp_path.parent, Path("/tmp"), root, root / "cache", root.parent}:
        assert not (folder / name).exists(), folder / name


@pytest.mark.e2e
def test_replay_of_a_run_whose_tree_was_planted_writes_nothing_outside(tmp_path: Path) -> None:
    """The issue's case through the real CLI: a run recorded, then its harness tree's row in
    ``index.db`` given an absolute and a ``..`` entry, and its materialised cache removed."""
    import shutil

    from replaykit.testing import REPO_ROOT, write_config
    from tests.cli_runner import cli

    work = tmp_path / "work"
    work.mkdir()
    values = {"panel.tasks": [str(REPO_ROOT / "envs" / "hello-file")], "panel.seeds": [0]}
    run = json.loads(cli("run", str(write_config(work, values)), "--json", check=True).stdout)
    store_dir = work / "store"
    store = open_store(str(store_dir))
    name = f"rk-planted-{uuid.uuid4().hex[:8]}.txt"
    outside = tmp_path / f"abs-{name}"
    sha = run["harness_sha"]
    plant(store, sha, {f"../../{name}": "", f"../../../{name}": "", str(outside): ""})
    store.close()
    shutil.rmtree(store_dir / "cache", ignore_errors=True)
    before = sorted(str(p) for p in tmp_path.rglob("*") if "cache" not in p.parts)
    verify = cli("cassettes", "verify", "--store", str(store_dir))
    assert verify.returncode == 1, verify.stdout
    assert f"damaged tree {sha}: store corrupt: unsafe file path" in verify.stdout, verify.stdout
    replay = cli("replay", run["run_id"], "--store", str(store_dir))
    assert replay.returncode == 1 and "Traceback" not in replay.stderr, replay.stderr
    assert replay.stderr.startswith("Error: store corrupt: unsafe file path"), replay.stderr
    assert "identical" not in replay.stdout
    assert not outside.exists()
    for folder in (tmp_path, store_dir, store_dir / "cache", Path("/tmp"), Path("/")):
        assert not (folder / name).exists(), folder / name
    assert sorted(str(p) for p in tmp_path.rglob("*") if "cache" not in p.parts) == before


def test_a_manifest_whose_paths_nest_is_store_corrupt(store_location: str) -> None:
    """``a`` a file and ``a/b`` a file under it cannot both be: verify names the tree and a
    replay says store corrupt (issue 38 item 4: verify passed and replay failed with a raw
    ``File exists``)."""
    store = open_store(store_location)
    store.put_tree(SHA, {"harness.py": (0o644, b"def solve(*a): pass\n")})
    plant(store, SHA, {"pkg": "", "pkg/mod.py": ""})
    reader = open_store(store_location, readonly=True)
    with pytest.raises(StoreCorrupt, match=r"file path 'pkg' is also a folder of 'pkg/mod.py'"):
        reader.materialise_tree(SHA)
    report = verify_store(reader)
    assert not report["ok"] and [d["table"] for d in report["damaged"]] == ["trees"], report
