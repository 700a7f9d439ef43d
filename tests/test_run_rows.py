"""``core/run_rows.py``: the listing's reader of a run document, held to ``RunDoc``.

``replaykit runs`` reads a run's rows without pydantic (issue 39 item 6); it must check what
``RunDoc.read`` checks: its shapes name the model's fields (required where the model requires
them), it never accepts a document the model refuses, and what it accepts it reads as the model
does. Whatever it refuses, ``runs`` reads with ``RunDoc`` after all: the listing is the same.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from replaykit.cassette.store import Store
from replaykit.core.errors import StoreError
from replaykit.core.run_doc import EpisodeSummary, ModelRef, Panel, RunDoc
from replaykit.core.run_rows import EPISODE_SUMMARY, MODEL_REF, PANEL, RUN_DOC, Shape, read_run_rows
from replaykit.episodes.listing import damage_line
from replaykit.exchange.importer import import_bundle

REPO = Path(__file__).resolve().parents[1]
BUNDLE = REPO / "cassettes" / "quickstart-training.tar.gz"
#: values put in place of a field: every JSON type, and what pydantic coerces
ODD: list[Any] = [None, "", "x", "1", 0, 1, -1, 1.0, 1.5, True, False, [], ["x"], [1], {}, {"x": 1}]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The run documents of the shipped quickstart training, as stored."""
    store = Store(tmp_path_factory.mktemp("rows") / "store")
    import_bundle(store, BUNDLE)
    docs = [dict(store.get_doc(r["id"], "measure")) for r in store.list_runs() if r["kind"] == "measure"]
    assert docs
    return docs


@pytest.mark.parametrize(
    ("shape", "model"),
    [(RUN_DOC, RunDoc), (EPISODE_SUMMARY, EpisodeSummary), (MODEL_REF, ModelRef), (PANEL, Panel)],
)
def test_the_shapes_name_the_models_fields(shape: Shape, model: type[BaseModel]) -> None:
    assert {n: required for n, (_, required) in shape.items()} == {
        n: info.is_required() for n, info in model.model_fields.items()
    }


def _same(doc: dict[str, Any]) -> None:
    """``read_run_rows`` refuses ``doc``, or reads what ``RunDoc.read`` reads of it."""
    try:
        rows = read_run_rows(doc)
    except ValueError:
        return
    run = RunDoc.read(copy.deepcopy(doc))  # raises when the listing accepted what the model refuses
    assert (rows.run_id, rows.cassettes, rows.model_calls, rows.reused_events) == (
        run.run_id,
        run.cassettes,
        run.model_calls,
        run.reused_events,
    )
    for row, summary in zip(rows.episodes, run.episodes, strict=True):
        assert (row.unit, row.paid_calls) == (summary.unit, summary.paid_calls)
        for name in ("task_id", "seed", "cassette_id", "reward", "passed", "infra_failure", "reused_events"):
            assert getattr(row, name) == getattr(summary, name) and type(getattr(row, name)) is type(
                getattr(summary, name)
            ), name


def test_stored_runs_read_as_the_model_reads_them(runs: list[dict[str, Any]]) -> None:
    for doc in runs:
        read_run_rows(doc)  # accepted as stored
        _same(doc)


def _variants(doc: dict[str, Any], shape: Shape, at: list[Any]) -> list[dict[str, Any]]:
    """``doc`` with the part at path ``at`` changed each way: each field of ``shape`` removed,
    or given each odd value."""
    out = []
    for name in shape:
        for value in [KeyError, *ODD]:
            changed = copy.deepcopy(doc)
            part = changed
            for step in at:
                part = part[step]
            if value is KeyError:
                part.pop(name, None)
            else:
                part[name] = value
            out.append(changed)
    return out


def test_it_never_accepts_what_the_model_refuses(runs: list[dict[str, Any]]) -> None:
    doc = runs[0]
    variants = [
        *_variants(doc, RUN_DOC, []),
        *_variants(doc, EPISODE_SUMMARY, ["episodes", 0]),
        *_variants(doc, MODEL_REF, ["model"]),
        *_variants(doc, PANEL, ["panel"]),
    ]
    refused = 0
    for variant in variants:
        try:
            RunDoc.read(copy.deepcopy(variant))
        except ValueError:
            refused += 1
            with pytest.raises(ValueError):
                read_run_rows(variant)
            continue
        _same(variant)
    assert refused > 100  # the variants reach the model's checks


def test_solved_and_total_must_be_the_rows(runs: list[dict[str, Any]]) -> None:
    doc = copy.deepcopy(runs[0])
    doc["solved"] = int(doc.get("solved", 0)) + 1
    with pytest.raises(ValueError):
        RunDoc.read(copy.deepcopy(doc))
    with pytest.raises(ValueError):
        read_run_rows(doc)


def test_runs_lists_a_coerced_or_damaged_document_as_the_model_reads_it(tmp_path: Path) -> None:
    """A document the reader refuses is read with ``RunDoc``: one pydantic reads (``passed: 1``)
    is listed with its figures, one it refuses is marked damaged in the model's words."""
    from tests.cli_runner import cli

    store = Store(tmp_path / "store")
    import_bundle(store, BUNDLE)
    run_id = next(r["id"] for r in store.list_runs() if r["kind"] == "measure")
    before = json.loads(cli("runs", "--kind", "measure", "--store", str(tmp_path / "store"), "--json").stdout)
    doc: dict[str, Any] = json.loads(json.dumps(store.get_doc(run_id, "measure")))
    doc["episodes"][0]["passed"] = int(doc["episodes"][0].get("passed", False))  # pydantic reads 1 as True
    with pytest.raises(ValueError):
        read_run_rows(doc)
    row = next(r for r in store.list_runs() if r["id"] == run_id)
    mirrors = {k: str(row[k]) for k in ("name", "harness_sha", "model", "endpoint", "config_digest")}
    store.put_doc(run_id, "measure", doc, **mirrors)
    coerced = json.loads(
        cli("runs", "--kind", "measure", "--store", str(tmp_path / "store"), "--json").stdout
    )
    assert [{k: v for k, v in r.items() if k != "created_at"} for r in coerced] == [
        {k: v for k, v in r.items() if k != "created_at"} for r in before
    ]
    doc["episodes"][0]["passed"] = "perhaps"  # no model reads that
    store.put_doc(run_id, "measure", doc, **mirrors)
    damaged = json.loads(
        cli("runs", "--kind", "measure", "--store", str(tmp_path / "store"), "--json").stdout
    )
    marked = next(r for r in damaged if r["id"] == run_id)
    with pytest.raises(StoreError) as refused:
        store.get_run(run_id)
    assert marked["damaged"] == damage_line(refused.value)  # get_run's words, as before
    assert marked["damaged"].startswith("its document is not a run (1 validation error for RunDoc")
