"""The suite on several cores (tests/parallel.py): whole modules or xdist groups per worker,
longest first; module fixtures once; the listed durations name real modules."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests import parallel

REPO = Path(__file__).resolve().parent.parent
pytest_plugins = ["pytester"]


@pytest.mark.parametrize(
    ("nodeid", "unit"),
    [
        ("tests/a/test_b.py::test_c", "tests/a/test_b.py"),
        ("tests/a/test_b.py::Klass::test_c[x-1]", "tests/a/test_b.py"),
        ("tests/a/test_b.py::test_c[x]@engine", "engine"),
        ("tests/a/test_b.py::test_c[user@host]", "tests/a/test_b.py"),  # an @ inside parameters is no group
    ],
)
def test_unit_of_a_test_id(nodeid: str, unit: str) -> None:
    assert parallel.unit_of(nodeid) == unit


def test_every_listed_module_exists() -> None:
    missing = [m for m in parallel.SECONDS if not (REPO / "tests" / m).is_file()]
    assert not missing, f"tests/parallel.py SECONDS names modules that are gone: {missing}"


class Item:
    """What ``longest_first`` reads of a pytest item."""

    def __init__(self, nodeid: str, *marks: str, group: str | None = None) -> None:
        self.nodeid = nodeid
        self.marks = set(marks)
        self.group = group

    def get_closest_marker(self, name: str) -> Any:
        return name if name in self.marks else None

    def iter_markers(self, name: str) -> list[pytest.Mark]:
        return [pytest.mark.xdist_group(self.group).mark] if name == "xdist_group" and self.group else []


def test_longest_units_first_each_kept_together_counting_only_selected_tiers() -> None:
    items = [
        Item("tests/test_small.py::a"),
        Item("tests/test_docs.py::light"),  # 0 s light, 72 s heavy: light alone weighs nothing
        Item("tests/test_cli.py::a"),  # 17 s light
        Item("tests/x/test_new.py::a", "docker"),  # unlisted, heavy: UNLISTED_HEAVY
        Item("tests/test_small.py::b"),
        Item("tests/test_cli.py::b"),
        Item("tests/harbor/test_differential.py::a", "harbor"),  # 190 s
        Item("tests/test_one.py::g", group="shared"),
        Item("tests/test_two.py::g", group="shared"),
    ]
    ordered = [i.nodeid for i in parallel.longest_first(items)]  # type: ignore[arg-type]
    assert ordered == [
        "tests/harbor/test_differential.py::a",
        "tests/test_cli.py::a",
        "tests/test_cli.py::b",
        "tests/x/test_new.py::a",
        "tests/test_small.py::a",  # weightless units: the collection's order
        "tests/test_small.py::b",
        "tests/test_docs.py::light",
        "tests/test_one.py::g",  # one group: one unit, together
        "tests/test_two.py::g",
    ]


SUITE = {
    "test_light.py": "",
    "test_heavy.py": "pytestmark = pytest.mark.ray\n",
    "test_more.py": "",
}
MODULE = """
import json, os
import pytest
{marks}
@pytest.fixture(scope="module")
def once():
    log("fixture", "{name}")

def log(kind, what):
    line = json.dumps([kind, what, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n"
    fd = os.open(os.environ["LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, line.encode())
    os.close(fd)

@pytest.mark.parametrize("i", range(4))
def test_it(once, i):
    log("test", "{name}")
"""
GROUPED = """
import json, os
import pytest

@pytest.mark.xdist_group("shared")
def test_grouped():
    fd = os.open(os.environ["LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, (json.dumps(["test", "{name}", os.environ["PYTEST_XDIST_WORKER"]]) + "\\n").encode())
    os.close(fd)
"""


@pytest.mark.e2e
def test_xdist_runs_whole_units_longest_first(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    ray: heavy\n")
    for name, marks in SUITE.items():
        pytester.makepyfile(**{name[:-3]: MODULE.format(marks=marks, name=name)})
    for name in ("test_group_a.py", "test_group_b.py"):
        pytester.makepyfile(**{name[:-3]: GROUPED.format(name=name)})
    log = pytester.path / "log.jsonl"
    monkeypatch.setenv("LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "tests.parallel", "-v")
    result.assert_outcomes(passed=14)
    assert re.search(r"scheduling tests via UnitScheduling", result.stdout.str())
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    workers: dict[str, set[str]] = {}
    for kind, what, worker in rows:
        if kind == "test":
            workers.setdefault(what, set()).add(worker)
    assert all(len(w) == 1 for w in workers.values()), workers  # a module never split
    assert workers["test_group_a.py"] == workers["test_group_b.py"]  # a group on one worker
    fixtures = sorted(what for kind, what, _ in rows if kind == "fixture")
    assert fixtures == sorted(SUITE)  # each module fixture set up once in the whole run
    (heavy_worker,) = workers["test_heavy.py"]
    first = next(what for kind, what, worker in rows if worker == heavy_worker)
    assert first == "test_heavy.py"  # the heaviest unit started first


LEAKS = """
import time, uuid
import pytest
from replaykit.envs.docker.containers import LABEL, OWNER_LABEL, owner_id
from replaykit.envs.docker.images import BASE_IMAGE, docker_client

pytestmark = pytest.mark.docker
DEAD = owner_id().split(":")[0] + ":999999999:0"  # a process that is gone (a killed CLI)

def container(owner, name):
    return docker_client().containers.create(
        BASE_IMAGE, command=["true"], name=f"{{name}}-{{uuid.uuid4().hex[:8]}}", labels={{LABEL: "1", OWNER_LABEL: owner}}
    )
{body}
"""
OWN = """
def test_leaks_its_own():
    container(owner_id(), "rk-parallel-own")  # the worker's own: that worker judges it
"""
LEAK = """
def test_leaks_a_dead_process_container():
    container(DEAD, "rk-parallel-dead")  # a gone process's: the controller judges it, at the end

def test_other_work():
    time.sleep(1)
"""


@pytest.mark.docker
@pytest.mark.e2e
def test_leftover_containers_are_judged_after_every_worker_finished(
    docker_base: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    docker: heavy\n")
    pytester.makepyfile(test_own=LEAKS.format(body=OWN), test_dead=LEAKS.format(body=LEAK))
    monkeypatch.delenv("REPLAYKIT_TEST_CPU", raising=False)  # the inner run is not this one's cost
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "tests.conftest")
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # decided on the controller, from what the workers left
    (line,) = [x for x in result.stdout.lines if "left behind by the tests" in x]
    # the dead process's container: named, unless a concurrent replaykit process swept it first
    # (every Docker run removes containers of gone owners), which only a run beside others sees
    assert "rk-parallel-own-" in line and ("rk-parallel-dead-" in line or "1 labelled" in line), line
    from replaykit.envs.docker.images import docker_client

    names = [n.lstrip("/") for c in docker_client().api.containers(all=True) for n in c["Names"]]
    assert not [n for n in names if n.startswith("rk-parallel-")], names  # removed
