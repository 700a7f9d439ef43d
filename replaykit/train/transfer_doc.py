"""The ``transfer`` document: what it holds, its id, its check on read, and the table it gives.

A transfer document (kind ``transfer``, in the store's ``runs`` table) holds:

- ``training_id``, ``name``: the training whose harness it measured;
- ``harnesses``: ``[{role, sha}]`` — ``untrained`` (the training's first baseline), ``trained``
  (its final baseline), and ``agent:NAME`` when a named agent was measured too;
- ``configs``: ``[{label, name, digest, env}]`` — each config's label (its name; its file's
  stem where two share one), its episode-config digest and its environment kind;
- ``models``: the model names, in order;
- ``cells``: ``[{config, model, harness, harness_sha, run_id, solved, total}]`` — one run per
  config × model × harness role;
- ``runs`` and ``trees``: every cell's run id and harness SHA. These are what it references:
  bundle export and ``gc`` follow exactly them (the training itself is named, not referenced:
  a bundle of a transfer carries its runs, their cassettes and trees, not the training).

Nothing derived is trusted: on read (``verified_transfer``: ``report``, import, ``cassettes
verify``) each cell's counts and SHA are checked against its run (itself checked against its
cassettes), ``runs``/``trees`` against the cells, and the id against the content. The rates,
intervals and paired differences shown (:func:`transfer_table`) are computed from the runs
every time, never stored.
"""

from __future__ import annotations

from typing import TypedDict, cast

from replaykit.cassette.backend import DocumentStore, StoreHandle
from replaykit.core.determinism import digest_of
from replaykit.core.errors import StoreCorrupt
from replaykit.core.records import TrainingDocument
from replaykit.train.intervals import Movement, Rate, paired, rate

UNTRAINED = "untrained"


class TransferHarness(TypedDict):
    role: str  # untrained | trained | agent:NAME
    sha: str


class TransferConfig(TypedDict):
    label: str
    name: str
    digest: str
    env: str


class TransferCell(TypedDict):
    config: str  # a config's label
    model: str
    harness: str  # a harness role
    harness_sha: str
    run_id: str
    solved: int
    total: int


class TransferDocument(TypedDict):
    kind: str
    transfer_id: str
    training_id: str
    name: str
    harnesses: list[TransferHarness]
    configs: list[TransferConfig]
    models: list[str]
    cells: list[TransferCell]
    runs: list[str]
    trees: list[str]


class TransferRow(TypedDict):
    """One config × model of the table: each role's rate and each role's paired difference
    against the untrained harness (``None`` for the untrained one itself)."""

    config: str
    model: str
    rates: dict[str, Rate]
    against_untrained: dict[str, Movement]


def transfer_id_of(
    training_id: str,
    configs: list[TransferConfig],
    models: list[str],
    harnesses: list[TransferHarness],
    cells: list[TransferCell],
) -> str:
    runs = [[c["config"], c["model"], c["harness"], c["harness_sha"], c["run_id"]] for c in cells]
    return digest_of(["transfer", training_id, configs, models, harnesses, runs])[:16]


def put_transfer(
    store: DocumentStore,
    training: TrainingDocument,
    configs: list[TransferConfig],
    models: list[str],
    harnesses: list[TransferHarness],
    cells: list[TransferCell],
) -> TransferDocument:
    doc: TransferDocument = {
        "kind": "transfer",
        "transfer_id": transfer_id_of(training["training_id"], configs, models, harnesses, cells),
        "training_id": training["training_id"],
        "name": training.get("name", ""),
        "harnesses": harnesses,
        "configs": configs,
        "models": models,
        "cells": cells,
        "runs": list(dict.fromkeys(c["run_id"] for c in cells)),
        "trees": sorted({c["harness_sha"] for c in cells}),
    }
    store.put_doc(doc["transfer_id"], "transfer", dict(doc), name=doc["name"], model=",".join(models))
    return doc


def _corrupt(store: StoreHandle, what: str) -> StoreCorrupt:
    return StoreCorrupt(what, "", str(store.location))


def verify_transfer(store: DocumentStore, doc: TransferDocument) -> None:
    """``store corrupt`` unless every cell follows from its run and the id from the content."""
    tid = doc.get("transfer_id")
    try:
        cells, configs, harnesses = list(doc["cells"]), list(doc["configs"]), list(doc["harnesses"])
        models = [str(m) for m in doc["models"]]
        own = transfer_id_of(str(doc["training_id"]), configs, models, harnesses, cells)
    except (KeyError, TypeError, ValueError) as exc:
        raise _corrupt(
            store, f"transfer {tid}: not a transfer document ({type(exc).__name__}: {exc})"
        ) from None
    if own != tid:
        raise _corrupt(
            store, f"transfer {tid}: its cells, configs or harnesses are not the ones its id names"
        )
    labels, roles = {c.get("label") for c in configs}, {h.get("role") for h in harnesses}
    for cell in cells:
        run = store.get_run(str(cell.get("run_id")))
        store.check_run(run)  # its episodes against their cassettes
        where = f"transfer {tid}: cell {cell.get('config')} × {cell.get('model')} × {cell.get('harness')}"
        if (
            cell.get("config") not in labels
            or cell.get("harness") not in roles
            or cell.get("model") not in models
        ):
            raise _corrupt(store, f"{where} names a config, model or harness the document does not list")
        if cell.get("harness_sha") != run.harness_sha or cell.get("model") != run.model.name:
            raise _corrupt(store, f"{where}: its harness or model is not its run {run.run_id}'s")
        if (cell.get("solved"), cell.get("total")) != (run.solved, run.total):
            raise _corrupt(store, f"{where}: solved/total do not follow from its run {run.run_id}")
    if doc.get("runs") != list(dict.fromkeys(c["run_id"] for c in cells)) or doc.get("trees") != sorted(
        {c["harness_sha"] for c in cells}
    ):
        raise _corrupt(store, f"transfer {tid}: its runs or trees are not its cells'")


def verified_transfer(store: DocumentStore, transfer_id: str) -> TransferDocument:
    doc = cast(TransferDocument, store.get_doc(transfer_id, kind="transfer"))  # checked below
    verify_transfer(store, doc)
    return doc


def transfer_table(store: DocumentStore, doc: TransferDocument) -> list[TransferRow]:
    """Per config × model: each role's solve rate (with its interval) and each other role's
    paired difference against the untrained harness, from the runs."""
    rows: list[TransferRow] = []
    for config in doc["configs"]:
        for model in doc["models"]:
            runs = {
                c["harness"]: store.get_run(c["run_id"])
                for c in doc["cells"]
                if c["config"] == config["label"] and c["model"] == model
            }
            base = runs.get(UNTRAINED)
            rows.append(
                {
                    "config": config["label"],
                    "model": model,
                    "rates": {role: rate(run) for role, run in runs.items()},
                    "against_untrained": {
                        role: paired(base, run) for role, run in runs.items() if base and role != UNTRAINED
                    },
                }
            )
    return rows
