"""Docker images for tasks: the Docker client, image aliases, ``FROM`` rewriting.

No registry is ever contacted. Every ``FROM`` line of a task's Dockerfile is rewritten
through the image aliases (a config map base image → local image) before it is built
(``image_build.py``: the build, its cache and the image ID that enters cassette keys).

Tasks whose Dockerfile starts ``FROM debian:bookworm-slim``, ``ubuntu:24.04``,
``python:3.12-slim``, … use the local base image ``replaykit/base:bookworm`` when that
image is not present locally; ``base_image.py`` builds it (``build_base_image``).
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, TypedDict, cast

from replaykit.core.errors import EnvError

BASE_IMAGE = "replaykit/base:bookworm"

#: Base images mapped to the local base image when they are not present locally.
DEFAULT_ALIAS_SOURCES: tuple[str, ...] = (
    "debian:bookworm-slim",
    "debian:bookworm",
    "debian:12-slim",
    "debian:12",
    "debian:stable-slim",
    "debian:stable",
    "debian:latest",
    "ubuntu:24.04",
    "ubuntu:22.04",
    "ubuntu:noble",
    "ubuntu:jammy",
    "ubuntu:latest",
    "python:3.11-slim",
    "python:3.12-slim",
    "python:3.13-slim",
    "python:3.11",
    "python:3.12",
    "python:3.13",
    "python:3.12-slim-bookworm",
    "python:3.11-slim-bookworm",
    "python:3-slim",
    "python:3.13-slim-bookworm",
    "python:3.13-bookworm",
    "python:3.12-bookworm",
    "python:3.11-bookworm",
)
#: Where ``python:*`` tags (any ``python:3…``) go: the python flavour (when it is missing, a build
#: says in one line to run ``replaykit images build-base --flavor python``).
PYTHON_FLAVOUR = "replaykit/base:bookworm-python"
_PYTHON_TAG = re.compile(r"^python:3(\.\d+)*(-[a-z0-9.-]+)?$")
#: Registries that mirror Docker Hub's official images under the same names (``FROM
#: public.ecr.aws/docker/library/python:3.11-slim`` is ``python:3.11-slim``).
HUB_MIRRORS: tuple[str, ...] = (
    "docker.io/library/",
    "index.docker.io/library/",
    "registry-1.docker.io/library/",
    "public.ecr.aws/docker/library/",
    "mirror.gcr.io/library/",
    "docker.io/",
    "library/",
)
#: Terminal-Bench's own base images (``ghcr.io/laude-institute/t-bench/python-3-13:20250620``,
#: ``…/ubuntu-24-04:latest``): a Python one runs on the python flavour, the others on the base.
_TBENCH = re.compile(r"^(?:[a-z0-9.-]+/)?laude-institute/t-bench/(?P<name>[a-z0-9._-]+):")

FROM_LINE = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)
_STAGE = re.compile(r"\bAS\s+(\S+)", re.IGNORECASE)
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])")

BuildLog = Callable[
    [str], None
]  # one line of build output (not the (event, data) Progress of replaykit.core.progress)
_clients: dict[int, Any] = {}


def docker_client() -> Any:
    """A connected docker SDK client (one per process); ``EnvError`` when no daemon answers."""
    pid = os.getpid()
    client = _clients.get(pid)
    if client is not None:
        return client
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # the SDK raises DockerException, requests errors, OSError, ...
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise EnvError(
            f"cannot reach the Docker daemon at {host}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; "
            "start it (scripts/setup-docker.sh does) or use env.kind: local"
        ) from None
    _clients[pid] = client
    return client


def normalise_ref(ref: str) -> str:
    """``docker.io/library/debian:12@sha256:…`` → ``debian:12``; no tag → ``:latest``."""
    name = ref.split("@", 1)[0]
    for prefix in HUB_MIRRORS:
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    if ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name


def image_exists(client: Any, ref: str) -> str | None:
    """The image ID of ``ref`` when it is present locally, else None (never pulls)."""
    import docker.errors

    try:
        return str(client.images.get(ref).id)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:
        if exc.status_code == 404:
            return None
        raise EnvError(f"cannot inspect image {ref!r}: {exc.explanation or exc}") from None


class ImageConfig(TypedDict, total=False):
    """The part of an image's ``Config`` (``docker image inspect``) replaykit reads; Docker
    writes null for an unset list or mapping."""

    WorkingDir: str
    Entrypoint: list[str] | None
    Labels: dict[str, str] | None


def image_config(client: Any, ref: str) -> ImageConfig:
    """The image's ``Config`` (WorkingDir, Entrypoint, …); {} when the image is unknown."""
    try:
        found = client.api.inspect_image(ref).get("Config")  # the docker SDK is untyped
        return cast(ImageConfig, dict(found)) if found else ImageConfig()
    except Exception:
        return ImageConfig()


def alias_for(client: Any, ref: str, aliases: dict[str, str]) -> str:
    """Where a ``FROM`` reference points: a configured alias, the image itself if present
    locally, else the local base image for well-known Debian/Ubuntu/Python tags."""
    for key in (ref, normalise_ref(ref)):
        if key in aliases:
            return aliases[key]
    normalised = {normalise_ref(k): v for k, v in aliases.items()}
    if normalise_ref(ref) in normalised:
        return normalised[normalise_ref(ref)]
    if image_exists(client, ref):
        return ref
    name = normalise_ref(ref)
    if _PYTHON_TAG.match(name) and name.split("-")[0] != "python:3.10" and "alpine" not in name:
        return PYTHON_FLAVOUR  # never the pip-less base in its place: a missing flavour says what to build
    if name in DEFAULT_ALIAS_SOURCES:
        return BASE_IMAGE
    tbench = _TBENCH.match(name)
    if tbench:
        return PYTHON_FLAVOUR if tbench["name"].startswith("python") else BASE_IMAGE
    return ref


def looks_python(ref: str) -> bool:
    """A base image whose name says it brings Python (and so pip): ``python:*``, ``*/python-3*``, …"""
    last = normalise_ref(ref).rsplit("/", 1)[-1]
    return "python" in last or last.startswith("pypy")


def missing_base_hint(ref: str) -> str:
    """What to do about a base image that is not present locally (replaykit never pulls)."""
    if ref == BASE_IMAGE:
        return "run `replaykit images build-base`"
    if ref == PYTHON_FLAVOUR:
        return "run `replaykit images build-base --flavor python` (pip, venv, uv, pytest; python:* images run on it)"
    if looks_python(ref):
        return (
            f"map it to the python flavour, which has pip, venv, uv and pytest (env.image_aliases {ref}: "
            f"{PYTHON_FLAVOUR}, or for `replaykit tasks check` pass --alias {ref}={PYTHON_FLAVOUR}; "
            "`replaykit images build-base --flavor python` builds it)"
        )
    return (
        f"map it in env.image_aliases (e.g. {ref}: {BASE_IMAGE}; {PYTHON_FLAVOUR} when the task needs pip), "
        f"or for `replaykit tasks check` pass --alias {ref}={BASE_IMAGE}"
    )


def rewrite_dockerfile(text: str, resolve: Callable[[str], str]) -> tuple[str, list[str]]:
    """Rewrite the image of every ``FROM`` line through ``resolve``; return the new text and
    the external base images it uses (build stages and ``scratch`` excluded)."""
    stages: set[str] = set()
    bases: list[str] = []
    lines = []
    for line in text.splitlines():
        m = FROM_LINE.match(line)
        if m:
            head, flags, ref, rest = m.groups()
            stage = _STAGE.search(rest)
            if ref.lower() not in stages and ref != "scratch" and "$" not in ref:
                ref = resolve(ref)
                bases.append(ref)
            if stage:
                stages.add(stage.group(1).lower())
            line = f"{head}{flags}{ref}{rest}"
        lines.append(line)
    return "\n".join(lines) + "\n", bases


def plain(text: str) -> str:
    """Build output as plain text: ANSI colour/cursor codes and carriage returns removed."""
    return _ANSI.sub("", text).replace("\r", "")
