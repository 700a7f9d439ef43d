"""How a bundle is laid out as an OCI artefact, and how a pulled manifest is checked.

An OCI image manifest (``artifactType`` ``application/vnd.replaykit.bundle.v1``):

- ``config``: the bundle's ``manifest.json`` (format, version, tools, root, and the sha256 and
  size of every other member), media type ``application/vnd.replaykit.bundle.manifest.v1+json``;
- one layer per index member (``index/runs.json`` …, its name as the layer's
  ``org.opencontainers.image.title``), then one layer per blob, addressed by the blob's own
  sha256 (so a blob the registry holds from an earlier push is never sent again);
- annotations: the root's id, kind and table, the replaykit version, and (signed) the signature.

The same bytes make the same manifest: pushing the same content twice gives the same digest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from replaykit.core.determinism import sha256_hex
from replaykit.exchange.bundle_format import MANIFEST, MEMBER_RE, BundleRoot
from replaykit.exchange.oci.client import RegistryError

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
ARTIFACT_TYPE = "application/vnd.replaykit.bundle.v1"
CONFIG_TYPE = "application/vnd.replaykit.bundle.manifest.v1+json"
INDEX_TYPE = "application/vnd.replaykit.bundle.index.v1+json"
BLOB_TYPE = "application/vnd.replaykit.blob.v1"
TITLE = "org.opencontainers.image.title"
ROOT_ID, ROOT_KIND, ROOT_TABLE, VERSION = (
    "replaykit.root.id",
    "replaykit.root.kind",
    "replaykit.root.table",
    "replaykit.version",
)


class Descriptor(TypedDict):
    """An OCI content descriptor as replaykit writes it (an index member named by its title)."""

    mediaType: str
    digest: str
    size: int
    annotations: NotRequired[dict[str, str]]


@dataclass(frozen=True)
class Layer:
    """One blob of the artefact: its digest (``sha256:…``), size, media type and member name."""

    digest: str
    size: int
    media_type: str
    member: str  # the bundle member it is: index/runs.json, blobs/<hex>, manifest.json (the config)

    def descriptor(self) -> Descriptor:
        out: Descriptor = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.media_type == INDEX_TYPE:
            out["annotations"] = {TITLE: self.member}
        return out


@dataclass
class Artefact:
    """The parts of an OCI manifest replaykit writes and reads."""

    config: Layer
    layers: list[Layer]
    annotations: dict[str, str] = field(default_factory=dict)

    def manifest(self) -> bytes:
        doc = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "artifactType": ARTIFACT_TYPE,
            "config": self.config.descriptor(),
            "layers": [layer.descriptor() for layer in self.layers],
            "annotations": dict(sorted(self.annotations.items())),
        }
        return json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")


def root_annotations(root: BundleRoot, version: str) -> dict[str, str]:
    return {
        ROOT_ID: root["id"],
        ROOT_KIND: root.get("kind", root["table"]),
        ROOT_TABLE: root["table"],
        VERSION: version,
    }


def config_layer(manifest_json: bytes) -> Layer:
    return Layer("sha256:" + sha256_hex(manifest_json), len(manifest_json), CONFIG_TYPE, MANIFEST)


def _layer(source: str, entry: object, config: bool = False) -> Layer:
    """A descriptor as pulled: a sha256 digest, a size, one of replaykit's media types, and the
    member it names (an index member by its title, a blob by its digest)."""
    if not isinstance(entry, dict):
        raise RegistryError(f"{source}: its manifest holds a descriptor that is not an object; refusing")
    digest, size, media = entry.get("digest"), entry.get("size"), entry.get("mediaType")
    if not isinstance(digest, str) or not digest.startswith("sha256:") or len(digest) != 71:
        raise RegistryError(
            f"{source}: its manifest names a layer by {str(digest)[:40]!r}, not sha256; refusing"
        )
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise RegistryError(f"{source}: layer {digest[7:19]} has no valid size; refusing")
    if config:
        member, wanted = MANIFEST, CONFIG_TYPE
    elif media == INDEX_TYPE:
        member, wanted = str((entry.get("annotations") or {}).get(TITLE, "")), INDEX_TYPE
    else:
        member, wanted = f"blobs/{digest[7:]}", BLOB_TYPE
    named = config or (MEMBER_RE.fullmatch(member) and member.startswith(("index/", "blobs/")))
    if media != wanted or not named:
        raise RegistryError(
            f"{source}: layer {digest[7:19]} ({media}) is not a replaykit bundle member; refusing"
        )
    return Layer(digest, size, str(media), member)


def parse_manifest(data: bytes, source: str) -> Artefact:
    """A pulled manifest: an OCI image manifest of a replaykit bundle, or one line why not."""
    try:
        doc = json.loads(data)
    except ValueError:
        raise RegistryError(f"{source}: its manifest is not JSON; refusing") from None
    if (
        not isinstance(doc, dict)
        or doc.get("schemaVersion") != 2
        or doc.get("mediaType", MANIFEST_TYPE) != MANIFEST_TYPE
    ):
        raise RegistryError(
            f"{source} is not an OCI image manifest (an index or a Docker v2 image?); refusing"
        )
    config = doc.get("config")
    if not isinstance(config, dict) or config.get("mediaType") != CONFIG_TYPE:
        raise RegistryError(
            f"{source} is not a replaykit artefact (its config is {str((config or {}).get('mediaType'))!r}); "
            "push one with `replaykit cassettes push`"
        )
    layers = doc.get("layers")
    if not isinstance(layers, list):
        raise RegistryError(f"{source}: its manifest lists no layers; refusing")
    parsed = [_layer(source, entry) for entry in layers]
    names = [layer.member for layer in parsed]
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice:
        raise RegistryError(f"{source}: its manifest lists member {twice!r} twice; refusing")
    notes = doc.get("annotations") or {}
    annotations = {str(k): str(v) for k, v in notes.items()} if isinstance(notes, dict) else {}
    return Artefact(_layer(source, config, config=True), parsed, annotations)
