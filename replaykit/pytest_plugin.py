"""pytest plugin: replay a replaykit cassette's LLM calls to your own code in a test.

Installed with replaykit (entry point ``pytest11: replaykit``), so the fixtures are
there in any project that has replaykit installed::

    def test_my_agent(replaykit_cassette):
        with replaykit_cassette("464d75f8b6ba") as replay:   # a cassette id (a unique prefix)
            client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused")
            reply = client.chat.completions.create(**my_request)
        assert replay.played == 1

Inside the ``with`` block every HTTP request made through httpx2 (the stock
``openai`` client, sync or async) is served from the cassette's ``llm`` events under
replaykit's matching, by content as the recording proxy does (method, path, canonical
JSON body; never headers; concurrent requests in any order, identical ones in recorded
order; nothing plays twice). Nothing reaches the network, so any ``base_url`` works and
no key is needed. A request that matches no unserved recorded one fails the test
with the divergence report (position, reason, diff against the nearest recorded request).
``require_all=True`` also fails a test that made fewer calls than were recorded.

Record on first run, replay after (the pytest-recording habit)::

    @pytest.mark.replaykit                      # or use the ``replaykit_llm`` fixture
    def test_my_agent():
        reply = openai.OpenAI().chat.completions.create(...)   # real endpoint, first run only

The first run (``--replaykit-record-mode once``, the default) lets the test's LLM
calls through and, if the test passes, stores them as a cassette named by the test
id (``<module>::<test>``; ``@pytest.mark.replaykit(name=..., rules=("uuids",))`` to choose); later runs
replay it offline. ``none`` only replays (a missing cassette fails the test), ``all``
records again. API keys never reach the cassette (headers are not stored; the value
of ``$OPENAI_API_KEY`` and of ``secrets=(ENV_VAR, ...)`` is scrubbed from bodies).

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

from replaykit.core.modes import SESSION_MODES

if TYPE_CHECKING:
    from replaykit.cassette.backend import EpisodeStore, RunStore, StoreBackend
    from replaykit.cassette.events import Episode, LlmEvent

ENV_VAR = "REPLAYKIT_STORE"


class LlmReplay:
    """One cassette's LLM calls being replayed: what was recorded and how far it got.

    Requests are matched by content, as the recording proxy does
    (:class:`~replaykit.capture.conversations.ConversationPlayer`): concurrent calls
    (threads, ``asyncio.gather``) arrive in any order and each gets the recorded answer to
    its own request; identical requests get theirs in recorded order; nothing plays twice."""

    def __init__(self, episode: "Episode", match_on: tuple[str, ...] | None = None) -> None:
        from replaykit.capture.conversations import ConversationPlayer
        from replaykit.capture.matchers import DEFAULT_MATCH_ON
        from replaykit.capture.tape import Tape

        self.episode = episode
        match_on = match_on or DEFAULT_MATCH_ON
        self.tape = Tape(episode.id, recorded=list(episode.llm_events), match_on=match_on)
        self.player = ConversationPlayer(episode.id, list(episode.llm_events), match_on)

    def cassette(self, path: str, rules: tuple[str, ...]) -> Any:
        """The vcrpy cassette serving this replay (a context manager)."""
        from replaykit.capture.recorder import EpisodeCassette

        return EpisodeCassette.use(path=path, tape=self.tape, rules=rules, player=self.player)

    @property
    def divergence(self) -> Any:
        """The first request no recorded exchange answered (None: none so far)."""
        return self.player.divergence

    @property
    def recorded(self) -> list["LlmEvent"]:
        return self.episode.llm_events

    @property
    def played(self) -> int:
        return self.player.cursor

    @property
    def remaining(self) -> int:
        return len(self.recorded) - self.played


@contextlib.contextmanager
def replay_cassette(
    store: "RunStore",
    cassette_id: str,
    require_all: bool = False,
    match_on: tuple[str, ...] | None = None,
) -> Iterator[LlmReplay]:
    """Serve the LLM calls of one stored cassette to httpx2 clients inside the block."""
    from replaykit.core.errors import CassetteNotFound, DivergenceError

    if not store.exists():
        raise CassetteNotFound(
            f"no replaykit store at {store.location}; set --replaykit-store, ini replaykit_store or ${ENV_VAR}"
        )
    episode = store.get_episode(store.resolve_id("cassettes", cassette_id, what="cassette"))
    replay = LlmReplay(episode, match_on)
    rules = tuple(episode.meta.get("rules", []))
    with replay.cassette(f"replaykit:{episode.id}", rules):
        try:
            yield replay
        except Exception:
            if replay.divergence is not None:  # the user's code may have wrapped it
                raise replay.divergence from None
            raise
    if replay.divergence is not None:  # raised inside the client, then swallowed
        raise replay.divergence
    if require_all and replay.remaining:
        raise DivergenceError(
            f"cassette {episode.id}: the test made {replay.played} of {len(replay.recorded)} recorded LLM calls",
            {
                "episode": episode.id,
                "position": replay.played,
                "kind": "end",
                "reason": "fewer calls than recorded",
                "diff": [],
            },
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
    group.addoption(
        "--replaykit-record-mode",
        dest="replaykit_record_mode",
        default="once",
        choices=[m.value for m in SESSION_MODES],
        help="for @pytest.mark.replaykit / replaykit_llm: once (record if missing, else replay), none (replay only), all (re-record)",
    )
    group.addoption(
        "--replaykit-store",
        dest="replaykit_store",
        default=None,
        metavar="PATH",
        help=f"replaykit store folder (else ini replaykit_store, ${ENV_VAR}, <rootdir>/cassettes)",
    )
    parser.addini(
        "replaykit_store",
        "replaykit store folder for the replaykit_cassette fixture (relative to the ini file)",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "replaykit(name=None, rules=(), secrets=()): record this test's LLM calls on the first run, replay them after",
    )


def store_path(config: pytest.Config) -> Path | str:
    """The store the fixtures use (see the module docstring for the order): a folder, or a
    backend URL kept as written (``postgresql://…``)."""
    from replaykit.cassette.stores import is_url

    option = config.getoption("replaykit_store", default=None)
    if option:
        return option if is_url(option) else Path(option).expanduser().resolve()
    ini = str(config.getini("replaykit_store") or "")
    if ini:
        if is_url(ini):
            return ini
        base = config.inipath.parent if config.inipath else config.rootpath
        return (base / Path(ini).expanduser()).resolve()
    env = os.environ.get(ENV_VAR)
    if env:
        return env if is_url(env) else Path(env).expanduser().resolve()
    return config.rootpath / "cassettes"


@pytest.fixture(scope="session")
def replaykit_store(pytestconfig: pytest.Config) -> Iterator["StoreBackend"]:
    from replaykit.cassette.stores import open_store

    store = open_store(store_path(pytestconfig))
    yield store
    store.close()


@pytest.fixture
def replaykit_cassette(replaykit_store: "RunStore") -> Callable[..., ContextManager[LlmReplay]]:
    """A factory: ``with replaykit_cassette(cassette_id) as replay: ...`` (see the module docstring)."""
    from replaykit.core.errors import DivergenceError, ReplaykitError

    @contextlib.contextmanager
    def use(
        cassette_id: str, require_all: bool = False, match_on: tuple[str, ...] | None = None
    ) -> Iterator[LlmReplay]:
        failure = None
        try:
            with replay_cassette(replaykit_store, cassette_id, require_all, match_on) as replay:
                yield replay
        except DivergenceError as exc:
            failure = divergence_text(exc)
        except ReplaykitError as exc:
            failure = f"replaykit: {exc}"
        if failure is not None:  # outside the except: the failure is reported once, with no chained traceback
            pytest.fail(failure, pytrace=False)

    return use


# -- record on first run, replay after ------------------------------------------------
def test_key(name: str, rules: tuple[str, ...]) -> Any:
    """The cassette key of a recorded test (kind ``pytest``): its name and rules."""
    from replaykit.cassette.keys import CassetteKey, ModelId
    from replaykit.core.determinism import digest_of

    return CassetteKey(
        harness_sha="",
        task_id=name,
        task_digest="",
        model=ModelId(name="", endpoint=""),
        seed=0,
        config_digest=digest_of({"rules": list(rules)})[:16],
        kind="pytest",
    )


def default_name(item: pytest.Item) -> str:
    """``<module file stem>::<test name>`` (the rootdir, hence the node id, varies with the arguments)."""
    return f"{item.path.stem}::{item.nodeid.split('::', 1)[-1]}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_PASSED] = report.passed
        tape = item.stash.get(_TAPE, None)
        if call.excinfo is not None and tape is not None and tape.divergence is not None:
            report.longrepr = divergence_text(tape.divergence)  # once, without the client's traceback
    return report


_PASSED = pytest.StashKey[bool]()
_TAPE = pytest.StashKey[Any]()


@pytest.fixture
def replaykit_llm(request: pytest.FixtureRequest, replaykit_store: "EpisodeStore") -> Iterator[Any]:
    """Record this test's LLM calls on the first run (if it passes); replay them after."""
    from replaykit.capture.recorder import episode_cassette
    from replaykit.capture.tape import Tape
    from replaykit.cassette.events import Episode
    from replaykit.cassette.scrub import Scrubber
    from replaykit.core.determinism import ENV_PINS

    marker = request.node.get_closest_marker("replaykit")
    options = dict(marker.kwargs) if marker else {}
    rules = tuple(options.get("rules", ()))
    key = test_key(str(options.get("name") or default_name(request.node)), rules)
    mode = request.config.getoption("replaykit_record_mode", default="once") or "once"
    if replaykit_store.exists() and not replaykit_store.has(key.id) and mode != "all":
        legacy = key.in_format(1)  # recorded before key format 2: the same fields, nothing local
        key = legacy if replaykit_store.has(legacy.id) else key
    exists = replaykit_store.exists() and replaykit_store.has(key.id)
    if exists and mode != "all":
        replay = LlmReplay(replaykit_store.get_episode(key.id))
        request.node.stash[_TAPE] = replay
        with replay.cassette(f"replaykit:{key.id}", rules):
            yield replay
        if replay.divergence is not None and request.node.stash.get(_PASSED, False):  # the test swallowed it
            pytest.fail(divergence_text(replay.divergence), pytrace=False)
        return
    if mode == "none":
        pytest.fail(
            f"replaykit: no recording of {key.task_id!r} in {replaykit_store.location}; run once with --replaykit-record-mode once",
            pytrace=False,
        )
    secrets = {name: os.environ.get(name, "") for name in ("OPENAI_API_KEY", *options.get("secrets", ()))}
    tape = Tape(key.id)
    with episode_cassette(
        f"pytest:{key.task_id}", tape, Scrubber({k: v for k, v in secrets.items() if v}), rules
    ):
        yield tape
    if request.node.stash.get(_PASSED, False):
        replaykit_store.put_episode(
            Episode(
                key=key,
                events=list(tape.events),
                meta={"pytest": {"name": key.task_id}, "rules": list(rules), "pins": ENV_PINS},
            )
        )


@pytest.fixture(autouse=True)
def _replaykit_marker(request: pytest.FixtureRequest) -> None:
    """``@pytest.mark.replaykit`` turns ``replaykit_llm`` on for the test (as ``@pytest.mark.vcr`` does)."""
    if request.node.get_closest_marker("replaykit") is not None:
        request.getfixturevalue("replaykit_llm")
