"""The ``docker`` kind's worker-node hook: base images on every Docker node, without a registry.

replaykit never pulls: a node builds task images from the base images its own engine
holds, and a base image's ID is part of every task image digest (so of cassette
keys). Before Docker episodes fan out on a multi-machine executor (Ray), the driver
makes sure that every alive node carrying the ``docker`` resource holds the images
its own engine resolves ``FROM`` lines to — the local base image, the python flavour,
the targets of ``env.image_aliases`` — under the same image ID. It asks each node
which it lacks, ``docker save``s each lacking image once into the executor's shared
storage (Ray's object store), and the node ``docker load``s it. Nodes that already
hold an image are not sent it. The executor offers the nodes (``base.WorkerNodes``);
this module knows Docker, the executor does not.
"""

from __future__ import annotations

from replaykit.core.errors import EnvError
from replaykit.envs.base import EnvSection, WorkerNodes
from replaykit.envs.docker.settings import DockerSettings

#: the custom resource Docker episodes are scheduled on (``ray start --resources '{"docker": 4}'``)
DOCKER_RESOURCE = "docker"


def wanted_images(aliases: dict[str, str] | None = None) -> dict[str, str]:
    """The base images this driver's engine holds that task builds may use: ref → image ID.
    Empty when the driver has no engine (then every node must hold its own)."""
    from replaykit.envs.docker.images import BASE_IMAGE, PYTHON_FLAVOUR, docker_client, image_exists

    try:
        client = docker_client()
    except EnvError:
        return {}
    refs = dict.fromkeys([BASE_IMAGE, PYTHON_FLAVOUR, *(aliases or {}).values()])
    found = {ref: image_exists(client, ref) for ref in refs}
    return {ref: image_id for ref, image_id in found.items() if image_id}


def node_image_ids(refs: list[str]) -> dict[str, str | None]:
    """On a node: the image ID each ref has in this node's engine (None: absent)."""
    from replaykit.envs.docker.images import docker_client, image_exists

    client = docker_client()
    return {ref: image_exists(client, ref) for ref in refs}


def save_image(ref: str) -> bytes:
    """``docker save`` of one image (its tag included), from this process's engine."""
    from replaykit.envs.docker.images import docker_client

    return b"".join(docker_client().images.get(ref).save(named=True))


def load_image(blob: bytes) -> list[str]:
    """On a node: ``docker load`` a saved image; the IDs loaded."""
    from replaykit.envs.docker.images import docker_client

    return [str(image.id) for image in docker_client().images.load(blob)]


def ship_images(nodes: WorkerNodes, wanted: dict[str, str]) -> dict[str, list[str]]:
    """Make every Docker node hold ``wanted`` (ref → image ID); return node → refs it was sent.
    A node whose ref points at another image ID gets the driver's image (same tag, same ID)."""
    ids = nodes.ids(DOCKER_RESOURCE)
    refs = sorted(wanted)
    if not ids or not refs:
        return {}
    held = nodes.run_each([(node, node_image_ids, (refs,)) for node in ids])
    lacking = {
        node: [ref for ref in refs if found.get(ref) != wanted[ref]]
        for node, found in zip(ids, held, strict=True)
    }
    blobs = {ref: nodes.share(save_image(ref)) for ref in sorted({r for rs in lacking.values() for r in rs})}
    loads = [(node, ref) for node, node_refs in lacking.items() for ref in node_refs]
    loaded = nodes.run_each([(node, load_image, (blobs[ref],)) for node, ref in loads])
    for (node, ref), image_ids in zip(loads, loaded, strict=True):
        if wanted[ref] not in image_ids:
            raise EnvError(
                f"node {node[:12]}: loading base image {ref!r} gave another image ID; check that node's Docker engine"
            )
    return {node: node_refs for node, node_refs in lacking.items() if node_refs}


def prepare_nodes(nodes: WorkerNodes, env: EnvSection[DockerSettings]) -> None:
    """The ``docker`` kind's ``prepare_nodes`` hook: every Docker node builds from the
    driver's base images and alias targets (same IDs, so the same cassette keys)."""
    ship_images(nodes, wanted_images(env.settings.image_aliases))
