"""The store's row TypedDicts name what its tables hold: the same columns as the schema,
and rows read back from either backend carrying exactly those keys, of those types."""

from __future__ import annotations

import types
from collections.abc import Mapping
from pathlib import Path
from typing import Union, assert_type, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from replaykit.cassette.certificates import Certificate
from replaykit.cassette.events import EnvEvent, Episode, Event, GradeEvent
from replaykit.cassette.integrity import CASSETTE_DERIVED, cassette_columns
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.store.browsing import _COLUMNS, EpisodeFacets, EpisodeListing
from replaykit.cassette.store.schema import EXTRA_TABLES, SCHEMA, CassetteColumns, CassetteRow, RunsRow
from replaykit.cassette.store.search import SearchHit, SearchIndex
from replaykit.cassette.stores import open_store
from replaykit.core.errors import CassetteNotFound, StoreCorrupt
from replaykit.core.run_doc import EpisodeSummary, ModelRef, RunDoc
from replaykit.envs.results import Grade, Observation


def _types(hint: object) -> tuple[type, ...]:
    """The runtime classes a value of ``hint`` may be (``int | None`` → int, NoneType)."""
    options = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    return tuple(dict if is_typeddict(o) else get_origin(o) or o for o in options)


def mismatches(row: Mapping[str, object], shape: type) -> list[str]:
    """Keys of ``row`` that ``shape`` does not declare, lacks, or holds with another type."""
    hints = get_type_hints(shape)
    required: frozenset[str] = vars(shape)["__required_keys__"]
    bad = [f"extra {k}" for k in row if k not in hints] + [f"missing {k}" for k in required if k not in row]
    bad += [
        f"{k}: {type(v).__name__}"
        for k, v in row.items()
        if k in hints and not isinstance(v, _types(hints[k]))
    ]
    return bad


@pytest.mark.parametrize(
    ("shape", "columns"),
    [
        (CassetteRow, SCHEMA["cassettes"]["columns"]),
        (RunsRow, SCHEMA["runs"]["columns"]),
        (Certificate, EXTRA_TABLES["certificates"]["columns"]),
    ],
)
def test_each_row_shape_is_its_table(shape: type, columns: dict[str, type]) -> None:
    hints = (  # a certificate's model: its fields but its format (no column: every one is 1)
        {n: f.annotation for n, f in Certificate.model_fields.items() if n != "version"}
        if shape is Certificate
        else get_type_hints(shape)
    )
    assert set(hints) == set(columns), shape.__name__
    for column, kind in columns.items():
        if column != "doc" or shape is not Certificate:  # a certificate holds its evidence decoded
            assert kind in _types(hints[column]), (shape.__name__, column)


def test_derived_columns_and_listings_name_their_columns() -> None:
    assert set(get_type_hints(CassetteColumns)) == set(CASSETTE_DERIVED)
    assert set(get_type_hints(CassetteRow)) - set(CASSETTE_DERIVED) == {"doc", "created_at"}
    assert tuple(get_type_hints(EpisodeListing)) == _COLUMNS


def _episode(seed: int, kind: str = "episode", graded: bool = True) -> Episode:
    key = CassetteKey("a" * 40, "task", "d" * 64, ModelId("m", "http://e", "r"), seed, "cfg", kind=kind)
    events: list[Event] = [EnvEvent("echo hi", Observation("hi\n", "", 0), "s" * 64)]
    if graded:
        events.append(GradeEvent(Grade(0.5, False)))
    return Episode(key, events, {})


def test_rows_read_back_have_their_shape(store_location: str) -> None:
    store = open_store(store_location)
    graded, ungraded, proxy = _episode(1), _episode(2, graded=False), _episode(3, kind="proxy")
    for episode in (graded, ungraded, proxy):
        store.put_episode(episode)
        assert mismatches(cassette_columns(episode), CassetteColumns) == []
    summary = EpisodeSummary(
        task_id="task", seed=1, cassette_id=graded.id, reward=0.5, steps=1, digest=graded.digest
    )
    model = ModelRef(name="m", endpoint="http://e")
    store.put_run(
        RunDoc(
            run_id="r1",
            name="n",
            harness_sha="a" * 40,
            model=model,
            config_digest="cfg",
            cassettes=[graded.id],
            episodes=[summary],
        )
    )
    store.put_certificate(
        Certificate(
            id="c1",
            task_id="task",
            task_digest="d",
            env_kind="local",
            image_id="",
            status="deterministic",
            reason="",
            run_id="r1",
            episodes=1,
            doc={"cassettes": []},
            created_at="now",
        )
    )
    reader = open_store(store_location, readonly=True)
    for episode in (graded, ungraded):
        assert mismatches(reader.cassette_row(episode.id), CassetteRow) == []
        assert mismatches(reader.verified_columns(episode.id), CassetteColumns) == []
    assert reader.cassette_row(ungraded.id)["passed"] is None
    assert [mismatches(r, CassetteRow) for r in reader.find_proxy_sessions("task")] == [[]]
    summaries = reader.cassette_summaries()
    assert len(summaries) == 3 and all(mismatches(r, CassetteRow) == [] for r in summaries)
    assert [r["id"] for r in reader.cassette_summaries(2)] == [r["id"] for r in summaries[1:]]
    rows, total = reader.episode_page({"kind": "episode"})
    assert total == 2 and all(mismatches(r, EpisodeListing) == [] for r in rows)
    facets = reader.episode_facets()
    assert mismatches(facets, EpisodeFacets) == [] and facets["seed"] == [1, 2]
    assert all(isinstance(v, int) for v in facets["seed"]) and facets["model"] == ["m"]
    assert [mismatches(r, RunsRow) for r in reader.list_runs()] == [[]]
    assert [mismatches(r, RunsRow) for r in reader.doc_rows("measure")] == [[]]
    record = reader.get_certificate("c1")
    assert record is not None
    assert {k: type(v) for k, v in record.row().items()} == EXTRA_TABLES["certificates"]["columns"]
    assert record.doc == {"cassettes": []}


def test_search_hits_have_their_shape(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path / "search.db")
    index.add([("c1", "h1", "task", 3, "m", "the needle is here")])
    hits, total = index.search("needle")
    assert total == 1 and [mismatches(h, SearchHit) for h in hits] == [[]] and hits[0]["seed"] == 3
    index.close()


def test_documents_read_back_as_their_kind(store_location: str) -> None:
    """``get_doc`` gives a document as a mapping (mypy checks ``assert_type``), ``get_training`` a
    training as its model (one of another shape is store corruption); the store still refuses a
    document of another kind."""
    store = open_store(store_location)
    store.put_doc("t1", "training", {"training_id": "t1", "kind": "training"})
    store.put_doc("n1", "note", {"hello": "world"})
    training = assert_type(store.get_doc("t1", kind="training"), Mapping[str, object])
    assert training["training_id"] == "t1"
    with pytest.raises(StoreCorrupt, match=r"its document is not a training .*name Field required") as bad:
        store.get_training("t1")  # it holds none of a training's epochs, chain, spec, ...
    assert "\n" not in str(bad.value) and "(training t1)" in str(bad.value)
    note = assert_type(store.get_doc("n1"), Mapping[str, object])
    assert note == {"hello": "world"}
    with pytest.raises(CassetteNotFound, match="is a note, not a verdict"):
        store.get_doc("n1", kind="verdict")
