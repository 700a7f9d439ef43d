"""``cassettes pull oci://HOST/REPO:TAG``: an artefact ``cassettes push`` made, verified completely
before anything is written, then imported as a bundle is (``exchange/importer.py``).

The manifest is read first and checked (a replaykit artefact, every descriptor a bundle member);
with ``--verify-key`` its signature is checked before any other byte is fetched. Each layer is
streamed to a scratch spool, hashed on the way and refused unless it is its digest and size;
the decompressed total and each member are capped as a bundle's are. A blob layer the target
store already holds (same digest, same size) is not downloaded: the store's copy is named
instead, and read back against its address wherever the verifier reads it (``blobs_skipped``). The layers then go through
the bundle verifier (``reader.verified_selection``: the manifest, every blob, every row, every
reference, cassettes against their events) and the import (one transaction, derived documents
recomputed). An interrupted pull (Ctrl-C, a dropped connection) has written nothing.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict

from replaykit.cassette.backend import StoreBackend
from replaykit.core.progress import Progress
from replaykit.core.stale import owned_temp_dir
from replaykit.exchange.bundle_format import BundleReport, Members, Selection
from replaykit.exchange.importer import DerivedCheck, import_selection
from replaykit.exchange.oci import signing
from replaykit.exchange.oci.client import Registry, RegistryError, in_parallel
from replaykit.exchange.oci.credentials import find_credentials
from replaykit.exchange.oci.layout import MANIFEST_TYPE, ROOT_ID, Artefact, Layer, parse_manifest
from replaykit.exchange.oci.reference import OciRef
from replaykit.exchange.reader import MAX_MEMBER_BYTES, max_bytes, verified_selection
from replaykit.exchange.spool import Blobs, sweep

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


class Pulled(TypedDict):
    """What a pull knows of the artefact: its reference and digest, what was downloaded, and
    (``--verify-key``) its signer."""

    reference: str
    digest: str
    bytes_downloaded: int
    blobs_skipped: int  # blob layers not downloaded: the store held them
    signed_by: NotRequired[str]


class PullReport(BundleReport, Pulled):
    """What ``cassettes pull --json`` reports: the import's report and :class:`Pulled`."""


def fetch(
    source: OciRef,
    insecure: bool = False,
    verify_key: Path | None = None,
    progress: Progress | None = None,
    environ: Mapping[str, str] | None = None,
    holding: StoreBackend | None = None,
) -> tuple[Selection, Pulled]:
    """The artefact at ``source``, downloaded and verified into a selection (its spool removed by
    ``sel.blobs.close()``), and what is known of it so far. Nothing is written to any store;
    ``holding``: the store it goes into, whose blobs are not downloaded again."""
    key = signing.load_public_key(verify_key) if verify_key else None  # a bad key file: before anything
    sweep()  # what a killed pull left in $TMPDIR
    with Registry(source, find_credentials(source.host, environ), insecure=insecure) as registry:
        data = registry.get_manifest(MANIFEST_TYPE)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if source.digest and digest != source.digest:
            raise RegistryError(f"{source}: the registry answered a manifest of digest {digest}; refusing")
        artefact = parse_manifest(data, str(source))
        root_id = artefact.annotations.get(ROOT_ID, "")
        signer = _signer(artefact, key, root_id, str(source))
        members = Members(blobs=Blobs(holding))
        try:
            size, skipped = _download(registry, artefact, members, str(source), progress, holding)
            sel = verified_selection(str(source), members)
        except BaseException:
            members.blobs.close()
            raise
    if root_id and sel.root["id"] != root_id:
        sel.blobs.close()
        raise RegistryError(
            f"{source}: its annotations name root {root_id}, its bundle {sel.root['id']}; refusing"
        )
    report: Pulled = {
        "reference": str(source),
        "digest": digest,
        "bytes_downloaded": size,
        "blobs_skipped": skipped,
    }
    if signer:
        report["signed_by"] = signer
    return sel, report


def pull(
    store: StoreBackend,
    source: OciRef,
    insecure: bool = False,
    verify_key: Path | None = None,
    progress: Progress | None = None,
    derived: DerivedCheck | None = None,
    environ: Mapping[str, str] | None = None,
) -> PullReport:
    """Fetch and verify the artefact at ``source``, then import it into ``store`` (one transaction;
    a no-op when the store holds it already)."""
    sel, pulled = fetch(source, insecure, verify_key, progress, environ, holding=store)
    report: PullReport = {**import_selection(store, sel, str(source), derived), **pulled}
    return report


def _signer(artefact: Artefact, key: Ed25519PublicKey | None, root_id: str, source: str) -> str | None:
    if key is None:
        return None
    return signing.check(artefact.annotations, key, artefact.config.digest, root_id, source)


def _held(layers: list[Layer], store: StoreBackend | None) -> set[str]:
    """The blob layers ``store`` holds already (same digest and size)."""
    blobs = {
        layer.digest.removeprefix("sha256:"): layer for layer in layers if layer.member.startswith("blobs/")
    }
    if store is None or not blobs:
        return set()
    sizes = store.present("blobs", sorted(blobs), "size")
    return {"sha256:" + d for d, size in sizes.items() if size == blobs[d].size}


def _check_sizes(layers: list[Layer], source: str) -> None:
    """The total and each member capped as a bundle's are."""
    total, cap = sum(layer.size for layer in layers), max_bytes()
    if total > cap:
        raise RegistryError(
            f"{source} holds {total} bytes, more than {cap} (the cap); refusing "
            "(raise it with REPLAYKIT_BUNDLE_MAX_BYTES if the artefact is trusted)"
        )
    for layer in layers:
        if layer.size > MAX_MEMBER_BYTES:
            raise RegistryError(f"{source}: layer {layer.digest[7:19]} holds {layer.size} bytes; refusing")


def _name_held(layers: list[Layer], members: Members, holding: StoreBackend | None) -> list[Layer]:
    """Name each blob layer ``holding`` has in ``members`` (its copy is read back against its
    address wherever the verifier reads it); the layers still to fetch."""
    held = _held(layers, holding)
    for layer in layers:
        if layer.digest in held:
            members.blobs.name(layer.digest.removeprefix("sha256:"), layer.size)
            members.digests[layer.member] = (layer.size, layer.digest.removeprefix("sha256:"))
    return [layer for layer in layers if layer.digest not in held]


def _download(
    registry: Registry,
    artefact: Artefact,
    members: Members,
    source: str,
    progress: Progress | None,
    holding: StoreBackend | None = None,
) -> tuple[int, int]:
    """Every layer (the config first) into ``members``, each against its digest and size, but
    the blobs ``holding`` has (named, not fetched): (bytes downloaded, blob layers skipped)."""
    every = [artefact.config, *artefact.layers]
    _check_sizes(every, source)
    layers = _name_held(every, members, holding)
    if progress:
        progress("plan", {"total": len(layers), "label": "pull"})
    folder = owned_temp_dir("pull")
    try:

        def one(at: int) -> Path:  # a layer to a file of its own (several at a time)
            layer, path = layers[at], folder / str(at)
            with registry.blob(layer.digest) as chunks, open(path, "wb") as out:
                for chunk in _bounded(chunks, layer.size):
                    out.write(chunk)
            return path

        paths = [one(0)]  # the config alone first: it settles the authentication
        paths += in_parallel(one, list(range(1, len(layers))))
        for layer, path in zip(layers, paths, strict=True):
            _take(layer, _file_chunks(path), members, source)
            path.unlink()
            if progress:
                progress("task", {"task_id": layer.member[:18], "label": "pull"})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return sum(layer.size for layer in layers), len(every) - len(layers)


def _file_chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as source:
        while block := source.read(1 << 20):
            yield block


def _bounded(chunks: Iterator[bytes], size: int) -> Iterator[bytes]:
    """The chunks, stopping one byte past ``size`` (a registry sending more is caught, in bounded memory)."""
    got = 0
    for chunk in chunks:
        got += len(chunk)
        yield chunk
        if got > size:
            return


def _take(layer: Layer, chunks: Iterator[bytes], members: Members, source: str) -> None:
    """One layer: a blob spooled (hashed on the way), anything else kept; refused unless it is
    its digest and size."""
    if layer.member.startswith("blobs/"):
        digest, size = members.blobs.spool(chunks)
        if ("sha256:" + digest, size) != (layer.digest, layer.size):
            members.blobs.pop(digest, None)
    else:
        data = b"".join(chunks)
        digest, size = hashlib.sha256(data).hexdigest(), len(data)
        members.data[layer.member] = data
    if ("sha256:" + digest, size) != (layer.digest, layer.size):
        raise RegistryError(
            f"{source}: layer {layer.digest[7:19]} ({layer.member}) does not match its digest and size"
            " (tampered or corrupt); refusing, nothing written"
        )
    members.digests[layer.member] = (size, digest)
