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
        for name in re.findall(r"^([A-Z_]+): (?:Factory)?Registry\[", path.read_text(), flags=re.M):
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


def test_matchers_and_normalisation_rules_are_registries_listed_by_plugins() -> None:
    from replaykit.capture.matchers import RULES, get_rule, register_rule, request_form
    from replaykit.core.errors import ConfigError

    register_rule("drop-seed", lambda body: {k: v for k, v in body.items() if k != "seed"})
    try:
        report = {r["what"]: r for r in plugins_report()["registries"]}
        rules = {e["name"]: e for e in report["normalisation rule"]["entries"]}
        assert {"uuids", "timestamps", "codex-session", "drop-seed"} <= set(rules)
        assert rules["uuids"]["source"] == "built-in" and rules["drop-seed"]["source"] == "registered"
        assert report["normalisation rule"]["group"] == "replaykit.rules"
        matchers = {e["name"] for e in report["request matcher"]["entries"]}
        assert {"method", "path", "body"} <= matchers
        form = request_form("POST", "http://x/v1/chat", b'{"seed": 3, "a": 1}', rules=("drop-seed",))
        assert form["body"] == {"a": 1}
    finally:
        RULES.unregister("drop-seed")
    with pytest.raises(ConfigError, match=r"^unknown normalisation rule 'drop-seed'; known: codex-session, "):
        get_rule("drop-seed")
