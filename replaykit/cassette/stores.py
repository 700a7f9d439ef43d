"""Store backends by URL scheme, and ``open_store``: the one place a concrete store is built.

A store location is a plain path or ``sqlite:PATH`` (the default backend: a folder
holding an SQLite index), or a URL whose scheme names a backend (``postgresql://user@host/db``).
A backend is a *driver* (:class:`~replaykit.cassette.store.driver.StoreDriver`: twelve
primitives over rows); the store above it is the same for every backend. Backends are
registered by scheme with :func:`register_store` or the ``replaykit.stores`` entry-point
group::

    [project.entry-points."replaykit.stores"]
    dirstore = "my_pkg.store:DirDriver"    # DirDriver(location: str, readonly: bool) -> StoreDriver

Everything else in replaykit is typed against the role it uses (``cassette/backend.py``:
``EpisodeStore``, ``DocumentStore``, ... ``StoreBackend``, all of them).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from replaykit.cassette.urls import redact
from replaykit.core.errors import ConfigError
from replaykit.core.registry import Registry

if TYPE_CHECKING:
    from replaykit.cassette.backend import StoreBackend
    from replaykit.cassette.store.driver import StoreDriver

#: ``opener(location, readonly)`` -> a driver; ``location`` is the path (sqlite) or the whole URL
StoreOpener = Callable[[str, bool], "StoreDriver"]


def _opener(name: str, obj: object) -> StoreOpener:
    if not callable(obj):
        raise ConfigError(f"store backend {name!r} is not callable (got {type(obj).__name__})")
    return obj


STORES: Registry[StoreOpener] = Registry(
    "store backend",
    "replaykit.stores",
    builtins={
        "sqlite": "replaykit.cassette.store.sqlite:SqliteDriver",
        "postgresql": "replaykit.cassette.store.postgres:PgDriver",
    },
    convert=_opener,
)
_ALIASES = {"postgres": "postgresql"}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):(.*)$", re.S)


def register_store(scheme: str, opener: StoreOpener) -> StoreOpener:
    """Make ``--store SCHEME://…`` (and ``store:`` in configs) open a store through ``opener``:
    ``opener(location, readonly)`` returns the backend's driver (the whole URL is passed)."""
    return STORES.register(scheme.lower(), opener)


def split_location(location: str | Path) -> tuple[str, str]:
    """``(scheme, target)``: ``("sqlite", PATH)`` for a path or ``sqlite:PATH``, else the
    scheme and the whole URL. A word before a colon is a scheme only when followed by
    ``//`` or when it names a registered backend (so ``./a:b`` stays a path)."""
    if isinstance(location, Path):
        return "sqlite", str(location)
    match = _SCHEME.match(location)
    if match is None:
        return "sqlite", location
    scheme, rest = match.group(1).lower(), match.group(2)
    scheme = _ALIASES.get(scheme, scheme)
    if scheme == "sqlite":
        return "sqlite", rest[2:] if rest.startswith("//") else rest
    if rest.startswith("//") or scheme in STORES:
        return scheme, location
    return "sqlite", location


def is_url(location: str | Path) -> bool:
    """Whether ``location`` names a non-file backend (a URL, not a folder)."""
    return split_location(location)[0] != "sqlite"


def open_store(location: str | Path, readonly: bool = False) -> StoreBackend:
    """The store at ``location`` (a path, ``sqlite:PATH`` or a backend URL); ``readonly``
    never creates nor writes it."""
    from replaykit.cassette.store import Store
    from replaykit.cassette.store.driver import StoreDriver

    scheme, target = split_location(location)
    if scheme not in STORES:
        raise ConfigError(
            f"unknown store backend {scheme!r} in store {redact(str(location))!r}; "
            f"use a folder, sqlite:PATH or one of: {', '.join(s + '://…' for s in STORES.names() if s != 'sqlite')}"
        )
    if scheme == "sqlite":
        target = str(Path(target).expanduser())
    driver = STORES.get(scheme)(target, readonly)
    if not isinstance(driver, StoreDriver):
        raise ConfigError(
            f"store backend {scheme!r} returned a {type(driver).__name__}, not a store driver "
            "(replaykit.cassette.store.driver.StoreDriver); check the plugin"
        )
    return Store(driver)


__all__ = ["STORES", "StoreOpener", "is_url", "open_store", "register_store", "split_location"]
