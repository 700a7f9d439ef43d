"""The simulator's mistakes: a step's command corrupted so that it fails, as a careless model's would.

``corrupt_command`` is what :class:`simulator.TaskModel` runs on a step drawn wrong; the kinds of
mistake and their exit codes are in its docstring (and ``README.md``).
"""

from __future__ import annotations

import random
import re

_WORD_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.+-]*)(?=\s|$|;)")
_SHELL_KEYWORDS = frozenset(
    {"if", "for", "while", "until", "case", "select", "function", "time", "do", "then"}
)
_REAL_COMMANDS = frozenset({"cpp", "ssh", "sl", "dc", "cc", "ed", "ex", "gcc", "ld", "as"})
_MISSING_DIR = "./solution-work"


def corrupt_command(command: str, rng: random.Random) -> str:
    """A realistic mistake that makes the command fail with a non-zero exit.

    The RNG picks one of the mistakes that apply to the command:

    * ``typo`` (weight 2): two letters of the command name swapped, or the last
      letter doubled in a short name ⇒ ``command not found``, exit 127. Only for
      a plain first word with no ``;``, ``|``, ``||`` or ``&`` after it (those
      would hide the failure) and when the typo is not itself a real program;
    * ``unclosed-quote``: the closing quote of the last quoted string dropped ⇒
      bash syntax error, exit 2, nothing runs;
    * ``wrong-dir``: ``cd ./solution-work && ...`` first, a directory that does
      not exist ⇒ exit 1 (a complex command is grouped in ``{ ...; }``).
    """
    operators, last_close = _scan(command)
    kinds = ["wrong-dir"]
    match = _WORD_RE.match(command)
    word = match.group(1) if match else ""
    typo = _typo(word, rng) if word else word
    if word not in _SHELL_KEYWORDS and operators <= {"&&"} and typo not in _REAL_COMMANDS | {word}:
        kinds += ["typo", "typo"]
    if last_close is not None:
        kinds.append("unclosed-quote")
    kind = kinds[rng.randrange(len(kinds))]
    if kind == "typo":
        return typo + command[len(word) :]
    if kind == "unclosed-quote" and last_close is not None:
        return command[:last_close] + command[last_close + 1 :]
    if operators <= {"&&", "|"}:
        return f"cd {_MISSING_DIR} && {command}"
    return f"cd {_MISSING_DIR} && {{ {command}; }}"


def _scan(command: str) -> tuple[set[str], int | None]:
    """Unquoted control operators of a one-line command, and where its last quoted string closes."""
    operators: set[str] = set()
    last_close: int | None = None
    quote: str | None = None
    i = 0
    while i < len(command):
        ch = command[i]
        if quote is not None:  # inside '...' only ' ends it; inside "..." a backslash escapes
            if ch == quote:
                quote, last_close = None, i
            elif ch == "\\" and quote == '"':
                i += 1
        elif ch == "\\":
            i += 1
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or command[i - 1].isspace()):
            break
        else:
            operator, width = _operator(command, i)
            if operator:
                operators.add(operator)
            i += width - 1
        i += 1
    return operators, last_close


def _operator(command: str, i: int) -> tuple[str | None, int]:
    """The control operator starting at ``command[i]`` (unquoted) and its width; None, 1 for
    another character (``&>`` and ``>&`` are redirections)."""
    ch = command[i]
    nxt = command[i + 1] if i + 1 < len(command) else ""
    if ch == ";":
        return ";", 1
    if ch == "|":
        return ("||", 2) if nxt == "|" else ("|", 1)
    if ch == "&":
        if nxt == "&":
            return "&&", 2
        if nxt != ">" and (i == 0 or command[i - 1] not in "<>"):
            return "&", 1
    return None, 1


def _typo(word: str, rng: random.Random) -> str:
    """Swap two adjacent letters after the first; double the last letter of short names."""
    swaps = [i for i in range(1, len(word) - 1) if word[i] != word[i + 1] and word[i].isalpha()]
    if len(word) >= 3 and swaps:
        i = swaps[rng.randrange(len(swaps))]
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    return word + word[-1]
