"""The named-agent registry and its plumbing: ``harness.agent`` validated with the config, the
agent's template materialised as its harness repo (the same SHA everywhere), its program required
with its install line, its name and version kept in each episode's meta, and a reuse or replay
under another installed version said in one line."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from replaykit.agents.base import NamedAgent, Requirement
from replaykit.agents.registry import AGENTS, get_agent, register_agent
from replaykit.cassette.store import Store
from replaykit.core.errors import ConfigError, HarnessError
from replaykit.episodes.compare import compare
from replaykit.episodes.config import load_config
from replaykit.episodes.config_paths import TEMPLATES
from replaykit.episodes.replay import replay_run
from replaykit.episodes.run import measure
from replaykit.testing import project_root, write_config

pytestmark = pytest.mark.e2e  # measures and replays in-process with the reference server


@pytest.fixture
def tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A registered agent ``test-agent`` (the quickstart harness as its template) whose program
    ``test-agent-cli`` lives in a folder on ``$REPLAYKIT_AGENTS_PATH``, printing its version."""
    bin_dir = tmp_path / "agents-bin"
    bin_dir.mkdir()
    monkeypatch.setenv("REPLAYKIT_AGENTS_PATH", str(bin_dir))
    register_agent(
        NamedAgent(
            name="test-agent",
            template=TEMPLATES / "quickstart",
            description="the quickstart harness as a named agent",
            requires=Requirement(program="test-agent-cli", install="pip install test-agent-cli==1.2.3"),
        )
    )
    yield bin_dir / "test-agent-cli"
    AGENTS.unregister("test-agent")


def install(program: Path, version: str) -> None:
    program.write_text(f"#!/bin/sh\necho 'test-agent-cli {version}'\n")
    program.chmod(0o755)


def config_of(tmp: Path, **overrides: object) -> Path:
    return write_config(
        tmp,
        {"panel.tasks": [str(project_root() / "envs" / "hello-file")], "panel.seeds": [0], **overrides},
    )


def test_an_unknown_agent_is_one_line_listing_the_registered_names(tool: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(config_of(tmp_path, **{"harness.agent": "no-such-agent"}))
    line = str(err.value)
    assert "\n" not in line and "harness.agent" in line
    assert "unknown agent 'no-such-agent'; known: " in line and "test-agent" in line
    assert not (tmp_path / "store").exists() and not (tmp_path / ".replaykit").exists()


def test_a_missing_program_is_one_line_with_its_install_command_and_nothing_is_made(
    tool: Path, tmp_path: Path
) -> None:
    config = load_config(config_of(tmp_path, **{"harness.agent": "test-agent"}))
    with pytest.raises(HarnessError) as err:
        measure(config)
    assert str(err.value) == (
        "agent 'test-agent' needs the program 'test-agent-cli', not found on $REPLAYKIT_AGENTS_PATH "
        "or PATH; install it: pip install test-agent-cli==1.2.3"
    )
    assert not (tmp_path / ".replaykit").exists()


def test_the_agent_template_is_its_harness_repo_with_the_same_sha_everywhere(
    tool: Path, tmp_path: Path
) -> None:
    install(tool, "1.2.3")
    shas = []
    for where in ("a", "b"):
        folder = tmp_path / where
        folder.mkdir()
        config = load_config(config_of(folder, **{"harness.agent": "test-agent"}))
        assert config.repo_path == folder / ".replaykit" / "agents" / get_agent("test-agent").repo_name()
        result = measure(config)
        shas.append(result.run.harness_sha)
        assert result.to_json()["agent"] == {"name": "test-agent", "version": "1.2.3"}
        episode = Store(folder / "store").get_episode(result.run.cassettes[0])
        assert episode.meta["agent"] == {"name": "test-agent", "version": "1.2.3"}
    assert shas[0] == shas[1]


def test_a_changed_template_is_a_new_repo_never_the_old_one_under_its_name(
    tool: Path, tmp_path: Path
) -> None:
    """A replaykit whose shipped template changed (an upgrade) runs the new files, at a new SHA."""
    install(tool, "1.2.3")
    first = measure(load_config(config_of(tmp_path, **{"harness.agent": "test-agent"}))).run
    template = tmp_path / "upgraded"
    shutil.copytree(TEMPLATES / "quickstart", template)
    (template / "harness.py").write_text((template / "harness.py").read_text() + "# upgraded\n")
    register_agent(replace(get_agent("test-agent"), template=template))
    config = load_config(config_of(tmp_path, **{"harness.agent": "test-agent"}))
    second = measure(config).run
    assert config.repo_path.name.startswith("test-agent-") and second.harness_repo != first.harness_repo
    assert second.harness_sha != first.harness_sha
    assert (Path(second.harness_repo) / "harness.py").read_text().endswith("# upgraded\n")


def test_reuse_and_replay_under_another_version_say_so(
    tool: Path, tmp_path: Path, recwarn: pytest.WarningsRecorder
) -> None:
    install(tool, "1.2.3")
    config = load_config(config_of(tmp_path, **{"harness.agent": "test-agent"}))
    first = measure(config)
    assert not [w for w in recwarn if "version" in str(w.message)]  # the same version: no note
    install(tool, "1.3.0")
    notes: list[str] = []
    again = measure(config, progress=lambda event, data: notes.append(str(data.get("message", ""))))
    assert again.reused == first.run.cassettes
    assert [n for n in notes if "agent" in n] == [
        "reused 1 episode(s) of agent 'test-agent' recorded under version 1.2.3 (1); installed here: 1.3.0"
    ]
    report = replay_run(Store(tmp_path / "store"), first.run.run_id)
    assert report["identical"]
    assert report.get("agent_note") == (
        "replayed 1 episode(s) of agent 'test-agent' recorded under version 1.2.3 (1); installed here: 1.3.0"
    )
    install(tool, "1.2.3")
    assert "agent_note" not in replay_run(Store(tmp_path / "store"), first.run.run_id)


def test_register_and_look_up(tool: Path) -> None:
    assert get_agent("test-agent").requires is not None
    assert "test-agent" in AGENTS.names()
    assert os.environ["REPLAYKIT_AGENTS_PATH"]


def test_a_pinned_version_is_refused_otherwise_and_an_agents_rules_join_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "agents-bin"
    bin_dir.mkdir()
    monkeypatch.setenv("REPLAYKIT_AGENTS_PATH", str(bin_dir))
    requires = Requirement(
        program="test-agent-cli", install="pip install test-agent-cli==1.2.3", exact="1.2.3"
    )
    register_agent(
        NamedAgent("pinned-agent", TEMPLATES / "quickstart", "pinned", requires=requires, rules=("uuids",))
    )
    try:
        install(bin_dir / "test-agent-cli", "1.3.0")
        config = load_config(
            config_of(tmp_path, **{"harness.agent": "pinned-agent", "record.rules": ["timestamps"]})
        )
        assert config.record.rules == ["timestamps", "uuids"]
        with pytest.raises(HarnessError) as err:
            measure(config)
        assert str(err.value) == (
            f"agent 'pinned-agent' drives test-agent-cli 1.2.3 (what its recordings hold); "
            f"{bin_dir / 'test-agent-cli'} is 1.3.0; install 1.2.3: pip install test-agent-cli==1.2.3"
        )
        assert not (tmp_path / ".replaykit").exists() and not (tmp_path / "store").exists()
        install(bin_dir / "test-agent-cli", "1.2.3")
        assert measure(config).to_json()["agent"] == {"name": "pinned-agent", "version": "1.2.3"}
    finally:
        AGENTS.unregister("pinned-agent")


def test_compare_measures_a_named_agent_as_a_harness(tool: Path, tmp_path: Path) -> None:
    install(tool, "1.2.3")
    template = tmp_path / "template"  # the quickstart harness, one comment apart: another SHA
    shutil.copytree(TEMPLATES / "quickstart", template)
    (template / "harness.py").write_text((template / "harness.py").read_text() + "# the agent's own\n")
    register_agent(replace(get_agent("test-agent"), template=template))
    config = load_config(config_of(tmp_path))
    with pytest.raises(ConfigError) as err:
        compare(config, ["reference-weak"], ["base=main", "agent:no-such-agent"])
    assert "--harness 'agent:no-such-agent': field 'harness.agent': unknown agent 'no-such-agent'" in str(
        err.value
    )
    assert not (tmp_path / "store").exists()  # refused before any cell
    report = compare(config, ["reference-weak"], ["base=main", "mine=agent:test-agent"])
    assert [c["harness"] for c in report.cells] == ["base", "mine"]
    store = Store(tmp_path / "store")
    mine = store.get_run(report.cells[1]["run_id"])
    assert mine.harness_repo == str(tmp_path / ".replaykit" / "agents" / get_agent("test-agent").repo_name())
    assert store.get_episode(mine.cassettes[0]).meta["agent"] == {"name": "test-agent", "version": "1.2.3"}
    base = store.get_run(report.cells[0]["run_id"])
    assert "agent" not in store.get_episode(base.cassettes[0]).meta
