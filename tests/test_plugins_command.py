"""``replaykit plugins`` knows every registry of the package, and says where names come from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replaykit.envs.base import Environment, EnvRequest
from replaykit.envs.registry import ENVIRONMENTS, get_env_kind, register_env
from replaykit.workspace.plugins import REGISTRIES, plugins_report

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[1] / "replaykit"


def test_every_registry_in_the_package_is_listed() -> None:
    defined = set()
    for path in PACKAGE.rglob("*.py"):
        for name in re.findall(r"^([A-Z_]+): Registry\[", path.read_text(), flags=re.M):
            module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
            defined.add(f"{module}:{name}")
    assert defined and defined == set(REGISTRIES), (
        f"add to workspace/plugins.py REGISTRIES: {defined - set(REGISTRIES)}"
    )


def twin(request: EnvRequest) -> Environment:
    return get_env_kind("local").factory(request)


def test_a_name_registered_at_run_time_is_listed_as_registered() -> None:
    register_env("twin-local", twin)
    try:
        report = plugins_report()
    finally:
        ENVIRONMENTS.unregister("twin-local")
    envs = next(r for r in report["registries"] if r["what"] == "environment kind")
    row = next(e for e in envs["entries"] if e["name"] == "twin-local")
    assert row["source"] == "registered" and row["ref"] == f"{__name__}:twin"
    assert {"local", "docker"} <= {e["name"] for e in envs["entries"]}
