"""The store seam: every consumer typed against ``StoreBackend``; concrete stores only
through ``open_store`` (by URL scheme, a registry with entry points)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replaykit.cassette.store import Store
from replaykit.cassette.store.sqlite import SqliteDriver
from replaykit.cassette.stores import STORES, is_url, open_store, register_store, split_location
from replaykit.cassette.urls import redact
from replaykit.core.errors import ConfigError

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "replaykit"
#: where a concrete store class may be named: the backends themselves and the registry
OPENERS = {Path("cassette/stores.py")}


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("cassettes", ("sqlite", "cassettes")),
        ("/tmp/x:y", ("sqlite", "/tmp/x:y")),
        ("./a:b", ("sqlite", "./a:b")),
        ("sqlite:/tmp/s", ("sqlite", "/tmp/s")),
        ("sqlite:rel/s", ("sqlite", "rel/s")),
        ("sqlite:///tmp/s", ("sqlite", "/tmp/s")),
        ("postgresql://u@h/db", ("postgresql", "postgresql://u@h/db")),
        ("postgres://u@h/db", ("postgresql", "postgres://u@h/db")),
        ("s3x://bucket/p", ("s3x", "s3x://bucket/p")),
    ],
)
def test_locations_split_by_scheme(location: str, expected: tuple[str, str]) -> None:
    assert split_location(location) == expected
    assert is_url(location) == (expected[0] != "sqlite")


def test_paths_and_sqlite_urls_open_the_sqlite_store(tmp_path: Path) -> None:
    for location in (tmp_path / "a", str(tmp_path / "b"), f"sqlite:{tmp_path / 'c'}"):
        store = open_store(location)
        assert isinstance(store, Store) and store.location == str(location).removeprefix("sqlite:")
        store.put_blob(b"x")
        assert store.exists() and store.reopen(readonly=True).readonly


def test_unknown_scheme_is_one_clear_line() -> None:
    with pytest.raises(ConfigError, match=r"unknown store backend 'nosuch'.*postgresql://"):
        open_store("nosuch://host/db")


def test_a_registered_backend_is_opened_by_its_scheme(tmp_path: Path) -> None:
    opened: list[tuple[str, bool]] = []

    def opener(location: str, readonly: bool) -> SqliteDriver:
        opened.append((location, readonly))
        return SqliteDriver(tmp_path, readonly=readonly)

    register_store("memtest", opener)
    try:
        open_store("memtest://anything").put_blob(b"x")
        store = open_store("memtest://anything", readonly=True)
    finally:
        STORES.unregister("memtest")
    assert opened == [("memtest://anything", False), ("memtest://anything", True)] and store.readonly
    assert isinstance(store, Store) and store.count_cassettes() == 0


def test_a_backend_that_returns_no_driver_is_one_line() -> None:
    register_store("notadriver", lambda location, readonly: object())  # type: ignore[arg-type,return-value]
    try:
        with pytest.raises(
            ConfigError, match=r"store backend 'notadriver' returned a object, not a store driver"
        ):
            open_store("notadriver://x")
    finally:
        STORES.unregister("notadriver")


def test_redact_drops_only_the_password() -> None:
    assert redact("postgresql://u:secret@h:5/db?x=1") == "postgresql://u@h:5/db?x=1"
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"


def test_consumers_name_the_protocol_never_a_concrete_store() -> None:
    """Outside the backends and ``open_store``, no module imports or annotates ``Store``."""
    pattern = re.compile(
        r'cassette\.store import .*\bStore\b|(?::|->|\[|\|)\s*"?Store"?\s*(?:[\],|)=:]|$)|\bStore\('
    )
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parent == Path("cassette/store") or rel in OPENERS or rel.parent in OPENERS:
            continue
        offenders += [
            f"{rel}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)
        ]
    assert offenders == []
