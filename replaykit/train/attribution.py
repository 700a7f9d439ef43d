"""Verdict attribution: did the candidate's change cause each flip, or did the episodes part first?

For every new solve and regression of a verdict, the baseline's and the candidate's
episode of that task instance are compared event by event: the first position where
their canonical events differ is where they *part*. Both episodes are then replayed
offline (their own harness trees, served from their cassettes) with line coverage on
the harness files (``sys.settrace``, only frames of the tree's files), each line noted
with how many events had been served when it first ran. The *changed lines* are the
candidate's lines a diff of the two trees inserts or replaces, and the baseline's lines
it deletes or replaces; a changed file that is not Python (a prompt, a table) counts as
one changed line, ``file:0``, when the harness opens it (Python's ``open`` audit event).
A flip is

- ``attributed`` when a changed line ran (in the candidate's replay, or a deleted one in
  the baseline's) before the parting event was produced: the change acted first;
- ``incidental`` when none did: the episodes parted before the change ran (noise, or a
  nondeterminism both harnesses share).

Offline and read-only: nothing is recorded, no model is called, the store is unchanged.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar, NotRequired, TypedDict

from replaykit.capture.tape import Tape
from replaykit.cassette.backend import EpisodeStore
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
from replaykit.cassette.facets import ended_by
from replaykit.core.run_doc import RunDoc
from replaykit.core.verdict_doc import VerdictRecord
from replaykit.episodes.rollout import replay_episode

#: changed lines listed per flip, at most
SHOWN_LINES = 20


class Parting(TypedDict):
    """The first event where the baseline's and the candidate's episode differ."""

    position: int
    kind: str  # llm | env | net | error | grade | end
    part: str  # request | response | action | observation | state | message | grade | kind
    baseline: str  # one line of each side
    candidate: str


class Flip(TypedDict):
    unit: str  # task#seed
    movement: str  # new_solve | regression
    baseline_cassette: str
    candidate_cassette: str
    parted: Parting | None
    changed_lines_before: list[str]  # side:file:line of changed lines that ran before the parting
    label: str  # attributed | incidental
    reason: str
    ended_by: NotRequired[str]  # the failing side's episode ended on a call gone wrong (cassette/facets.py)


class Attribution(TypedDict):
    flips: list[Flip]
    attributed: int
    incidental: int
    changed_lines: int  # in the diff of the two harness trees


def _event_line(event: Event | None) -> str:
    if event is None:
        return "(the episode ended)"
    if isinstance(event, LlmEvent):
        return f"llm {event.method} {event.path}"
    if isinstance(event, EnvEvent):
        return f"env $ {event.action[:160]} → exit {event.observation.exit_code}"
    if isinstance(event, NetEvent):
        return f"net {event.method} {event.url[:160]} → {event.status}"
    if isinstance(event, (ErrorEvent, LimitEvent)):
        return f"{event.kind} {event.message[:160]}"
    if isinstance(event, GradeEvent):
        return f"grade reward {event.grade.reward:g} passed {event.grade.passed}"
    return event.kind


def _part(a: Event, b: Event) -> str:
    if a.kind != b.kind:
        return "kind"
    if isinstance(a, LlmEvent) and isinstance(b, LlmEvent):
        return "request" if a.request_form() != b.request_form() else "response"
    if isinstance(a, EnvEvent) and isinstance(b, EnvEvent):
        if a.action != b.action:
            return "action"
        return "observation" if a.observation != b.observation else "state"
    return {"error": "message", "limit": "message", "grade": "grade"}.get(a.kind, "kind")


def parting(baseline: Episode, candidate: Episode) -> Parting | None:
    """Where two episodes part (their canonical event forms; None when identical)."""
    a, b = baseline.events, candidate.events
    for position in range(max(len(a), len(b))):
        ea = a[position] if position < len(a) else None
        eb = b[position] if position < len(b) else None
        if ea is not None and eb is not None and ea.digest_form() == eb.digest_form():
            continue
        present = ea if ea is not None else eb
        return {
            "position": position,
            "kind": present.kind if present is not None else "end",
            "part": _part(ea, eb) if ea is not None and eb is not None else "kind",
            "baseline": _event_line(ea),
            "candidate": _event_line(eb),
        }
    return None


def changed_lines(
    old: dict[str, bytes], new: dict[str, bytes]
) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    """(baseline's deleted/replaced lines, candidate's inserted/replaced lines) per file, 1-based."""
    gone: dict[str, set[int]] = {}
    added: dict[str, set[int]] = {}
    for path in sorted(set(old) | set(new)):
        a = old.get(path, b"").decode("utf-8", "replace").splitlines()
        b = new.get(path, b"").decode("utf-8", "replace").splitlines()
        if a == b:
            continue
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag in ("replace", "delete"):
                gone.setdefault(path, set()).update(range(i1 + 1, i2 + 1))
            if tag in ("replace", "insert"):
                added.setdefault(path, set()).update(range(j1 + 1, j2 + 1))
        if not path.endswith(".py"):  # data: it acts when the harness reads it
            for side, text in ((gone, a), (added, b)):
                if text:
                    side.setdefault(path, set()).add(0)
    return gone, added


_WATCHING: list[Coverage] = []  # the replay under coverage, if any (the audit hook reads it)


def _opened(event: str, args: tuple[Any, ...]) -> None:
    """Python's audit hook: a file of the tree opened counts as its line 0 running."""
    if event == "open" and _WATCHING and isinstance(args[0], str | Path):
        cov = _WATCHING[-1]
        root, name = str(cov.root) + "/", str(args[0])
        if name.startswith(root) and cov.tape is not None:
            cov.first.setdefault((name[len(root) :], 0), len(cov.tape.events))


@dataclass
class Coverage:
    """Lines of a tree's files that ran during one replay, with the events served before each
    (line 0: the file was opened)."""

    root: Path
    first: dict[tuple[str, int], int] = field(default_factory=dict)
    tape: Tape | None = None
    hooked: ClassVar[bool] = False

    def _local(self, rel: str) -> Callable[[FrameType, str, Any], Any]:
        def trace(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "line" and self.tape is not None:
                self.first.setdefault((rel, frame.f_lineno), len(self.tape.events))
            return trace

        return trace

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event != "call":
            return None
        name = frame.f_code.co_filename
        root = str(self.root) + "/"
        if not name.startswith(root):
            return None
        return self._local(name[len(root) :])

    def replay(self, episode: Episode) -> bool:
        """Replay ``episode`` against the tree under coverage; whether it was identical."""

        def watch(tape: Tape) -> None:
            self.tape = tape

        if not Coverage.hooked:  # an audit hook stays for the process: one, reading _WATCHING
            sys.addaudithook(_opened)
            Coverage.hooked = True
        previous = sys.gettrace()
        _WATCHING.append(self)
        sys.settrace(self)
        try:
            result = replay_episode(episode, self.root, on_tape=watch)
        finally:
            sys.settrace(previous)
            _WATCHING.remove(self)
        return result.identical


def _ran_before(cov: Coverage, changed: dict[str, set[int]], position: int, side: str) -> list[str]:
    """Changed lines whose first run came before event ``position`` was produced."""
    return sorted(
        f"{side}:{path}:{line}"
        for (path, line), served in cov.first.items()
        if line in changed.get(path, set()) and served <= position
    )


def _tree(store: EpisodeStore, sha: str) -> dict[str, bytes]:
    return {path: data for path, (_, data) in store.get_tree(sha).items()}


def attribute(
    store: EpisodeStore, baseline: RunDoc, candidate: RunDoc, verdict: VerdictRecord
) -> Attribution:
    """Label every new solve and regression of ``verdict`` (on these two runs) attributed or incidental."""
    gone, added = changed_lines(_tree(store, baseline.harness_sha), _tree(store, candidate.harness_sha))
    roots = (store.materialise_tree(baseline.harness_sha), store.materialise_tree(candidate.harness_sha))
    b_ids = {e.unit: e.cassette_id for e in baseline.episodes}
    c_ids = {e.unit: e.cassette_id for e in candidate.episodes}
    flips: list[Flip] = []
    for movement, units in (("new_solve", verdict["new_solves"]), ("regression", verdict["regressions"])):
        for unit in units:
            flips.append(_flip(store, unit, movement, b_ids[unit], c_ids[unit], roots, gone, added))
    return {
        "flips": flips,
        "attributed": sum(1 for f in flips if f["label"] == "attributed"),
        "incidental": sum(1 for f in flips if f["label"] == "incidental"),
        "changed_lines": sum(len(v) for v in gone.values()) + sum(len(v) for v in added.values()),
    }


def _flip(
    store: EpisodeStore,
    unit: str,
    movement: str,
    b_id: str,
    c_id: str,
    roots: tuple[Path, Path],
    gone: dict[str, set[int]],
    added: dict[str, set[int]],
) -> Flip:
    eb, ec = store.get_episode(b_id), store.get_episode(c_id)
    parted = parting(eb, ec)
    position = parted["position"] if parted else len(ec.events)
    covered = []
    for side, root, episode, changed in (
        ("candidate", roots[1], ec, added),
        ("baseline", roots[0], eb, gone),
    ):
        cov = Coverage(root)
        if changed:
            cov.replay(episode)
        covered += _ran_before(cov, changed, position, side)
    label = "attributed" if covered else "incidental"
    where = f"event {position} ({parted['kind']}: {parted['part']})" if parted else "the end"
    reason = (
        f"changed line(s) {', '.join(covered[:3])} ran before the episodes parted at {where}"
        if covered
        else f"the episodes parted at {where} before any changed line ran"
    )
    flip: Flip = {
        "unit": unit,
        "movement": movement,
        "baseline_cassette": b_id,
        "candidate_cassette": c_id,
        "parted": parted,
        "changed_lines_before": covered[:SHOWN_LINES],
        "label": label,
        "reason": reason,
    }
    ended = ended_by((ec if movement == "regression" else eb).events)  # the side that failed
    if ended:
        flip["ended_by"] = ended
    return flip
