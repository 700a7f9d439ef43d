"""The Codex CLI as the policy of an episode (``replaykit run CONFIG --agent codex``).

``codex exec`` gets the task's instruction; its own shell, exec and patch tools are off, and its
one way to act is the ``run`` tool of replaykit's MCP server, which runs a command in the task's
environment (a recorded env step). Its Responses calls go through the episode's client (recorded
``llm`` events). This file is the agent's harness repository: what is here (the prompt, the
Codex settings, the Codex version it drives) is part of every cassette key of a run of it; the
mechanics are ``replaykit/agents/codex/driver.py``.

``harness.params``: ``timeout_sec`` (Codex's whole run, 1800), ``reasoning_effort`` (Codex's
``model_reasoning_effort``, unset by default).
"""

from typing import Any

from replaykit.agents.codex.driver import run_codex

CODEX_VERSION = "0.171.0"  # the Codex CLI this harness drives: part of its SHA, so of every key

PROMPT = """{instruction}

You work in the task's environment through the `run` tool (MCP server `replaykit`): it runs one
bash command there, in its working directory, and returns the exit code, stdout and stderr. It is
the only way to look at or change the task's files; your own folder is an empty scratch folder.
When the task is done, say so in one short message."""


def solve(task: Any, env: Any, llm: Any, ctx: Any) -> str:
    settings: dict[str, object] = {}
    if ctx.params.get("reasoning_effort"):
        settings["model_reasoning_effort"] = str(ctx.params["reasoning_effort"])
    return run_codex(
        PROMPT.format(instruction=task.instruction),
        env,
        llm,
        model=ctx.model,
        seed_parts=(ctx.task_id, ctx.seed),
        codex_version=CODEX_VERSION,
        timeout_s=float(ctx.params.get("timeout_sec", 1800)),
        config=settings,
    )
