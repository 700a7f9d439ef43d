"""What an episode says it was served (``cassette/lineage.py``) is checked, never trusted:
against its own events on every read, against its donor's by replay and ``cassettes verify``,
and a run document's reuse fields against the claims; the store's donor and fork queries."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from replaykit.cassette.events import EnvEvent, Episode, Event, GradeEvent, LlmEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.lineage import (
    EXACT,
    FORK_STEP,
    FORKED_FROM,
    check_claim,
    claim_problems,
    fork_doc,
    prefix_claim,
)
from replaykit.cassette.stores import open_store
from replaykit.core.errors import StoreCorrupt
from replaykit.core.run_doc import EpisodeSummary, ModelRef, RunDoc
from replaykit.envs.results import Grade, Observation
from replaykit.exchange.fsck import verify_store


def key(sha: str, seed: int = 0, extra: tuple[tuple[str, str], ...] = (("env", "local"),)) -> CassetteKey:
    return CassetteKey(sha, "task", "digest", ModelId("m", "builtin", "sim-1"), seed, "cfg", extra=extra)


def llm(text: str) -> LlmEvent:
    body = {"messages": [{"role": "user", "content": text}]}
    return LlmEvent("POST", "/v1/chat/completions", body, 200, "OK", [], f'{{"r":"{text}"}}'.encode(), [9])


def events(*texts: str) -> list[Event]:
    out: list[Event] = []
    for text in texts:
        out += [llm(text), EnvEvent(f"echo {text}", Observation(text, "", 0), "s")]
    return [*out, GradeEvent(Grade(1.0, True))]


def served(donor: Episode, mine: list[Event], k: int, new_key: CassetteKey) -> Episode:
    return Episode(new_key, mine, {"reused": prefix_claim(donor.id, mine, k, EXACT)})


def test_a_true_claim_is_checked_against_the_donor(store_location: str) -> None:
    store = open_store(store_location)
    donor = Episode(key("a" * 40), events("x", "y"))
    new = served(donor, events("x", "z"), 2, key("b" * 40))  # events 0..1 equal the donor's
    store.put_episode(donor)
    store.put_episode(new)
    assert check_claim(store, store.get_episode(new.id)) == "checked"
    assert check_claim(store, store.get_episode(donor.id)) == "none"
    assert store.verified_reuse(new.id) == (2, 1, EXACT)


def test_a_claim_that_disagrees_with_its_own_events_is_corruption_on_read(store_location: str) -> None:
    store = open_store(store_location)
    donor = Episode(key("a" * 40), events("x", "y"))
    mine = events("x", "z")
    claim = prefix_claim(donor.id, mine, 3, EXACT)  # says events 0..2 came from the donor: 2 did not
    claim["digest"] = prefix_claim(donor.id, mine, 2, EXACT)["digest"]
    store.put_episode(Episode(key("b" * 40), mine, {"reused": claim}))
    with pytest.raises(StoreCorrupt, match="does not match its events"):
        store.get_episode(key("b" * 40).id)


@pytest.mark.parametrize(
    "change, problem",
    [
        ("events", "differ from the ones it claims"),
        ("seed", "not the same task, seed, model and config"),
        ("sha", "not the same task, seed, model and config"),
        ("engine", "another engine identity"),
    ],
)
def test_a_donor_that_could_not_have_served_it(change: str, problem: str) -> None:
    donor = Episode(key("a" * 40), events("x", "y"), {"model": {"name": "m", "temperature": 0.0}})
    mine = served(donor, events("x", "z"), 2, key("b" * 40))
    mine.meta["model"] = {"name": "m", "temperature": 0.0}
    if change == "events":
        donor = dataclasses.replace(donor, events=events("w", "y"))
    elif change == "seed":
        donor = dataclasses.replace(donor, key=key("a" * 40, seed=1))
    elif change == "sha":
        donor = dataclasses.replace(donor, key=key("b" * 40))
    else:
        donor.meta["model"] = {"name": "m", "temperature": 0.0, "engine": {"n_ctx": 2048}}
    assert any(problem in p for p in claim_problems(mine, donor)), claim_problems(mine, donor)


def test_verify_names_a_false_claim_and_lists_an_absent_donor(store_location: str) -> None:
    store = open_store(store_location)
    donor = Episode(key("a" * 40), events("x", "y"))
    lie = served(Episode(key("a" * 40), events("x", "q")), events("x", "q"), 4, key("b" * 40))
    absent = served(Episode(key("c" * 40), events("x")), events("x"), 2, key("d" * 40))
    store.put_episode(donor)
    store.put_episode(lie)  # its claim is consistent with its own events, not with the donor's
    store.put_episode(absent)
    report = verify_store(open_store(store_location, readonly=True) if "://" not in store_location else store)
    assert not report["ok"]
    assert [(d["id"], "differ from the ones it claims" in d["error"]) for d in report["damaged"]] == [
        (lie.id, True)
    ]
    assert report["unchecked"] == [absent.id]


def test_a_run_document_must_count_what_its_cassettes_claim(store_location: str) -> None:
    store = open_store(store_location)
    donor = Episode(key("a" * 40), events("x", "y"))
    new = served(donor, events("x", "z"), 2, key("b" * 40))
    store.put_episode(donor)
    store.put_episode(new)
    cols = store.verified_columns(new.id)

    def run(reused: int, calls: int | None, basis: str) -> Any:
        entry = EpisodeSummary(
            task_id="task",
            seed=0,
            cassette_id=new.id,
            reward=1.0,
            passed=True,
            steps=2,
            llm_calls=cols["n_llm"],
            digest=cols["digest"],
            reused_events=reused,
            model_calls=calls,
        )
        return RunDoc(
            run_id="r",
            harness_sha="b" * 40,
            model=ModelRef(name="m", endpoint="builtin"),
            config_digest="cfg",
            cassettes=[new.id],
            episodes=[entry],
            reuse_basis=basis,
        )

    store.check_run(run(2, 1, EXACT))  # 2 calls recorded, 1 served: 1 paid
    for bad in (run(0, None, ""), run(2, 2, EXACT), run(2, 1, "")):  # claims nothing / paid both / basis
        with pytest.raises(StoreCorrupt):
            store.check_run(bad)


def test_find_donors_and_forks(store_location: str) -> None:
    store = open_store(store_location)
    mine = key("b" * 40)
    same = Episode(key("a" * 40), events("x"))
    other_seed = Episode(key("c" * 40, seed=1), events("x"))
    parent = Episode(mine, events("x", "y"))
    fork = Episode(
        key("b" * 40, extra=(("env", "local"), (FORKED_FROM, parent.id), (FORK_STEP, "1"))), events("x")
    )
    for episode in (same, other_seed, parent, fork):
        store.put_episode(episode)
    assert [r["id"] for r in store.find_donors(mine)] == [same.id]  # not its own SHA, not another seed
    assert [r["id"] for r in store.find_forks(parent.key)] == [fork.id]
    assert store.find_forks(same.key) == []
    doc = fork_doc(fork)
    assert (
        doc["forked_from"] == parent.id and doc["fork_step"] == 1 and doc["cassettes"] == [fork.id, parent.id]
    )
