"""An image's content digest: what a task's build added, as files, never as Docker's IDs.

Docker's image ID hashes the image's configuration, creation times included, so no two
builds share one. :func:`image_digest` hashes what a build made instead: every path of the
layers above the base image (the merged view of those layers: a path's top-most entry wins,
an overlay whiteout is a deletion, an opaque directory is marked) with its type, permission
bits, owner, content hash or link target — never modification times — and the parts of the
image's configuration a container runs with (``Env``, ``Cmd``, ``Entrypoint``, ``WorkingDir``,
``User``, ``ExposedPorts``, ``Volumes``, its labels but replaykit's). Two builds of the same
Dockerfile that fetched the same bytes give the same digest when the build is reproducible.

Known volatile files are left out (:data:`VOLATILE`: apt and dpkg logs and apt's binary
caches, which hold times). The base image enters by the names the Dockerfile's ``FROM``
lines resolved to, not by ID: a machine that built its own base image gets its own ID.

The layers are read from the daemon's overlay2 directories (a local daemon, run as root);
elsewhere :func:`image_digest` returns None (reproducibility cannot be checked there).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from replaykit.core.determinism import digest_of

#: paths whose content carries times, not what the build made (prefixes)
VOLATILE: tuple[str, ...] = (
    "/var/log/",
    "/var/cache/apt/pkgcache.bin",
    "/var/cache/apt/srcpkgcache.bin",
    "/var/cache/ldconfig/aux-cache",
    "/var/cache/debconf/config.dat-old",
    "/var/cache/debconf/templates.dat-old",
    "/tmp/",
    "/root/.cache/",
)
_CONFIG = ("Env", "Cmd", "Entrypoint", "WorkingDir", "User", "ExposedPorts", "Volumes")


def _volatile(path: str) -> bool:
    return any(path == p.rstrip("/") or path.startswith(p) for p in VOLATILE)


def _file_hash(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(1 << 20):
            h.update(piece)
    return h.hexdigest()


def _entry(full: str, st: os.stat_result) -> list[object]:
    kind = stat.S_IFMT(st.st_mode)
    if stat.S_ISCHR(kind) and st.st_rdev == 0:
        return ["whiteout"]
    what: object = ""
    if stat.S_ISREG(kind):
        what = _file_hash(full)
    elif stat.S_ISLNK(kind):
        what = os.readlink(full)
    elif stat.S_ISDIR(kind):
        try:
            what = "opaque" if os.getxattr(full, "trusted.overlay.opaque") == b"y" else ""
        except OSError:
            what = ""
    return [kind, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, what]


def _walk(top: str) -> Iterator[tuple[str, str]]:
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            yield "/" + os.path.relpath(full, top), full


def layer_dirs(client: Any, image: str) -> list[str] | None:
    """The image's overlay2 layer directories, top-most first (None: not readable here)."""
    driver = client.api.inspect_image(image).get("GraphDriver") or {}
    data = driver.get("Data") or {}
    if driver.get("Name") not in ("overlay2", "overlay") or not data.get("UpperDir"):
        return None
    dirs = [str(data["UpperDir"]), *[p for p in str(data.get("LowerDir") or "").split(":") if p]]
    if not all(os.path.isdir(d) and os.access(d, os.R_OK | os.X_OK) for d in dirs):
        return None
    return dirs


def own_layers(client: Any, image: str, bases: Sequence[str]) -> int:
    """How many of the image's layers its build added: past the longest base image's layers
    that the image starts with."""
    layers = list(client.api.inspect_image(image).get("RootFS", {}).get("Layers") or [])
    shared = 0
    for base in bases:
        try:
            below = list(client.api.inspect_image(base).get("RootFS", {}).get("Layers") or [])
        except Exception:
            continue
        if layers[: len(below)] == below:
            shared = max(shared, len(below))
    return len(layers) - shared


def image_digest(client: Any, image: str, bases: Sequence[str]) -> str | None:
    """The content digest of what ``image``'s build added over ``bases`` (see the module)."""
    dirs = layer_dirs(client, image)
    if dirs is None:
        return None
    count = own_layers(client, image, bases)
    merged: dict[str, list[object]] = {}
    hidden: set[str] = set()  # under a whiteout or an opaque directory of a higher layer
    for top in dirs[:count]:
        seen_here: list[str] = []
        for rel, full in _walk(top):
            if rel in merged or _volatile(rel) or any(rel.startswith(h + "/") for h in hidden):
                continue
            entry = _entry(full, os.lstat(full))
            merged[rel] = entry
            if entry[0] == "whiteout" or entry[-1] == "opaque":
                seen_here.append(rel)
        hidden.update(seen_here)
    config = client.api.inspect_image(image).get("Config") or {}
    shown = {name: config.get(name) for name in _CONFIG}
    labels = config.get("Labels") or {}
    shown["Labels"] = {k: v for k, v in sorted(labels.items()) if not k.startswith("replaykit.")}
    return digest_of({"files": sorted(merged.items()), "config": shown, "bases": sorted(bases)})


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
