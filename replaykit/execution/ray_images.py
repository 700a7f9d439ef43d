"""Base images on every Docker node of a Ray cluster, without a registry.

replaykit never pulls: a node builds task images from the base images its own engine
holds, and a base image's ID is part of every task image digest (so of cassette
keys). Before Docker episodes fan out, the driver makes sure that every alive node
carrying the ``docker`` resource holds the images its own engine resolves ``FROM``
lines to — the local base image, the python flavour, the targets of
``env.image_aliases`` — under the same image ID. It asks each node which it lacks,
``docker save``s each lacking image once into Ray's object store, and the node
``docker load``s it. Nodes that already hold an image are not sent it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from replaykit.core.errors import EnvError


def wanted_images(aliases: dict[str, str] | None = None) -> dict[str, str]:
    """The base images this driver's engine holds that task builds may use: ref → image ID.
    Empty when the driver has no engine (then every node must hold its own)."""
    from replaykit.envs.images import BASE_IMAGE, PYTHON_FLAVOUR, docker_client, image_exists

    try:
        client = docker_client()
    except EnvError:
        return {}
    refs = dict.fromkeys([BASE_IMAGE, PYTHON_FLAVOUR, *(aliases or {}).values()])
    found = {ref: image_exists(client, ref) for ref in refs}
    return {ref: image_id for ref, image_id in found.items() if image_id}


def node_image_ids(refs: list[str]) -> dict[str, str | None]:
    """On a node: the image ID each ref has in this node's engine (None: absent)."""
    from replaykit.envs.images import docker_client, image_exists

    client = docker_client()
    return {ref: image_exists(client, ref) for ref in refs}


def save_image(ref: str) -> bytes:
    """``docker save`` of one image (its tag included), from this process's engine."""
    from replaykit.envs.images import docker_client

    return b"".join(docker_client().images.get(ref).save(named=True))


def load_image(blob: bytes) -> list[str]:
    """On a node: ``docker load`` a saved image; the IDs loaded."""
    from replaykit.envs.images import docker_client

    return [str(image.id) for image in docker_client().images.load(blob)]


def docker_nodes(ray: Any) -> list[str]:
    """IDs of the alive nodes that carry the ``docker`` resource."""
    return [
        str(node["NodeID"])
        for node in ray.nodes()
        if node.get("Alive") and float(node.get("Resources", {}).get("docker", 0)) > 0
    ]


def _on(ray: Any, node_id: str, fn: Any) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return ray.remote(fn).options(
        num_cpus=0,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        max_retries=1,
    )


def ship_images(ray: Any, wanted: dict[str, str], nodes: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Make every Docker node hold ``wanted`` (ref → image ID); return node → refs it was sent.
    A node whose ref points at another image ID gets the driver's image (same tag, same ID)."""
    nodes = list(docker_nodes(ray) if nodes is None else nodes)
    refs = sorted(wanted)
    if not nodes or not refs:
        return {}
    held = ray.get([_on(ray, node, node_image_ids).remote(refs) for node in nodes])
    lacking = {
        node: [ref for ref in refs if ids.get(ref) != wanted[ref]]
        for node, ids in zip(nodes, held, strict=True)
    }
    blobs = {ref: ray.put(save_image(ref)) for ref in sorted({r for rs in lacking.values() for r in rs})}
    loads = [
        (node, ref, _on(ray, node, load_image).remote(blobs[ref]))
        for node, node_refs in lacking.items()
        for ref in node_refs
    ]
    for node, ref, pending in loads:
        if wanted[ref] not in ray.get(pending):
            raise EnvError(
                f"node {node[:12]}: loading base image {ref!r} gave another image ID; check that node's Docker engine"
            )
    return {node: node_refs for node, node_refs in lacking.items() if node_refs}
