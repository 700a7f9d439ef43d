"""The import-cycle and layer check (scripts/check_imports.py) that the test command runs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_type_only_imports_are_kept_apart_and_a_loop_through_them_is_reported(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from replaykit.train import trainer\n    import replaykit.cassette.store\n"
        "else:\n    from replaykit.episodes.rollout import record_episode\n"
    )
    modules = {
        "replaykit.train.trainer",
        "replaykit.episodes.rollout",
        "replaykit.cassette.store",
        "replaykit.m",
    }
    assert check.type_imports_of(mod, "replaykit.m", modules) == {
        "replaykit.train.trainer",
        "replaykit.cassette.store",
    }
    assert check.imports_of(mod, "replaykit.m", modules) == {"replaykit.episodes.rollout"}
    runtime = {"a": {"b"}, "b": set(), "c": {"d"}, "d": {"c"}}
    typed = {"b": {"a"}}
    assert check.type_only_loops(runtime, typed) == [
        "type-only import loop among 2 modules: a -> b; b -> a (type-only)"
    ]  # c <-> d is a runtime cycle, reported as such, not here
    assert check.type_only_loops({"a": {"b"}}, {}) == []


def test_a_pending_loop_is_a_note_until_it_is_gone_then_its_entry_must_go() -> None:
    line = "type-only import loop among 2 modules: replaykit.x.a -> replaykit.x.b; replaykit.x.b -> replaykit.x.a (type-only)"
    assert check.pending_loops([line], {"replaykit.x": "owner"}) == ([], [f"pending, owner: {line}"])
    assert check.pending_loops([line], {"replaykit.y": "owner"})[0][0] == line
    problems, _ = check.pending_loops([], {"replaykit.x": "owner"})
    assert problems == [
        "the type-only loop in replaykit.x is gone: remove it from PENDING_LOOPS in scripts/check_imports.py"
    ]


def test_every_module_is_on_one_part_and_only_allowed_arrows_run_between_parts() -> None:
    parts = {
        "Core": ["replaykit/core/"],
        "Models": ["replaykit/models/"],
        "EnvCore": ["replaykit/envs/base.py"],
    }
    nevers = [("Core", "Models", "core imports nothing above it")]
    runtime = {
        "replaykit.core.errors": {"replaykit.models.codex"},
        "replaykit.models.codex": {"replaykit.core.errors", "replaykit.envs.base"},
        "replaykit.envs.base": set(),
        "replaykit.envs.other": set(),
    }
    problems, notes = check.part_violations(runtime, {}, parts, nevers, pending={})
    assert problems == [
        'replaykit.envs.other is on no part of layers-whiteboard.json: name it in exactly one part\'s "is"',
        (
            "replaykit.models.codex imports replaykit.envs.base: part Models may not import part EnvCore "
            "(MAY in scripts/check_imports.py)"
        ),
        "never Core -> Models (core imports nothing above it): replaykit.core.errors imports replaykit.models.codex",
    ]
    assert notes == []
    # a type-only import is an arrow too; a pending NEVER is a note, and one that holds must leave the list
    typed = {"replaykit.core.errors": {"replaykit.models.codex"}}
    problems, notes = check.part_violations(
        {"replaykit.core.errors": set(), "replaykit.models.codex": set()},
        typed,
        parts,
        nevers,
        pending={("Core", "Models"): "owner"},
    )
    assert problems == [] and notes == [
        (
            "pending, owner: never Core -> Models (core imports nothing above it): "
            "replaykit.core.errors imports (type-only) replaykit.models.codex"
        )
    ]
    problems, _ = check.part_violations({}, {}, parts, nevers, pending={("Core", "Models"): "owner"})
    assert problems == [
        "never Core -> Models holds now: remove it from PENDING_NEVERS in scripts/check_imports.py"
    ]


def test_the_longest_path_has_a_module_so_a_part_may_name_a_folder_beside_its_subfolder() -> None:
    """As the whiteboard is drawn: "envs/" beside "envs/docker/" is the rest of envs/, so a part
    names one folder, not each of its files; two parts naming the same path are both reported."""
    parts = {"EnvCore": ["replaykit/envs/"], "DockerKind": ["replaykit/envs/docker/"]}
    assert check.part_of("replaykit.envs.base", parts) == ["EnvCore"]
    assert check.part_of("replaykit.envs", parts) == ["EnvCore"]
    assert check.part_of("replaykit.envs.docker.network.proxy", parts) == ["DockerKind"]
    assert check.part_of("replaykit.envs.docker", parts) == ["DockerKind"]
    assert check.part_of("replaykit.core.errors", parts) == []
    twice = {**parts, "Local": ["replaykit/envs/local.py"], "Again": ["replaykit/envs/local.py"]}
    assert check.part_of("replaykit.envs.local", twice) == ["Local", "Again"]
    runtime = {"replaykit.envs.docker.env": {"replaykit.envs.base"}, "replaykit.envs.base": set()}
    never = [("EnvCore", "DockerKind", "the env core knows no kind")]
    assert check.part_violations(runtime, {}, parts, never, pending={}) == ([], [])  # DockerKind MAY EnvCore
    reverse = {"replaykit.envs.base": {"replaykit.envs.docker.env"}, "replaykit.envs.docker.env": set()}
    problems, _ = check.part_violations(reverse, {}, parts, never, pending={})
    assert problems == [
        (
            "never EnvCore -> DockerKind (the env core knows no kind): "
            "replaykit.envs.base imports replaykit.envs.docker.env"
        )
    ]


def test_every_part_of_the_whiteboard_stays_drawable() -> None:
    """A part of the whiteboard names at most 16 paths (a folder stands for all below it)."""
    parts, _ = check.whiteboard()
    assert all(1 <= len(paths) <= 16 for paths in parts.values()), {n: len(p) for n, p in parts.items()}


def test_the_checker_reads_the_whiteboard_and_every_never_is_enforced_or_pending() -> None:
    parts, nevers = check.whiteboard()
    assert {"Core", "Cassette", "DockerKind", "Templates"} <= set(parts) == set(check.MAY)
    for a, b, _why in nevers:  # a NEVER is never an allowed arrow
        assert b not in check.MAY[a], (a, b)
    assert set(check.PENDING_NEVERS) <= {(a, b) for a, b, _ in nevers}


def test_an_import_through_a_module_that_only_re_exports_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(check, "ROOT", tmp_path)
    (tmp_path / "replaykit").mkdir()
    (tmp_path / "replaykit" / "defs.py").write_text("class Thing: ...\n")
    (tmp_path / "replaykit" / "hub.py").write_text(
        "from replaykit.defs import Thing\n__all__ = ['Thing']\ndef helper(): ...\n"
    )
    user = tmp_path / "replaykit" / "user.py"
    user.write_text("from replaykit.hub import Thing, helper\nfrom replaykit.defs import Thing as T\n")
    files = {"replaykit.defs": tmp_path / "replaykit/defs.py", "replaykit.hub": tmp_path / "replaykit/hub.py"}
    assert check.reexports(files, [user]) == [
        (
            "replaykit/user.py:1 imports Thing from replaykit.hub, which only re-exports it: "
            "import it from the module that defines it"
        )
    ]
