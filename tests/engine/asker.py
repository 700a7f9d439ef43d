"""A harness that asks the model once, with the bash tool, and never acts: a real model's
commands are never run on the host (the identity tests use the local env kind)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replaykit.testing.llama_server import LlamaServer

HARNESS = """\
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "Run one bash command.",
          "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                         "required": ["command"]}}}]


def solve(task, env, llm, ctx):
    reply = llm.chat.completions.create(
        messages=[{"role": "user", "content": task.instruction}], tools=TOOLS, **ctx.llm_kwargs()
    )
    message = reply.choices[0].message
    calls = message.tool_calls or []
    return calls[0].function.arguments if calls else message.content  # never run
"""
#: one forced bash call of at most 24 tokens (llama-cpp-python uses tools only when tool_choice is sent)
PARAMS = {"max_tokens": 24, "tool_choice": {"type": "function", "function": {"name": "bash"}}}


def asker_repo(path: Path) -> Path:
    """A git repo at ``path`` whose main branch holds the asking harness."""
    path.mkdir(parents=True)
    (path / "harness.py").write_text(HARNESS)
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "harness.py"], ["commit", "-q", "-m", "asker"]):
        subprocess.run(["git", *args], cwd=path, check=True, env={**env, "PATH": "/usr/bin:/bin"})
    return path


def asker_config(
    engine_config: Callable[..., Path], tmp_path: Path, tasks: list[str], **values: Any
) -> Callable[[LlamaServer], Path]:
    """``make(server)``: a config on ``server`` running the asking harness on ``tasks`` × seed 0."""
    from replaykit.testing import REPO_ROOT

    repo = asker_repo(tmp_path / "asker")

    def make(server: LlamaServer) -> Path:
        overrides = {
            "harness.repo": str(repo),
            "panel.tasks": [str(REPO_ROOT / "envs" / t) for t in tasks],
            "panel.seeds": [0],
            "model.params": PARAMS,
            **values,
        }
        config: Path = engine_config(server, overrides)
        return config

    return make
