"""Where an episode's first events came from: a donor's (prefix reuse) or a fork's parent's.

An episode recorded with prefix reuse (``episodes/reuse.py``) or as a fork
(``episodes/fork.py``) keeps the claim ``meta["reused"]`` (``ReusedClaim``): its events
0..k-1 equal cassette ``donor``'s events 0..k-1 — their digest forms, so the requests,
the response bytes, the actions, observations and state digests — ``calls`` of them model
calls answered from the donor instead of the endpoint, and ``digest`` is the sha256 of that
prefix (``events_digest``). A fork also keeps ``meta["fork"]`` and names its parent and
step in its key (``forked_from``, ``fork_step``), so it is a cassette of its own.

Nothing here is trusted: :func:`claim_problems` checks a claim against the episode's own
events and the donor's; every read of a cassette checks it against its own events
(``own_problems``), ``replay``, ``cassettes verify`` and every listing that shows it
against the donor's (:func:`check_claim`), and ``check_run`` a run document's counts
against it. A donor that is not in the store leaves the claim unchecked (said
so, never "ok"); a donor whose events differ, or whose key could not have donated, is
store corruption. Cassettes recorded before claims existed have none and need none.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, Protocol

from replaykit.cassette.events import Episode, Event, LlmEvent, events_digest
from replaykit.cassette.keys import CassetteKey
from replaykit.core.errors import CassetteNotFound, StoreCorrupt
from replaykit.core.meta import ReusedClaim
from replaykit.core.records import JSON


class Episodes(Protocol):
    """What checking a claim reads of a store (``EpisodeStore`` has it)."""

    def get_episode(self, cassette_id: str) -> Episode: ...

    def corrupt(self, what: str, where: str = "") -> StoreCorrupt: ...


#: a fork's key names its parent and step with these extras
FORKED_FROM, FORK_STEP, FORK_MESSAGE = "forked_from", "fork_step", "fork_message"
EXACT, SHARED_SAMPLE = "exact", "shared sample"

ClaimStatus = Literal["none", "checked", "donor absent"]


def prefix_claim(donor: str, events: list[Event], k: int, basis: str) -> ReusedClaim:
    """The claim that ``events[:k]`` came from ``donor``."""
    return {
        "donor": donor,
        "events": k,
        "calls": sum(1 for e in events[:k] if isinstance(e, LlmEvent)),
        "digest": events_digest(events[:k]),
        "basis": basis,
    }


def claim_of(episode: Episode) -> ReusedClaim | None:
    """The episode's claim as recorded (None: it was served nothing)."""
    claim = episode.meta.get("reused")
    return claim if isinstance(claim, dict) else None


def fork_of(key: CassetteKey) -> tuple[str, int] | None:
    """(parent id, step) when the key is a fork's."""
    extra = dict(key.extra)
    if FORKED_FROM not in extra:
        return None
    step = extra.get(FORK_STEP, "")
    return extra[FORKED_FROM], int(step) if step.isdigit() else -1


class ReuseCounts(NamedTuple):
    """What an episode's claim counts: events served from a donor, model calls among them, the basis."""

    events: int = 0
    calls: int = 0
    basis: str = ""


def reused_counts(episode: Episode) -> ReuseCounts:
    """The episode's claim, counted (zeros without one; its consistency is ``own_problems``)."""
    claim = claim_of(episode)
    if claim is None:
        return ReuseCounts()
    return ReuseCounts(int(claim["events"]), int(claim["calls"]), str(claim["basis"]))


def fork_doc(episode: Episode) -> dict[str, JSON]:
    """The ``fork`` document of a fork's cassette (id: the cassette's), derived from its key:
    what keeps the fork, its parent and its harness tree together (bundles, ``gc``, ``runs``)."""
    fork = fork_of(episode.key)
    assert fork is not None
    key = episode.key
    return {
        "kind": "fork",
        "fork_id": key.id,
        "forked_from": fork[0],
        "fork_step": fork[1],
        "task_id": key.task_id,
        "seed": key.seed,
        "harness_sha": key.harness_sha,
        "model": {"name": key.model.name, "endpoint": key.model.endpoint, "revision": key.model.revision},
        "cassettes": [key.id, fork[0]],
        "trees": [key.harness_sha],
    }


def _shape_problem(claim: ReusedClaim) -> str | None:
    if not isinstance(claim.get("donor"), str) or not isinstance(claim.get("digest"), str):
        return "its reuse claim names no donor or digest"
    for name in ("events", "calls"):
        value = claim.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"its reuse claim's {name} is not a count"
    if claim.get("basis") not in (EXACT, SHARED_SAMPLE):
        return f"its reuse claim's basis {claim.get('basis')!r} is neither {EXACT} nor {SHARED_SAMPLE}"
    return None


def own_problems(episode: Episode) -> list[str]:
    """What in the claim disagrees with the episode's own events (empty: consistent)."""
    claim = claim_of(episode)
    if claim is None:
        return []
    shape = _shape_problem(claim)
    if shape:
        return [shape]
    k = claim["events"]
    if not 0 < k <= len(episode.events):
        return [f"it claims {k} reused event(s) of its {len(episode.events)}"]
    expected = prefix_claim(claim["donor"], episode.events, k, claim["basis"])
    return [
        f"its reuse claim's {name} does not match its events 0..{k - 1}"
        for name in ("calls", "digest")
        if claim[name] != expected[name]
    ]


def donor_problems(episode: Episode, donor: Episode) -> list[str]:
    """What makes ``donor`` unable to have served the claim (empty: it could, and did)."""
    claim = claim_of(episode)
    assert claim is not None
    k, problems = claim["events"], []
    if len(donor.events) < k or events_digest(donor.events[:k]) != claim["digest"]:
        problems.append(f"donor {donor.id}'s events 0..{k - 1} differ from the ones it claims")
    fork = fork_of(episode.key)
    mine, theirs = episode.key, donor.key
    if fork is not None:  # a fork names its parent; task, seed and task content are the parent's
        if fork[0] != donor.id or fork[1] != claim["calls"]:
            problems.append(f"its key names parent {fork[0]} at step {fork[1]}, not {donor.id}")
        if (mine.task_id, mine.task_digest, mine.seed) != (theirs.task_id, theirs.task_digest, theirs.seed):
            problems.append(f"parent {donor.id} ran another task or seed")
    elif theirs.harness_sha == mine.harness_sha or _without_sha(theirs) != _without_sha(mine):
        problems.append(
            f"donor {donor.id} is not the same task, seed, model and config under another harness"
        )
    elif _engine(donor) != _engine(episode):
        problems.append(f"donor {donor.id} was recorded under another engine identity")
    return problems


def _engine(episode: Episode) -> object:
    model = episode.meta.get("model")
    return model.get("engine") if isinstance(model, dict) else None


def _without_sha(key: CassetteKey) -> CassetteKey:
    from dataclasses import replace

    return replace(key, harness_sha="")


def claim_problems(episode: Episode, donor: Episode | None) -> list[str]:
    """Everything wrong with an episode's claim (``donor``: the cassette it names, read)."""
    problems = own_problems(episode)
    if problems or donor is None or claim_of(episode) is None:
        return problems
    return donor_problems(episode, donor)


def check_claim(store: Episodes, episode: Episode) -> ClaimStatus:
    """Check an episode's claim against its events and its donor's (read verified): ``checked``,
    ``none`` (no claim) or ``donor absent`` (not in this store: unchecked); a false claim, or
    a donor that fails verification, is ``store corrupt``."""
    claim = claim_of(episode)
    if claim is None:
        return "none"
    where = f"cassette {episode.id}"
    problems = own_problems(episode)
    if problems:
        raise store.corrupt(problems[0], where)
    try:
        donor = store.get_episode(claim["donor"])
    except CassetteNotFound:
        return "donor absent"
    except StoreCorrupt as exc:
        raise store.corrupt(f"its donor {claim['donor']} is damaged: {exc.what}", where) from None
    problems = donor_problems(episode, donor)
    if problems:
        raise store.corrupt(problems[0], where)
    return "checked"
