"""Compare harnesses × models: measure (or reuse) every cell, the "train once, swap
models" table. Beside ``run.measure``, which measures one cell."""

from __future__ import annotations

from pydantic import ValidationError

from replaykit.cassette.backend import DocumentStore
from replaykit.core.compare_doc import CompareCell, CompareDoc
from replaykit.core.determinism import digest_of
from replaykit.core.errors import CassetteNotFound, ConfigError, StoreCorrupt
from replaykit.core.modes import RecordMode
from replaykit.core.progress import Progress
from replaykit.episodes.agents import agent_identity
from replaykit.episodes.config import RunConfig
from replaykit.episodes.config_errors import validation_line
from replaykit.episodes.run import measure, run_store


def compare(
    config: RunConfig,
    models: list[str],
    harness_refs: list[str],
    record_mode: RecordMode = RecordMode.ONCE,
    progress: Progress | None = None,
) -> CompareDoc:
    """Measure (or reuse) every harness × model cell: the "train once, swap models" table.

    A harness given as ``ROLE=REF`` (``untrained=6ff33fa``, ``trained=main``) is measured at REF
    and shown by its role: cells, tables and charts name it ROLE (its SHA stays in each cell).
    A REF ``agent:NAME`` is that named agent's harness (its own repo, ``replaykit/agents/``)."""
    cells: list[CompareCell] = []
    repo = None
    labelled = [harness_role(h) for h in harness_refs]
    harness_refs = [label for label, _ in labelled]
    twice = next((h for i, h in enumerate(harness_refs) if h in harness_refs[:i]), None)
    if twice is not None:
        raise ConfigError(f"--harness names {twice!r} twice; give each harness (or role) once")
    # ``agent:NAME``: that named agent's harness (its own repo), checked before any cell runs
    configs = {ref: agent_config(config, ref, record_mode) for _, ref in labelled}
    if progress:
        progress("outer", {"total": len(models) * len(harness_refs), "label": "cell"})
    for label, ref in labelled:
        for name in models:
            model = config.model.model_copy(update={"name": name})
            cfg, at = configs[ref]
            result = measure(cfg, record_mode=record_mode, harness_ref=at, model=model, progress=progress)
            if progress:
                progress("outer_step", {"label": f"{label} × {name}"})
            run = result.run
            repo = repo or run.harness_repo
            cells.append(
                {
                    "harness": label,
                    "harness_sha": run.harness_sha,
                    "model": name,
                    "run_id": run.run_id,
                    "solved": run.solved,
                    "total": run.total,
                    "solve_rate": run.solved / max(run.total, 1),
                    "recorded": len(result.recorded),
                    "reused": len(result.reused),
                    "model_calls": result.model_calls,
                    "reused_events": result.reused_events,
                }
            )
    stored = store_compare(
        run_store(config, RecordMode.parse(record_mode)), config.name, models, harness_refs, cells
    )
    return stored.replaced(
        cells=cells,
        model_calls=sum(c.get("model_calls", 0) for c in cells),
        reused_events=sum(c.get("reused_events", 0) for c in cells),
    )


def agent_config(config: RunConfig, ref: str, record_mode: RecordMode) -> tuple[RunConfig, str | None]:
    """(the config, the ref) a ``--harness`` ref is measured with: ``agent:NAME`` is the named
    agent's harness (``harness.agent: NAME``, its own repo, at its HEAD), validated as a config is."""
    if not ref.startswith("agent:"):
        return config, ref
    name = ref.removeprefix("agent:")
    data = config.model_dump()
    data["harness"] = {**data["harness"], "agent": name}
    try:
        cfg = RunConfig.model_validate(data, context={"base_dir": config.base_dir})
    except ValidationError as exc:
        raise ConfigError(f"--harness {ref!r}: {validation_line(exc, model=RunConfig)}") from None
    cfg.base_dir = config.base_dir
    agent_identity(name, needed=record_mode != "none")  # its program, before any cell is measured
    return cfg, None


def harness_role(given: str) -> tuple[str, str]:
    """``ROLE=REF`` → (ROLE, REF); a bare ref is its own label."""
    role, sep, ref = given.partition("=")
    if not sep:
        return given, given
    if not role.strip() or not ref.strip():
        raise ConfigError(f"--harness {given!r}: expected ROLE=REF (e.g. trained=main) or a ref")
    return role.strip(), ref.strip()


def store_compare(
    store: DocumentStore, name: str, models: list[str], harness_refs: list[str], cells: list[CompareCell]
) -> CompareDoc:
    """Keep a compare result in the store (kind ``compare``, id from its cells) so `replaykit report` can show it."""
    stable: list[CompareCell] = [
        {
            "harness": c["harness"],
            "harness_sha": c["harness_sha"],
            "model": c["model"],
            "run_id": c["run_id"],
            "solved": c["solved"],
            "total": c["total"],
            "solve_rate": c["solve_rate"],
        }
        for c in cells
    ]
    compare_id = compare_id_of(models, harness_refs, stable)
    doc = CompareDoc(name=name, models=models, harnesses=harness_refs, cells=stable, compare_id=compare_id)
    store.put_doc(compare_id, "compare", doc.to_json(), name=name, model=",".join(models))
    return doc


def compare_id_of(models: list[str], harness_refs: list[str], cells: list[CompareCell]) -> str:
    """A compare's id: its models, harnesses and cells' (SHA, model, run)."""
    return digest_of([models, harness_refs, [[c["harness_sha"], c["model"], c["run_id"]] for c in cells]])[
        :16
    ]


def _cell_problem(store: DocumentStore, doc: CompareDoc, cell: CompareCell) -> str | None:
    """What is wrong with one cell against the run it names (None: it is what its run gives)."""
    try:
        run = store.get_run(str(cell["run_id"]))
    except CassetteNotFound:
        return f"its cell {cell.get('harness')} × {cell.get('model')} names run {cell['run_id']}, not in the store"
    store.check_run(run)  # the run's episodes against their cassettes
    if cell["harness"] not in doc.harnesses or cell["model"] not in doc.models:
        return f"its cell {cell['harness']} × {cell['model']} is not one of its harnesses × models"
    own = {
        "harness_sha": run.harness_sha,
        "model": run.model.name,
        "solved": run.solved,
        "total": run.total,
    }
    wrong = [k for k, v in own.items() if cell.get(k) != v]
    if cell.get("solve_rate") != run.solved / max(run.total, 1):
        wrong.append("solve_rate")
    return (
        f"cell {cell['harness']} × {cell['model']} field(s) {', '.join(wrong)} do not follow from run {run.run_id}"
        if wrong
        else None
    )


def verify_compare(store: DocumentStore, doc: CompareDoc, compare_id: str) -> None:
    """``store corrupt`` unless every cell of a stored compare is what its run gives (solved,
    total, rate, harness SHA, model) and its id, runs and trees are its cells' (a compare is
    derived from its runs: recomputed, never trusted)."""

    def corrupt(what: str) -> StoreCorrupt:
        return StoreCorrupt(f"compare {compare_id}: {what} (forged or corrupt)", "", str(store.location))

    cells, models, harnesses = doc.cells, doc.models, doc.harnesses
    problem = next((p for c in cells if (p := _cell_problem(store, doc, c))), None)
    if problem:
        raise corrupt(problem)
    if doc.runs != [c["run_id"] for c in cells] or doc.trees != sorted({c["harness_sha"] for c in cells}):
        raise corrupt("its runs or trees are not its cells'")
    if compare_id_of(models, harnesses, cells) != compare_id or doc.compare_id != compare_id:
        raise corrupt("its models, harnesses and cells are not the ones its id names")


def read_compare(store: DocumentStore, compare_id: str) -> CompareDoc:
    """A stored compare result as its model, checked against its row (not recomputed:
    ``verified_compare``); a document of another shape is store corruption."""
    full = store.resolve_id("runs", compare_id, what="compare")
    try:
        return CompareDoc.read(store.get_doc(full, kind="compare"))
    except ValueError as exc:
        raise StoreCorrupt(
            f"compare {full}: its document is not a compare result ({str(exc)[:80]}) (forged or corrupt)",
            "",
            str(store.location),
        ) from None


def verified_compare(store: DocumentStore, compare_id: str) -> CompareDoc:
    """A stored compare result, every cell recomputed from its run first."""
    full = store.resolve_id("runs", compare_id, what="compare")
    doc = read_compare(store, full)
    verify_compare(store, doc, full)
    return doc
