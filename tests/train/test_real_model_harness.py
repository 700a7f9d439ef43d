"""The shell-text harness (replaykit/templates/shell-text) and configs/real-model.yaml's patch
queue, offline: commands taken out of a text reply, every command's output sent back to the model
as the next user message, and each shipped patch applying to the template alone or after any
other (the patch queue applies epoch i's diff to whatever baseline the training has then)."""

from __future__ import annotations

import importlib.util
import itertools
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from replaykit.testing import REPO_ROOT
from replaykit.train.gitops import apply_diff

TEMPLATE = REPO_ROOT / "replaykit" / "templates" / "shell-text" / "harness.py"
PATCHES = sorted((REPO_ROOT / "configs" / "real-model" / "patches").glob("*.diff"))


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("shell_text_harness", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Chat:
    """A stand-in for ``llm``: answers in order, keeps every request's messages."""

    replies: list[str]
    sent: list[list[dict[str, str]]] = field(default_factory=list)

    def create(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        self.sent.append([dict(m) for m in messages])
        text = self.replies[len(self.sent) - 1]
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=text))])


@dataclass
class Env:
    ran: list[str] = field(default_factory=list)

    def run(self, command: str) -> Any:
        self.ran.append(command)
        return SimpleNamespace(exit_code=0, stdout=f"ran {len(self.ran)}: {command}\n", stderr="")


def solve(module: ModuleType, replies: list[str], max_steps: int = 3) -> tuple[Chat, Env, Any]:
    chat, env = Chat(replies), Env()
    llm = SimpleNamespace(chat=SimpleNamespace(completions=chat))
    ctx = SimpleNamespace(params={"max_steps": max_steps}, llm_kwargs=lambda: {"model": "m"})
    result = module.solve(SimpleNamespace(instruction="Create done.txt."), env, llm, ctx)
    return chat, env, result


@pytest.mark.parametrize(
    ("reply", "command"),
    [
        ("```bash\nmkdir -p build\n```\n\nThis creates build.", "mkdir -p build"),
        ("Here:\n```bash\n#!/bin/bash\n# make it\ntouch done.txt\n```", "touch done.txt"),
        ("```bash\necho 42 > answer.txt", "echo 42 > answer.txt"),  # cut by max_tokens
        ("rm junk.txt\nThis deletes it.", "rm junk.txt"),  # no block: the first line
        ("```bash\n# copy notes.txt to backup.txt\n```", ""),  # comments only: no command
    ],
)
def test_a_command_is_taken_out_of_a_text_reply(reply: str, command: str) -> None:
    assert load(TEMPLATE).extract_command(reply) == command


def test_every_output_reaches_the_model_as_the_next_user_message() -> None:
    chat, env, result = solve(load(TEMPLATE), ["```bash\nls\n```", "```bash\ntouch done.txt\n```", "DONE"])
    assert env.ran == ["ls", "touch done.txt"] and result == "DONE"
    assert [m["role"] for m in chat.sent[2]] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert (
        "ran 1: ls" in chat.sent[1][-1]["content"] and "ran 2: touch done.txt" in chat.sent[2][-1]["content"]
    )


def test_a_reply_without_a_command_ends_the_untrained_episode_and_is_asked_again_after_the_patch(
    tmp_path: Path,
) -> None:
    chat, env, _ = solve(load(TEMPLATE), ["```bash\n# create done.txt\n```", "```bash\ntouch done.txt\n```"])
    assert env.ran == [] and len(chat.sent) == 1
    (tmp_path / "harness.py").write_text(TEMPLATE.read_text())
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    apply_diff(tmp_path, (REPO_ROOT / "configs/real-model/patches/03-retry-empty.diff").read_text())
    chat, env, _ = solve(
        load(tmp_path / "harness.py"),
        ["```bash\n# create done.txt\n```", "```bash\ntouch done.txt\n```", "DONE"],
    )
    assert env.ran == ["touch done.txt"] and "no command" in chat.sent[1][-1]["content"]


def test_each_patch_applies_alone_and_after_any_other(tmp_path: Path) -> None:
    assert [p.name for p in PATCHES] == ["01-task-format.diff", "02-truncate.diff", "03-retry-empty.diff"]
    for n, order in enumerate(p for k in (1, 2, 3) for p in itertools.permutations(PATCHES, k)):
        work = tmp_path / str(n)
        work.mkdir()
        (work / "harness.py").write_text(TEMPLATE.read_text())
        subprocess.run(["git", "init", "-q"], cwd=work, check=True)
        for patch in order:
            apply_diff(work, patch.read_text())
        _, env, _ = solve(load(work / "harness.py"), ["```bash\ntouch done.txt\n```", "DONE"])
        assert env.ran == ["touch done.txt"], order
