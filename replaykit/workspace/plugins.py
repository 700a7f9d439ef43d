"""What every registry holds and where from: the report behind ``replaykit plugins``.

Each extension point keeps its own registry (``core/registry.py``) beside its
protocol; this module only names them. Listing never imports a plugin: built-ins are
``module:attribute`` references and entry points are read from installed metadata.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, TypedDict

from replaykit.core.registry import Registry, RegistryEntry

#: every registry of the package (tests/test_plugins_command.py checks none is missing)
REGISTRIES: tuple[str, ...] = (
    "replaykit.envs.registry:ENVIRONMENTS",
    "replaykit.execution.registry:EXECUTORS",
    "replaykit.cassette.stores:STORES",
    "replaykit.train.estimators:ESTIMATORS",
    "replaykit.train.backends:BACKENDS",
    "replaykit.train.criteria:CRITERIA",
    "replaykit.train.optimizers:OPTIMIZERS",
    "replaykit.capture.matchers:MATCHERS",
    "replaykit.capture.matchers:RULES",
    "replaykit.agents.registry:AGENTS",
)


class EntryRow(TypedDict):
    name: str
    source: str  # built-in | entry point | registered
    ref: str
    distribution: str
    shadows: str


class RegistryRow(TypedDict):
    what: str
    group: str  # the entry-point group a package declares entries in
    entries: list[EntryRow]


class PluginsReport(TypedDict):
    registries: list[RegistryRow]
    plugins: int  # entries that come from installed packages


def registries() -> list[Registry[Any]]:
    found = []
    for ref in REGISTRIES:
        module, _, attr = ref.partition(":")
        found.append(getattr(import_module(module), attr))
    return found


def _row(entry: RegistryEntry) -> EntryRow:
    return EntryRow(
        name=entry.name,
        source=entry.source,
        ref=entry.ref,
        distribution=entry.distribution,
        shadows=entry.shadows,
    )


def plugins_report() -> PluginsReport:
    rows = [
        RegistryRow(what=reg.what, group=reg.group, entries=[_row(e) for e in reg.entries()])
        for reg in registries()
    ]
    plugins = sum(1 for r in rows for e in r["entries"] if e["source"] == "entry point")
    return PluginsReport(registries=rows, plugins=plugins)
