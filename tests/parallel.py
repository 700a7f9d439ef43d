"""The suite on several cores (pytest-xdist; ``scripts/test.sh`` passes ``-n 2 --dist
loadgroup``): which tests share a worker, and in which order they start.

* A **unit of work** goes to one worker whole: a test module (its module-scoped fixtures
  are set up once, and whatever its tests share stays in one process), or an
  ``xdist_group`` (tests of several modules that share something no two processes may).
* Units start **longest first**, so the long Docker tests overlap everything else and a
  run ends at about its total ÷ workers instead of at the longest test plus the rest.
  ``SECONDS`` holds a module's wall seconds (its light tests, its heavy-tier tests)
  as measured with ``REPLAYKIT_TEST_CPU`` at 0fcf307; only the tests a run selects count.
  A module not listed weighs ``UNLISTED_HEAVY`` when it runs heavy-tier tests, else 0;
  among equals the collection's order stays.

Registered by ``tests/conftest.py``; inert without ``-n`` (a serial run keeps its order).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

#: the tiers that need more than this process (tests/conftest.py marks tests by them too)
HEAVY = ("docker", "ray", "browser", "engine", "harbor", "postgres", "codex")
#: module (under tests/) → (seconds of its light tests, seconds of its heavy-tier tests)
SECONDS: dict[str, tuple[float, float]] = {
    "harbor/test_differential.py": (0, 424),
    "harbor/test_jobs_layout.py": (0, 66),
    "harbor/test_run_options.py": (0, 200),
    "test_docs.py": (0, 72),
    "agents/test_mini_swe_agent.py": (0, 100),
    "engine/test_mini_swe_agent_smollm2.py": (0, 50),
    "envs/docker/test_harbor_docker_run.py": (0, 59),
    "envs/docker/test_docker_tasks.py": (0, 47),
    "agents/test_codex_agent.py": (0, 54),  # measured alone (-n 0), 2026-12-02
    "envs/docker/network/test_frozen_docker.py": (0, 43),
    "view/test_browser.py": (0, 25),
    "envs/docker/test_docker_run.py": (0, 24),
    "envs/docker/test_recipe.py": (0, 22),
    "envs/docker/test_second_machine.py": (0, 85),  # + a debootstrap (~3 min) the first time on a machine
    "envs/docker/test_terminus.py": (0, 28),
    "envs/docker/test_build_failure.py": (0, 24),
    "envs/docker/test_limits_docker.py": (0, 17),
    "envs/docker/network/test_own_service.py": (0, 40),
    "envs/docker/network/test_build_replay.py": (0, 165),  # wall seconds at load 15, not at 0fcf307
    "exchange/test_oci.py": (170, 0),  # a docker-registry per module; wall seconds at load ~9
    "test_reproduce.py": (80, 0),
    "exchange/test_comparisons_travel.py": (30, 0),
    "test_endpoint_failures.py": (24, 0),
    "test_broken_answers.py": (22, 0),
    "test_certify.py": (0, 21),
    "envs/docker/test_flavours.py": (0, 20),
    "test_cli.py": (17, 3),
    "train/test_counterfactual.py": (19, 0),
    "test_ray.py": (0, 18),
    "test_benchmarks.py": (18, 0),
    "test_leases.py": (13, 4),
    "cassette/test_corruption.py": (16, 0),
    "envs/docker/test_harbor_parity_docker.py": (0, 15),
    "test_concurrency_cleanup.py": (15, 0),
    "test_maintenance.py": (15, 0),
    "envs/docker/test_docker.py": (0, 14),
    "engine/test_engine_docs.py": (0, 14),
    "train/test_trainer.py": (12, 0),
    "test_run.py": (12, 0),
    "cassette/test_integrity.py": (4, 7),
    "test_plugins.py": (11, 0),
    "envs/docker/test_docker_faults.py": (0, 11),
    "test_wheel.py": (10, 0),
    "engine/test_engine_e2e.py": (0, 10),
    "engine/test_identity_rows.py": (0, 76),  # SmolLM2 and the tiny model on llama-cpp-python, 4 restarts
    "engine/test_llama_server.py": (0, 100),  # engine start + tool results, an engine dying mid-run
    "engine/test_identity_rows_llama_server.py": (0, 80),
    "capture/test_proxy_concurrency.py": (10, 0),
    "report/test_browser.py": (0, 10),
    "cassette/test_postgres_store.py": (0, 10),
    "capture/test_proxy_empty_sessions.py": (9, 0),
    "test_readonly.py": (9, 0),
    "engine/test_engine_identity.py": (0, 9),
    "train/test_counterfactual_random.py": (8, 0),
    "cassette/test_corruption_derived.py": (8, 0),
    "report/test_report.py": (7, 0),
    "models/test_probe.py": (7, 0),
    "view/test_words.py": (6, 0),
    "report/test_output_cap.py": (6, 0),
    "test_scaffold.py": (3, 2),
    "envs/docker/test_compose.py": (0, 5),
    "models/test_codex.py": (0, 5),
    "test_render.py": (5, 0),
    "test_harbor_run.py": (5, 0),
}
UNLISTED_HEAVY = 3.0


def module_of(nodeid: str) -> str:
    """``tests/a/test_b.py::test_c[x]@group`` → ``tests/a/test_b.py``."""
    return nodeid.split("::", 1)[0]


def unit_of(nodeid: str) -> str:
    """The unit of work of a test id as xdist's loadgroup reports it: the group after the
    last ``@`` (past any parameter brackets), else the module."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.rsplit("@", 1)[1]
    return module_of(nodeid)


def group_of(item: pytest.Item) -> str | None:
    """The ``xdist_group`` name(s) of a test, joined as xdist joins them; None outside groups."""
    names = {
        str(m.args[0] if m.args else m.kwargs.get("name", "default"))
        for m in item.iter_markers("xdist_group")
    }
    return "_".join(sorted(names)) if names else None


def weights(items: Iterable[pytest.Item]) -> dict[str, float]:
    """Seconds per unit of work, counting only the tiers of the tests selected."""
    tiers: dict[str, set[bool]] = {}  # module -> which tiers are selected (True: heavy)
    units: dict[str, set[str]] = {}
    for item in items:
        module = module_of(item.nodeid).removeprefix("tests/")
        tiers.setdefault(module, set()).add(any(item.get_closest_marker(t) for t in HEAVY))
        units.setdefault(group_of(item) or module_of(item.nodeid), set()).add(module)

    def seconds(module: str) -> float:
        light, heavy = SECONDS.get(module, (0.0, UNLISTED_HEAVY))
        return (light if False in tiers[module] else 0.0) + (heavy if True in tiers[module] else 0.0)

    return {unit: sum(seconds(m) for m in modules) for unit, modules in units.items()}


def longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` regrouped by unit of work (each unit's tests kept together, in their order),
    the longest units first; a stable sort, so equal units keep the collection's order."""
    weight = weights(items)
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(group_of(item) or module_of(item.nodeid), i)

    def key(pair: tuple[int, pytest.Item]) -> tuple[float, int, int]:
        unit = group_of(pair[1]) or module_of(pair[1].nodeid)
        return (-weight[unit], first_seen[unit], pair[0])

    return [item for _, item in sorted(enumerate(items), key=key)]


@pytest.hookimpl(trylast=True)  # after ``-m``/``-k`` deselected: only what runs weighs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the controller schedules in this order
        items[:] = longest_first(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` schedules whole units (modules or groups) in collection order
    (the workers' order: longest first), rather than xdist's per-test loadgroup."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist is untyped
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False  # keep the longest-first order, not "most tests first"
    return UnitScheduling(config, log)
