"""The reference proposer: a simulated proposer model with a fixed curriculum.

Model name ``reference-proposer``. It reads a training brief (the harness files
between ``=== FILE ===`` / ``=== end FILE ===`` markers and the ids of proposals
already tried, written ``[id]``) and proposes the first curriculum change that
applies to the current source and was not tried yet, as a one-line description
plus a unified diff in a fenced ``diff`` block. Some changes help (retry after a
failed command), some hurt or change nothing, some are malformed on purpose (a
broken import, an edit outside the patch surface) — so a quickstart training shows
accepted, rejected and skipped candidates. Deterministic: a pure function of the brief.

Given a workspace (``train/workspace_tree.render_workspace``: the transcripts of the baseline's
failed episodes and the prior candidates, quoted after the brief) it reads that too: the prior
candidates' proposals count as tried, and the retry change is proposed only when a failed
transcript shows a command that failed (the evidence the change answers).

It reads the harness it is given, not a script: a change whose behaviour the harness
already has (a retry after a failed command, written any way) is not proposed again, and
a harness that is not the quickstart's shape (none of the lines its changes edit) gets
no diff but one line saying so and naming the estimators that can train it (``FOREIGN``).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from replaykit.models.reference.protocol import AssistantTurn, ChatRequest, message_text

PROPOSER_MODEL = "reference-proposer"
ENTRY = "harness.py"

_TOOL_LINE = '            messages.append({"role": "tool", "tool_call_id": call.id, "content": format_observation(obs)})\n'
_DONE_LINE = '    "When the task is complete, reply with the single word Done."\n'
_LOOP = 'int(ctx.params.get("max_steps", 10))'
_FORMAT = '    return f"exit_code: {obs.exit_code}\\nstdout:\\n{obs.stdout}\\nstderr:\\n{obs.stderr}"\n'


@dataclass(frozen=True)
class Change:
    id: str
    description: str
    path: str
    search: str  # "" with path != ENTRY: create the file with `replace`
    replace: str
    present: str = ""  # a regex: the harness already behaves so (however it is written)

    def has(self, source: str) -> bool:
        return self.replace in source or bool(self.present and re.search(self.present, source, re.I))


#: the reply when the harness is not the quickstart's shape: no diff, and what to use instead
#: (docs/training.md: a real model, Codex or a patch queue); the epoch's line in `train` says it
FOREIGN = (
    "No proposal: the built-in proposer knows only the quickstart harness's edits; "
    "configure a model proposer: docs/training.md"
)


CURRICULUM: tuple[Change, ...] = (
    Change(
        "retry-nudge",
        "After a failed command, tell the model it failed and ask it to retry.",
        ENTRY,
        _TOOL_LINE,
        _TOOL_LINE
        + "            if obs.exit_code != 0:\n"
        + '                messages.append({"role": "user", "content": f"The command failed (exit code {obs.exit_code}). Fix it and retry."})\n',
        present=r"exit_code\s*(?:!=|>)\s*0|\bretry\b",
    ),
    Change(
        "verbose-prompt",
        "Ask the model to double-check every command in the system prompt.",
        ENTRY,
        _DONE_LINE,
        '    "Think carefully about each command before you run it and double-check every path. "\n'
        + _DONE_LINE,
        present=r"double[- ]check",
    ),
    Change(
        "step-cap",
        "Cap the tool loop at 3 steps to save tokens.",
        ENTRY,
        _LOOP,
        f"min(3, {_LOOP})",
        present=r"min\(\s*\d+\s*,\s*int\(ctx\.params",
    ),
    Change(
        "helper-module",
        "Move observation formatting into a helper module.",
        ENTRY,
        "import json\n",
        "import json\n\nimport harness_helpers  # noqa: F401\n",
        present=r"^\s*(?:import|from)\s+harness_helpers\b",
    ),
    Change(
        "stderr-first",
        "Show stderr before stdout in observations.",
        ENTRY,
        _FORMAT,
        '    return f"exit_code: {obs.exit_code}\\nstderr:\\n{obs.stderr}\\nstdout:\\n{obs.stdout}"\n',
    ),
    Change(
        "notes-file",
        "Keep a NOTES.md of harness decisions next to the harness.",
        "NOTES.md",
        "",
        "# Harness notes\n\nRetry after failures.\n",
    ),
)

_FILE_RE = re.compile(r"^=== (?P<path>\S+) ===\n(?P<body>.*?)^=== end (?P=path) ===$", re.S | re.M)
_TRIED_RE = re.compile(r"\[([a-z0-9-]+)\]")


_WS_RE = re.compile(
    r"^--- workspace: (?P<path>\S+) ---\n(?P<body>.*?)^--- end workspace: (?P=path) ---$", re.S | re.M
)
_EXIT_RE = re.compile(r"^exit (-?\d+)", re.M)


def workspace_quotes(brief: str) -> dict[str, str] | None:
    """The workspace files a request quotes (path → text); None: it quotes no workspace."""
    if "\n--- workspace: " not in brief:
        return None
    return {m.group("path"): m.group("body") for m in _WS_RE.finditer(brief)}


def failed_commands(quoted: dict[str, str]) -> int:
    """How many commands the failed transcripts show exiting non-zero."""
    return sum(
        int(code) != 0
        for path, text in quoted.items()
        if path.startswith("episodes/failed/")
        for code in _EXIT_RE.findall(text)
    )


def parse_files(brief: str) -> dict[str, str]:
    return {m.group("path"): m.group("body") for m in _FILE_RE.finditer(brief)}


def tried_ids(brief: str) -> set[str]:
    section = (
        brief.split("Previously tried proposals:", 1)[1] if "Previously tried proposals:" in brief else ""
    )
    section = section.split("\n\n", 1)[0]
    return set(_TRIED_RE.findall(section))


def unified_diff(path: str, old: str | None, new: str) -> str:
    if old is None:
        lines = new.splitlines(keepends=True)
        body = "".join("+" + line for line in lines)
        return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"
    diff = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(diff)


def quickstart_shaped(source: str) -> bool:
    """Whether ``harness.py``'s source has the lines the curriculum edits (the quickstart's shape)."""
    return any(c.search and c.path == ENTRY and (c.search in source or c.has(source)) for c in CURRICULUM)


def next_change(brief: str) -> tuple[Change, str] | None:
    """The first curriculum change not yet tried that applies and that the harness does not
    already have; with its diff."""
    files = parse_files(brief)
    tried = tried_ids(brief)
    quoted = workspace_quotes(brief)
    if quoted is not None:  # the workspace's prior candidates were tried too
        tried |= {i for p, t in quoted.items() if p.startswith("candidates/") for i in _TRIED_RE.findall(t)}
    for change in CURRICULUM:
        if change.id in tried:
            continue
        if change.id == "retry-nudge" and quoted is not None and not failed_commands(quoted):
            continue  # no transcript shows a failed command: nothing for a retry to answer
        if change.search == "":
            if change.path not in files:
                return change, unified_diff(change.path, None, change.replace)
            continue
        source = files.get(change.path)
        if source is None or source.count(change.search) != 1 or change.has(source):
            continue  # does not apply, or the harness has it already
        return change, unified_diff(change.path, source, source.replace(change.search, change.replace))
    return None


def propose_edit(source: str, brief: str) -> tuple[str, str] | None:
    """For agents that edit files themselves: (new source of harness.py, description); None
    when no change fits (``quickstart_shaped`` tells why)."""
    found = next_change(brief)
    if found is None or found[0].path != ENTRY or not found[0].search:
        return None
    change, _ = found
    return source.replace(change.search, change.replace), f"[{change.id}] {change.description}"


def proposer_turn(request: ChatRequest) -> AssistantTurn:
    brief = "\n".join(message_text(m) for m in request.messages if m.get("role") == "user")
    if not quickstart_shaped(parse_files(brief).get(ENTRY, "")):
        return AssistantTurn(content=FOREIGN)
    found = next_change(brief)
    if found is None:
        return AssistantTurn(
            content="No further proposals: every curriculum change was tried or does not apply."
        )
    change, diff = found
    return AssistantTurn(content=f"[{change.id}] {change.description}\n\n```diff\n{diff}```\n")
