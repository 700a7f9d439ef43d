"""CodexAgentBackend: ``codex exec`` recorded through the proxy, replayed offline with the same edits."""

from __future__ import annotations

import os
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from replaykit.capture.tape import Tape
from replaykit.cassette.events import Episode
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.store import Store
from replaykit.core.errors import DivergenceError, ModelError
from replaykit.models import codex as codex_module
from replaykit.models.codex import CODEX_RULES, INSTALL_HINT, CodexAgentBackend, config_toml
from replaykit.models.reference import server as server_module
from replaykit.models.reference.proposer import propose_edit
from replaykit.models.reference.protocol import AssistantTurn, ChatRequest
from replaykit.train.backends import AgentBackend

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


REPO = Path(__file__).resolve().parents[2]
HELLO = REPO / "envs" / "hello-file"
HARNESS = "import json\n\n\ndef solve(task, env, llm, ctx):\n    steps = 10\n    return steps\n"


@pytest.fixture()
def codex_cli() -> str:
    """The Codex CLI; CI installs it (scripts/setup-codex.sh). Skipped only with REPLAYKIT_ALLOW_CODEX_SKIP=1, never under CI."""
    found = shutil.which(os.environ.get("REPLAYKIT_CODEX_BIN", "codex"))
    if found is None:
        if os.environ.get("REPLAYKIT_ALLOW_CODEX_SKIP") == "1" and not os.environ.get("CI"):
            pytest.skip("the Codex CLI is not installed")
        pytest.fail(f"the Codex CLI is not installed; run `bash scripts/setup-codex.sh` ({INSTALL_HINT})")
    return found


class StubProposer:
    def __call__(self, request: ChatRequest) -> AssistantTurn:
        return AssistantTurn(content="unused")

    def propose_edit(self, source: str, brief: str) -> tuple[str, str] | None:
        return source.replace("steps = 10", "steps = 3"), "[step-cap] Cap the loop at 3 steps."


@pytest.fixture()
def stub_proposer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = server_module.build_models
    monkeypatch.setattr(
        server_module, "build_models", lambda tasks: {**real(tasks), "stub-proposer": StubProposer()}
    )
    yield


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def through_store(tmp_path: Path, tape: Tape, name: str) -> Episode:
    """Write the recorded tape as a cassette and read it back (the store's codec and digest apply)."""
    store = Store(tmp_path / "store")
    key = CassetteKey("", name, "", ModelId("reference-oracle", "builtin"), 0, "", kind="codex")
    store.put_episode(Episode(key, list(tape.events), {"rules": list(CODEX_RULES)}))
    return store.get_episode(key.id)


def test_missing_cli_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REPLAYKIT_CODEX_BIN", "codex-not-installed-here")
    with pytest.raises(ModelError) as info:
        CodexAgentBackend(model="reference-oracle").run_task(tmp_path, "anything", Tape("x", recorded=[]))
    assert INSTALL_HINT in str(info.value) and "\n" not in str(info.value)


def test_the_backend_fits_the_protocol_and_writes_a_valid_config() -> None:
    backend = CodexAgentBackend(model="reference-proposer", base_url="builtin")
    assert isinstance(backend, AgentBackend) and backend.kind == "codex"
    config = tomllib.loads(
        config_toml("m", "http://127.0.0.1:5/v1", "workspace-write", 1000, {"model_reasoning_effort": "low"})
    )
    provider = config["model_providers"][codex_module.PROVIDER_ID]
    assert config["model_provider"] == codex_module.PROVIDER_ID and config["approval_policy"] == "never"
    assert provider["wire_api"] == "responses" and provider["base_url"] == "http://127.0.0.1:5/v1"
    assert provider["request_max_retries"] == 0 and provider["env_key"] == codex_module.KEY_ENV
    env = codex_module.codex_environment(Path("/tmp/h"))
    assert env["CODEX_HOME"] == "/tmp/h" and env["TZ"] == "UTC" and "OPENAI_API_KEY" not in env


@pytest.mark.codex
def test_codex_exec_task_records_and_replays_offline(codex_cli: str, tmp_path: Path) -> None:
    instruction = (HELLO / "instruction.md").read_text()
    backend = CodexAgentBackend(
        model="reference-oracle", base_url="builtin", trace_dir=tmp_path / "traces", turn_timeout_sec=120
    )
    recorded_dir, replay_dir = tmp_path / "recorded", tmp_path / "replayed"
    recorded_dir.mkdir()
    replay_dir.mkdir()
    tape = Tape("codex-hello")
    run = backend.run_task(
        recorded_dir, instruction, tape
    )  # the builtin reference server is stopped on return
    assert (recorded_dir / "greeting" / "hello.txt").read_text() == "Hello, replaykit!\n"
    assert run.final_message.startswith("Done.") and run.trace_path is not None and run.trace_path.is_file()
    assert len(tape.llm_events) == len(tape.events) >= 3
    assert all(e.path == "/v1/responses" for e in tape.llm_events)
    episode = through_store(tmp_path, tape, "hello-file")
    replay = Tape("codex-hello", recorded=list(episode.events))
    again = backend.run_task(replay_dir, instruction, replay)
    assert replay.divergence is None and replay.cursor == len(episode.events)
    assert replay.digest == episode.digest == tape.digest
    assert tree(replay_dir) == tree(recorded_dir) and again.final_message == run.final_message


@pytest.mark.codex
def test_a_replay_that_differs_reports_the_divergence(codex_cli: str, tmp_path: Path) -> None:
    backend = CodexAgentBackend(model="reference-oracle", base_url="builtin", turn_timeout_sec=120)
    tape = Tape("codex-div")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    backend.run_task(tmp_path / "a", (HELLO / "instruction.md").read_text(), tape)
    with pytest.raises(DivergenceError) as info:
        backend.run_task(
            tmp_path / "b", "Write a poem about cassettes.", Tape("codex-div", recorded=list(tape.events))
        )
    report = info.value.report
    assert report["position"] == 0 and any("poem" in line for line in report["diff"])


@pytest.mark.codex
def test_codex_as_proposer_edits_the_harness_and_replays(
    codex_cli: str, stub_proposer: None, tmp_path: Path
) -> None:
    backend = CodexAgentBackend(model="stub-proposer", base_url="builtin", turn_timeout_sec=120)
    brief = "Propose one change to harness.py that should solve more tasks. Edit the file in place."
    work, again = tmp_path / "work", tmp_path / "again"
    for d in (work, again):
        d.mkdir()
        (d / "harness.py").write_text(HARNESS)
    tape = Tape("proposer")
    with backend.session(tape, seed=0) as session:
        summary = backend.propose(work, brief, session)
    assert summary == "[step-cap] Cap the loop at 3 steps."
    assert (work / "harness.py").read_text() == HARNESS.replace("steps = 10", "steps = 3")
    replay = Tape("proposer", recorded=list(tape.events))
    with backend.session(replay, seed=0) as session:
        assert session.base_url.endswith(":9/v1")  # offline: nothing listens there
        assert backend.propose(again, brief, session) == summary
    assert tree(again) == tree(work) and replay.digest == tape.digest


@pytest.mark.codex
def test_codex_with_the_reference_proposer(codex_cli: str, tmp_path: Path) -> None:
    source = (REPO / "replaykit" / "templates" / "quickstart" / "harness.py").read_text()
    brief = f"Improve the harness.\n\n=== harness.py ===\n{source}=== end harness.py ===\n\nPreviously tried proposals: none\n"
    expected = propose_edit(source, brief)
    assert expected is not None, "the reference proposer proposes a change to the quickstart template"
    (tmp_path / "harness.py").write_text(source)
    backend = CodexAgentBackend(model="reference-proposer", base_url="builtin", turn_timeout_sec=120)
    with backend.session(Tape("ref-proposer")) as session:
        summary = backend.propose(tmp_path, brief, session)
    assert summary == expected[1]
    assert (tmp_path / "harness.py").read_text().rstrip("\n") == expected[0].rstrip("\n")
