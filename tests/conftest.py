"""Docker test policy and shared Docker fixtures.

Tests marked ``@pytest.mark.docker`` need a Docker engine (``scripts/setup-docker.sh``
starts one and builds the local base image). When no engine answers they FAIL, with
a one-line reason, unless ``REPLAYKIT_ALLOW_DOCKER_SKIP=1`` is set (then they skip);
under ``CI`` they always fail, so a CI run can never pass with the Docker tests skipped.

After the session, no container labelled ``replaykit=1`` created during the session
may remain: leftovers are removed and the session fails. Under pytest-xdist (``-n``) the
controller judges, once every worker has finished: a worker only reports that it ran
Docker tests and which process it was (another worker's containers may still be running
while one finishes). Scheduling across workers: ``tests/parallel.py``.

Nothing happens at import time: Docker is only contacted by the hooks and fixtures.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from replaykit.testing import write_config
from tests.parallel import HEAVY

REPO = Path(__file__).resolve().parent.parent
_state: dict[str, Any] = {}


def pytest_configure(config: pytest.Config) -> None:
    from tests import parallel

    config.pluginmanager.register(parallel, "replaykit-parallel")
    os.environ.setdefault("REPLAYKIT_PROJECT", str(REPO))  # where replaykit.testing finds configs/ and envs/
    # A test run started in the background (``nohup … &``, some CI runners) begins with
    # SIGINT ignored, and exec'd children keep an ignored signal: the CLI under test would
    # never see Ctrl-C. A handled signal is reset to the default in children, so handle it.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


#: the tiers a test can be in besides ``unit`` (pyproject declares them all; the heavy ones
#: are tests/parallel.py's HEAVY)
TIERS = ("e2e", *HEAVY)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test in no tier is ``unit``: in-process, fast (``pytest -m unit``). A module of
    CLI- or server-driven tests says ``pytestmark = pytest.mark.e2e``; a heavy test
    carries its own marker (``docker``, ``ray``, ``browser``, ``engine``, …). A unit test's
    heavy parameter (the ``postgresql`` one of ``store_location``) is heavy, not ``unit``."""
    for item in items:
        if any(item.get_closest_marker(t) for t in HEAVY):
            item.own_markers[:] = [m for m in item.own_markers if m.name != "unit"]
        elif not any(item.get_closest_marker(t) for t in TIERS):
            item.add_marker(pytest.mark.unit)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With ``REPLAYKIT_TEST_CPU=FILE``: append each test's CPU seconds (this process and
    its waited-for children) and wall seconds to FILE, one JSON line each — a suite's
    cost measured the way the benchmarks measure, whatever else the machine runs — and,
    under xdist, which worker ran it."""
    path = os.environ.get("REPLAYKIT_TEST_CPU")
    if not path:
        yield
        return
    import json
    import resource

    def cpu() -> float:
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + kids.ru_utime + kids.ru_stime

    cpu0, wall0 = cpu(), time.perf_counter()
    yield
    test = item.nodeid.split("@", 1)[0] if item.get_closest_marker("xdist_group") else item.nodeid
    row: dict[str, object] = {
        "test": test,
        "cpu": round(cpu() - cpu0, 3),
        "wall": round(time.perf_counter() - wall0, 3),
    }
    if worker := os.environ.get("PYTEST_XDIST_WORKER"):
        row["worker"] = worker  # gw0, gw1, …: how a parallel run was balanced
    # one write of one whole line, O_APPEND: lines of several xdist workers never interleave
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(row) + "\n").encode())
    finally:
        os.close(fd)


def docker_unavailable() -> str | None:
    """None when a Docker engine answers, else a one-line reason (checked once)."""
    if "reason" not in _state:
        try:
            from replaykit.envs.docker.images import docker_client

            docker_client()
            _state["reason"] = None
        except Exception as exc:  # EnvError, ImportError
            _state["reason"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    reason: str | None = _state["reason"]
    return reason


def pytest_sessionstart(session: pytest.Session) -> None:
    _state["started"] = time.time()


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("postgres") is not None:
        postgres_required()
    if item.get_closest_marker("docker") is None:
        return
    reason = docker_unavailable()
    if reason is None:
        _state["docker_ran"] = True
        return
    if os.environ.get("CI"):
        pytest.fail(f"Docker tests must run in CI (run scripts/setup-docker.sh): {reason}", pytrace=False)
    if os.environ.get("REPLAYKIT_ALLOW_DOCKER_SKIP") == "1":
        pytest.skip(f"no Docker engine: {reason}")
    pytest.fail(
        f"no Docker engine: {reason} (run scripts/setup-docker.sh, or set REPLAYKIT_ALLOW_DOCKER_SKIP=1 to skip)",
        pytrace=False,
    )


def postgres_required() -> None:
    """A ``postgres`` test without its server: fails under CI, skips elsewhere (one line)."""
    from tests.pg import unavailable

    reason = unavailable()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(
            f"PostgreSQL tests must run in CI (run scripts/setup-postgres.sh): {reason}", pytrace=False
        )
    pytest.skip(f"no PostgreSQL test server: {reason} (run scripts/setup-postgres.sh)")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres), "dirstore"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a fresh, empty store lives, once per backend: a folder (SQLite), the URL
    of a new PostgreSQL database (dropped afterwards), or a ``dirstore:`` folder (the store
    plugin of tests/store_plugin/, registered in this process)."""
    if request.param == "sqlite":
        yield str(tmp_path / "store")
        return
    if request.param == "dirstore":
        from tests.store_sql import register_dirstore

        register_dirstore()
        yield f"dirstore:{tmp_path / 'dirstore'}"
        return
    from tests.pg import fresh_database

    with fresh_database() as url:
        yield url


def leftover_containers(since: float, owners: set[str], dead: bool = True) -> list[dict[str, Any]]:
    """Labelled containers created at or after ``since`` (epoch seconds) by one of
    ``owners`` (this test process, its xdist workers) or, with ``dead``, by a process that
    is gone (their forked workers, a killed CLI). A container whose owner is another live
    process (a concurrent test session, or another xdist worker still running) is not ours
    to judge."""
    from replaykit.envs.docker.containers import OWNER_LABEL, _owner_alive
    from replaykit.envs.docker.images import docker_client

    found = docker_client().api.containers(all=True, filters={"label": "replaykit=1"})
    return [
        c
        for c in found
        if c.get("Created", 0) >= int(since) - 1
        and (
            (owner := (c.get("Labels") or {}).get(OWNER_LABEL, "")) in owners
            or (dead and not _owner_alive(owner))
        )
    ]


def remove_leftovers(left: list[dict[str, Any]]) -> list[str]:
    """Remove ``left`` (containers as Docker lists them); their names."""
    from replaykit.envs.docker.containers import remove_container

    for c in left:
        remove_container(c["Id"])
    return [n.lstrip("/") for c in left for n in (c.get("Names") or [c["Id"][:12]])[:1]]


def is_worker(config: pytest.Config) -> bool:
    """This process is a pytest-xdist worker (``-n``), not the controller or a serial run."""
    return hasattr(config, "workerinput")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the xdist controller: what a finished worker reported (see pytest_sessionfinish)."""
    out = getattr(node, "workeroutput", None) or {}
    if out.get("replaykit_docker_ran"):
        _state["docker_ran"] = True
        _state.setdefault("owners", set()).add(out["replaykit_owner"])
        _state.setdefault("left", []).extend(out["replaykit_left"])


@pytest.hookimpl(trylast=True)  # on the xdist controller: after its workers stopped
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session when the tests left labelled containers behind (removing them).
    A worker judges only its own (in-process) containers, before its exit handlers could
    hide a leak, and reports who it was; the controller judges the rest once all are done."""
    if not _state.get("docker_ran"):
        return
    from replaykit.envs.docker.containers import owner_id

    since = _state.get("started", 0)
    if is_worker(session.config):
        own = remove_leftovers(leftover_containers(since, {owner_id()}, dead=False))
        out = session.config.workeroutput  # type: ignore[attr-defined]
        out.update(replaykit_docker_ran=True, replaykit_owner=owner_id(), replaykit_left=own)
        return
    left = [
        *_state.get("left", []),
        *remove_leftovers(leftover_containers(since, {owner_id(), *_state.get("owners", ())})),
    ]
    if not left:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = f"replaykit: {len(left)} labelled container(s) left behind by the tests (now removed): {', '.join(left)}"
    if reporter is not None:
        reporter.write_line(message, red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def docker_base() -> str:
    """The local base image (built once if missing: debootstrap, about a minute)."""
    if docker_unavailable():
        pytest.fail(f"no Docker engine: {docker_unavailable()}", pytrace=False)
    from replaykit.envs.docker.base_image import build_base_image
    from replaykit.envs.docker.images import BASE_IMAGE

    build_base_image()
    return BASE_IMAGE


@pytest.fixture(scope="session")
def docker_config() -> Callable[..., Path]:
    """``make(tmp, **overrides)``: configs/quickstart-docker.yaml with its store and
    harness repo under ``tmp`` (dotted keys override, e.g. ``{"env.snapshot": "full"}``)."""

    def make(tmp: Path, overrides: dict[str, Any] | None = None, name: str = "config.yaml") -> Path:
        return write_config(tmp, overrides, name, base="quickstart-docker.yaml")

    return make


@pytest.fixture(scope="session")
def docker_quickstart(
    docker_base: str, docker_config: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The quickstart panel recorded once in Docker with the reference model."""
    from replaykit.cassette.store import Store
    from replaykit.episodes.config import load_config
    from replaykit.episodes.run import measure

    tmp = tmp_path_factory.mktemp("quickstart-docker")
    config_path = docker_config(tmp)
    start = time.monotonic()
    result = measure(load_config(config_path))
    store = Store(tmp / "store")
    yield {
        "tmp": tmp,
        "config": config_path,
        "store": store,
        "run": result.run.to_json(),  # the stored form
        "recorded": result.recorded,
        "seconds": time.monotonic() - start,
    }
    store.close()


@pytest.fixture(scope="session")
def mini_path() -> str:
    """The ``REPLAYKIT_AGENTS_PATH`` that finds mini-swe-agent's ``mini`` (also set in this process):
    ``scripts/setup-agents.sh`` installs it (scripts/test.sh runs that and exports the variable).
    Its absence fails the test; ``REPLAYKIT_ALLOW_AGENT_SKIP=1`` skips instead, never under CI."""
    from replaykit.agents.base import AGENTS_PATH_VAR
    from replaykit.agents.registry import get_agent

    path = os.environ.get(AGENTS_PATH_VAR) or str(Path.home() / ".cache" / "replaykit" / "agents" / "bin")
    os.environ[AGENTS_PATH_VAR] = path
    requirement = get_agent("mini-swe-agent").requires
    assert requirement is not None
    if requirement.find() is None:
        if os.environ.get("REPLAYKIT_ALLOW_AGENT_SKIP") == "1" and not os.environ.get("CI"):
            pytest.skip("mini-swe-agent is not installed (bash scripts/setup-agents.sh)")
        pytest.fail(
            f"mini-swe-agent's `mini` is not on {AGENTS_PATH_VAR}={path} or PATH: run bash scripts/setup-agents.sh",
            pytrace=False,
        )
    return path
