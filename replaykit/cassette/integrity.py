"""What a stored row must agree with: one source of truth for writing and verifying.

A cassette row caches columns derived from its episode (key columns, digest,
counts, the grade, tokens). :func:`cassette_columns` computes them; the store
writes exactly that, and every read (``Store.get_episode``), ``cassettes verify``
and bundle import/export compare a row with it (:func:`cassette_mismatches`). A
runs-table row (run, training, verdict, …) must name itself in its document
(:func:`doc_mismatches`). A blob must hash to its address (:func:`blob_ok`). A harness
tree's manifest must name only relative paths inside the tree (:func:`tree_manifest`), in the
store and at the bundle border alike: nothing planted is written outside its folder.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from replaykit.core.determinism import canonical_json

if TYPE_CHECKING:
    from replaykit.cassette.events import Episode
    from replaykit.cassette.lineage import ReuseCounts
    from replaykit.cassette.store.schema import CassetteColumns
    from replaykit.core.run_doc import EpisodeSummary

#: columns of a cassette row that are derived from its episode (all but ``doc`` and ``created_at``)
CASSETTE_DERIVED = (
    "id",
    "kind",
    "harness_sha",
    "task_id",
    "task_digest",
    "model",
    "endpoint",
    "model_revision",
    "seed",
    "config_digest",
    "key_json",
    "digest",
    "n_llm",
    "n_env",
    "reward",
    "passed",
    "infra_failure",
    "tokens",
)
#: the field of a runs-table document that names its own row id, by kind
DOC_ID_FIELD = {
    "measure": "run_id",
    "training": "training_id",
    "verdict": "verdict_id",
    "fork": "fork_id",
    "transfer": "transfer_id",
}
#: runs-table columns mirrored from a measure document
RUN_MIRRORS = {
    "harness_sha": ("harness_sha",),
    "model": ("model", "name"),
    "endpoint": ("model", "endpoint"),
    "config_digest": ("config_digest",),
}


HEX64 = re.compile(r"[0-9a-f]{64}")


def safe_path(name: str) -> bool:
    """Is ``name`` a relative POSIX path that stays inside its folder (no absolute path, drive,
    backslash, NUL, empty, ``.`` or ``..`` part)? Bundle members and tree files alike."""
    if (
        not name
        or name.startswith(("/", "\\"))
        or "\\" in name
        or "\x00" in name
        or re.match(r"^[A-Za-z]:", name)
    ):
        return False
    return all(part not in ("", ".", "..") for part in name.split("/")) and all(
        part not in (".", "..") for part in PurePosixPath(name).parts
    )


def tree_manifest(text: object) -> dict[str, tuple[int, str]]:
    """A harness tree's manifest (``{path: [mode, blob]}`` JSON) as ``{path: (mode, blob)}``,
    checked: every path stays inside the tree (:func:`safe_path`), none is a folder of another,
    every blob is a sha256.
    Raises ``ValueError`` naming what is wrong (the store says store corrupt, a bundle refuses)."""
    try:
        parsed = json.loads(text)  # type: ignore[arg-type]
        items = {str(p): (int(v[0]), str(v[1])) for p, v in parsed.items()}
    except (ValueError, TypeError, AttributeError, IndexError, KeyError):
        raise ValueError("its manifest is not a {path: [mode, blob]} mapping") from None
    for path, (_, digest) in items.items():
        if not safe_path(path):
            raise ValueError(f"unsafe file path {path[:80]!r} (absolute or with '..'); refusing")
        if not HEX64.fullmatch(digest):
            raise ValueError(f"file {path[:80]!r} has no valid blob hash")
    for path in items:  # a file cannot also be a folder of another (``a`` and ``a/b``)
        parts = path.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in items:
                raise ValueError(f"file path {folder[:80]!r} is also a folder of {path[:80]!r}")
    return items


def blob_ok(digest: str, data: bytes, size: int | None = None) -> bool:
    """Does ``data`` hash to ``digest`` (and have the recorded ``size``, when given)?"""
    if size is not None and size != len(data):
        return False
    return hashlib.sha256(data).hexdigest() == digest


def cassette_columns(episode: Episode) -> CassetteColumns:
    """Every derived column of an episode's row, computed from its key and events."""
    key, grade = episode.key, episode.grade
    return {
        "id": key.id,
        "kind": key.kind,
        "harness_sha": key.harness_sha,
        "task_id": key.task_id,
        "task_digest": key.task_digest,
        "model": key.model.name,
        "endpoint": key.model.endpoint,
        "model_revision": key.model.revision,
        "seed": key.seed,
        "config_digest": key.config_digest,
        "key_json": canonical_json(key.canonical()),
        "digest": episode.digest,
        "n_llm": len(episode.llm_events),
        "n_env": len(episode.env_events),
        "reward": grade.reward if grade else None,
        "passed": int(grade.passed) if grade else None,
        "infra_failure": int(grade.infra_failure) if grade else None,
        "tokens": episode.usage_tokens(),
    }


def _same(stored: Any, derived: Any) -> bool:  # any values a row or a document holds
    if isinstance(derived, bool) or isinstance(stored, bool):
        return stored is not None and derived is not None and int(stored) == int(derived)
    if derived is None or stored is None:
        return derived is None and stored is None
    if isinstance(derived, (int, float)) and isinstance(stored, (int, float)):
        return float(stored) == float(derived)
    return type(stored) is type(derived) and stored == derived


def cassette_mismatches(
    row: Mapping[str, object], episode: Episode, derived: CassetteColumns | None = None
) -> list[str]:
    """Names of the row's columns that disagree with its episode (empty: consistent); the
    row as stored or as a bundle carries it (so any values: what it holds is checked)."""
    columns: Mapping[str, object] = derived or cassette_columns(episode)
    bad = []
    for column in CASSETTE_DERIVED:
        if column == "key_json":
            raw = row.get("key_json")
            try:
                ok = isinstance(raw, (str, bytes)) and json.loads(raw or "null") == episode.key.canonical()
            except (TypeError, ValueError):
                ok = False
        else:
            ok = _same(row.get(column), columns[column])
        if not ok:
            bad.append(column)
    return bad


def run_episode_mismatches(
    entry: EpisodeSummary, derived: CassetteColumns, reused: ReuseCounts | None = None
) -> list[str]:
    """Fields of a run document's episode entry that disagree with its cassette's events (and,
    given ``reused``, with what its claim counts: served events, and the calls that were paid)."""
    pairs = {
        "cassette_id": "id",
        "task_id": "task_id",
        "seed": "seed",
        "reward": "reward",
        "passed": "passed",
        "infra_failure": "infra_failure",
        "steps": "n_env",
        "llm_calls": "n_llm",
        "tokens": "tokens",
        "digest": "digest",
    }
    row: dict[str, object] = entry.to_json()  # the fields it was stored with
    columns: Mapping[str, object] = derived
    bad = [name for name, column in pairs.items() if name in row and not _same(row[name], columns[column])]
    if reused is not None:  # absent fields: nothing was served (rows of runs from before reuse)
        paid = derived["n_llm"] - reused.calls if reused.events else None
        if not _same(row.get("reused_events") or 0, reused.events):
            bad.append("reused_events")
        if not _same(row.get("model_calls"), paid):
            bad.append("model_calls")
    return bad


def doc_mismatches(row: Mapping[str, object], doc: object) -> list[str]:
    """What in a runs-table row disagrees with its document (empty: consistent)."""
    if not isinstance(doc, dict):
        return ["document is not a JSON object"]
    kind = str(row.get("kind") or "")
    bad = []
    if doc.get("kind") not in (None, kind):
        bad.append(f"kind (row says {kind}, document {doc.get('kind')})")
    field = DOC_ID_FIELD.get(kind)
    if field and field in doc and doc[field] != row.get("id"):  # every document replaykit writes names itself
        bad.append(f"document is for {str(doc.get(field))[:16]}, not {row.get('id')}")
    if kind == "measure":
        bad += _run_mismatches(row, doc)
    return bad


def _run_mismatches(row: Mapping[str, object], doc: dict[str, object]) -> list[str]:
    """What in a measured run's row (its mirrored columns) and document (its episodes, solved
    and total) disagrees."""
    bad = []
    for column, path in RUN_MIRRORS.items():
        value: object = doc
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if row.get(column) not in (None, "") and row.get(column) != value:
            bad.append(column)
    episodes, ids = doc.get("episodes"), doc.get("cassettes")
    if isinstance(episodes, list) and isinstance(ids, list):
        if [e.get("cassette_id") for e in episodes if isinstance(e, dict)] != ids:
            bad.append("episodes (do not list the run's cassettes)")
        elif "solved" in doc and doc["solved"] != sum(1 for e in episodes if e.get("passed")):
            bad.append("solved")
        elif "total" in doc and doc["total"] != len(episodes):
            bad.append("total")
    return bad
