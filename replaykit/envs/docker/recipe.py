"""A task image named by what it is made of, never by the local engine's image ID.

The *recipe* of a task image (``recipe_of``) is a digest of: the task's environment folder
(its content digest), the Dockerfile as the task wrote it (heredocs rewritten, ``FROM`` as
written, never the local alias), each base image's own recipe (``base_recipe``: the labels a
replaykit base image carries — its suite, package list and wheel pins — or the recipe label of
a task image built on it; a registry digest; the local ID only for an image of neither kind)
and how the build reached the network. It is written on the image as the label
``replaykit.recipe`` when the image is built. A build that fetched through the frozen network
adds the digest of what it fetched (``fetches_digest``: each exchange's method, URL, request
body, status and body digest, in order).

The cassette key names the image ``recipe:<recipe>`` or ``recipe:<recipe>+<fetches>``
(``image_key``): the same task built on any machine from the same recipe (another debootstrap
of the same base, another tag namespace, another image ID) has the same key. At use the local
image is checked against it (``find_image``, and the label check of ``image_build``); a
mismatch is one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replaykit.core.determinism import digest_of
from replaykit.envs.docker.images import image_config
from replaykit.envs.docker.network.build import read_facts, read_recording

RECIPE_FORMAT = 1
RECIPE_LABEL = "replaykit.recipe"
PREFIX = "recipe:"
#: labels of a task image that are not its base's recipe (its own id and cache digest)
_OWN_LABELS = ("replaykit.task", "replaykit.digest", RECIPE_LABEL)


def base_recipe(client: Any, ref: str) -> str:
    """What names a base image in a task image's recipe: a task image's recipe label; a
    replaykit base image's own labels (suite, packages, flavour and its wheel pins); a registry
    digest; else (an image replaykit did not build and no registry named) its local ID."""
    labels = image_config(client, ref).get("Labels") or {}
    if labels.get(RECIPE_LABEL):
        return PREFIX + labels[RECIPE_LABEL]
    own = {k: v for k, v in sorted(labels.items()) if k.startswith("replaykit.") and k not in _OWN_LABELS}
    if own:
        return "labels:" + digest_of(own)[:24]
    try:
        found = client.api.inspect_image(ref)
    except Exception:  # an image that vanished meanwhile: its build says so
        return "ref:" + ref
    digests = sorted(found.get("RepoDigests") or [])
    return "repo:" + digests[0].split("@", 1)[-1] if digests else "id:" + str(found.get("Id", ref))


def recipe_of(environment: str, dockerfile: str, bases: Mapping[str, str], network: str) -> str:
    """A task image's recipe: its environment folder's digest, its Dockerfile as written,
    ``{FROM as written: base_recipe}``, and how its build reached the network."""
    return digest_of(
        {
            "format": RECIPE_FORMAT,
            "environment": environment,
            "dockerfile": dockerfile,
            "bases": dict(sorted(bases.items())),
            "build_network": network,
        }
    )[:24]


def fetches_digest(image_id: str) -> str | None:
    """The digest of what the build of ``image_id`` fetched through the frozen network (None:
    it fetched nothing through it, or this machine keeps no recording of its build)."""
    facts = read_facts(image_id)
    if facts is None or not facts["recorded"]:
        return None
    fetched = [
        [r["method"], r["url"], r["request_body"], r["status"], r["body"]] for r in read_recording(image_id)
    ]
    return digest_of(fetched)[:16]


def image_key(recipe: str, fetches: str | None) -> str:
    """The ``image`` a cassette key names: ``recipe:<recipe>[+<fetches>]``."""
    return PREFIX + recipe + (f"+{fetches}" if fetches else "")


def parse_key(value: str) -> tuple[str, str | None]:
    """(recipe, fetches) of an ``image_key`` value."""
    recipe, _, fetches = value.removeprefix(PREFIX).partition("+")
    return recipe, fetches or None


def is_recipe(value: str) -> bool:
    """Does a key's ``image`` name a recipe (format 2), not a local image ID (format 1)?"""
    return value.startswith(PREFIX)


def find_image(client: Any, value: str) -> str | None:
    """The ID of an image on this engine built from the recipe ``value`` names and, for a build
    that fetched, that fetched the same (an image loaded from a bundle, whose build this machine
    never recorded, is taken by its recipe label), or None."""
    recipe, fetches = parse_key(value)
    for image in client.images.list(filters={"label": f"{RECIPE_LABEL}={recipe}"}):
        if fetches is None or fetches_digest(str(image.id)) in (fetches, None):
            return str(image.id)
    return None
