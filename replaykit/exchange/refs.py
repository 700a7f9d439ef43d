"""The reference walkers shared by bundle export, import and ``gc``: what a document,
an episode or a tree manifest references (which member or file names are safe:
``cassette.integrity.safe_path``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, cast

from replaykit.cassette.backend import StoreHandle
from replaykit.cassette.codec import decode_episode
from replaykit.cassette.documents import EpisodeDoc
from replaykit.cassette.integrity import HEX64, tree_manifest
from replaykit.core.run_doc import RunDoc
from replaykit.exchange.bundle_format import BundleError


def _ids(doc: Mapping[str, object], name: str, where: str) -> list[str]:
    value = doc.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise BundleError(f"{where}: field {name!r} must be a list of ids")
    return list(value)


def doc_refs(doc: Any, where: str) -> dict[str, list[str]]:
    """What a runs-table document references: rows under ``runs`` (+ ``verdicts``),
    ``cassettes`` and ``trees`` (+ ``harness_sha``), and blobs listed under ``blobs``."""
    if not isinstance(doc, dict):
        raise BundleError(f"{where} is not a JSON object")
    trees = _ids(doc, "trees", where)
    sha = doc.get("harness_sha")
    if sha:
        if not isinstance(sha, str):
            raise BundleError(f"{where}: field 'harness_sha' must be a string")
        trees.insert(0, sha)
    blobs = _ids(doc, "blobs", where)
    bad = next((b for b in blobs if not HEX64.fullmatch(b)), None)
    if bad is not None:
        raise BundleError(f"{where}: {bad[:40]!r} under 'blobs' is not a sha256 blob hash")
    return {
        "runs": _ids(doc, "runs", where) + _ids(doc, "verdicts", where),
        "cassettes": _ids(doc, "cassettes", where),
        "trees": trees,
        "blobs": blobs,
    }


def doc_certificates(doc: Any, where: str) -> list[str]:
    """The certificates a runs-table document names (a verdict's: what it excluded tasks by,
    and, certifying every epoch, every certificate of its baseline)."""
    if not isinstance(doc, dict):
        raise BundleError(f"{where} is not a JSON object")
    return sorted({*_ids(doc, "certificates", where), *_ids(doc, "certified", where)})


def episode_blobs(doc: Any, get: Callable[[str], bytes], where: str) -> tuple[set[str], Any]:
    """Every blob an episode document references (decoding it with ``get``), and the episode."""
    seen: set[str] = set()

    def fetch(digest: str) -> bytes:
        seen.add(digest)
        return get(digest)

    if not isinstance(doc, dict):
        raise BundleError(f"{where} is not a JSON object")
    try:
        episode = decode_episode(cast(EpisodeDoc, doc), fetch)  # decoding checks it: bad shapes raise
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise BundleError(f"{where} is unreadable: {exc}") from None
    seen.update(e.snapshot for e in episode.env_events if e.snapshot)
    seen.update(chunk for e in episode.net_events for chunk in e.chunks)  # network bodies, by reference
    return seen, episode


def tree_blobs(manifest_text: Any, where: str) -> list[str]:
    """The file blobs of a tree manifest, refusing paths that would escape the tree (the
    check the store makes on every read: ``cassette.integrity.tree_manifest``)."""
    try:
        return [digest for _, digest in tree_manifest(manifest_text).values()]
    except ValueError as exc:
        raise BundleError(f"{where}: {str(exc).removeprefix('its ')}") from None


def stored_run(store: StoreHandle, doc: object, where: str) -> RunDoc:
    """A run document read from ``store`` as a ``RunDoc``; another shape is ``store corrupt``."""
    try:
        return RunDoc.read(doc)
    except ValueError as exc:
        raise store.corrupt(f"its document is not a run ({str(exc)[:80]})", where) from None
