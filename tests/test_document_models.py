"""Every stored document has one model (``core/records.py`` and its neighbours), and every
document of the shipped bundles reads into it and writes back to its own canonical bytes: so
its digest, its id and what an export writes never change. The bundles of key format 1
(``tests/data/format1``) are documents written before the models; ``tests/data/documents``
holds one of each kind the bundles lack (compare, a regraded run, certificates), recorded
before the models by the code of the time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.certificates import Certificate
from replaykit.core.compare_doc import CompareDoc
from replaykit.core.determinism import canonical_json
from replaykit.core.document import Document
from replaykit.core.run_doc import RunDoc
from replaykit.core.training_doc import EpochRecord, TrainingDoc
from replaykit.core.verdict_doc import VerdictDoc
from replaykit.exchange.reader import read_bundle
from replaykit.train.transfer_doc import TransferDoc

REPO = Path(__file__).resolve().parents[1]
BUNDLES = sorted((REPO / "cassettes").glob("*.tar.gz")) + sorted(
    (REPO / "tests/data/format1").glob("*.tar.gz")
)
DOCUMENTS = REPO / "tests" / "data" / "documents"

#: each stored kind's model
MODELS: dict[str, type[Document]] = {
    "measure": RunDoc,
    "verdict": VerdictDoc,
    "compare": CompareDoc,
    "training": TrainingDoc,
    "transfer": TransferDoc,
}
#: the kinds the shipped bundles hold (a compare result: tests/data/documents/compare.json)
IN_BUNDLES = {"measure", "verdict", "training", "transfer"}


def bundle_documents() -> Iterator[tuple[str, str, bytes]]:
    """(where, kind, the stored bytes) of every document of the shipped bundles."""
    for path in BUNDLES:
        sel = read_bundle(path)
        try:
            for row in sel.rows["runs"].values():
                yield f"{path.relative_to(REPO)}:{row['id']}", str(row["kind"]), sel.blobs[str(row["doc"])]
        finally:
            sel.blobs.close()


def fixture_documents() -> Iterator[tuple[str, str, bytes]]:
    yield "regraded-run.json", "measure", (DOCUMENTS / "regraded-run.json").read_bytes()
    yield "compare.json", "compare", (DOCUMENTS / "compare.json").read_bytes()


@pytest.mark.parametrize("source", ["bundles", "fixtures"])
def test_every_stored_document_reads_back_to_its_own_bytes(source: str) -> None:
    documents = [
        d for d in (bundle_documents() if source == "bundles" else fixture_documents()) if d[1] in MODELS
    ]
    assert documents
    if source == "bundles":  # every model has documents to read
        assert {kind for _, kind, _ in documents} == IN_BUNDLES
    for where, kind, data in documents:
        model = MODELS[kind].read(json.loads(data))
        assert canonical_json(model.to_json()).encode() == data, where
        assert model.version == 1


def test_a_run_built_in_code_is_what_the_store_held_before() -> None:
    """A run built from its parts writes every field (but the unset optional ones), as the
    hand-written ``to_dict`` did: a regraded run's document, recorded before the models,
    rebuilt field by field, is the same bytes."""
    stored = json.loads((DOCUMENTS / "regraded-run.json").read_bytes())
    read = RunDoc.read(stored)
    rebuilt = RunDoc(
        **{name: getattr(read, name) for name in RunDoc.model_fields if name not in ("solved", "total")}
    )
    assert canonical_json(rebuilt.to_json()) == canonical_json(stored)
    assert rebuilt.regraded_from and "version" not in rebuilt.to_json()


def test_a_stored_run_whose_counts_are_not_its_rows_is_refused() -> None:
    stored = json.loads((DOCUMENTS / "regraded-run.json").read_bytes())
    with pytest.raises(ValueError, match="solved/total"):
        RunDoc.read({**stored, "solved": stored["solved"] + 1})


def test_a_verdict_built_in_code_is_what_the_store_held_before() -> None:
    """A verdict built from its parts (as ``train/documents.put_verdict`` builds it) writes what
    the hand-written ``VerdictDoc.to_dict`` wrote: every verdict of the shipped bundles, rebuilt
    from its fields, is its stored bytes (``runs``/``trees`` derived, certificates sorted; one
    recorded before verdicts named certificates gains an empty list, as ``to_dict`` wrote)."""
    verdicts = [json.loads(data) for _, kind, data in bundle_documents() if kind == "verdict"]
    assert verdicts
    for stored in verdicts:
        read = VerdictDoc.read(stored)
        fields = {
            n: getattr(read, n) for n in VerdictDoc.model_fields if n not in ("runs", "trees", "version")
        }
        rebuilt = VerdictDoc(**{**fields, "certificates": list(reversed(read.certificates or []))})
        assert canonical_json(rebuilt.to_json()) == canonical_json({"certificates": [], **stored})
        assert "certified" not in rebuilt.to_json() and read.certified is None


def test_a_stored_verdict_of_another_shape_is_refused() -> None:
    data = next(data for _, kind, data in bundle_documents() if kind == "verdict")
    stored = json.loads(data)
    with pytest.raises(ValueError, match="accept"):
        VerdictDoc.read({**stored, "verdict": {**stored["verdict"], "accept": [1]}})
    kept = VerdictDoc.read({**stored, "verdict": {**stored["verdict"], "later": 1}})
    assert kept.to_json()["verdict"]["later"] == 1  # a newer writer's key is kept


def test_a_compare_result_built_in_code_is_what_the_store_held_before() -> None:
    """A compare result recorded before the models (``episodes.compare.store_compare`` wrote it
    by hand), rebuilt from its fields as ``store_compare`` builds it, is the same bytes (its
    runs and trees derived from its cells); what ``compare`` returns adds this invocation's
    counts, never stored."""
    stored = json.loads((DOCUMENTS / "compare.json").read_bytes())
    read = CompareDoc.read(stored)
    assert [c["solve_rate"] for c in read.cells] == [0.4375, 0.625] and read.model_calls is None
    rebuilt = CompareDoc(
        name=read.name,
        models=read.models,
        harnesses=read.harnesses,
        cells=read.cells,
        compare_id=read.compare_id,
    )
    assert canonical_json(rebuilt.to_json()) == canonical_json(stored)
    returned = rebuilt.replaced(model_calls=0, reused_events=0).to_json()
    assert returned == {**stored, "model_calls": 0, "reused_events": 0}
    with pytest.raises(ValueError, match="solved"):
        CompareDoc.read({**stored, "cells": [{**stored["cells"][0], "solved": "many"}]})


def test_certificates_stored_before_the_model_read_back_to_their_rows() -> None:
    """Certificate rows recorded before the model (``tests/data/documents/certificates.json``,
    as a bundle carries them: the evidence as canonical JSON) read into ``Certificate`` and
    write back the same row, byte for byte."""
    rows = json.loads((DOCUMENTS / "certificates.json").read_bytes())
    assert len(rows) == 2
    for row in rows:
        cert = Certificate.from_row(row)
        assert (
            cert.status == "deterministic" and cert.doc["cassettes"] and cert.doc["first_difference"] is None
        )
        assert cert.row() == row and canonical_json(cert.row()) == canonical_json(row)
        assert cert.version == 1
    with pytest.raises(ValueError, match="episodes"):
        Certificate.from_row({**rows[0], "episodes": "two"})


def test_a_bundles_certificate_row_is_stored_with_its_evidence_decoded(tmp_path: Path) -> None:
    """Import stores a bundle's certificate row (its evidence as canonical JSON text) as the
    certificate it is: read back, the evidence is the decoded object and the row the same."""
    from replaykit.cassette.store import Store
    from replaykit.exchange.importer import certificate_of

    row = json.loads((DOCUMENTS / "certificates.json").read_bytes())[0]
    store = Store(tmp_path / "store")
    store.put_certificate(certificate_of(row))
    got = store.get_certificate(row["id"])
    assert got is not None and got.doc == json.loads(row["doc"]) and got.row() == row


def stored(kind: str) -> list[dict[str, Any]]:
    """Every document of ``kind`` in the shipped bundles, as stored."""
    return [json.loads(data) for _, k, data in bundle_documents() if k == kind]


def test_a_training_built_in_code_is_what_the_store_held_before() -> None:
    """A training built from its parts, as ``train/documents.py`` builds it (its epochs as
    ``Loss.to_record`` gives them, what it references derived), writes what the hand-written
    dicts wrote: every training of the shipped bundles, format 1 and 2, rebuilt from its fields
    is its stored bytes (an optional key absent stays absent: ``format``, ``patch_queue``, an
    epoch's ``panels`` and ``smoke``)."""
    trainings = stored("training")
    assert len(trainings) == 4 and {t.get("format") for t in trainings} == {None, 2}
    derived = ("runs", "verdicts", "cassettes", "trees", "version")
    for data in trainings:
        read = TrainingDoc.read(data)
        epochs = [
            EpochRecord(**{n: getattr(e, n) for n in EpochRecord.model_fields if n in e.model_fields_set})
            for e in read.epochs
        ]
        fields = {n: getattr(read, n) for n in TrainingDoc.model_fields if n not in derived}
        rebuilt = TrainingDoc(**{**fields, "epochs": epochs})
        assert canonical_json(rebuilt.to_json()) == canonical_json(data)
        assert rebuilt.training_format == (data.get("format") or 1)


def test_a_read_epoch_keeps_its_keys_in_a_training_built_around_it() -> None:
    """A resumed training's document holds the epochs an earlier run recorded as they were read:
    an epoch recorded before a field existed stays without it when the document is rebuilt."""
    data = next(t for t in stored("training") if "format" not in t)
    old = {k: v for k, v in data["epochs"][0].items() if k != "promoted"}  # before promoted was stored
    read = TrainingDoc.read({**data, "epochs": [old]})
    again = TrainingDoc(**{n: getattr(read, n) for n in ("epochs", *read.model_fields_set) if n != "version"})
    assert again.to_json()["epochs"] == [old] and again.epochs[0].promoted is None
    assert "promoted" in EpochRecord(**{**old, "promoted": None}).to_json()  # built in code: held


def test_a_stored_training_of_another_shape_is_refused() -> None:
    data = stored("training")[0]
    with pytest.raises(ValueError, match="loss"):
        TrainingDoc.read({**data, "epochs": [{**data["epochs"][0], "loss": "big"}]})
    kept = TrainingDoc.read({**data, "later": 1, "epochs": [{**data["epochs"][0], "later": 2}]})
    assert kept.to_json()["later"] == 1 and kept.to_json()["epochs"][0]["later"] == 2


def test_a_transfer_built_in_code_is_what_the_store_held_before() -> None:
    """The shipped transfer document, rebuilt from its fields as ``put_transfer`` builds it (its
    runs and trees derived from its cells), is its stored bytes."""
    (data,) = stored("transfer")
    read = TransferDoc.read(data)
    rebuilt = TransferDoc(
        transfer_id=read.transfer_id,
        training_id=read.training_id,
        name=read.name,
        harnesses=read.harnesses,
        configs=read.configs,
        models=read.models,
        cells=read.cells,
    )
    assert canonical_json(rebuilt.to_json()) == canonical_json(data)
    with pytest.raises(ValueError, match="solved"):
        TransferDoc.read({**data, "cells": [{**data["cells"][0], "solved": "many"}]})


@pytest.mark.parametrize("model", [*MODELS.values(), Certificate], ids=lambda m: m.__name__)
def test_every_field_of_a_document_says_what_it_holds(model: type[Document]) -> None:
    """The descriptions live on the fields: every property of a document's JSON schema, and of
    the shapes it nests, has one."""
    schema = model.model_json_schema()
    shapes = {model.__name__: schema, **schema.get("$defs", {})}
    missing = [
        f"{name}.{field}"
        for name, shape in shapes.items()
        for field, spec in shape.get("properties", {}).items()
        if not spec.get("description")
    ]
    assert missing == []
