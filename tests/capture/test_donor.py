"""A recording tape with donors beside it: their answers are served while the new episode
repeats them exactly; at the first difference it goes live for good; a fork's bound and
strictness; requests a secret or a normalisation rule would change are never served."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from replaykit.capture.donor import Donors
from replaykit.capture.inject import InjectMessages
from replaykit.capture.recorder import episode_cassette
from replaykit.capture.tape import Tape
from replaykit.cassette.events import EnvEvent, Event, LlmEvent
from replaykit.cassette.lineage import EXACT
from replaykit.cassette.scrub import Scrubber
from replaykit.core.errors import DivergenceError
from replaykit.envs.results import Observation
from replaykit.models.reference.server import ReferenceServer


@pytest.fixture(scope="module")
def server() -> Iterator[ReferenceServer]:
    with ReferenceServer() as srv:
        yield srv


def ask(base_url: str, text: str, seed: int) -> str:
    llm = openai.OpenAI(base_url=base_url, api_key="sk-test-key-123456", max_retries=0)
    reply = llm.chat.completions.create(
        model="reference-strong", messages=[{"role": "user", "content": text}], seed=seed
    )
    return str(reply.id)


def env(action: str, stdout: str = "ok\n") -> EnvEvent:
    return EnvEvent(action, Observation(stdout, "", 0), "state-1")


def record(base_url: str, texts: list[str], tape: Tape | None = None, step: str = "ok\n") -> Tape:
    """An episode: one call per text, each followed by an environment step."""
    tape = tape or Tape("test")
    with episode_cassette("test", tape, tape.scrubber):
        for i, text in enumerate(texts):
            ask(base_url, text, seed=i)
            tape.record(env(f"step {i}", step))
    return tape


class Counting:
    """How many requests reached the endpoint (the transport's real send)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import httpx2

        self.sent = 0
        real = httpx2.HTTPTransport.handle_request

        def counted(transport: Any, request: Any) -> Any:
            self.sent += 1
            return real(transport, request)

        monkeypatch.setattr(httpx2.HTTPTransport, "handle_request", counted)


def test_an_identical_episode_is_served_whole_and_sends_nothing(
    server: ReferenceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    donor = record(server.base_url, ["a", "b"])
    sent = Counting(monkeypatch)
    tape = Tape("new")
    tape.donors = Donors([("D", list(donor.events))])
    record(server.base_url, ["a", "b"], tape)
    assert sent.sent == 0
    assert tape.digest == donor.digest  # the same events as a live recording on this engine
    claim = tape.donors.claim(tape.events, EXACT)
    assert claim is not None and claim["donor"] == "D" and claim["events"] == 4 and claim["calls"] == 2


def test_the_first_difference_goes_live_for_good(
    server: ReferenceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    donor = record(server.base_url, ["a", "b", "c"])
    sent = Counting(monkeypatch)
    tape = Tape("new")
    tape.donors = Donors([("D", list(donor.events))])
    record(server.base_url, ["a", "B", "c"], tape)  # the second request differs; the third matches again
    assert sent.sent == 2  # "B" and, though it is the donor's, "c": nothing after the difference is served
    claim = tape.donors.claim(tape.events, EXACT)
    assert claim is not None and claim["events"] == 2 and claim["calls"] == 1
    assert tape.events[:2] == donor.events[:2] and tape.events[2] != donor.events[2]


def test_an_observation_that_differs_ends_the_prefix(
    server: ReferenceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    donor = record(server.base_url, ["a", "b"])
    sent = Counting(monkeypatch)
    tape = Tape("new")
    tape.donors = Donors([("D", list(donor.events))])
    record(server.base_url, ["a", "b"], tape, step="other\n")  # the environment does not reproduce step 0
    assert sent.sent == 1  # call 0 served; the observation after it differs: call 1 goes live
    claim = tape.donors.claim(tape.events, EXACT)
    assert claim is not None and claim["events"] == 1 and claim["calls"] == 1


def test_donors_are_tried_in_order_and_drop_out_when_they_differ(server: ReferenceServer) -> None:
    first = record(server.base_url, ["a", "x"])
    second = record(server.base_url, ["a", "b"])
    tape = Tape("new")
    tape.donors = Donors([("first", list(first.events)), ("second", list(second.events))])
    record(server.base_url, ["a", "b"], tape)
    claim = tape.donors.claim(tape.events, EXACT)
    assert claim is not None and claim["donor"] == "second" and claim["events"] == 4


def test_a_request_a_secret_would_be_scrubbed_from_is_sent_live(
    server: ReferenceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "tok-Zq81xv0PLm"
    donor_tape = Tape("d")
    donor_tape.scrubber = Scrubber({"token": secret})
    donor = record(server.base_url, [f"use {secret}"], donor_tape)
    assert "<secret:token>" in str(donor.events[0].body)  # type: ignore[union-attr]
    sent = Counting(monkeypatch)
    tape = Tape("new")
    tape.scrubber = Scrubber({"token": secret})
    tape.donors = Donors([("D", list(donor.events))])
    record(server.base_url, [f"use {secret}"], tape)
    assert (
        sent.sent == 1
    )  # its stored form matches, but the bytes sent hold a value the donor's may not have had
    assert tape.donors.claim(tape.events, EXACT) is None


def test_a_fork_serves_its_steps_then_goes_live(
    server: ReferenceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = record(server.base_url, ["a", "b", "c"])
    sent = Counting(monkeypatch)
    tape = Tape("fork")
    tape.donors = Donors([("P", list(parent.events))], calls=2, strict=True)
    record(server.base_url, ["a", "b", "c"], tape)
    assert sent.sent == 1  # calls 0 and 1 served, call 2 sent though the parent has it
    claim = tape.donors.claim(tape.events, EXACT)
    assert claim is not None and claim["calls"] == 2 and claim["events"] == 4


def test_a_fork_whose_first_steps_differ_is_a_divergence_and_sends_nothing(
    server: ReferenceServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = record(server.base_url, ["a", "b", "c"])
    sent = Counting(monkeypatch)
    tape = Tape("fork")
    tape.donors = Donors([("P", list(parent.events))], calls=2, strict=True)
    with pytest.raises(DivergenceError):  # raised to the harness, and kept by the tape
        record(server.base_url, ["a", "B", "c"], tape)
    assert sent.sent == 0
    assert isinstance(tape.divergence, DivergenceError)
    assert tape.divergence.report["kind"] == "fork" and tape.divergence.report["position"] == 2
    assert any('"B"' in line for line in tape.divergence.report["diff"])


def test_a_message_is_given_from_its_step_on_and_replays() -> None:
    inject = InjectMessages([(1, "look again")])
    body0 = b'{"messages":[{"role":"user","content":"hi"}]}'
    assert inject(body0, 0) == body0  # before the step: untouched
    at = inject(b'{"messages":[{"role":"user","content":"hi"},{"role":"tool","content":"1"}]}', 1)
    later = inject(
        b'{"messages":[{"role":"user","content":"hi"},{"role":"tool","content":"1"},{"role":"tool","content":"2"}]}',
        2,
    )
    assert b'"content":"look again"' in at and at.index(b"look again") > at.index(b'"1"')
    assert later.index(b"look again") < later.index(b'"2"')  # it stays where it was given
    with pytest.raises(ValueError, match="no chat messages list"):
        inject(b'{"input":"x"}', 3)


def test_serving_needs_no_network(server: ReferenceServer, monkeypatch: pytest.MonkeyPatch) -> None:
    donor = record(server.base_url, ["a"])

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a served call opened a socket")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    tape = Tape("new")
    tape.donors = Donors([("D", list(donor.events))])
    record("http://127.0.0.1:9/v1", ["a"], tape)  # nothing listens there: everything is served
    events: list[Event] = tape.events
    assert isinstance(events[0], LlmEvent) and events[0] is donor.events[0]
