"""Raw SQL on a store's own connection, for tests that plant damage or count what is stored
beneath the store's API: SQLite's spelling (``?`` marks, ``[name]``) on either backend."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.store.driver import Row, StoreDriver, Where


class PgSql:
    """A psycopg connection taking the tests' SQLite spelling (``?`` → ``%s``, ``[x]`` → ``"x"``)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        text = re.sub(r"\[(\w+)\]", r'"\1"', sql)
        if params:
            text = text.replace("%", "%%").replace("?", "%s")
        return self.conn.execute(text, list(params) or None)


def raw_sql(store: StoreBackend) -> Any:
    """The store's own connection (``execute(sql, params)``), whichever the backend."""
    from replaykit.cassette.store import Store
    from replaykit.cassette.store.postgres import PgDriver
    from replaykit.cassette.store.sqlite import SqliteDriver

    assert isinstance(store, Store)
    driver = store.driver
    if isinstance(driver, SqliteDriver):
        return driver.conn
    assert isinstance(driver, PgDriver), f"no raw SQL for a {type(driver).__name__}"
    return PgSql(driver.conn)


def driver_of(store: StoreBackend) -> StoreDriver:
    """The driver under a store (what a backend implements)."""
    from replaykit.cassette.store import Store

    assert isinstance(store, Store)
    return store.driver


def rewrite(store: StoreBackend, table: str, where: Where, change: Callable[[Row], Row]) -> int:
    """Replace the rows matching ``where`` by ``change(row)``, beneath the store's checks (damage
    a test plants), through the driver's primitives: the same on every backend."""
    driver = driver_of(store)
    with driver.transaction():
        rows = driver.select(table, where=where)
        driver.delete(table, where)
        driver.insert(table, [change(dict(r)) for r in rows])
    return len(rows)


def register_dirstore() -> None:
    """Register tests/store_plugin's ``dirstore`` backend in this process (as its entry point would)."""
    import importlib.util
    from pathlib import Path

    from replaykit.cassette.stores import STORES, register_store

    if "dirstore" in STORES:
        return
    path = Path(__file__).parent / "store_plugin" / "replaykit_dirstore.py"
    spec = importlib.util.spec_from_file_location("replaykit_dirstore", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    register_store("dirstore", module.DirStore)
