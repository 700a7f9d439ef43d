"""Two episodes aligned call by call and step by step, and the first point where they part.

    doc = diff_cassettes(store, "a2b58aa3", "39825d2c")
    doc["first_difference"]  # {"position", "kind", "part": request|response|action|observation|state|grade|...,
                             #  "unified": [...], "side_by_side": [{"tag", "a", "b"}, ...]}

Typically the baseline and the candidate episode of one task and seed: everything
before the first difference is shared, so that point is what the candidate changed.
"""

from __future__ import annotations

import difflib
import json

from replaykit.cassette.backend import RunStore
from replaykit.cassette.events import (
    EnvEvent,
    Episode,
    ErrorEvent,
    Event,
    GradeEvent,
    LimitEvent,
    LlmEvent,
    NetEvent,
)
from replaykit.cassette.lineage import fork_of
from replaykit.core.glossary import fork_call
from replaykit.report.documents import (
    AlignedRow,
    EpisodeDiff,
    FirstDifference,
    ForkPoint,
    SideRow,
    UnitDiff,
    VerdictDiff,
)
from replaykit.report.transcript import (
    OUTPUT_CAP,
    episode_summary,
    message_lines,
    parse_response,
    request_messages,
)
from replaykit.train.derived import verified_verdict

CONTEXT = 3


def _label(event: Event | None) -> str:
    return "end" if event is None else {"llm": "call", "env": "step"}.get(event.kind, event.kind)


def _request_lines(event: LlmEvent) -> list[str]:
    lines = [f"{event.method} {event.path}"]
    body = event.body if isinstance(event.body, dict) else {}
    for name in sorted(k for k in body if k not in ("messages", "input", "instructions", "tools")):
        lines.append(f"{name}: {json.dumps(body[name], ensure_ascii=False, sort_keys=True)}")
    if "tools" in body:
        lines.append("tools: " + json.dumps(body["tools"], ensure_ascii=False, sort_keys=True))
    for msg in request_messages(event.body):
        lines.extend(message_lines(msg))
    return lines


def _response_lines(event: LlmEvent, raw: bool = False) -> list[str]:
    if raw:
        text = event.content.decode("utf-8", "replace")
        try:
            return json.dumps(json.loads(text), indent=1, ensure_ascii=False, sort_keys=True).splitlines()
        except ValueError:
            return text.splitlines()
    reply = parse_response(event)
    lines = [f"status {reply['status']}" + (f" · error: {reply['error']}" if reply.get("error") else "")]
    for msg in reply["messages"]:
        lines.extend(message_lines(msg))
    return lines


def _obs_lines(event: EnvEvent) -> list[str]:
    obs = event.observation
    lines = [f"exit_code: {obs.exit_code}" + (" (timed out)" if obs.timed_out else "")]
    lines += [f"stdout| {line}" for line in obs.stdout.splitlines()]
    lines += [f"stderr| {line}" for line in obs.stderr.splitlines()]
    return lines


def _part(a: Event | None, b: Event | None) -> tuple[str | None, list[str], list[str]]:
    """Which part of two events differs (None when equal) and the lines to diff."""
    if a is None or b is None or a.kind != b.kind:
        return "kind", _describe(a), _describe(b)
    if isinstance(a, LlmEvent) and isinstance(b, LlmEvent):
        return _llm_part(a, b)
    if isinstance(a, EnvEvent) and isinstance(b, EnvEvent):
        return _env_part(a, b)
    if isinstance(a, (ErrorEvent, LimitEvent)) and isinstance(b, (ErrorEvent, LimitEvent)):
        return (a.kind, [a.message], [b.message]) if a.message != b.message else (None, [], [])
    if isinstance(a, GradeEvent) and isinstance(b, GradeEvent):
        ga, gb = a.grade.to_dict(), b.grade.to_dict()
        return (
            (
                "grade",
                [f"{k}: {v}" for k, v in sorted(ga.items())],
                [f"{k}: {v}" for k, v in sorted(gb.items())],
            )
            if ga != gb
            else (None, [], [])
        )
    return None, [], []


def _llm_part(a: LlmEvent, b: LlmEvent) -> tuple[str | None, list[str], list[str]]:
    """Which part of two model calls differs: the request, else the response."""
    if a.request_form() != b.request_form():
        return "request", _request_lines(a), _request_lines(b)
    if (a.status, a.content, a.chunks) == (b.status, b.content, b.chunks):
        return None, [], []
    la, lb = _response_lines(a), _response_lines(b)
    if la == lb:  # the replies read the same: show the raw bodies (ids, usage, chunking)
        la, lb = (
            [*_response_lines(a, raw=True), f"chunks: {a.chunks}"],
            [*_response_lines(b, raw=True), f"chunks: {b.chunks}"],
        )
    return "response", la, lb


def _env_part(a: EnvEvent, b: EnvEvent) -> tuple[str | None, list[str], list[str]]:
    """Which part of two environment steps differs: the action, the observation, the state."""
    if a.action != b.action:
        return "action", a.action.splitlines(), b.action.splitlines()
    if a.observation != b.observation:
        return "observation", _obs_lines(a), _obs_lines(b)
    if a.state_digest != b.state_digest:
        return "state", [f"state {a.state_digest}"], [f"state {b.state_digest}"]
    return None, [], []


def _describe(event: Event | None) -> list[str]:
    if event is None:
        return ["(the episode has ended)"]
    if isinstance(event, LlmEvent):
        return ["call", *_request_lines(event)]
    if isinstance(event, EnvEvent):
        return ["step", f"$ {event.action}", *_obs_lines(event)]
    if isinstance(event, NetEvent):
        return [
            "fetch",
            f"{event.method} {event.url} → {event.status} ({event.size} bytes, body {event.body[:12]})",
        ]
    if isinstance(event, (ErrorEvent, LimitEvent)):
        return [event.kind, event.message]
    if isinstance(event, GradeEvent):
        return ["grade", json.dumps(event.grade.to_dict(), sort_keys=True)]
    return [repr(event)]


def side_by_side(a: list[str], b: list[str], context: int = CONTEXT) -> list[SideRow]:
    """Rows ``{"tag": equal|replace|delete|insert|skip, "a": line|None, "b": line|None}`` around the changes."""
    rows: list[SideRow] = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        if rows:
            rows.append({"tag": "skip", "a": "…", "b": "…"})
        for tag, i1, i2, j1, j2 in group:
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


def cap_lines(lines: list[str], cap: int | None, cassette_id: str) -> list[str]:
    """At most ``cap`` bytes of ``lines`` (None: all), then how much more there is and how to see it."""
    if cap is None:
        return lines
    used = 0
    for i, line in enumerate(lines):
        used += len(line.encode("utf-8")) + 1
        if used > cap:
            more = sum(len(x.encode("utf-8")) + 1 for x in lines[i:])
            return [*lines[:i], f"… {more} more bytes — `replaykit cassettes show {cassette_id} --full`"]
    return lines


def diff_episodes(
    a: Episode, b: Episode, a_id: str = "", b_id: str = "", cap: int | None = OUTPUT_CAP
) -> EpisodeDiff:
    """Align two episodes event by event (calls with calls, steps with steps) and find where
    they part; the lines shown of each side are cut to ``cap`` bytes (None: in full)."""
    aligned: list[AlignedRow] = []
    first: FirstDifference | None = None
    counters: dict[str, int] = {}
    for position in range(max(len(a.events), len(b.events))):
        ea = a.events[position] if position < len(a.events) else None
        eb = b.events[position] if position < len(b.events) else None
        label = _label(ea if ea is not None else eb)
        counters[label] = counters.get(label, 0) + 1
        part, la, lb = _part(ea, eb)
        row: AlignedRow = {
            "position": position,
            "a": _label(ea),
            "b": _label(eb),
            "index": counters[label],
            "same": part is None,
            "part": part,
        }
        aligned.append(row)
        if part is not None and first is None:
            la, lb = cap_lines(la, cap, a_id or a.id), cap_lines(lb, cap, b_id or b.id)
            first = {
                "position": position,
                "kind": label,
                "index": counters[label],
                "part": part,
                "label": f"{label} {counters[label]}: {part}"
                if part != "kind"
                else f"event {position}: {_label(ea)} vs {_label(eb)}",
                "a_lines": la,
                "b_lines": lb,
                "unified": list(difflib.unified_diff(la, lb, "a", "b", n=CONTEXT, lineterm="")),
                "side_by_side": side_by_side(la, lb),
            }
    return {
        "a": episode_summary(a_id or a.id, a),
        "b": episode_summary(b_id or b.id, b),
        "identical": first is None,
        "shared_prefix": first["position"] if first else len(a.events),
        "first_difference": first,
        "aligned": aligned,
        "grades": [a.grade.to_dict() if a.grade else None, b.grade.to_dict() if b.grade else None],
    }


def fork_point(a: Episode, b: Episode) -> ForkPoint | None:
    """Where ``b`` forked from ``a`` (or ``a`` from ``b``): the event of the fork's first live call."""
    for side, parent, child in (("b", a, b), ("a", b, a)):
        fork = fork_of(child.key)
        if fork is not None and fork[0] == parent.id:
            calls = [i for i, e in enumerate(child.events) if isinstance(e, LlmEvent)]
            position = calls[fork[1]] if 0 <= fork[1] < len(calls) else len(child.events)
            return {
                "fork": side,
                "step": fork[1],
                "at": fork_call(fork[1], len(parent.llm_events)),
                "position": position,
            }
    return None


def diff_cassettes(store: RunStore, a: str, b: str) -> EpisodeDiff:
    """``cassettes diff A B`` (ids or unique prefixes); reads only. A fork and its parent: the fork point too."""
    a_id = store.resolve_id("cassettes", a, what="cassette")
    b_id = store.resolve_id("cassettes", b, what="cassette")
    ea, eb = store.get_episode(a_id), store.get_episode(b_id)
    doc = diff_episodes(ea, eb, a_id, b_id)
    point = fork_point(ea, eb)
    if point is not None:
        doc["fork_point"] = point
    return doc


def diff_verdict(store: RunStore, verdict_id: str, unit: str | None = None) -> VerdictDiff:
    """``cassettes diff VERDICT [--unit TASK#SEED]``: the baseline vs candidate episode of each
    new solve and regression (or of one unit), each with its first difference."""
    from replaykit.core.errors import ReplaykitError

    try:
        kind = store.doc_kind(verdict_id)
    except ReplaykitError:
        kind = "cassette"
    if kind != "verdict":
        raise ReplaykitError(f"{verdict_id!r} is a {kind}: give two cassette ids (A B), or one verdict id")
    doc = verified_verdict(store, verdict_id)  # a forged verdict is store corrupt, never diffed
    v = doc.verdict
    runs: list[dict[str, str]] = []  # unit → cassette id, of the baseline and the candidate run
    for side, run_id in (("baseline", doc.baseline_run), ("candidate", doc.candidate_run)):
        if not run_id:
            raise ReplaykitError(
                f"the {side} of verdict {doc.verdict_id} was not measured (no run is stored): nothing to diff"
            )
        runs.append({e.unit: e.cassette_id for e in store.get_run(run_id).episodes})
    moved = [(u, "new solve") for u in v.get("new_solves") or []] + [
        (u, "regression") for u in v.get("regressions") or []
    ]
    if unit is not None:
        if unit not in runs[0] or unit not in runs[1]:
            known = ", ".join(sorted(set(runs[0]) & set(runs[1]))[:8])
            raise ReplaykitError(
                f"--unit {unit!r} is not in both runs of verdict {doc.verdict_id}; use TASK#SEED, e.g. {known}"
            )
        moved = [(unit, dict(moved).get(unit, "unchanged"))]
    units: list[UnitDiff] = []
    for name, movement in moved:
        a_id, b_id = runs[0][name], runs[1][name]
        diff = diff_episodes(store.get_episode(a_id), store.get_episode(b_id), a_id, b_id)
        diff.pop("aligned")
        units.append({"unit": name, "movement": movement, **diff})
    return {
        "verdict_id": doc.verdict_id,
        "accept": v["accept"],
        "reason": v["reason"],
        "baseline_sha": doc.baseline_sha,
        "candidate_sha": doc.candidate_sha,
        "units": units,
    }
