"""core.files.replace_dir: a finished folder put in place in one rename."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replaykit.core.files import replace_dir


def folder(path: Path, text: str) -> Path:
    path.mkdir()
    (path / "f.txt").write_text(text)
    return path


def test_a_new_folder_replaces_the_old_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = folder(tmp_path / "job", "old")
    (target / "only-old.txt").write_text("x")
    assert replace_dir(folder(tmp_path / ".tmp", "new"), target)
    assert sorted(p.name for p in target.iterdir()) == ["f.txt"]
    assert (target / "f.txt").read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["job"]


def test_another_writers_folder_that_lands_first_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = folder(tmp_path / "job", "old")
    real = os.replace

    def racing(src: str | Path, dst: str | Path) -> None:
        real(src, dst)
        if Path(src) == target:  # the old one went aside: another writer's lands now
            folder(target, "theirs")

    monkeypatch.setattr(os, "replace", racing)
    assert not replace_dir(folder(tmp_path / ".tmp", "ours"), target)
    assert (target / "f.txt").read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["job"]
