"""How the proposer's edit is written for a Codex-style client.

An ``apply_patch`` envelope (``*** Begin Patch`` … hunks with three lines of
context … ``*** End Patch``) for the client's ``apply_patch`` tool, or the same
envelope fed to an ``apply_patch`` command through a shell heredoc when the client
offers only a shell tool.
"""

from __future__ import annotations

import difflib


def apply_patch_text(path: str, old: str, new: str) -> str:
    """An ``apply_patch`` envelope turning ``old`` into ``new`` (hunks with 3 lines of context)."""
    new_lines = new.splitlines()
    if not old:
        body = [f"*** Add File: {path}"] + ["+" + line for line in new_lines]
    else:
        old_lines = old.splitlines()
        body = [f"*** Update File: {path}"]
        for group in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_grouped_opcodes(
            3
        ):
            body.append("@@")
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    body += [" " + line for line in old_lines[i1:i2]]
                if tag in ("replace", "delete"):
                    body += ["-" + line for line in old_lines[i1:i2]]
                if tag in ("replace", "insert"):
                    body += ["+" + line for line in new_lines[j1:j2]]
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"]) + "\n"


def shell_heredoc(command: str, text: str) -> str:
    """``command <<'EOF_PATCH'`` … with a delimiter that is not a line of ``text``."""
    delim = "EOF_PATCH"
    while delim in text.splitlines():
        delim += "_"
    return f"{command} <<'{delim}'\n{text.rstrip(chr(10))}\n{delim}"
