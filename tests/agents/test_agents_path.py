"""Where an agent's program is looked up: ``$REPLAYKIT_AGENTS_PATH``, and when that is unset the
folder ``scripts/setup-agents.sh`` links programs into (so a machine that ran it finds them
without an export, as ``replaykit reproduce`` of a bundle with an agent's runs needs), then PATH."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.agents.base import Requirement, default_agents_path


def program(folder: Path, name: str = "some-agent-cli") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\necho 'some-agent-cli 1.0'\n")
    path.chmod(0o755)
    return path


def test_unset_it_is_the_folder_setup_agents_links_into(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REPLAYKIT_AGENTS_PATH", raising=False)
    monkeypatch.setenv("REPLAYKIT_AGENTS_HOME", str(tmp_path / "agents"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert default_agents_path() == tmp_path / "agents" / "bin"
    need = Requirement(program="some-agent-cli", install="pip install some-agent-cli")
    assert need.find() is None
    installed = program(tmp_path / "agents" / "bin")
    assert need.find() == installed
    monkeypatch.delenv("REPLAYKIT_AGENTS_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_agents_path() == tmp_path / "home" / ".cache" / "replaykit" / "agents" / "bin"


def test_set_it_is_the_only_folder_searched_before_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program(tmp_path / "agents" / "bin")
    monkeypatch.setenv("REPLAYKIT_AGENTS_HOME", str(tmp_path / "agents"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    need = Requirement(program="some-agent-cli", install="pip install some-agent-cli")
    monkeypatch.setenv("REPLAYKIT_AGENTS_PATH", str(tmp_path / "empty"))
    assert need.find() is None  # an explicit folder (here: nothing in it) replaces the default
    mine = program(tmp_path / "mine")
    monkeypatch.setenv("REPLAYKIT_AGENTS_PATH", str(tmp_path / "mine"))
    assert need.find() == mine
