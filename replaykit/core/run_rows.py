"""A stored run document (kind ``measure``) read for a listing without its pydantic model.

``replaykit runs`` shows, of each run, figures derived from its rows (pass@k, seed disagreement,
paid calls, reused events); building ``RunDoc`` for them would load pydantic and build its models
(about as much CPU as importing typer), so the listing first reads the verified document with
``read_run_rows``. It accepts a document only where ``RunDoc.read`` accepts it as is: every field
``RunDoc`` (and its ``ModelRef``, ``Panel``, ``EpisodeSummary``) declares present when required
and of the JSON type the writer writes, ``solved``/``total`` what the rows give. Whatever it
refuses (a damaged document, or a value pydantic would coerce, ``"1"`` for an int) the listing
reads with ``RunDoc`` after all, so it lists and words every document as ``Store.get_run`` does
(``tests/test_run_rows.py`` holds the shapes here to ``core/run_doc.py``'s fields).

``RunDoc`` stays the one model of the document; ``RunRows`` is what a listing keeps of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:  # what statistics read of a run: a RunDoc or RunRows (typing only)

    class Replicate(Protocol):
        """One (task, seed) row: a run's ``EpisodeSummary``, or a listing's ``SummaryRow``."""

        @property
        def task_id(self) -> str: ...
        @property
        def cassette_id(self) -> str: ...
        @property
        def passed(self) -> bool: ...
        @property
        def infra_failure(self) -> bool: ...

    class Replicates(Protocol):
        """What a run's statistics read of it: a ``RunDoc``, or a listing's ``RunRows``."""

        @property
        def run_id(self) -> str: ...
        @property
        def cassettes(self) -> Sequence[str]: ...
        @property
        def episodes(self) -> Sequence[Replicate]: ...


def _str(v: object) -> bool:
    return isinstance(v, str)


def _int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _bool(v: object) -> bool:
    return isinstance(v, bool)


def _real(v: object) -> bool:
    return isinstance(v, float) or _int(v)


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: v is None or check(v)


def _seed(v: object) -> bool:
    return _int(v) or _str(v)


def _list_of(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: isinstance(v, list) and all(check(x) for x in v)


def _version(v: object) -> bool:
    return _int(v) and v >= 1  # type: ignore[operator]


#: field -> (its check, required), per shape, as ``core/run_doc.py`` declares them
Shape = dict[str, tuple[Callable[[object], bool], bool]]

MODEL_REF: Shape = {"name": (_str, True), "endpoint": (_str, True), "revision": (_str, False)}
PANEL: Shape = {"tasks": (_list_of(_str), False), "seeds": (_list_of(_seed), False)}
EPISODE_SUMMARY: Shape = {
    "task_id": (_str, True),
    "seed": (_seed, True),
    "cassette_id": (_str, False),
    "reward": (_optional(_real), False),
    "passed": (_bool, False),
    "infra_failure": (_bool, False),
    "steps": (_int, False),
    "llm_calls": (_int, False),
    "tokens": (_int, False),
    "digest": (_str, False),
    "reused_events": (_int, False),
    "model_calls": (_optional(_int), False),
}


def _shaped(shape: Shape) -> Callable[[object], bool]:
    return lambda v: isinstance(v, dict) and not _wrong(shape, v)


RUN_DOC: Shape = {
    "version": (_version, False),
    "run_id": (_str, True),
    "kind": (_str, False),
    "name": (_str, False),
    "harness_sha": (_str, True),
    "harness_repo": (_str, False),
    "model": (_shaped(MODEL_REF), True),
    "config_digest": (_str, True),
    "panel": (_shaped(PANEL), False),
    "cassettes": (_list_of(_str), True),
    "episodes": (_list_of(_shaped(EPISODE_SUMMARY)), False),
    "solved": (_int, False),
    "total": (_int, False),
    "reuse_basis": (_str, False),
    "regraded_from": (_str, False),
    "trees": (_list_of(_str), False),
}


def _wrong(shape: Shape, doc: Mapping[str, object]) -> str:
    """The first field of ``doc`` missing or of another type ('' when none)."""
    for name, (check, required) in shape.items():
        if name not in doc:
            if required:
                return f"{name}: missing"
        elif not check(doc[name]):
            return f"{name}: not of its type"
    return ""


@dataclass(frozen=True)
class SummaryRow:
    """What a listing keeps of one (task, seed) row (``EpisodeSummary``'s fields of that name)."""

    task_id: str
    seed: int | str
    cassette_id: str
    reward: float | None
    passed: bool
    infra_failure: bool
    llm_calls: int
    reused_events: int
    model_calls: int | None

    @property
    def unit(self) -> str:
        return f"{self.task_id}#{self.seed}"

    @property
    def paid_calls(self) -> int:
        """As ``EpisodeSummary.paid_calls``: the calls recording it sent to the endpoint."""
        return self.llm_calls if self.model_calls is None else self.model_calls


@dataclass(frozen=True)
class RunRows:
    """What a listing keeps of a run: its id, its cassettes and its rows."""

    run_id: str
    cassettes: list[str]
    episodes: list[SummaryRow]

    @property
    def model_calls(self) -> int:
        return sum(e.paid_calls for e in self.episodes)

    @property
    def reused_events(self) -> int:
        return sum(e.reused_events for e in self.episodes)


def read_run_rows(doc: Mapping[str, object]) -> RunRows:
    """A stored run document's rows; ``ValueError`` where ``RunDoc.read`` would refuse it or
    coerce a value (the module docstring)."""
    bad = _wrong(RUN_DOC, doc)
    if bad:
        raise ValueError(bad)
    rows = cast(list[dict[str, Any]], doc.get("episodes", []))  # checked: RUN_DOC
    episodes = [
        SummaryRow(
            task_id=r["task_id"],
            seed=r["seed"],
            cassette_id=r.get("cassette_id", ""),
            reward=r.get("reward"),
            passed=r.get("passed", False),
            infra_failure=r.get("infra_failure", False),
            llm_calls=r.get("llm_calls", 0),
            reused_events=r.get("reused_events", 0),
            model_calls=r.get("model_calls"),
        )
        for r in rows
    ]
    solved, total = sum(1 for e in episodes if e.passed), len(episodes)
    if doc.get("solved", solved) != solved or doc.get("total", total) != total:
        raise ValueError("its solved/total are not its rows'")
    return RunRows(
        run_id=cast(str, doc["run_id"]), cassettes=cast(list[str], doc["cassettes"]), episodes=episodes
    )


__all__ = ["RunRows", "SummaryRow", "read_run_rows"]
