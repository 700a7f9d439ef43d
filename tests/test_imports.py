"""The import-cycle and layer check (scripts/check_imports.py) that the test command runs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "check_imports.py"
spec = importlib.util.spec_from_file_location("check_imports", SCRIPT)
assert spec and spec.loader
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)


def test_finds_cycles_and_layer_violations_in_a_made_up_graph() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert check.cycles(edges) == [["a", "b", "c"]]
    assert check.cycles({"a": {"b"}, "b": set()}) == []
    assert check.layer_violations({"replaykit.models.codex": {"replaykit.train.backends"}}) == [
        "replaykit.models.codex imports replaykit.train.backends (a layer above replaykit.models)"
    ]


def test_lazy_imports_count_and_type_checking_ones_do_not(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from replaykit.train import trainer\n"
        "def f():\n    from replaykit.episodes.rollout import record_episode\n    import replaykit.cassette.store\n"
    )
    modules = {
        "replaykit.train.trainer",
        "replaykit.episodes.rollout",
        "replaykit.cassette.store",
        "replaykit.cassette",
    }
    assert check.imports_of(mod, "replaykit.m", modules) == {
        "replaykit.episodes.rollout",
        "replaykit.cassette.store",
    }


def test_the_package_has_no_cycle_and_respects_its_layers() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_a_deprecated_alias_may_import_only_its_target_and_nobody_imports_it() -> None:
    alias = {"replaykit.cassette.tape": {"replaykit.capture.tape", "replaykit.core.deprecation"}}
    assert check.layer_violations(alias) == []  # cassette may not import capture, but the alias may
    assert check.layer_violations(
        {"replaykit.cassette.tape": {"replaykit.capture.tape", "replaykit.train.loss"}}
    ) == ["replaykit.cassette.tape (a deprecated alias) imports more than replaykit.capture.tape"]
    assert check.layer_violations({**alias, "replaykit.episodes.rollout": {"replaykit.cassette.tape"}}) == [
        "replaykit.episodes.rollout import(s) the deprecated alias replaykit.cassette.tape; use replaykit.capture.tape"
    ]
