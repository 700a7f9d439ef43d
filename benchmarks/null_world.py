"""The world of ``null_trainings.py``: its tasks, its harness, its proposals, its configs.

- **tasks**: eight one-step tasks (write one word to ``answer.txt``), each graded by a bash
  verifier. One step each keeps an episode to two model calls, one command and one grade.
- **harness**: the quickstart's tool loop, its system prompt ending with the sentences of the
  ``note_*.txt`` files beside it (none at first). It never nudges a failed command to be retried.
- **null proposals**: epoch ``j``'s adds ``note_j.txt``, one sentence. The request bytes change
  (the task model, ``reference-noisy``, samples anew), what the harness does does not: a
  change that does nothing, as a reworded prompt is to a real model. Each is a file of its
  own, so every one applies to every baseline.
- **the real improvement**: after a failed command the harness asks the model to retry. With
  ``reference-noisy`` a nudged retry is right with probability 0.35 (up to 4 attempts), so a
  task's solve probability ``p`` becomes about ``p + 0.725 (1 - p)``.
"""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path
from typing import Any

WORDS = ("amber", "birch", "cobalt", "dune", "ember", "fjord", "garnet", "harbor")

TASK_TOML = """version = "2.0"

[verifier]
timeout_sec = 30.0

[agent]
timeout_sec = 60.0

[environment]
workdir = "/app"
allow_internet = false
"""

VERIFIER = """#!/usr/bin/env bash
APP_DIR="${{APP_DIR:-/app}}"
LOGS_DIR="${{LOGS_DIR:-/logs}}"
mkdir -p "$LOGS_DIR/verifier"
if [ "$(cat "$APP_DIR/answer.txt" 2>/dev/null)" = "{word}" ]; then
  echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
"""

HARNESS = '''"""The null-trainings benchmark harness: the quickstart loop, its prompt ending with its notes."""

import json
from pathlib import Path

NOTES = [p.read_text().strip() for p in sorted(Path(__file__).parent.glob("note_*.txt"))]

SYSTEM_PROMPT = " ".join(
    [
        "You are a shell agent. Solve the task with the bash tool, one command at a time.",
        "When the task is complete, reply with the single word Done.",
    ]
    + NOTES
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run one bash command in the task's working directory.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]


def observe(obs):
    return f"exit_code: {obs.exit_code}\\nstdout:\\n{obs.stdout}\\nstderr:\\n{obs.stderr}"


def solve(task, env, llm, ctx):
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task.instruction},
    ]
    for _ in range(int(ctx.params.get("max_steps", 10))):
        reply = llm.chat.completions.create(messages=messages, tools=TOOLS, **ctx.llm_kwargs())
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in message.tool_calls
        ]
        messages.append({"role": "assistant", "content": message.content or "", "tool_calls": calls})
        for call in message.tool_calls:
            obs = env.run(json.loads(call.function.arguments).get("command", ""))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": observe(obs)})
    return None
'''

NOTE_SENTENCES = (
    "Keep each command short.",
    "Work in the current directory.",
    "Prefer standard shell tools.",
    "Read the task before acting.",
)


def make_tasks(folder: Path) -> list[Path]:
    """The eight tasks under ``folder`` (written once)."""
    out = []
    for i, word in enumerate(WORDS):
        task = folder / f"null-{i}-{word}"
        out.append(task)
        if (task / "tests" / "test.sh").exists():
            continue
        (task / "solution").mkdir(parents=True, exist_ok=True)
        (task / "tests").mkdir(parents=True, exist_ok=True)
        (task / "environment").mkdir(parents=True, exist_ok=True)
        (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
        (task / "task.toml").write_text(TASK_TOML)
        (task / "instruction.md").write_text(
            f"# Answer {word}\n\nWrite the single word `{word}` to the file `answer.txt` in the working directory.\n"
        )
        (task / "solution" / "solve.sh").write_text(f"#!/usr/bin/env bash\necho {word} > answer.txt\n")
        (task / "tests" / "test.sh").write_text(VERIFIER.format(word=word))
    return out


def make_template(folder: Path) -> Path:
    """The harness template folder (``harness.py``, no notes)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "harness.py").write_text(HARNESS)
    return folder


def null_diff(epoch: int) -> str:
    """Add ``note_<epoch>.txt``: the requests change, the behaviour does not."""
    sentence = NOTE_SENTENCES[epoch % len(NOTE_SENTENCES)]
    name = f"note_{epoch:02d}.txt"
    return (
        f"diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/{name}\n"
        f"@@ -0,0 +1 @@\n+{sentence}\n"
    )


def real_diff() -> str:
    """After a failed command, ask the model to retry (the simulator's retry convention)."""
    old = HARNESS.splitlines(keepends=True)
    at = next(i for i, t in enumerate(old) if 'messages.append({"role": "tool"' in t)
    indent = old[at][: len(old[at]) - len(old[at].lstrip())]
    nudge = [
        f"{indent}if obs.exit_code != 0:\n",
        f'{indent}    messages.append({{"role": "user", "content": "That failed; please retry."}})\n',
    ]
    new = old[: at + 1] + nudge + old[at + 1 :]
    body = "".join(difflib.unified_diff(old, new, "a/harness.py", "b/harness.py"))
    return "diff --git a/harness.py b/harness.py\n" + body


def config(
    root: Path,
    store: Path,
    repo: Path,
    tasks: list[Path],
    seeds: list[int] | dict[str, Any],
    epochs: int,
    diffs: list[str],
    criterion: dict[str, Any],
    budget: float | None,
) -> dict[str, Any]:
    """The run config of one training (as a mapping: ``RunConfig.model_validate``)."""
    train: dict[str, Any] = {
        "epochs": epochs,
        "seed": 0,
        "patch_surface": ["harness.py", "note_*.txt"],
        "estimator": {"kind": "patch_queue", "diffs": diffs},
        "criterion": criterion,
        "optimizer": {"name": "greedy_monotonic"},
    }
    if budget is not None:
        train["error_budget"] = budget
    return {
        "name": "null-trainings",
        "store": str(store),
        "harness": {
            "repo": str(repo),
            "template": None,
            "branch": "main",
            "entry": "harness.py",
            "params": {"max_steps": 6},
        },
        "model": {"name": "reference-noisy", "base_url": "builtin", "temperature": 0.0},
        "panel": {"tasks": [str(t) for t in tasks], "seeds": seeds},
        "env": {"kind": "local", "timeout_sec": 30},
        "executor": {"workers": 1},
        "train": train,
    }


def fresh_repo(template_repo: Path, dest: Path) -> Path:
    """A copy of the materialised template repo (the same initial SHA for every training)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(template_repo, dest)
    return dest
