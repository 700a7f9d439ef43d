"""``replaykit reproduce SOURCE``: someone's shared comparison, reproduced in one command.

SOURCE is a bundle file or an ``oci://`` reference. It is imported into a scratch store of its
own (verified completely first, derived documents recomputed: ``cassettes import``'s path), then
every root it holds (the bundle's root, and each document no other document of it names: the
comparisons a training carries) is replayed offline (a training epoch by epoch, a compare or
verdict run by run, a run or a cassette episode by episode) and its charts are drawn again (the
report's figures, as SVG; their sha256 in ``--json``, the files with ``--charts DIR``). One line
per root: ``identical``, or where it first parted. No engine, no network (an ``oci://`` source is
fetched first, from its registry), Docker running or not; the scratch store is removed after.

``--chart NAME=FILE`` writes one chart where a README shows it: NAME as ``--json`` lists it
(``transfer``, ``curve``, …; ``ROOT:NAME`` with a root id prefix when several roots draw one of
that name), FILE a ``.svg`` (the bytes ``--charts`` writes and ``report`` inlines) or a ``.png``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict

from replaykit.cassette.backend import BrowseStore, DocumentStore, StoreBackend
from replaykit.cassette.stores import open_store
from replaykit.core.determinism import sha256_hex
from replaykit.core.errors import ConfigError, DivergenceReport, ReplaykitError
from replaykit.core.progress import Progress
from replaykit.core.stale import owned_temp_dir
from replaykit.episodes.replay import replay_cassette, replay_runs
from replaykit.exchange.bundle_format import Selection
from replaykit.exchange.importer import import_selection
from replaykit.exchange.oci.pull import fetch
from replaykit.exchange.oci.reference import OciRef
from replaykit.exchange.reader import read_bundle
from replaykit.exchange.refs import doc_refs
from replaykit.report import charts
from replaykit.report.build import KINDS, build
from replaykit.train.audit import replay_training
from replaykit.train.derived import verify_document

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: how a reproduction gets its selection (verified, nothing written) and what is known of its source
Fetch = Callable[[], tuple[Selection, Mapping[str, object]]]


class Chart(TypedDict):
    name: str
    sha256: str  # of the SVG drawn
    path: NotRequired[str]  # where ``--charts DIR`` wrote it
    files: NotRequired[list[str]]  # where ``--chart NAME=FILE`` wrote it


#: ``--chart NAME=FILE``: (NAME or ROOT:NAME, FILE ending .svg or .png)
ChartFile = tuple[str, Path]
CHART_SUFFIXES = (".svg", ".png")


def chart_file(given: str) -> ChartFile:
    """``NAME=FILE`` checked before anything is read: one line when it is not one."""
    name, sep, file = (part.strip() for part in given.partition("="))
    if not sep or not name or not file or Path(file).suffix not in CHART_SUFFIXES:
        raise ConfigError(
            f"{given!r}: expected NAME=FILE with FILE ending .svg or .png, e.g. transfer=docs/chart.svg"
        )
    return name, Path(file)


class RootResult(TypedDict):
    """One root: what it is, whether its replay was identical, where it first parted, its charts."""

    id: str
    kind: str
    identical: bool
    replayed: int  # runs (or cassettes) replayed for it
    divergence: str | None  # the first: ``run R: episode E, event P (kind): reason``
    charts: list[Chart]


class Reproduction(TypedDict):
    source: str
    root: str  # the bundle's root id
    identical: bool
    roots: list[RootResult]
    digest: NotRequired[str]  # an oci:// source's manifest digest


def roots_of(sel: Selection) -> list[tuple[str, str]]:
    """(id, kind) of the bundle's root, then every document no other document of it references."""
    named: set[str] = set()
    kinds: dict[str, str] = {}
    for key, row in sel.rows["runs"].items():
        kinds[key] = str(row.get("kind") or "measure")
    for key in kinds:
        doc = sel_doc(sel, key)
        named.update(doc_refs(doc, f"document {key}")["runs"])
    root = sel.root
    first = [(root["id"], root.get("kind", "cassette"))]
    rest = sorted((k, kind) for k, kind in kinds.items() if k not in named and k != root["id"])
    return first + rest


def sel_doc(sel: Selection, key: str) -> object:
    """A document of the selection, read from its spool (before the import closes it)."""
    return json.loads(sel.blobs[str(sel.rows["runs"][key]["doc"])])


def _parted(run_id: str, divergence: DivergenceReport | None) -> str:
    if not divergence:
        return f"run {run_id}: not identical"
    return (
        f"run {run_id[:16]}: episode {str(divergence.get('episode', ''))[:16]}, event"
        f" {divergence.get('position')} ({divergence.get('kind', '?')}): {divergence.get('reason', '')}"
    )


def replay_root(
    store: StoreBackend, root_id: str, kind: str, progress: Progress | None
) -> tuple[bool, int, str | None]:
    """Replay one root offline: (identical, runs or cassettes replayed, the first divergence)."""
    if kind == "training":
        report = replay_training(store, root_id, progress=progress)
        first = next((r for r in report["runs"] if not r["identical"]), None)
        epoch = next((e for e in report["epochs"] if not e["identical"]), None)
        where = (
            _parted(first["run_id"], first["divergence"])
            if first
            else f"epoch {epoch['epoch']}: {', '.join(epoch['differs_in'])} differ"
            if epoch
            else None
        )
        if not report["identical"] and where is None:
            where = f"final baseline {report['replayed_final_baseline'][:10]}, recorded {report['final_baseline'][:10]}"
        return report["identical"], len(report["runs"]), where
    if kind in ("cassette", "fork"):
        one = replay_cassette(store, root_id, None, None)
        return one["identical"], 1, None if one["identical"] else _parted(root_id, one["divergence"])
    runs = _runs_of(store, root_id, kind)
    reports = replay_runs(store, runs, progress=progress)
    bad = next((r for r in reports if not r["identical"]), None)
    return bad is None, len(reports), None if bad is None else _parted(bad["run_id"], bad["divergence"])


def _runs_of(store: DocumentStore, root_id: str, kind: str) -> list[str]:
    if kind == "measure":
        return [root_id]
    doc = store.get_doc(root_id)
    if kind == "verdict":
        return [str(doc.get("baseline_run")), str(doc.get("candidate_run"))]
    listed = doc.get("runs")
    return [str(r) for r in listed] if isinstance(listed, list) else []


def redraw(
    store: BrowseStore, root_id: str, kind: str, folder: Path | None, wanted: Sequence[ChartFile] = ()
) -> list[Chart]:
    """The root's report figures drawn again, as SVG (written into ``folder`` when given, and
    each one ``wanted`` names into its file)."""
    if kind not in KINDS:
        return []
    _, figures = build(store, root_id)
    out: list[Chart] = []
    for name, figure in sorted(figures.items()):
        text = charts.svg(figure)
        chart: Chart = {"name": name, "sha256": sha256_hex(text.encode("utf-8"))}
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{root_id[:16]}-{name}.svg"
            path.write_text(text, encoding="utf-8")
            chart["path"] = str(path)
        files = [file for asked, file in wanted if _names(asked, root_id, name)]
        for file in files:
            _write_chart(file, text, figure)
        if files:
            chart["files"] = [str(f) for f in files]
        out.append(chart)
    return out


def _names(asked: str, root_id: str, name: str) -> bool:
    """Whether ``--chart``'s NAME (or ROOT:NAME) names the chart ``name`` of ``root_id``."""
    root, sep, chart = asked.rpartition(":")
    return chart == name and (not sep or root_id.startswith(root))


def _write_chart(file: Path, text: str, figure: Figure) -> None:
    """One chart into ``file`` (its suffix says SVG or PNG), atomically."""
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(f".{file.name}.tmp")
    if file.suffix == ".svg":
        tmp.write_text(text, encoding="utf-8")
    else:
        charts.save_png(figure, tmp)
    tmp.replace(file)


def check_chart_files(wanted: Sequence[ChartFile], results: list[RootResult]) -> None:
    """One line when a ``--chart`` NAME named no chart drawn, or several (of other roots)."""
    for asked, _ in wanted:
        drawn = [
            (r["id"], c["name"]) for r in results for c in r["charts"] if _names(asked, r["id"], c["name"])
        ]
        if len(drawn) == 1:
            continue
        if not drawn:
            every = ", ".join(f"{r['id'][:8]}:{c['name']}" for r in results for c in r["charts"])
            raise ReplaykitError(
                f"--chart {asked!r}: no chart of that name was drawn; drawn: {every or 'none'}"
            )
        both = ", ".join(f"{root[:8]}:{name}" for root, name in drawn)
        raise ReplaykitError(
            f"--chart {asked!r}: drawn by {len(drawn)} roots ({both}); name one as ROOT:NAME"
        )


def reproduce(
    source: str,
    fetched: Fetch,
    charts_dir: Path | None = None,
    progress: Progress | None = None,
    chart_files: Sequence[ChartFile] = (),
) -> Reproduction:
    """Import ``fetch()``'s selection into a scratch store, replay and redraw every root
    (``chart_files``: ``--chart NAME=FILE``, checked once every root is drawn)."""
    sel, known = fetched()
    scratch = owned_temp_dir("reproduce")
    try:
        roots = roots_of(sel)
        store = open_store(str(scratch / "store"))
        import_selection(store, sel, source, verify_document)
        results: list[RootResult] = []
        for root_id, kind in roots:
            identical, replayed, where = replay_root(store, root_id, kind, progress)
            results.append(
                {
                    "id": root_id,
                    "kind": kind,
                    "identical": identical,
                    "replayed": replayed,
                    "divergence": where,
                    "charts": redraw(store, root_id, kind, charts_dir, chart_files),
                }
            )
        store.close()
    finally:
        sel.blobs.close()
        shutil.rmtree(scratch, ignore_errors=True)
    check_chart_files(chart_files, results)
    done: Reproduction = {
        "source": source,
        "root": sel.root["id"],
        "identical": all(r["identical"] for r in results),
        "roots": results,
    }
    if isinstance(known.get("digest"), str):
        done["digest"] = str(known["digest"])
    return done


def from_bundle(path: Path) -> Fetch:
    """A bundle file, read and verified when asked."""
    return lambda: (read_bundle(path), {})


def from_registry(ref: OciRef, insecure: bool = False, verify_key: Path | None = None) -> Fetch:
    """An ``oci://`` artefact, fetched and verified when asked (its signature with ``verify_key``)."""
    return lambda: fetch(ref, insecure, verify_key)
