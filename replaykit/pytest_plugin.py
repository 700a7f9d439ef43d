"""pytest plugin: replay a replaykit cassette's LLM calls to your own code in a test.

Installed with replaykit (entry point ``pytest11: replaykit``), so the fixtures are
there in any project that has replaykit installed::

    def test_my_agent(replaykit_cassette):
        with replaykit_cassette("464d75f8b6ba") as replay:   # a cassette id (a unique prefix)
            client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused")
            reply = client.chat.completions.create(**my_request)
        assert replay.played == 1

Inside the ``with`` block every HTTP request made through httpx2 (the stock
``openai`` client) is served from the cassette's ``llm`` events, in order, under
replaykit's matching (method, path, canonical JSON body, position; never headers;
nothing plays twice). Nothing reaches the network, so any ``base_url`` works and
no key is needed. A request that was not recorded at that position fails the test
with the divergence report (position, reason, diff of the two requests).
``require_all=True`` also fails a test that made fewer calls than were recorded.

The store is, first found: ``--replaykit-store PATH``, the ini option
``replaykit_store`` (relative to the ini file), ``$REPLAYKIT_STORE``, else
``<rootdir>/cassettes``. Fixtures: ``replaykit_cassette`` (the factory above) and
``replaykit_store`` (the :class:`~replaykit.cassette.store.Store`). Outside pytest,
:func:`replay_cassette` is the same context manager raising ``DivergenceError``.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterator

import pytest

if TYPE_CHECKING:
    from replaykit.cassette.events import Episode, LlmEvent
    from replaykit.cassette.store import Store

ENV_VAR = "REPLAYKIT_STORE"


class LlmReplay:
    """One cassette's LLM calls being replayed: what was recorded and how far it got."""

    def __init__(self, episode: "Episode", match_on: tuple[str, ...] | None = None) -> None:
        from replaykit.cassette.matchers import DEFAULT_MATCH_ON
        from replaykit.cassette.tape import Tape

        self.episode = episode
        self.tape = Tape(episode.id, recorded=list(episode.llm_events), match_on=match_on or DEFAULT_MATCH_ON)

    @property
    def recorded(self) -> list["LlmEvent"]:
        return self.episode.llm_events

    @property
    def played(self) -> int:
        return self.tape.cursor

    @property
    def remaining(self) -> int:
        return len(self.recorded) - self.played


@contextlib.contextmanager
def replay_cassette(store: "Store", cassette_id: str, require_all: bool = False, match_on: tuple[str, ...] | None = None) -> Iterator[LlmReplay]:
    """Serve the LLM calls of one stored cassette to httpx2 clients inside the block."""
    from replaykit.cassette.recorder import EpisodeCassette
    from replaykit.errors import CassetteNotFound, DivergenceError

    if not store.exists():
        raise CassetteNotFound(f"no replaykit store at {store.root}; set --replaykit-store, ini replaykit_store or ${ENV_VAR}")
    episode = store.get_episode(store.resolve_id("cassettes", cassette_id, what="cassette"))
    replay = LlmReplay(episode, match_on)
    rules = tuple(episode.meta.get("rules", []))
    with EpisodeCassette.use(path=f"replaykit:{episode.id}", tape=replay.tape, rules=rules):
        try:
            yield replay
        except Exception:
            if replay.tape.divergence is not None:  # the user's code may have wrapped it
                raise replay.tape.divergence from None
            raise
    if replay.tape.divergence is not None:  # raised inside the client, then swallowed
        raise replay.tape.divergence
    if require_all and replay.remaining:
        raise DivergenceError(
            f"cassette {episode.id}: the test made {replay.played} of {len(replay.recorded)} recorded LLM calls",
            {"episode": episode.id, "position": replay.played, "kind": "end", "reason": "fewer calls than recorded", "diff": []},
        )


def divergence_text(exc: Any) -> str:
    """The divergence message plus its report (both requests' diff), for a test failure."""
    report = getattr(exc, "report", {}) or {}
    lines = [f"replaykit: {exc}"]
    lines += [f"  {line}" for line in report.get("diff", [])[:120]]
    if not report.get("diff") and report.get("actual") is not None:
        lines.append("  actual: " + json.dumps(report["actual"], ensure_ascii=False, default=str)[:2000])
    return "\n".join(lines)


# -- pytest wiring ------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("replaykit", "replaykit cassette replay")
    group.addoption("--replaykit-store", dest="replaykit_store", default=None, metavar="PATH", help=f"replaykit store folder (else ini replaykit_store, ${ENV_VAR}, <rootdir>/cassettes)")
    parser.addini("replaykit_store", "replaykit store folder for the replaykit_cassette fixture (relative to the ini file)", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "replaykit: tests that replay replaykit cassettes")


def store_path(config: pytest.Config) -> Path:
    """The store the fixtures use (see the module docstring for the order)."""
    option = config.getoption("replaykit_store", default=None)
    if option:
        return Path(option).expanduser().resolve()
    ini = str(config.getini("replaykit_store") or "")
    if ini:
        base = config.inipath.parent if config.inipath else config.rootpath
        return (base / Path(ini).expanduser()).resolve()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return config.rootpath / "cassettes"


@pytest.fixture(scope="session")
def replaykit_store(pytestconfig: pytest.Config) -> Iterator["Store"]:
    from replaykit.cassette.store import Store

    store = Store(store_path(pytestconfig))
    yield store
    store.close()


@pytest.fixture
def replaykit_cassette(replaykit_store: "Store") -> Callable[..., ContextManager[LlmReplay]]:
    """A factory: ``with replaykit_cassette(cassette_id) as replay: ...`` (see the module docstring)."""
    from replaykit.errors import DivergenceError, ReplaykitError

    @contextlib.contextmanager
    def use(cassette_id: str, require_all: bool = False, match_on: tuple[str, ...] | None = None) -> Iterator[LlmReplay]:
        try:
            with replay_cassette(replaykit_store, cassette_id, require_all, match_on) as replay:
                yield replay
        except DivergenceError as exc:
            pytest.fail(divergence_text(exc), pytrace=False)
        except ReplaykitError as exc:
            pytest.fail(f"replaykit: {exc}", pytrace=False)

    return use
