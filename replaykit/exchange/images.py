"""What a bundle carries beyond store rows (``cassettes export --with-images``): each env
kind's artefacts (``EnvKind.artefacts``; the docker kind's task images, ``docker save``d)
streamed into 4 MiB content-addressed blobs under one document per artefact, so another
machine certifies without a registry or a rebuild; import has each artefact the machine
lacks loaded again by its kind, which checks it came back as itself.

Which artefacts: those the selection's cassette keys name, asked of the kind each key
names. The documents travel beside the root (a bundle's rows need not all be reachable
from it) and, once imported, are kept documents: ``gc`` keeps their blobs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from replaykit.cassette.backend import BlobStore
from replaykit.cassette.events import NET_CHUNK
from replaykit.core.determinism import canonical_json, sha256_hex
from replaykit.core.errors import EnvError
from replaykit.envs.base import Artefacts
from replaykit.envs.registry import get_env_kind
from replaykit.exchange.bundle_format import Selection


def doc_id(kind: str, ident: str) -> str:
    return f"{kind}-" + ident.rpartition(":")[2][:32]


def _artefacts(extra: list[tuple[str, str]]) -> Artefacts | None:
    try:
        return get_env_kind(dict(extra).get("env", "local")).artefacts
    except EnvError:  # a kind not installed here has nothing to save either
        return None


def kind_documents(extra: list[tuple[str, str]]) -> list[str]:
    """The store documents a cassette with these key extras needs beyond its own, asked of its
    kind (docker: the recorded build of its image): its bundle carries those the store has."""
    try:
        hooks = get_env_kind(dict(extra).get("env", "local")).extras
    except EnvError:
        return []
    return list(hooks.documents(extra)) if hooks is not None else []


def wanted(sel: Selection) -> dict[str, tuple[Artefacts, list[str]]]:
    """Each artefact document kind the selection's cassettes need: its kind's hooks and the ids."""
    found: dict[str, tuple[Artefacts, list[str]]] = {}
    for row in sel.rows["cassettes"].values():
        extra = [(str(k), str(v)) for k, v in json.loads(str(row["key_json"])).get("extra") or []]
        hooks = _artefacts(extra)
        if hooks is None:
            continue
        ids = found.setdefault(hooks.kind, (hooks, []))[1]
        ids.extend(i for i in hooks.ids(extra) if i not in ids)
    return {kind: (hooks, sorted(ids)) for kind, (hooks, ids) in found.items() if ids}


def _put(sel: Selection, data: bytes) -> str:
    digest = sha256_hex(data)
    sel.blobs.setdefault(digest, data)  # spooled, not held (exchange/spool.py)
    return digest


def add_images(sel: Selection) -> list[str]:
    """Every artefact of the selection's cassettes saved into it (blobs + one document each)."""
    added = []
    for kind, (hooks, ids) in sorted(wanted(sel).items()):
        for ident in ids:
            chunks, size, pending = [], 0, b""
            for piece in hooks.save(ident):
                pending += piece
                while len(pending) >= NET_CHUNK:
                    chunks.append(_put(sel, pending[:NET_CHUNK]))
                    size += NET_CHUNK
                    pending = pending[NET_CHUNK:]
            if pending:
                chunks.append(_put(sel, pending))
                size += len(pending)
            name = doc_id(kind, ident)
            doc = {"kind": kind, f"{kind}_doc_id": name, kind: ident, "size": size, "blobs": chunks}
            digest = _put(sel, canonical_json(doc).encode("utf-8"))
            sel.rows["runs"][name] = {
                "id": name,
                "kind": kind,
                "name": ident,
                "harness_sha": "",
                "model": "",
                "endpoint": "",
                "config_digest": "",
                "doc": digest,
                "created_at": "",
            }
            added.append(ident)
    return added


def load_images(store: BlobStore, sel: Selection) -> list[str]:
    """Each artefact document of ``sel`` whose artefact this machine lacks, loaded by its kind
    (from ``store``'s blobs, each verified against its address)."""
    kinds = {kind: hooks for kind, (hooks, _) in wanted(sel).items()}
    loaded = []
    for row in sel.rows["runs"].values():
        hooks = kinds.get(str(row.get("kind")))
        if hooks is None:
            continue
        doc = store.get_json(str(row["doc"]))
        ident = str(doc[hooks.kind])
        if hooks.exists(ident):
            continue

        def stream(chunks: list[str] = doc["blobs"]) -> Iterator[bytes]:
            for chunk in chunks:
                yield store.get_blob(chunk)  # verified against its address

        hooks.load(ident, stream())
        loaded.append(ident)
    return loaded
