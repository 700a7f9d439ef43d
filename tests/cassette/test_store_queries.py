"""The store boundary: named queries instead of SQL elsewhere, and the backend protocol."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from replaykit.cassette.certificates import Certificate
from replaykit.cassette.events import Episode, GradeEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.stores import is_url, open_store
from replaykit.core.run_doc import ModelRef
from replaykit.core.training_doc import NamedParams, TrainingDoc
from replaykit.envs.results import Grade

PACKAGE = Path(__file__).resolve().parents[2] / "replaykit"


def proxy_episode(name: str, endpoint: str) -> Episode:
    key = CassetteKey("", name, "", ModelId("", endpoint), 0, "cfg", kind="proxy")
    return Episode(key, [GradeEvent(Grade(1.0, True))], {})


def training(tid: str, spec: str) -> TrainingDoc:
    """A training of no epoch yet (as a training stores itself before its first)."""
    return TrainingDoc(
        training_id=tid,
        name="t",
        spec_digest=spec,
        harness_repo="/h",
        branch="main",
        initial_sha="a" * 40,
        final_baseline="a" * 40,
        chain=["a" * 40],
        epochs=[],
        estimator={"estimator": "patch_queue"},
        criterion=NamedParams(name="strict_pareto", params={}),
        optimizer=NamedParams(name="greedy_monotonic", params={}),
        model=ModelRef(name="m", endpoint="builtin"),
        config={},
        config_base_dir="/c",
    )


def test_find_trainings_by_spec_digest(store_location: str) -> None:
    store = open_store(store_location)
    t1, t2 = training("t1", "spec-a"), training("t2", "spec-b")
    store.put_doc("t1", "training", t1.to_json(), config_digest="spec-a")
    store.put_doc("t2", "training", t2.to_json(), config_digest="spec-b")
    store.put_doc("v1", "verdict", {"verdict_id": "v1"}, config_digest="spec-a")
    assert store.find_trainings("spec-a") == [t1]  # read into its model
    assert store.find_trainings("spec-c") == []


def test_find_proxy_sessions_by_name_and_endpoint(store_location: str) -> None:
    store = open_store(store_location)
    store.put_episode(proxy_episode("s", "http://a"))
    store.put_episode(proxy_episode("s", "http://b"))
    store.put_episode(proxy_episode("other", "http://a"))
    assert {r["endpoint"] for r in store.find_proxy_sessions("s")} == {"http://a", "http://b"}
    assert [r["endpoint"] for r in store.find_proxy_sessions("s", "http://b")] == ["http://b"]
    assert store.find_proxy_sessions("nobody") == []


def test_certificates_round_trip_and_reading_creates_nothing(store_location: str) -> None:
    store = open_store(store_location)
    store.put_episode(proxy_episode("s", "http://a"))  # an existing store without certificates
    store.close()
    index = Path(store_location) / "index.db"
    before = b"" if is_url(store_location) else index.read_bytes()
    reader = open_store(store_location)
    assert reader.get_certificate("c1") is None
    reader.close()
    assert is_url(store_location) or index.read_bytes() == before
    cert = Certificate(
        id="c1",
        task_id="t",
        task_digest="d",
        env_kind="local",
        image_id="",
        status="deterministic",
        reason="",
        run_id="r",
        episodes=1,
        doc={"cassettes": ["x"]},
        created_at="now",
    )
    store.put_certificate(cert)
    got = open_store(store_location).get_certificate("c1")
    assert got == cert  # the evidence stored as canonical JSON, decoded on read


def test_rows_for_bundles(store_location: str) -> None:
    store = open_store(store_location)
    assert not store.exists() and store.present("blobs", ["x"]) == {} and not store.exists()
    digest = store.put_blob(b"data")
    assert (
        digest == hashlib.sha256(b"data").hexdigest()
        and store.has_blob(digest)
        and not store.has_blob("0" * 64)
    )
    assert store.present("blobs", [digest, "0" * 64]) == {digest: 1}
    other = store.reopen()
    with other.transaction():
        other.insert_blobs({digest: b"data"})
        other.insert_rows("trees", [{"sha": "s1", "manifest": "{}"}])
    assert other.get_blob(digest) == b"data" and other.get_row("trees", "s1") == {
        "sha": "s1",
        "manifest": "{}",
    }
    assert other.present("trees", ["s1", "s2"], "manifest") == {"s1": "{}"}


def test_sql_lives_in_the_store_module_only() -> None:
    pattern = re.compile(
        r"\.db\[|index\.db|rows_where|(?<!def )execute\(|\bimport sqlite|\bimport psycopg|from psycopg"
    )
    offenders = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parent != Path("cassette/store")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []
