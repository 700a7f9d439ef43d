"""The ``transfer`` document as one pydantic model (``TransferDoc``): what it holds, its id, its
check on read, and the table it gives.

A transfer document (kind ``transfer``, in the store's ``runs`` table) measures a training's
harness, untrained and trained, on other configs and models: one run per config × model ×
harness role (its fields say what each holds). ``runs`` and ``trees`` are what it references:
bundle export and ``gc`` follow exactly them (the training itself is named, not referenced: a
bundle of a transfer carries its runs, their cassettes and trees, not the training).

Nothing derived is trusted: on read (``verified_transfer``: ``report``, import, ``cassettes
verify``) each cell's counts and SHA are checked against its run (itself checked against its
cassettes), ``runs``/``trees`` against the cells, and the id against the content. The rates,
intervals and paired differences shown (:func:`transfer_table`) are computed from the runs
every time, never stored. ``TransferDoc.read`` a stored one, ``to_json`` what the store writes
(``core/document.py``); its parts are TypedDicts pydantic validates (extra keys kept), as the
report's sections hold them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from replaykit.cassette.backend import DocumentStore, StoreHandle
from replaykit.core.determinism import digest_of
from replaykit.core.document import Document
from replaykit.core.errors import StoreCorrupt
from replaykit.core.training_doc import TrainingDoc
from replaykit.train.intervals import Movement, Rate, paired, rate

UNTRAINED = "untrained"


@with_config(ConfigDict(extra="allow"))
class TransferHarness(TypedDict):
    """A harness measured, by its role."""

    role: Annotated[
        str,
        Field(
            description="untrained (the training's first baseline), trained (its final baseline) or agent:NAME (a named agent)."
        ),
    ]
    sha: Annotated[str, Field(description="Its harness commit.")]


@with_config(ConfigDict(extra="allow"))
class TransferConfig(TypedDict):
    """A config measured on."""

    label: Annotated[str, Field(description="Its label: its name (its file's stem where two share one).")]
    name: Annotated[str, Field(description="The config's name.")]
    digest: Annotated[str, Field(description="Its episode-config digest (with the training's harness).")]
    env: Annotated[str, Field(description="Its environment kind.")]


@with_config(ConfigDict(extra="allow"))
class TransferCell(TypedDict):
    """One config × model × harness role: its run and its counts."""

    config: Annotated[str, Field(description="The config, by its label.")]
    model: Annotated[str, Field(description="The model, by name.")]
    harness: Annotated[str, Field(description="The harness, by its role.")]
    harness_sha: Annotated[str, Field(description="The harness commit its run measured.")]
    run_id: Annotated[str, Field(description="Its run.")]
    solved: Annotated[int, Field(description="Episodes its run solved.")]
    total: Annotated[int, Field(description="Episodes its run measured.")]


class TransferDoc(Document):
    """A transfer (kind ``transfer``): a training's untrained and trained harness (and an agent)
    measured on each config × model; its id derives from its training, configs, models,
    harnesses and cells."""

    kind: str = Field(default="transfer", description="The document kind (always transfer).")
    transfer_id: str = Field(
        description="The transfer's id: a hash of its training, configs, models, harnesses and cells' runs."
    )
    training_id: str = Field(description="The training whose harness it measured.")
    name: str = Field(default="", description="The training's name.")
    harnesses: list[TransferHarness] = Field(description="The harnesses measured, by role.")
    configs: list[TransferConfig] = Field(description="The configs measured on.")
    models: list[str] = Field(description="The model names, in order.")
    cells: list[TransferCell] = Field(description="One run per config × model × harness role.")
    runs: list[str] = Field(
        default_factory=list, description="Its cells' runs, each once, in cell order (derived)."
    )
    trees: list[str] = Field(
        default_factory=list, description="Its cells' harness commits, sorted (derived)."
    )

    def _built(self) -> None:
        """``runs`` and ``trees`` are derived from its cells."""
        self._set("runs", own_runs(self.cells))
        self._set("trees", own_trees(self.cells))


def own_runs(cells: list[TransferCell]) -> list[str]:
    return list(dict.fromkeys(c["run_id"] for c in cells))


def own_trees(cells: list[TransferCell]) -> list[str]:
    return sorted({c["harness_sha"] for c in cells})


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
    training: TrainingDoc,
    configs: list[TransferConfig],
    models: list[str],
    harnesses: list[TransferHarness],
    cells: list[TransferCell],
) -> TransferDoc:
    doc = TransferDoc(
        transfer_id=transfer_id_of(training.training_id, configs, models, harnesses, cells),
        training_id=training.training_id,
        name=training.name,
        harnesses=harnesses,
        configs=configs,
        models=models,
        cells=cells,
    )
    store.put_doc(doc.transfer_id, "transfer", doc.to_json(), name=doc.name, model=",".join(models))
    return doc


def _corrupt(store: StoreHandle, what: str) -> StoreCorrupt:
    return StoreCorrupt(what, "", str(store.location))


def verify_transfer(store: DocumentStore, doc: TransferDoc) -> None:
    """``store corrupt`` unless every cell follows from its run and the id from the content."""
    tid, cells, models = doc.transfer_id, doc.cells, doc.models
    if transfer_id_of(doc.training_id, doc.configs, models, doc.harnesses, cells) != tid:
        raise _corrupt(
            store, f"transfer {tid}: its cells, configs or harnesses are not the ones its id names"
        )
    labels, roles = {c["label"] for c in doc.configs}, {h["role"] for h in doc.harnesses}
    for cell in cells:
        run = store.get_run(cell["run_id"])
        store.check_run(run)  # its episodes against their cassettes
        where = f"transfer {tid}: cell {cell['config']} × {cell['model']} × {cell['harness']}"
        if cell["config"] not in labels or cell["harness"] not in roles or cell["model"] not in models:
            raise _corrupt(store, f"{where} names a config, model or harness the document does not list")
        if cell["harness_sha"] != run.harness_sha or cell["model"] != run.model.name:
            raise _corrupt(store, f"{where}: its harness or model is not its run {run.run_id}'s")
        if (cell["solved"], cell["total"]) != (run.solved, run.total):
            raise _corrupt(store, f"{where}: solved/total do not follow from its run {run.run_id}")
    if doc.runs != own_runs(cells) or doc.trees != own_trees(cells):
        raise _corrupt(store, f"transfer {tid}: its runs or trees are not its cells'")


def read_transfer(store: DocumentStore, transfer_id: str) -> TransferDoc:
    """A stored transfer as its model (not verified: ``verified_transfer``); a document of
    another shape is store corruption."""
    data = store.get_doc(transfer_id, kind="transfer")
    try:
        return TransferDoc.read(data)
    except ValueError as exc:
        said = " ".join(str(exc).split())[:100]  # pydantic's lines, as one
        raise _corrupt(
            store, f"transfer {data.get('transfer_id')}: not a transfer document ({said})"
        ) from None


def verified_transfer(store: DocumentStore, transfer_id: str) -> TransferDoc:
    doc = read_transfer(store, transfer_id)
    verify_transfer(store, doc)
    return doc


def transfer_json(store: DocumentStore, doc: TransferDoc) -> dict[str, object]:
    """``transfer --json``: the document and its table (``transfer_table``)."""
    return {**doc.to_json(), "table": transfer_table(store, doc)}


def transfer_table(store: DocumentStore, doc: TransferDoc) -> list[TransferRow]:
    """Per config × model: each role's solve rate (with its interval) and each other role's
    paired difference against the untrained harness, from the runs."""
    rows: list[TransferRow] = []
    for config in doc.configs:
        for model in doc.models:
            runs = {
                c["harness"]: store.get_run(c["run_id"])
                for c in doc.cells
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
