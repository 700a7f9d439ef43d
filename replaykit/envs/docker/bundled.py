"""The docker kind's bundle artefacts (``EnvKind.artefacts``): the task images a bundle
``--with-images`` carries, so another machine certifies without a registry or a rebuild.
``docker save`` streamed out; ``docker load`` in, checked to give back the image a key names
(format 2: an image of that recipe, ``recipe.py``; format 1: that very image ID).
The documents and their 4 MiB chunks are ``replaykit/exchange/images.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from replaykit.core.errors import EnvError
from replaykit.envs.docker.images import docker_client, image_exists
from replaykit.envs.docker.recipe import find_image, is_recipe


def _local(ident: str) -> str | None:
    """This engine's image for an artefact id (a recipe, or a format-1 image ID), or None."""
    client = docker_client()
    return find_image(client, ident) if is_recipe(ident) else image_exists(client, ident)


class TaskImages:
    """``Artefacts`` of the docker kind: the images its cassette keys name."""

    kind = "image"

    def ids(self, extra: Sequence[tuple[str, str]]) -> list[str]:
        image = dict(extra).get("image", "")
        return [image] if image.startswith("sha256:") or is_recipe(image) else []

    def exists(self, ident: str) -> bool:
        return _local(ident) is not None

    def save(self, ident: str) -> Iterator[bytes]:
        client = docker_client()
        local = _local(ident)
        if local is None:
            raise EnvError(f"image {ident[:31]} is not on this Docker engine; export without --with-images")
        tags = sorted(client.images.get(local).tags)
        # saved by tag when it has one, so a load restores the tag (the build cache finds it)
        yield from client.api.get_image(tags[0] if tags else local, chunk_size=1 << 20)

    def load(self, ident: str, data: Iterator[bytes]) -> None:
        client = docker_client()
        try:
            for _ in client.api.load_image(data):
                pass
        except Exception as exc:
            raise EnvError(f"docker load of image {ident[:31]} failed: {str(exc).splitlines()[0]}") from None
        if _local(ident) is None:
            raise EnvError(
                f"docker load of image {ident[:31]} gave another image; the bundle is not what it says"
            )


IMAGES = TaskImages()
