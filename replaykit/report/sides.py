"""Two episodes' transcripts side by side, aligned at their first difference: the turns
they share once, then each side's turns from there paired in order while their kinds agree, then call with
call, step with step, grade with grade (difflib over the turns' kinds), each pair's lines
diffed in full, so every hunk shows, not only the first.

    doc = transcripts_side_by_side(a, b, first=6, cap=4000)
    doc["shared"]  # the turns before event 6: identical in both, shown once
    doc["pairs"]   # [{"a": {"position": 6, "title": "call 4 · …", …} | None, "b": …, "same": False, "rows": […]}]
    doc["hunks"]   # how many pairs differ

A turn is shown as ``cassettes show --transcript`` reads it: a call's new messages and its
reply (the history it re-sends folded), a step's command and output, an error, the grade.
"""

from __future__ import annotations

import difflib

from replaykit.cassette.events import Episode
from replaykit.report.documents import SideRow, SidesDoc, Turn, TurnLines, TurnPair
from replaykit.report.transcript import message_lines, transcript


def turn_lines(turn: Turn) -> TurnLines:
    """One turn as a title and plain text lines."""
    if turn["kind"] == "call":
        title = f"call {turn['call']} · {turn['method']} {turn['path']} → {turn['status']}"
        lines = [line for m in turn["new"] for line in message_lines(m)]
        if turn["error"]:
            lines.append(f"error: {turn['error']}")
        lines += [line for m in turn["reply"] for line in message_lines(m)]
    elif turn["kind"] == "env":
        title = f"step · exit {turn['exit_code']}" + (" · timed out" if turn["timed_out"] else "")
        title += f" · state {turn['state_digest'][:12]}"
        lines = [f"$ {line}" for line in turn["action"].splitlines() or [""]]
        lines += [f"stdout| {line}" for line in turn["stdout"].splitlines()]
        lines += [f"stderr| {line}" for line in turn["stderr"].splitlines()]
    elif turn["kind"] == "error":
        title, lines = "harness error", turn["message"].splitlines()
    else:
        verdict = "INFRA FAILURE" if turn.get("infra_failure") else ("PASS" if turn["passed"] else "FAIL")
        title, lines = f"grade · {verdict} · reward {turn['reward']}", (turn.get("detail") or "").splitlines()
    return {"position": turn["position"], "kind": turn["kind"], "title": title, "lines": lines}


def _rows(a: list[str], b: list[str]) -> list[SideRow]:
    """Every line of both sides, paired where they agree and marked where they do not."""
    rows: list[SideRow] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        left, right = a[i1:i2], b[j1:j2]
        for n in range(max(len(left), len(right))):
            rows.append(
                {
                    "tag": tag,
                    "a": left[n] if n < len(left) else None,
                    "b": right[n] if n < len(right) else None,
                }
            )
    return rows


def _pair(a: TurnLines | None, b: TurnLines | None) -> TurnPair:
    same = a is not None and b is not None and (a["title"], a["lines"]) == (b["title"], b["lines"])
    return {"a": a, "b": b, "same": same, "rows": _rows(a["lines"] if a else [], b["lines"] if b else [])}


def _aligned(a: list[TurnLines], b: list[TurnLines]) -> list[tuple[TurnLines | None, TurnLines | None]]:
    """Turns paired in order while their kinds agree (the first difference is the first pair);
    from where they do not, by difflib over the kinds: a grade meets the other side's grade."""
    n = 0
    while n < min(len(a), len(b)) and a[n]["kind"] == b[n]["kind"]:
        n += 1
    pairs: list[tuple[TurnLines | None, TurnLines | None]] = list(zip(a[:n], b[:n], strict=True))
    a, b = a[n:], b[n:]
    kinds = difflib.SequenceMatcher(None, [t["kind"] for t in a], [t["kind"] for t in b], autojunk=False)
    for _, i1, i2, j1, j2 in kinds.get_opcodes():  # equal and replace blocks pair in order, the rest alone
        for k in range(max(i2 - i1, j2 - j1)):
            pairs.append((a[i1 + k] if i1 + k < i2 else None, b[j1 + k] if j1 + k < j2 else None))
    return pairs


def transcripts_side_by_side(a: Episode, b: Episode, first: int, cap: int | None) -> SidesDoc:
    """``a`` and ``b`` as transcripts (each text cut to ``cap`` bytes; None: in full), the turns
    before event ``first`` (their first difference) once, the rest paired (``_aligned``)."""
    ta = [turn_lines(t) for t in transcript(a, cap)]
    tb = [turn_lines(t) for t in transcript(b, cap)]
    shared = [t for t in ta if t["position"] < first]
    rest_a, rest_b = [t for t in ta if t["position"] >= first], [t for t in tb if t["position"] >= first]
    pairs = [_pair(x, y) for x, y in _aligned(rest_a, rest_b)]
    return {"shared": shared, "pairs": pairs, "hunks": sum(not p["same"] for p in pairs)}
