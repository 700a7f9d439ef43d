"""CodexAgentBackend: the Codex CLI (``codex exec --json``) as an agent backend.

Codex runs in another process, so its model traffic goes through the recording
proxy bound to the session's tape: while recording the proxy forwards to the
session's endpoint; while replaying it serves the tape and nothing touches the
network, so Codex makes the same calls and the same file edits offline.

Each run gets a throwaway ``CODEX_HOME`` whose ``config.toml`` points a model
provider (``wire_api = "responses"``) at the proxy, with no retries (a replay
divergence fails at once), ``approval_policy = "never"`` and a
``workspace-write`` sandbox so Codex edits files in ``workdir`` unattended. The
environment carries the determinism pins and no API key (the proxy holds the
real one). Codex's volatile request content (UUIDs, dates, paths, timings) is
matched through the ``uuids``, ``timestamps`` and ``codex-session`` rules.

Usable as the proposer of an estimator (:meth:`CodexAgentBackend.propose`) and as
a task agent (:meth:`CodexAgentBackend.run_task`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from replaykit.capture.proxy import recording_proxy
from replaykit.capture.tape import Tape
from replaykit.cassette.scrub import Scrubber
from replaykit.core.determinism import derive_seed, pinned_environ
from replaykit.core.errors import ModelError
from replaykit.core.records import JSON
from replaykit.models.endpoint import OFFLINE_BASE_URL
from replaykit.models.session import ProposalSession

INSTALL_HINT = "npm install -g @openai/codex"
CODEX_RULES = ("uuids", "timestamps", "codex-session")
PROVIDER_ID = "replaykit"
KEY_ENV = "REPLAYKIT_CODEX_KEY"
#: what a Codex process must not inherit from replaykit's environment (besides credentials)
CODEX_VARIABLES = ("OPENAI_", "CODEX_", "RUST_LOG")


def codex_binary() -> str:
    """The ``codex`` executable (``$REPLAYKIT_CODEX_BIN`` or ``codex`` on PATH), or one clear error."""
    name = os.environ.get("REPLAYKIT_CODEX_BIN", "codex")
    found = shutil.which(name)
    if found is None:
        raise ModelError(
            f"the Codex CLI ({name!r}) is not installed or not on PATH; install it with `{INSTALL_HINT}`"
        )
    return found


def codex_version(binary: str | None = None) -> str:
    out = subprocess.run([binary or codex_binary(), "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip() or out.stderr.strip()


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(str(value))  # a TOML basic string is a JSON string


def config_toml(
    model: str, base_url: str, sandbox: str, stream_idle_ms: int, extra: Mapping[str, object] | None = None
) -> str:
    """The throwaway ``config.toml``: one provider (the proxy), no retries, no prompts, no updates."""
    top: dict[str, object] = {
        "model": model,
        "model_provider": PROVIDER_ID,
        "approval_policy": "never",
        "sandbox_mode": sandbox,
        "check_for_update_on_startup": False,
        "web_search": "disabled",
        **(extra or {}),
    }
    lines = [f"{k} = {_toml(v)}" for k, v in top.items()]
    provider: dict[str, JSON] = {
        "name": "replaykit proxy",
        "base_url": base_url,
        "wire_api": "responses",
        "env_key": KEY_ENV,
        "request_max_retries": 0,
        "stream_max_retries": 0,
        "stream_idle_timeout_ms": stream_idle_ms,
    }
    lines += ["", f"[model_providers.{PROVIDER_ID}]", *(f"{k} = {_toml(v)}" for k, v in provider.items())]
    lines += ["", "[analytics]", "enabled = false", "", "[sandbox_workspace_write]", "network_access = false"]
    return "\n".join(lines) + "\n"


def codex_environment(home: Path) -> dict[str, str]:
    """The parent's environment without credentials, plus the pins and the throwaway CODEX_HOME."""
    env = pinned_environ(CODEX_VARIABLES)
    env.update({"CODEX_HOME": str(home), KEY_ENV: "replaykit-proxy", "NO_COLOR": "1"})
    return env


def _object(value: JSON | None) -> Mapping[str, JSON]:
    """A JSON object, or ``{}`` for anything else (a missing or malformed field)."""
    return value if isinstance(value, Mapping) else {}


class Folder(Protocol):
    """A proposer's workspace as this backend reads it (``train.workspace_tree.Workspace``)."""

    @property
    def path(self) -> Path: ...


#: where Codex finds the training's workspace, in its working folder (removed after its run)
WORKSPACE_DIR = ".replaykit-workspace"
WORKSPACE_NOTE = (
    f"What happened so far is in ./{WORKSPACE_DIR}/ (read-only; do not edit it; its README.md says what "
    "is where): transcripts of the baseline's failed episodes, every prior candidate's diff and verdict, "
    "per-task scores."
)


@contextlib.contextmanager
def _workspace_copy(source: Path, dest: Path) -> Iterator[None]:
    """``source`` copied to ``dest`` (files 0444, folders 0555) for the block, then removed."""
    shutil.copytree(source, dest)
    for dirpath, _, names in os.walk(dest):
        for name in names:
            os.chmod(os.path.join(dirpath, name), 0o444)
        os.chmod(dirpath, 0o555)
    try:
        yield
    finally:
        for dirpath, _, _ in os.walk(dest):
            os.chmod(dirpath, 0o755)
        shutil.rmtree(dest, ignore_errors=True)


@dataclass
class CodexRun:
    """One ``codex exec`` run: its exit code, its ``--json`` events (JSON objects, read by
    narrowing: Codex's event schema is its own), what it said and changed."""

    exit_code: int
    events: list[Mapping[str, JSON]]
    stderr: str
    trace_path: Path | None = None
    version: str = ""
    file_changes: list[JSON] = field(default_factory=list)  # the ``changes`` of file_change items

    @property
    def final_message(self) -> str:
        for event in reversed(self.events):
            item = _object(event.get("item"))
            if event.get("type") == "item.completed" and item.get("type") == "agent_message":
                return str(item.get("text", ""))
        return ""

    @property
    def error(self) -> str:
        for event in reversed(self.events):
            if event.get("type") in ("turn.failed", "error"):
                err = _object(event.get("error"))
                return str(err.get("message") or event.get("message") or event)
        return self.stderr.strip().splitlines()[-1] if self.stderr.strip() else f"exit code {self.exit_code}"


def parse_events(stdout: str) -> list[Mapping[str, JSON]]:
    events: list[Mapping[str, JSON]] = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                event: JSON = json.loads(line)
                if isinstance(event, Mapping):
                    events.append(event)
    return events


class CodexAgentBackend:
    """The Codex CLI as an :class:`~replaykit.train.backends.AgentBackend` (``kind = "codex"``)."""

    kind = "codex"

    def __init__(
        self,
        model: str = "reference-proposer",
        base_url: str = "builtin",
        trace_dir: Path | str | None = None,
        turn_timeout_sec: float = 600.0,
        sandbox: str = "workspace-write",
        config: Mapping[str, object] | None = None,  # extra config.toml keys (scalars; others as strings)
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.trace_dir = Path(trace_dir) if trace_dir else None
        self.turn_timeout_sec = float(turn_timeout_sec)
        self.sandbox = os.environ.get("REPLAYKIT_CODEX_SANDBOX", sandbox)
        self.config = dict(config or {})
        self._version: str | None = None

    @property
    def version(self) -> str:
        """``codex --version`` (a different CLI version sends different requests: keep it with the run)."""
        if self._version is None:
            self._version = codex_version()
        return self._version

    # -- the AgentBackend protocol --------------------------------------------------
    def propose(
        self, workdir: Path, brief: str, session: ProposalSession, workspace: Folder | None = None
    ) -> str:
        """Let Codex edit ``workdir`` following ``brief``; return its final message. ``workspace``
        (the training's, ``train/workspace.py``): copied read-only to ``WORKSPACE_DIR`` in
        ``workdir`` for the run (a path the same on every machine) and removed before the edit is read."""
        if workspace is None:
            run = self.run(workdir, brief, session)
        else:
            with _workspace_copy(workspace.path, Path(workdir) / WORKSPACE_DIR):
                run = self.run(workdir, f"{brief}\n\n{WORKSPACE_NOTE}", session)
        return run.final_message or "(Codex gave no summary)"

    # -- running -------------------------------------------------------------------
    def run(self, workdir: Path, prompt: str, session: ProposalSession) -> CodexRun:
        """One ``codex exec --json`` in ``workdir`` through the recording proxy bound to ``session.tape``."""
        binary = codex_binary()
        workdir = Path(workdir).resolve()
        rules = tuple(session.rules) + tuple(r for r in CODEX_RULES if r not in session.rules)
        upstream = None if session.replaying else session.base_url
        with tempfile.TemporaryDirectory(prefix="replaykit-codex-") as tmp:
            home = Path(tmp) / "codex-home"
            home.mkdir()
            (home / "installation_id").write_text(_stable_uuid(session.tape.label, session.seed))
            with recording_proxy(
                session.tape, upstream, session.scrubber, rules, api_key=session.api_key
            ) as url:
                idle_ms = int(self.turn_timeout_sec * 1000)
                (home / "config.toml").write_text(
                    config_toml(self.model, url, self.sandbox, idle_ms, self.config)
                )
                code, stdout, stderr = self._exec(binary, workdir, prompt, codex_environment(home))
        if session.tape.divergence is not None:
            raise session.tape.divergence
        events = parse_events(stdout)
        changes: list[JSON] = []
        for event in events:
            item = _object(event.get("item"))
            if event.get("type") == "item.completed" and item.get("type") == "file_change":
                listed = item.get("changes", [])
                changes.extend(listed if isinstance(listed, list) else [])
        run = CodexRun(code, events, stderr, version=self.version, file_changes=changes)
        run.trace_path = self._save_trace(session.tape.label, stdout, stderr)
        if code != 0:
            raise ModelError(f"codex exec failed in {workdir} (exit {code}): {run.error}")
        return run

    def _exec(self, binary: str, workdir: Path, prompt: str, env: dict[str, str]) -> tuple[int, str, str]:
        argv = [
            binary,
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--ephemeral",
            "--color",
            "never",
            "-C",
            str(workdir),
            "-",
        ]
        proc = subprocess.Popen(
            argv,
            cwd=workdir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(prompt, timeout=self.turn_timeout_sec)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise ModelError(
                f"codex exec timed out after {self.turn_timeout_sec:g}s in {workdir}; raise turn_timeout_sec"
            ) from None
        return proc.returncode, stdout, stderr

    def _save_trace(self, label: str, stdout: str, stderr: str) -> Path | None:
        if self.trace_dir is None:
            return None
        self.trace_dir.mkdir(parents=True, exist_ok=True)
        path, n = self.trace_dir / f"{label}.codex.jsonl", 1
        while path.exists():
            path, n = self.trace_dir / f"{label}.{n}.codex.jsonl", n + 1
        path.write_text(stdout)
        path.with_suffix(".stderr.txt").write_text(stderr)
        return path

    # -- as a task agent -------------------------------------------------------------
    @contextlib.contextmanager
    def session(
        self, tape: Tape, seed: int = 0, secrets: dict[str, str] | None = None
    ) -> Iterator[ProposalSession]:
        """A session on ``tape``: the endpoint (``builtin`` starts the reference server) while recording, nothing while replaying."""
        if tape.replaying:
            yield ProposalSession(tape, OFFLINE_BASE_URL, "", seed, Scrubber(secrets), CODEX_RULES)
            return
        from replaykit.models.config import ModelConfig
        from replaykit.models.endpoint import open_endpoint

        with open_endpoint(ModelConfig(name=self.model, base_url=self.base_url)) as endpoint:
            scrubber = Scrubber({**(secrets or {}), "api_key": endpoint.api_key})
            yield ProposalSession(tape, endpoint.base_url, endpoint.api_key, seed, scrubber, CODEX_RULES)

    def run_task(self, workdir: Path, instruction: str, tape: Tape, seed: int = 0) -> CodexRun:
        """Run a task's instruction in ``workdir`` (recording into, or replaying from, ``tape``)."""
        with self.session(tape, seed) as session:
            return self.run(workdir, instruction, session)


def _stable_uuid(*parts: Any) -> str:
    """A fixed installation id per session, so a fresh CODEX_HOME does not invent one."""
    hexa = "".join(f"{derive_seed(*parts, i):08x}" for i in range(4))
    return f"{hexa[:8]}-{hexa[8:12]}-4{hexa[13:16]}-a{hexa[17:20]}-{hexa[20:32]}"
