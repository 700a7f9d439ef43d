"""The local base image: ``replaykit/base:bookworm`` built with debootstrap, never pulled.

``build_base_image`` makes it (Debian bookworm with bash, coreutils, python3, pytest and tmux,
which the ``terminus`` harness template drives) with ``debootstrap`` and ``docker import``, from the Debian mirror this host's apt uses
(``host_mirror``); tasks whose Dockerfile starts ``FROM debian:bookworm-slim``,
``ubuntu:24.04``, ``python:3.12-slim``, … run on it when that image is not present
locally (the aliases are ``images.py``; the python flavour is ``flavours.py``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from replaykit.core.errors import EnvError
from replaykit.envs.docker.images import BASE_IMAGE, BuildLog, docker_client, image_config, image_exists

BASE_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python-is-python3", "python3-pytest", "tmux")
#: the label naming the packages an image was built with: an image whose label differs (an older
#: build without tmux among them) is rebuilt, never reused
PACKAGES_LABEL = "replaykit.base-packages"


def packages_label(packages: tuple[str, ...]) -> str:
    return ",".join(packages)


def built_with(client: Any, tag: str, packages: tuple[str, ...]) -> bool:
    """The image ``tag`` carries the label of exactly ``packages`` (inherited by images built FROM it)."""
    labels = image_config(client, tag).get("Labels") or {}
    return labels.get(PACKAGES_LABEL) == packages_label(packages)


def host_mirror(suite: str = BASE_SUITE) -> str | None:
    """The Debian mirror this host's apt uses for ``suite`` (None: debootstrap's default)."""
    override = os.environ.get("REPLAYKIT_DEBIAN_MIRROR")
    if override:
        return override
    files = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for block in re.split(r"\n\s*\n", text):  # deb822 stanzas
            uris = re.search(r"^URIs:\s*(\S+)", block, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", block, re.M)
            if (
                uris
                and suites
                and suite in suites.group(1).split()
                and uris.group(1).rstrip("/").endswith("/debian")
            ):
                return uris.group(1)
        for line in text.splitlines():  # one-line format
            parts = line.split("#", 1)[0].split()
            if len(parts) >= 3 and parts[0] == "deb":
                rest = [p for p in parts[1:] if not p.startswith("[")]
                if len(rest) >= 2 and rest[1] == suite and rest[0].rstrip("/").endswith("/debian"):
                    return rest[0]
    return None


class BaseImage(TypedDict):
    """``images build-base``: the tag, the image id, and whether it was built now (else cached)."""

    tag: str
    id: str
    built: bool
    flavor: NotRequired[str]  # python: the flavour built on it (envs/docker/flavours.py)


def build_base_image(
    tag: str = BASE_IMAGE,
    force: bool = False,
    progress: BuildLog | None = None,
    packages: tuple[str, ...] = BASE_PACKAGES,
) -> BaseImage:
    """Build the local base image with debootstrap + ``docker import`` (skipped when present with
    the label of these ``packages``; an image built with other packages is rebuilt, said so)."""
    client = docker_client()
    existing = image_exists(client, tag)
    if existing and not force:
        if built_with(client, tag, packages):
            return {"tag": tag, "id": existing, "built": False}
        if progress:
            progress(f"{tag} was built with other packages than {packages_label(packages)}: rebuilding it")
    debootstrap = _debootstrap_program()
    with tempfile.TemporaryDirectory(prefix="replaykit-base-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        _bootstrap(debootstrap, rootfs, packages, progress)
        _drop_caches(rootfs)
        archive = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(archive), "."], check=True)
        if progress:
            progress(f"docker import → {tag}")
        repository, _, version = tag.rpartition(":")
        client.api.import_image(
            src=str(archive),
            repository=repository,
            tag=version,
            changes=[
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "ENV LANG=C.UTF-8",
                'CMD ["bash"]',
                f"LABEL replaykit.base={BASE_SUITE}",
                f"LABEL {PACKAGES_LABEL}={packages_label(packages)}",
            ],
        )
    image_id = image_exists(client, tag)
    if image_id is None:
        raise EnvError(f"docker import did not produce {tag}")
    return {"tag": tag, "id": image_id, "built": True}


def _debootstrap_program() -> str:
    """debootstrap's path, when it is installed and this process may run it (root)."""
    debootstrap = shutil.which("debootstrap") or next(
        (p for p in ("/usr/sbin/debootstrap", "/sbin/debootstrap") if os.path.exists(p)), None
    )
    if debootstrap is None:
        raise EnvError(
            "debootstrap is not installed; `apt-get install -y debootstrap` (scripts/setup-docker.sh does)"
        )
    if os.geteuid() != 0:
        raise EnvError(
            "building the base image needs root (debootstrap); run it as root or via scripts/setup-docker.sh"
        )
    return debootstrap


def _bootstrap(debootstrap: str, rootfs: Path, packages: tuple[str, ...], progress: BuildLog | None) -> None:
    """A minimal Debian with ``packages`` in ``rootfs`` (from the host's mirror when it has one)."""
    argv = [debootstrap, "--variant=minbase", f"--include={','.join(packages)}", BASE_SUITE, str(rootfs)]
    mirror = host_mirror()
    if mirror:
        argv.append(mirror)
    if progress:
        progress(
            f"debootstrap {BASE_SUITE}: fetches and unpacks ~{len(packages) + 90} Debian packages "
            "(2-3 minutes on an idle machine, longer on a busy one or a slow mirror)"
        )
    returncode, tail = _debootstrap(argv, progress)
    if returncode != 0:
        raise EnvError(f"debootstrap {BASE_SUITE} failed (exit {returncode}): {' | '.join(tail)}")


def _drop_caches(rootfs: Path) -> None:
    """apt's caches and lists and the docs, emptied (their folders kept, and apt's lock files)."""
    for junk in (
        "var/cache/apt/archives",
        "var/lib/apt/lists",
        "usr/share/doc",
        "usr/share/man",
        "usr/share/info",
    ):
        folder = rootfs / junk
        if not folder.is_dir():
            continue
        for child in folder.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            elif child.name != "lock":
                child.unlink(missing_ok=True)


#: debootstrap's stages (its ``I: <Verb> <package>`` lines), said once each with a count
_STAGES = ("Retrieving", "Validating", "Extracting", "Unpacking", "Configuring", "Installing")


def _debootstrap(argv: list[str], progress: BuildLog | None) -> tuple[int, list[str]]:
    """Run debootstrap, telling each stage as it goes (every 25 packages: "unpacking: 50 so
    far"); the exit code and its last three lines."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    last: list[str] = []
    counts: dict[str, int] = {}
    for raw in proc.stdout:
        line = raw.rstrip()
        last = [*last[-2:], line]
        verb = line[3:].split(" ", 1)[0] if line.startswith("I: ") else ""
        if progress and verb in _STAGES:
            n = counts[verb] = counts.get(verb, 0) + 1
            if n == 1 or n % 25 == 0:
                progress(f"debootstrap: {verb.lower()} packages ({n} so far)")
    return proc.wait(), last
