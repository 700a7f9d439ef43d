"""Harness trees: the files of a harness commit stored as blobs plus a manifest, so
replay needs no git repository; materialised under ``cache/trees/<sha>`` (or a
temporary folder for a read-only store). Every read of a manifest checks that its paths stay
inside the tree (``integrity.tree_manifest``): a planted ``..`` or absolute entry is store
corruption, never written."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from replaykit.cassette.integrity import safe_path, tree_manifest
from replaykit.cassette.store.blobs import BlobsMixin
from replaykit.core.determinism import canonical_json, sha256_hex
from replaykit.core.errors import CassetteNotFound, HarnessError, StoreCorrupt
from replaykit.core.files import replace_dir
from replaykit.core.tree_digest import task_tree_problem

if TYPE_CHECKING:
    from replaykit.cassette.codec import Blobs


class TreesMixin(BlobsMixin):
    """The ``trees`` table and the materialised-tree cache."""

    def put_tree(self, sha: str, files: dict[str, tuple[int, bytes]]) -> None:
        """Store the files of a harness commit so replay needs no git repository (leased
        first inside ``leasing()``, so ``gc`` cannot take it before a document names it)."""
        self.lease("trees", [sha])
        if self.has_tree(sha):
            return
        self.writable()
        from replaykit.cassette.codec import put  # the episode codec: loaded for a write

        blobs: Blobs = {}
        manifest = {path: [mode, put(blobs, data)] for path, (mode, data) in sorted(files.items())}
        with self.write_lock():
            self._write_blobs(blobs)
            self.driver.insert(
                "trees", [{"sha": sha, "manifest": canonical_json(manifest)}], conflict="replace"
            )
            self._lease_rows("trees", [sha])

    def has_tree(self, sha: str) -> bool:
        return bool(self.driver.select("trees", ["sha"], {"sha": sha}, limit=1))

    def _tree_manifest(self, sha: str) -> dict[str, tuple[int, str]]:
        rows = self.driver.select("trees", ["manifest"], {"sha": sha}, limit=1)
        if not rows:
            raise CassetteNotFound(
                f"harness tree {sha[:12]} is not in store {self.location}; record a run of it first"
            )
        try:  # checked on every read: a planted path never reaches a materialisation
            return tree_manifest(str(rows[0]["manifest"]))
        except ValueError as exc:
            raise self.corrupt(str(exc), f"harness tree {sha[:12]}") from None

    def get_tree(self, sha: str) -> dict[str, tuple[int, bytes]]:
        """A tree's files, every blob verified; a task folder's tree (``core.tree_digest``) also
        against the content digest its name says."""
        try:
            manifest = self._tree_manifest(sha)
            blobs = self.get_blobs(h for _, h in manifest.values())  # one query for the whole tree
            files = {p: (m, blobs[h]) for p, (m, h) in manifest.items()}
        except StoreCorrupt as exc:
            raise exc.within(f"harness tree {sha[:12]}", self.location) from None
        problem = task_tree_problem(sha, files)
        if problem is not None:
            raise self.corrupt(problem)
        return files

    def _cache_ok(self, target: Path, sha: str) -> bool:
        """A materialised tree is used only while every file still matches the stored manifest."""
        if not (target / ".complete").exists():
            return False
        try:
            return all(
                sha256_hex((target / p).read_bytes()) == h for p, (_, h) in self._tree_manifest(sha).items()
            )
        except OSError:
            return False

    def materialise_tree(self, sha: str, files: dict[str, tuple[int, bytes]] | None = None) -> Path:
        """Write a stored harness tree under ``cache/trees/<sha>`` (atomically) and return it.

        A read-only store writes it in a temporary folder instead (removed by ``close``);
        ``files`` stands in for a tree the store does not hold (e.g. ``replay --harness REF``)."""
        if files is not None and not self.has_tree(sha):
            target = self._scratch_dir() / sha
            if not (target / ".complete").exists():
                self._write_tree(target, sha, files)
            return target
        target = self._scratch_dir() / sha if self.readonly else self.root / "cache" / "trees" / sha
        if not self._cache_ok(target, sha):
            self._write_tree(target, sha, self.get_tree(sha))
        return target

    def _scratch_dir(self) -> Path:
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="replaykit-trees-"))
            atexit.register(shutil.rmtree, self._scratch, True)
        return self._scratch

    @staticmethod
    def _write_tree(target: Path, sha: str, files: dict[str, tuple[int, bytes]]) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}-", dir=target.parent))
        for path, (mode, data) in files.items():
            if not safe_path(path):  # a stored tree is checked on read; a tree from git here
                shutil.rmtree(tmp, ignore_errors=True)
                raise HarnessError(
                    f"harness tree {sha[:12]} names an unsafe file path {path[:80]!r}; refusing"
                )
            dest = tmp / path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            os.chmod(dest, 0o755 if mode & 0o111 else 0o644)
        (tmp / ".complete").write_text(sha)
        if _holds(target, files):  # another process wrote it meanwhile and may be reading it now
            shutil.rmtree(tmp, ignore_errors=True)
            return
        replace_dir(tmp, target)  # a stale copy goes aside in one rename, never emptied in place


def _holds(target: Path, files: dict[str, tuple[int, bytes]]) -> bool:
    """Whether a materialised tree is complete and holds exactly these bytes."""
    if not (target / ".complete").exists():
        return False
    try:
        return all((target / p).read_bytes() == data for p, (_, data) in files.items())
    except OSError:
        return False
