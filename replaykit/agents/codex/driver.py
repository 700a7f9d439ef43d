"""Run the Codex CLI as an episode's policy, confined to the episode's environment.

``codex exec`` runs on the host in an empty scratch folder with a throwaway ``CODEX_HOME`` whose
``config.toml`` (:func:`config_toml`):

- turns off every tool of Codex's own that acts on the host: ``[features] shell_tool = false``
  and ``unified_exec = false`` (no ``shell`` / ``exec_command`` / ``write_stdin``), and
  ``view_image``, ``multi_agent``, ``goals``; ``shell_snapshot = false`` (no login shell run at
  start); ``sandbox_mode = "read-only"`` (no ``apply_patch`` tool is offered), ``web_search =
  "disabled"``; so what Codex 0.171 offers its model is the MCP resource readers of the one MCP
  server and ``request_user_input`` (Plan mode only), besides that server's tool;
- declares that one MCP server, ``replaykit`` (``python -m replaykit.agents.mcp_exec``) with
  ``default_tools_approval_mode = "approve"`` (under ``approval_policy = "never"`` an MCP call
  is refused otherwise): its ``run(command)`` posts to the bridge, which runs ``env.run``;
- points the one model provider (``wire_api = "responses"``, no retries) at the bridge, which
  sends each request through the episode's ``llm`` client.

So every command is a recorded env step in the task's container, every model call an ``llm``
event of the episode, and a replay needs Codex itself but no network, engine or Docker.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from replaykit.agents.base import AGENTS_PATH_VAR, Requirement
from replaykit.agents.codex.bridge import CodexBridge
from replaykit.agents.mcp_exec import LATE_VAR, SERVER_NAME, TOKEN_VAR, URL_VAR
from replaykit.agents.process import agent_scratch
from replaykit.agents.wire import CodexError, CodexEvent
from replaykit.core.determinism import derive_seed, pinned_environ
from replaykit.core.errors import HarnessError
from replaykit.core.procs import dies_with_parent

CODEX_VERSION = "0.171.0"  # scripts/setup-codex.sh installs it; the template pins the same
INSTALL = f"bash scripts/setup-codex.sh (npm install -g @openai/codex@{CODEX_VERSION})"
REQUIREMENT = Requirement(program="codex", install=INSTALL, exact=CODEX_VERSION)
#: what Codex makes volatile in its requests (ids, dates, paths, wall times): ``capture.matchers``
CODEX_RULES = ("uuids", "timestamps", "codex-session")
PROVIDER_ID = "replaykit"
KEY_ENV = "REPLAYKIT_CODEX_KEY"  # holds the bridge's token: the real key stays with the episode's client
MCP_STARTUP_VAR = "REPLAYKIT_CODEX_MCP_STARTUP_S"
TEMP_PREFIX = "replaykit-codex-agent-"  # the throwaway CODEX_HOME and scratch folder
FEATURES_OFF = ("shell_tool", "unified_exec", "view_image", "multi_agent", "goals", "shell_snapshot")


def codex_binary() -> str:
    """The ``codex`` on ``$REPLAYKIT_AGENTS_PATH`` or PATH; one line with the install command if absent."""
    found = REQUIREMENT.find()
    if found is None:
        raise HarnessError(
            f"the Codex CLI ('codex') is not on ${AGENTS_PATH_VAR} or PATH; install it: {INSTALL}"
        )
    return str(found)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(str(value))  # a TOML basic string is a JSON string


def _table(name: str, values: Mapping[str, object]) -> list[str]:
    return ["", f"[{name}]", *(f"{k} = {_toml(v)}" for k, v in values.items())]


def config_toml(
    model: str, bridge: CodexBridge, tool_timeout_s: float, extra: Mapping[str, object] | None = None
) -> str:
    """The throwaway ``config.toml`` (see the module docstring): ``extra`` adds top-level keys."""
    top = {
        "model": model,
        "model_provider": PROVIDER_ID,
        "approval_policy": "never",
        "sandbox_mode": "read-only",
        "check_for_update_on_startup": False,
        "web_search": "disabled",
        **(extra or {}),
    }
    provider = {
        "name": "replaykit episode",
        "base_url": bridge.base_url,
        "wire_api": "responses",
        "env_key": KEY_ENV,
        "request_max_retries": 0,
        "stream_max_retries": 0,
        "stream_idle_timeout_ms": int(tool_timeout_s * 1000),
    }
    server = {
        "command": sys.executable,
        "args": ["-m", "replaykit.agents.mcp_exec"],
        # Codex hands an MCP server its own few variables and these (a test's late start too)
        "env": {URL_VAR: bridge.exec_url, TOKEN_VAR: bridge.token, **late_start()},
        "default_tools_approval_mode": "approve",
        # Codex waits for it before its first turn (a server it did not wait for once left an
        # episode without its only tool), and fails when it does not answer within the bound
        "startup_timeout_sec": mcp_startup_s(),
        "required": True,
        "tool_timeout_sec": int(tool_timeout_s),
    }
    lines = [f"{k} = {_toml(v)}" for k, v in top.items()]
    lines += _table("features", dict.fromkeys(FEATURES_OFF, False))
    lines += _table(f"model_providers.{PROVIDER_ID}", provider)
    lines += _table(f"mcp_servers.{SERVER_NAME}", server)
    lines += _table("analytics", {"enabled": False})
    return "\n".join(lines) + "\n"


def late_start() -> dict[str, str]:
    """``$REPLAYKIT_MCP_LATE_S`` for the MCP server when set (tests start it late on purpose)."""
    late = os.environ.get(LATE_VAR)
    return {LATE_VAR: late} if late else {}


def mcp_startup_s() -> int:
    """Seconds Codex waits for replaykit's MCP server (``$REPLAYKIT_CODEX_MCP_STARTUP_S``, else 60)."""
    raw = os.environ.get(MCP_STARTUP_VAR, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else 60


def codex_environment(home: Path, token: str) -> dict[str, str]:
    """The parent's environment without credentials, plus the pins, the throwaway homes and the
    bridge's token as the provider's key (the episode's real key stays with its client)."""
    env = pinned_environ(("OPENAI_", "CODEX_", "RUST_LOG"))  # Codex's own variables are set below
    env.update({"CODEX_HOME": str(home), "HOME": str(home.parent), KEY_ENV: token})
    env.update({"NO_COLOR": "1", "SHELL": "/bin/bash"})
    return env


def stable_uuid(*parts: Any) -> str:
    """A fixed installation id per task and seed, so a fresh CODEX_HOME does not invent one."""
    hexa = "".join(f"{derive_seed(*parts, i):08x}" for i in range(4))
    return f"{hexa[:8]}-{hexa[8:12]}-4{hexa[13:16]}-a{hexa[17:20]}-{hexa[20:32]}"


def parse_events(stdout: str) -> list[CodexEvent]:
    """``codex exec --json``'s events (JSON objects, one a line; anything else skipped)."""
    events = []
    for line in stdout.splitlines():
        with contextlib.suppress(ValidationError):
            events.append(CodexEvent.model_validate_json(line))
    return events


def final_message(events: list[CodexEvent]) -> str:
    for event in reversed(events):
        if event.type == "item.completed" and event.item is not None and event.item.type == "agent_message":
            return event.item.text
    return ""


def failure(events: list[CodexEvent], code: int, bridge: str) -> str:
    """One line for a Codex run that failed (its last error event, else its exit code), the
    bridge's address (a port of this run) written ``<bridge>`` so a replay says the same."""
    for event in reversed(events):
        if event.type in ("turn.failed", "error"):
            err = event.error
            message = str(err.message if isinstance(err, CodexError) else event.message)
            line = message.replace(bridge, "<bridge>").splitlines()[0][:300] if message else ""
            return f"codex exec failed (exit {code}): {line}"
    return f"codex exec failed (exit {code})"


class _Process:
    """The Codex process, killed with its process group on stop or exit."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)


def check_version(binary: str, pinned: str) -> None:
    """Codex sends other requests from one version to the next: a harness drives the one it pins."""
    found = REQUIREMENT.version_of(Path(binary))
    if found != pinned:
        raise HarnessError(
            f"this harness drives codex-cli {pinned} (its recordings are of that version's requests); "
            f"{binary} is {found}: install {pinned}: {INSTALL}"
        )


def run_codex(
    prompt: str,
    env: Any,
    llm: Any,
    model: str,
    seed_parts: tuple[Any, ...],
    codex_version: str,
    timeout_s: float = 1800.0,
    config: Mapping[str, object] | None = None,
) -> str:
    """``codex exec`` (of version ``codex_version``) on ``prompt`` with ``env`` as its only
    actuator and ``llm`` as its model; its final message. A limit or a divergence met by the
    bridge is re-raised here."""
    binary = codex_binary()
    check_version(binary, codex_version)
    process = _Process()
    with (
        agent_scratch(TEMP_PREFIX) as tmp,
        CodexBridge(env, llm, process.kill) as bridge,
    ):
        home, scratch = Path(tmp) / "codex-home", Path(tmp) / "work"
        home.mkdir()
        scratch.mkdir()
        (home / "installation_id").write_text(stable_uuid("codex-agent", *seed_parts))
        (home / "config.toml").write_text(config_toml(model, bridge, timeout_s, config))
        argv = [binary, "exec", "--json", "--skip-git-repo-check", "--ephemeral", "--color", "never"]
        argv += ["-C", str(scratch), "-"]
        process.proc = subprocess.Popen(
            argv,
            cwd=scratch,
            env=codex_environment(home, bridge.token),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=dies_with_parent(signal.SIGKILL),  # gone with replaykit, kill -9 included
        )
        bridge.gate.admit(process.proc.pid)  # Codex and its MCP server, while Codex runs
        try:
            stdout, _ = process.proc.communicate(prompt, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.proc.communicate()
            bridge.raise_stop()
            raise HarnessError(f"codex exec did not finish within {timeout_s:g} s") from None
        finally:
            process.kill()
            bridge.gate.end()
        missing = bridge.infra or (
            None
            if process.proc.returncode == 0 or bridge.tools_ready.is_set()
            else f"replaykit's MCP tool server did not answer Codex within {mcp_startup_s()} s"
        )
        if missing is not None:  # an agent without its only tool: infra, never a result
            env.unusable(f"codex: {missing}")
            return ""
        bridge.raise_stop()
        events = parse_events(stdout)
        if process.proc.returncode != 0:
            raise HarnessError(failure(events, process.proc.returncode, bridge.address))
        return final_message(events)
