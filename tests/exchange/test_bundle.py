"""Bundles: export a recorded run, import it elsewhere, replay it; refuse every unsafe bundle."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import pytest

from replaykit.cassette.events import GradeEvent
from replaykit.cassette.store import Store
from replaykit.core.run_doc import RunDoc
from replaykit.envs.results import Grade
from replaykit.episodes.config import load_config
from replaykit.episodes.replay import replay_run
from replaykit.episodes.run import measure
from replaykit.exchange.bundle import export_bundle
from replaykit.exchange.bundle_format import BundleError
from replaykit.exchange.importer import import_bundle, verify_bundle
from replaykit.exchange.reader import read_bundle
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


REPO = Path(__file__).resolve().parents[2]
TABLES = ("cassettes", "runs", "trees", "blobs")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny run (two tasks, seed 0) recorded with the in-process reference server."""
    root = tmp_path_factory.mktemp("source")
    cfg = load_config(
        REPO / "configs" / "quickstart.yaml",
        {
            "store": str(root / "store"),
            "harness.repo": str(root / "harness"),
            "panel.tasks": [str(REPO / "envs" / "hello-file"), str(REPO / "envs" / "count-error-lines")],
            "panel.seeds": [0],
            "env.timeout_sec": 29,  # a key of this module's own: workspaces are per key, other tests record the quickstart's
        },
    )
    run = measure(cfg).run.to_json()  # the stored form
    store = Store(cfg.store_path)
    bundle = root / "run.tar.gz"
    export_bundle(store, run["run_id"], bundle)
    return {"root": root, "store": store, "run": run, "bundle": bundle}


def counts(path: Path) -> dict[str, int]:
    store = Store(path)
    try:
        return {t: store.driver.count(t) for t in TABLES}
    finally:
        store.close()


# -- building bad bundles ----------------------------------------------------------
Members = list[tuple[tarfile.TarInfo, bytes]]


def members_of(path: Path) -> Members:
    raw = gzip.decompress(path.read_bytes())
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        return [(m, tar.extractfile(m).read() if m.isreg() else b"") for m in tar.getmembers()]  # type: ignore[union-attr]


def write_tar(path: Path, members: Members, compress: bool = True) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    path.write_bytes(gzip.compress(buf.getvalue()) if compress else buf.getvalue())
    return path


def remanifest(members: Members) -> Members:
    """Recompute the manifest's hashes and sizes (a tamperer who also edits the manifest)."""
    from hashlib import sha256

    manifest = json.loads(members[0][1])
    manifest["members"] = {
        i.name: {"sha256": sha256(d).hexdigest(), "size": len(d)} for i, d in members[1:] if i.isreg()
    }
    return [(members[0][0], json.dumps(manifest).encode()), *members[1:]]


def first_blob(members: Members) -> int:
    return next(i for i, (m, _) in enumerate(members) if m.name.startswith("blobs/"))


def tamper_blob(ms: Members) -> Members:
    i = first_blob(ms)
    data = ms[i][1]
    ms[i] = (ms[i][0], data[:-1] + bytes([data[-1] ^ 1]))  # same size, other bytes
    return ms


def grow_blob(ms: Members) -> Members:
    i = first_blob(ms)
    ms[i] = (ms[i][0], ms[i][1] + b" ")
    return ms


def tamper_blob_and_manifest(ms: Members) -> Members:
    return remanifest(tamper_blob(ms))


def tamper_row(column: str, value: Any) -> Callable[[Members], Members]:
    def edit(ms: Members) -> Members:
        i = next(i for i, (m, _) in enumerate(ms) if m.name == "index/cassettes.json")
        rows = json.loads(ms[i][1])
        rows[0][column] = value
        ms[i] = (ms[i][0], json.dumps(rows).encode())
        return remanifest(ms)

    return edit


def drop_blob(ms: Members) -> Members:
    del ms[first_blob(ms)]
    return remanifest(ms)


def extra(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> Callable[[Members], Members]:
    def edit(ms: Members) -> Members:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, link
        return [*ms, (info, b"x" if kind == tarfile.REGTYPE else b"")]

    return edit


def version(n: Any) -> Callable[[Members], Members]:
    def edit(ms: Members) -> Members:
        manifest = json.loads(ms[0][1])
        manifest["version"] = n
        return [(ms[0][0], json.dumps(manifest).encode()), *ms[1:]]

    return edit


BAD = {
    "tampered blob": (tamper_blob, "does not match its sha256"),
    "resized blob": (grow_blob, "the manifest says"),
    "tampered blob, manifest rewritten": (tamper_blob_and_manifest, "does not hash to its name"),
    "tampered index row": (tamper_row("digest", "0" * 64), "column\\(s\\) digest do not match its events"),
    "odd column in a row": (tamper_row("x]; DROP TABLE blobs; --", 1), "invalid column"),
    "nested value in a row": (tamper_row("extra", {"a": 1}), "invalid column"),
    "missing blob": (drop_blob, "referenced but not in the bundle"),
    "traversal member": (extra("../evil.txt"), "escapes the archive"),
    "nested traversal": (extra("blobs/../../evil"), "escapes the archive"),
    "absolute member": (extra("/tmp/evil.txt"), "escapes the archive"),
    "symlink member": (extra("blobs/link", tarfile.SYMTYPE, "/etc/passwd"), "is a link"),
    "hardlink member": (extra("blobs/hard", tarfile.LNKTYPE, "manifest.json"), "is a link"),
    "device member": (extra("blobs/dev", tarfile.CHRTYPE), "device"),
    "unknown member": (extra("notes.txt"), "unexpected member"),
    "unknown format version": (version(3), "format version 3; this replaykit reads versions 1, 2"),
}


@pytest.fixture
def other_store(tmp_path: Path) -> Path:
    """A target store with unrelated content, to check that a refused import writes nothing."""
    store = Store(tmp_path / "other")
    store.put_blob(b"unrelated")
    store.put_tree("f" * 40, {"a.txt": (0o644, b"a")})
    store.close()
    return tmp_path / "other"


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_bundles_are_refused_with_nothing_written(
    recorded: dict[str, Any], tmp_path: Path, other_store: Path, case: str
) -> None:
    edit, message = BAD[case]
    bad = write_tar(tmp_path / "bad.tar.gz", edit(members_of(recorded["bundle"])))
    before = counts(other_store)
    for target in (tmp_path / "empty", other_store):
        with pytest.raises(BundleError, match=message):
            import_bundle(Store(target), bad)
    with pytest.raises(BundleError, match=message):
        verify_bundle(bad)
    assert not (tmp_path / "empty").exists()
    assert counts(other_store) == before


@pytest.mark.parametrize("compress", [True, False])
def test_truncated_bundle_is_refused(recorded: dict[str, Any], tmp_path: Path, compress: bool) -> None:
    """Cut anywhere in its content (a gzip stream anywhere at all), a bundle is refused."""
    source = tmp_path / ("full.tar.gz" if compress else "full.tar")
    export_bundle(recorded["store"], recorded["run"]["run_id"], source)
    data = source.read_bytes()
    with tarfile.open(source) as tar:
        last = tar.getmembers()[-1]
        end = last.offset_data + last.size  # past it, only the end-of-archive zero padding
    for cut in (100, len(data) // 3, len(data) // 2, (end if not compress else len(data)) - 10):
        short = tmp_path / f"short-{cut}{'.tar.gz' if compress else '.tar'}"
        short.write_bytes(data[:cut])
        with pytest.raises(BundleError, match=r"truncated|incomplete|not a tar"):
            import_bundle(Store(tmp_path / "empty"), short)
    assert not (tmp_path / "empty").exists()


def test_import_replays_identically_in_another_directory(recorded: dict[str, Any], tmp_path: Path) -> None:
    run_id = recorded["run"]["run_id"]
    original = replay_run(recorded["store"], run_id)
    target = Store(tmp_path / "elsewhere")
    report = import_bundle(target, recorded["bundle"])
    assert (
        report["noop"] is False and report["imported"]["cassettes"] == 2 and report["imported"]["runs"] == 1
    )
    replayed = replay_run(target, run_id)
    assert replayed["identical"] and original["identical"]
    assert [e["replayed_digest"] for e in replayed["episodes"]] == [
        e["recorded_digest"] for e in original["episodes"]
    ]
    assert target.get_run(run_id).to_json() == recorded["run"]


def test_import_twice_is_a_noop(recorded: dict[str, Any], tmp_path: Path) -> None:
    target = Store(tmp_path / "t")
    import_bundle(target, recorded["bundle"])
    before = counts(tmp_path / "t")
    again = import_bundle(target, recorded["bundle"])
    assert again["noop"] is True and not any(again["imported"].values())
    assert counts(tmp_path / "t") == before


def test_export_is_deterministic(recorded: dict[str, Any], tmp_path: Path) -> None:
    run_id = recorded["run"]["run_id"]
    for name in ("a.tar.gz", "b.tar.gz", "a.tar", "b.tar"):
        export_bundle(recorded["store"], run_id, tmp_path / name)
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    with tarfile.open(tmp_path / "a.tar") as tar:
        names = tar.getnames()
        assert names[0] == "manifest.json" and names[1:4] == [
            "index/cassettes.json",
            "index/runs.json",
            "index/trees.json",
        ]
        assert all(
            m.mtime == tar.getmembers()[0].mtime and m.uid == 0 and m.isreg() for m in tar.getmembers()
        )
    manifest = json.loads(gzip.decompress((tmp_path / "a.tar.gz").read_bytes())[512:].split(b"\0", 1)[0])
    assert manifest["format"] == "replaykit-bundle" and manifest["version"] == 1
    assert manifest["root"]["id"] == run_id and "vcrpy" in manifest["tools"]
    assert set(manifest["members"]) == set(names[1:])


def test_verify_checks_without_writing(recorded: dict[str, Any], tmp_path: Path) -> None:
    report = verify_bundle(recorded["bundle"], Store(tmp_path / "nowhere"))
    assert report["ok"] and report["counts"]["cassettes"] == 2 and report["would_import"]["runs"] == 1
    assert not (tmp_path / "nowhere").exists()


def _conflict_cassette(recorded: dict[str, Any], store: Store) -> None:
    episode = recorded["store"].get_episode(recorded["run"]["cassettes"][0])
    events = [e for e in episode.events if not isinstance(e, GradeEvent)] + [
        GradeEvent(Grade(reward=0.5, passed=False))
    ]
    store.put_episode(replace(episode, events=events))  # same key, other content


def _conflict_run(recorded: dict[str, Any], store: Store) -> None:
    store.put_run(RunDoc.read(dict(recorded["run"], name="someone else's")))


@pytest.mark.parametrize("make", [_conflict_cassette, _conflict_run], ids=["cassette", "run"])
def test_existing_id_with_other_content_is_refused(
    recorded: dict[str, Any], tmp_path: Path, make: Callable[..., None]
) -> None:
    target = Store(tmp_path / "t")
    make(recorded, target)
    before = counts(tmp_path / "t")
    with pytest.raises(BundleError, match=r"already exists in store .* with other content"):
        import_bundle(target, recorded["bundle"])
    assert counts(tmp_path / "t") == before


def test_a_training_like_doc_pulls_in_everything_it_lists(recorded: dict[str, Any], tmp_path: Path) -> None:
    """Docs of any kind are walked by field name: runs, verdicts, cassettes, trees, harness_sha."""
    source: Store = recorded["store"]
    run = recorded["run"]
    verdict = {"kind": "verdict", "runs": [run["run_id"]], "cassettes": run["cassettes"][:1]}
    extra_blob = source.put_blob(b"a git bundle, say")
    training = {
        "kind": "training",
        "runs": [run["run_id"]],
        "verdicts": ["verdict-1"],
        "cassettes": [],
        "trees": [run["harness_sha"]],
        "harness_sha": run["harness_sha"],
        "blobs": [extra_blob],
    }
    for rid, doc in (("verdict-1", verdict), ("training-1", training)):
        source.put_doc(rid, doc["kind"], doc)
    try:
        export_bundle(source, "training-1", tmp_path / "training.tar")
        bundle = read_bundle(tmp_path / "training.tar")
        assert set(bundle.rows["runs"]) == {"training-1", "verdict-1", run["run_id"]}
        assert set(bundle.rows["cassettes"]) == set(run["cassettes"])
        assert bundle.root == {"table": "runs", "id": "training-1", "kind": "training"}
        assert bundle.blobs[extra_blob] == b"a git bundle, say"
        target = Store(tmp_path / "t")
        import_bundle(target, tmp_path / "training.tar")
        assert replay_run(target, run["run_id"])["identical"]
        source.put_doc("training-2", "training", {"runs": ["missing-run"]})
        with pytest.raises(BundleError, match="references run missing-run which is not in store"):
            export_bundle(source, "training-2", tmp_path / "partial.tar")
    finally:
        with source.write_lock():
            source.delete_rows("runs", ["verdict-1", "training-1", "training-2"])


def test_a_single_cassette_exports_with_its_tree(recorded: dict[str, Any], tmp_path: Path) -> None:
    cid = recorded["run"]["cassettes"][0]
    export_bundle(recorded["store"], cid[:10], tmp_path / "one.tgz")
    bundle = read_bundle(tmp_path / "one.tgz")
    assert list(bundle.rows["cassettes"]) == [cid] and not bundle.rows["runs"]
    assert list(bundle.rows["trees"]) == [recorded["run"]["harness_sha"]]


def test_tree_paths_that_escape_are_refused(recorded: dict[str, Any], tmp_path: Path) -> None:
    ms = members_of(recorded["bundle"])
    i = next(i for i, (m, _) in enumerate(ms) if m.name == "index/trees.json")
    rows = json.loads(ms[i][1])
    manifest = json.loads(rows[0]["manifest"])
    manifest["../../outside.py"] = next(iter(manifest.values()))
    rows[0]["manifest"] = json.dumps(manifest)
    ms[i] = (ms[i][0], json.dumps(rows).encode())
    bad = write_tar(tmp_path / "bad.tgz", remanifest(ms))
    with pytest.raises(BundleError, match="unsafe file path"):
        import_bundle(Store(tmp_path / "t"), bad)


def test_cli_export_verify_import_replay(recorded: dict[str, Any], tmp_path: Path) -> None:
    run_id = recorded["run"]["run_id"]
    source = str(recorded["store"].root)
    out = cli("cassettes", "export", run_id[:8], "-o", "b.tar.gz", "--store", source, "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["counts"]["cassettes"] == 2
    out = cli("cassettes", "verify", "b.tar.gz", cwd=tmp_path)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr
    out = cli("cassettes", "import", "b.tar.gz", "--store", "other", cwd=tmp_path)
    assert out.returncode == 0 and "imported" in out.stdout, out.stderr
    out = cli("cassettes", "import", "b.tar.gz", "--store", "other", cwd=tmp_path)
    assert out.returncode == 0 and "nothing to do" in out.stdout, out.stderr
    out = cli("replay", run_id, "--store", "other", "--json", cwd=tmp_path)
    assert out.returncode == 0 and json.loads(out.stdout)["identical"], out.stderr
    write_tar(tmp_path / "evil.tar.gz", extra("../evil.txt")(members_of(tmp_path / "b.tar.gz")))
    out = cli("cassettes", "import", "evil.tar.gz", "--store", "fresh", cwd=tmp_path)
    assert (
        out.returncode == 1 and out.stderr.startswith("Error: ") and len(out.stderr.strip().splitlines()) == 1
    )
    assert "escapes the archive" in out.stderr and not (tmp_path / "fresh").exists()


def test_cli_training_bundle_replays_in_another_directory(tmp_path: Path) -> None:
    """A whole training (runs, verdicts, proposer cassettes, trees, its git bundle) travels."""
    import yaml

    data = yaml.safe_load((REPO / "configs" / "quickstart.yaml").read_text())
    data.update(store=str(tmp_path / "store"))
    data["harness"]["repo"] = str(tmp_path / "harness")
    data["panel"].update(tasks=[str(REPO / "envs" / "hello-file")], seeds=[0])
    data["env"]["timeout_sec"] = 27
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(data))
    out = cli("train", "cfg.yaml", "--epochs", "2", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    training_id = json.loads(out.stdout)["training_id"]
    out = cli("cassettes", "export", training_id, "-o", "training.tgz", "--store", "store", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    far = tmp_path / "far"
    far.mkdir()
    (far / "training.tgz").write_bytes((tmp_path / "training.tgz").read_bytes())
    out = cli("cassettes", "import", "training.tgz", "--store", "s", cwd=far)
    assert out.returncode == 0, out.stderr
    out = cli("replay", training_id, "--store", "s", "--json", cwd=far)
    assert out.returncode == 0 and json.loads(out.stdout)["identical"], out.stdout + out.stderr


def test_an_export_gets_the_users_file_permissions(recorded: dict[str, Any], tmp_path: Path) -> None:
    """0644 under umask 022, like every other file replaykit writes (mkstemp's 0600 before)."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        out = tmp_path / "run.tar.gz"
        export_bundle(recorded["store"], recorded["run"]["run_id"], out)
        assert stat.S_IMODE(out.stat().st_mode) == 0o644
        os.umask(0o027)
        export_bundle(recorded["store"], recorded["run"]["run_id"], out)  # replacing it: still the umask's
        assert stat.S_IMODE(out.stat().st_mode) == 0o640
    finally:
        os.umask(old)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".run.tar.gz-")]  # no temporary left
