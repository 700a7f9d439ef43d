"""Task images in bundles (``cassettes export --with-images``): ``docker save`` streamed into
4 MiB content-addressed blobs under one ``image`` document per image ID, so another machine
certifies without a registry or a rebuild; import ``docker load``s each image the engine
lacks and checks that it came back with the same ID.

The image documents travel beside the root (a bundle's rows need not all be reachable
from it) and, once imported, are kept documents: ``gc`` keeps their blobs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from replaykit.cassette.codec import put
from replaykit.cassette.events import NET_CHUNK
from replaykit.core.determinism import canonical_json
from replaykit.core.errors import EnvError
from replaykit.exchange.bundle_format import Selection

KIND = "image"


def doc_id(image_id: str) -> str:
    return "image-" + image_id.removeprefix("sha256:")[:32]


def image_ids(sel: Selection) -> list[str]:
    """The task images the selection's cassettes were recorded in (their keys name them)."""
    found = set()
    for row in sel.rows["cassettes"].values():
        extra = dict(json.loads(str(row["key_json"])).get("extra") or [])
        if str(extra.get("image", "")).startswith("sha256:"):
            found.add(str(extra["image"]))
    return sorted(found)


def add_images(sel: Selection) -> list[str]:
    """``docker save`` every image of the selection into it (blobs + one document each)."""
    from replaykit.envs.docker.images import docker_client, image_exists

    client = docker_client()
    added = []
    for image in image_ids(sel):
        if image_exists(client, image) is None:
            raise EnvError(f"image {image[:19]} is not on this Docker engine; export without --with-images")
        chunks, size, pending = [], 0, b""
        tags = sorted(client.images.get(image).tags)
        # saved by tag when it has one, so a load restores the tag (the build cache finds it)
        for piece in client.api.get_image(tags[0] if tags else image, chunk_size=1 << 20):
            pending += piece
            while len(pending) >= NET_CHUNK:
                chunks.append(put(sel.blobs, pending[:NET_CHUNK]))
                size += NET_CHUNK
                pending = pending[NET_CHUNK:]
        if pending:
            chunks.append(put(sel.blobs, pending))
            size += len(pending)
        ident = doc_id(image)
        doc = {"kind": KIND, "image_doc_id": ident, "image": image, "size": size, "blobs": chunks}
        digest = put(sel.blobs, canonical_json(doc).encode("utf-8"))
        sel.rows["runs"][ident] = {
            "id": ident,
            "kind": KIND,
            "name": image,
            "harness_sha": "",
            "model": "",
            "endpoint": "",
            "config_digest": "",
            "doc": digest,
            "created_at": "",
        }
        added.append(image)
    return added


def load_images(store: Any, sel: Selection) -> list[str]:
    """``docker load`` each image document of ``sel`` that the engine lacks (from ``store``'s blobs)."""
    rows = [r for r in sel.rows["runs"].values() if r.get("kind") == KIND]
    if not rows:
        return []
    from replaykit.envs.docker.images import docker_client, image_exists

    client = docker_client()
    loaded = []
    for row in rows:
        doc = store.get_json(row["doc"])
        image = str(doc["image"])
        if image_exists(client, image) is not None:
            continue

        def stream(chunks: list[str] = doc["blobs"]) -> Iterator[bytes]:
            for chunk in chunks:
                yield store.get_blob(chunk)  # verified against its address

        try:
            for _ in client.api.load_image(stream()):
                pass
        except Exception as exc:
            raise EnvError(f"docker load of image {image[:19]} failed: {str(exc).splitlines()[0]}") from None
        if image_exists(client, image) is None:
            raise EnvError(
                f"docker load of image {image[:19]} gave another image; the bundle is not what it says"
            )
        loaded.append(image)
    return loaded
