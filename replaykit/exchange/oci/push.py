"""``cassettes push ID oci://HOST/REPO:TAG``: a run, training, verdict, compare or cassette, with
everything it needs (what its bundle holds), as an OCI artefact (``layout.py``).

Each blob is asked for first (``HEAD``) and sent only when the registry lacks it, so pushing a
training after its baseline run sends only the new blobs, and pushing the same content again
sends none. The manifest is put last: an interrupted push leaves blobs in the registry but no
tag naming a partial artefact. The store is only read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import NotRequired, TypedDict

from replaykit.cassette.backend import StoreBackend
from replaykit.core.determinism import sha256_hex
from replaykit.core.progress import Progress
from replaykit.core.versions import tool_versions
from replaykit.exchange.bundle import collect, index_members, manifest_bytes
from replaykit.exchange.bundle_format import BundleRoot, Selection
from replaykit.exchange.oci import signing
from replaykit.exchange.oci.client import Registry
from replaykit.exchange.oci.credentials import find_credentials
from replaykit.exchange.oci.layout import (
    BLOB_TYPE,
    INDEX_TYPE,
    MANIFEST_TYPE,
    Artefact,
    Layer,
    config_layer,
    root_annotations,
)
from replaykit.exchange.oci.reference import OciRef


class PushReport(TypedDict):
    """What ``cassettes push --json`` reports."""

    reference: str
    digest: str  # the manifest's
    root: BundleRoot
    counts: dict[str, int]  # rows per table, and blobs (as a bundle's)
    blobs_uploaded: int  # OCI blobs sent (store blobs, index members, the config)
    blobs_present: int  # OCI blobs the registry already held
    bytes_uploaded: int
    signed_by: NotRequired[str]  # the signing key's fingerprint


Part = tuple[Layer, Callable[[], Iterable[bytes]]]


def _parts(sel: Selection) -> tuple[Layer, list[Part]]:
    """The config layer and every layer with how to read its bytes (a blob read from the store
    again, verified, a chunk at a time)."""
    index = index_members(sel)
    manifest_json = manifest_bytes(sel, index)
    config = config_layer(manifest_json)
    parts: list[Part] = [(config, partial(_whole, manifest_json))]
    for name, data in index:
        parts.append(
            (Layer("sha256:" + sha256_hex(data), len(data), INDEX_TYPE, name), partial(_whole, data))
        )
    for digest in sorted(sel.blobs):
        layer = Layer("sha256:" + digest, sel.blobs.size(digest), BLOB_TYPE, f"blobs/{digest}")
        parts.append((layer, partial(sel.blobs.chunks, digest)))
    return config, parts


def _whole(data: bytes) -> list[bytes]:
    return [data]


def push(
    store: StoreBackend,
    root_id: str,
    target: OciRef,
    insecure: bool = False,
    sign_key: Path | None = None,
    progress: Progress | None = None,
    environ: Mapping[str, str] | None = None,
) -> PushReport:
    """Push ``root_id`` (what its bundle would hold, verified as it is read) to ``target``."""
    key = signing.load_private_key(sign_key) if sign_key else None  # a bad key file: before anything
    credentials = find_credentials(target.host, environ)
    sel = collect(store, root_id)
    try:
        config, parts = _parts(sel)
        annotations = root_annotations(sel.root, tool_versions()["replaykit"])
        if key is not None:
            annotations |= signing.sign(key, config.digest, sel.root["id"])
        with Registry(target, credentials, push=True, insecure=insecure) as registry:
            sent, held, size = _upload(registry, parts, progress)
            data = Artefact(config, [layer for layer, _ in parts[1:]], annotations).manifest()
            digest = registry.put_manifest(data, MANIFEST_TYPE) or "sha256:" + sha256_hex(data)
    finally:
        sel.blobs.close()
    report: PushReport = {
        "reference": str(target),
        "digest": digest,
        "root": sel.root,
        "counts": sel.counts(),
        "blobs_uploaded": sent,
        "blobs_present": held,
        "bytes_uploaded": size,
    }
    if key is not None:
        report["signed_by"] = signing.fingerprint(key.public_key())
    return report


def _upload(registry: Registry, parts: list[Part], progress: Progress | None) -> tuple[int, int, int]:
    """Each part the registry lacks, uploaded: (uploaded, already present, bytes sent). Every
    layer is asked for first, several at a time; the missing ones are sent one by one (their
    bytes read from the store here, on the thread that opened it)."""
    unique: dict[str, Part] = {}
    for part in parts:
        unique.setdefault(part[0].digest, part)
    held = registry.held(list(unique))
    missing = [part for digest, part in unique.items() if digest not in held]
    if progress:
        progress("plan", {"total": len(missing), "label": "upload"})
    sent = size = 0
    for layer, chunks in missing:
        registry.upload_blob(layer.digest, layer.size, chunks)
        sent, size = sent + 1, size + layer.size
        if progress:
            progress("task", {"task_id": layer.member[:18], "label": "upload"})
    return sent, len(parts) - sent, size
