"""Flavours of the local base image: ``python`` (pip, venv, uv, pytest) for ``python:*`` tasks.

``replaykit images build-base --flavor python`` (= :func:`build_python_image`) makes
``replaykit/base:bookworm-python`` with no image registry and without needing the
container to reach a package registry:

1. ``debootstrap`` a bookworm root with python3, pip, venv and pytest (Debian
   packages, from the host's apt mirror) → ``replaykit/base:bookworm-python-root``;
2. ``pip download`` on the **host** the wheels of :data:`PYTHON_WHEELS` (uv, pytest,
   pytest-json-ctrf) and :data:`PYTHON_WHEEL_DEPS`, every one pinned, for the image's
   Python (3.11, x86_64);
3. a build FROM that root COPYs the wheels to ``/opt/replaykit/wheels``, installs them
   offline, and writes ``/etc/pip.conf`` (``find-links`` the wheels as an *extra*
   source, ``break-system-packages``). The index is **not** disabled: a task with the
   network installs what it asks for, like on a ``python:*`` image; without the index
   (here PyPI is unreachable) ``pip install pytest`` still finds the bundled wheel, and
   a pin the wheels cannot satisfy fails as pip says, never swapped for another version.

Both steps are skipped when their tag exists (``--force`` rebuilds). The default image
aliases map every ``python:*`` tag (``python:3.13-slim-bookworm`` included) to this
image when it is present, else to ``replaykit/base:bookworm``.

**TB2's uv verifier offline.** Terminal-Bench 2's standard ``tests/test.sh`` installs
uv with ``curl … | sh``, sources ``$HOME/.local/bin/env``, then runs
``uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf … /tests/test_outputs.py``.
Offline that cannot fetch anything, so the flavour ships a **verifier shim**:
``/usr/local/bin/uvx`` drops the interpreter and ``--with`` pins and runs
``python3 -m pytest`` with the preinstalled pytest and pytest-json-ctrf (any other
tool goes to the real ``uvx --offline``); ``$HOME/.local/bin/env`` exists, so the
``source`` line works, and the failing ``apt-get``/``curl`` lines are harmless (the
script has no ``set -e``). The test runs under the image's Python 3.11, not 3.13.
That swap is never silent: the shim says on stderr which interpreter and pins it
replaced, and :func:`substitutions` (``tasks check`` warnings, stored with a run's
episodes as ``environment.warnings``) names every image alias applied and every
``uvx`` pin the shim will replace.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from replaykit.core.errors import EnvError
from replaykit.envs.docker import base_image, images

PYTHON_IMAGE = images.PYTHON_FLAVOUR
PYTHON_ROOT = "replaykit/base:bookworm-python-root"
PYTHON_PACKAGES = (*base_image.BASE_PACKAGES, "python3-pip", "python3-venv", "ca-certificates")
#: The wheels the flavour bundles, pinned with their dependencies for the image's Python 3.11
#: (downloaded ``--no-deps``: exactly these), so a new uv or pytest release never changes the
#: image. The image carries them in a label: an image with other wheels is rebuilt.
PYTHON_WHEELS = ("uv==0.13.9", "pytest==9.2.0", "pytest-json-ctrf==0.6.1")
PYTHON_WHEEL_DEPS = ("iniconfig==2.3.1", "packaging==26.4", "pluggy==1.7.0", "pygments==2.21.0")
WHEEL_PINS = PYTHON_WHEELS + PYTHON_WHEEL_DEPS
_PY = ("3.11", "cp311")

UVX_SHIM = r"""#!/bin/sh
# replaykit's offline uvx (replaykit/envs/docker/flavours.py): `uvx [opts] pytest ARGS` runs the
# preinstalled pytest; interpreter (-p) and --with pins are ignored; other tools go to uv offline.
dropped=""
while [ $# -gt 0 ]; do
  case "$1" in
    -p|--python|-w|--with|--from|--with-requirements|--with-editable|-i|--index-url|--extra-index-url|--index)
      dropped="$dropped $1 ${2:-}"; shift; [ $# -gt 0 ] && shift ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "uvx: no tool given" >&2; exit 2; }
tool="$1"; shift
case "$tool" in
  pytest|pytest==*|pytest@*|pytest\[*)
    echo "replaykit uvx: runs the bundled pytest $(python3 -c 'import pytest, sys; print(pytest.__version__, "on Python", sys.version.split()[0])'); ignored:$dropped${tool#pytest}" >&2
    exec python3 -m pytest "$@" ;;
  *) exec /usr/local/bin/uvx.real --offline "$tool" "$@" ;;
esac
"""
UV_ENV = 'case ":$PATH:" in *":$HOME/.local/bin:"*) ;; *) export PATH="$HOME/.local/bin:$PATH" ;; esac\n'
PIP_CONF = "[global]\nfind-links = /opt/replaykit/wheels\nbreak-system-packages = true\ndisable-pip-version-check = true\n"
#: Bumped when the flavour's content changes: an image with another label is rebuilt.
FLAVOUR_VERSION = "2"
DOCKERFILE = f"""FROM {PYTHON_ROOT}
COPY wheels/ /opt/replaykit/wheels/
COPY pip.conf /etc/pip.conf
RUN python3 -m pip install --no-index --upgrade {" ".join(WHEEL_PINS)} \\
 && mv /usr/local/bin/uvx /usr/local/bin/uvx.real
COPY uvx /usr/local/bin/uvx
COPY uv-env /root/.local/bin/env
RUN chmod 755 /usr/local/bin/uvx && uv --version && python3 -m pytest --version \\
 && python3 -m venv /tmp/venv-check && /tmp/venv-check/bin/python -m pip --version && rm -rf /tmp/venv-check
LABEL replaykit.base=bookworm-python replaykit.flavour-version={FLAVOUR_VERSION} replaykit.flavour-wheels={",".join(WHEEL_PINS)}
"""


def download_wheels(dest: Path) -> None:
    """The wheels of :data:`PYTHON_WHEELS` for the image's CPython, fetched on the host with pip."""
    version, abi = _PY
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        version,
        "--implementation",
        "cp",
        "--abi",
        abi,
        "--abi",
        "abi3",
        "--abi",
        "none",
        "--platform",
        "manylinux_2_17_x86_64",
        "--platform",
        "manylinux2014_x86_64",
        "--platform",
        "any",
        "-d",
        str(dest),
        *WHEEL_PINS,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
        raise EnvError(f"pip download of {', '.join(PYTHON_WHEELS)} failed (exit {proc.returncode}): {tail}")


def build_python_image(
    tag: str = PYTHON_IMAGE, force: bool = False, progress: images.BuildLog | None = None
) -> base_image.BaseImage:
    """Build the python flavour (see the module docstring); cached by tag."""
    client = images.docker_client()
    existing = images.image_exists(client, tag)
    labels = images.image_config(client, tag).get("Labels") or {}
    current = (labels.get("replaykit.flavour-version"), labels.get("replaykit.flavour-wheels"))
    fresh = current == (FLAVOUR_VERSION, ",".join(WHEEL_PINS)) and base_image.built_with(
        client, tag, PYTHON_PACKAGES
    )  # the root's packages label, inherited: a flavour on a root without tmux is rebuilt
    if existing and not force and fresh:
        return {"tag": tag, "id": existing, "built": False, "flavor": "python"}
    base_image.build_base_image(tag=PYTHON_ROOT, force=force, progress=progress, packages=PYTHON_PACKAGES)
    with tempfile.TemporaryDirectory(prefix="replaykit-flavour-") as tmp:
        context = Path(tmp)
        (context / "wheels").mkdir()
        if progress:
            progress(f"pip download {' '.join(PYTHON_WHEELS)} (host side)")
        download_wheels(context / "wheels")
        (context / "Dockerfile").write_text(DOCKERFILE)
        (context / "pip.conf").write_text(PIP_CONF)
        (context / "uvx").write_text(UVX_SHIM)
        os.chmod(context / "uvx", 0o755)
        (context / "uv-env").write_text(UV_ENV)
        if progress:
            progress(f"docker build → {tag}")
        log: list[str] = []
        try:
            for chunk in client.api.build(
                path=str(context),
                tag=tag,
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
                network_mode="none",
                timeout=900,
            ):
                if "stream" in chunk:
                    log.extend(
                        line for line in images.plain(str(chunk["stream"])).splitlines() if line.strip()
                    )
                if "error" in chunk:
                    raise EnvError(
                        f"building {tag} failed: {images.plain(str(chunk['error'])).strip()} ({' | '.join(log[-4:])})"
                    )
        except EnvError:
            raise
        except Exception as exc:
            raise EnvError(f"building {tag} failed: {images.plain(str(exc))}") from None
    image_id = images.image_exists(client, tag)
    if image_id is None:
        raise EnvError(f"the build of {tag} produced no image")
    return {"tag": tag, "id": image_id, "built": True, "flavor": "python"}


_UVX_PIN = re.compile(r"(?:^|\s)(?:-w|--with)[ =]+(\S+)|(?:^|\s)(?:-p|--python)[ =]+(\S+)")


def uvx_pins(folder: Path) -> list[str]:
    """The interpreter and ``--with`` pins of the ``uvx … pytest`` lines in a task's scripts."""
    found: list[str] = []
    for script in sorted(folder.glob("tests/**/*.sh")) + sorted(folder.glob("steps/*/tests/**/*.sh")):
        try:
            text = script.read_text(encoding="utf-8", errors="replace").replace("\\\n", " ")
        except OSError:
            continue
        for line in text.splitlines():
            if "uvx" not in line or "pytest" not in line:
                continue
            for pin, python in _UVX_PIN.findall(line.split("uvx", 1)[1]):
                item = f"-w {pin}" if pin else f"-p {python}"
                if item not in found:
                    found.append(item)
    return found


def from_aliases(client: Any, task: Any, aliases: dict[str, str]) -> dict[str, str]:
    """The task's ``FROM`` images (or ``docker_image``) that an alias replaces → what runs instead."""
    dockerfile = task.environment_dir / "Dockerfile"
    env_table = task.config.get("environment")
    prebuilt = env_table.get("docker_image") if isinstance(env_table, dict) else None
    if dockerfile.is_file():
        text = dockerfile.read_text(encoding="utf-8", errors="replace")
    elif isinstance(prebuilt, str) and prebuilt.strip():
        text = f"FROM {prebuilt.strip()}\n"
    else:
        return {}
    seen: dict[str, str] = {}

    def record(ref: str) -> str:
        seen[ref] = images.alias_for(client, ref, aliases)
        return seen[ref]

    images.rewrite_dockerfile(text, record)
    return {ref: target for ref, target in seen.items() if target != ref}


def substitutions(task: Any, aliases: dict[str, str]) -> list[str]:
    """What replaykit puts in place of what the task names: each ``FROM`` alias applied
    and, on the python flavour, the ``uvx`` pins its shim replaces (one line each)."""
    client = images.docker_client()
    notes: list[str] = []
    targets = from_aliases(client, task, aliases)
    for ref, target in targets.items():
        notes.append(f"FROM {ref} runs on {target} (image alias)")
    if PYTHON_IMAGE in targets.values():
        pins = uvx_pins(task.path)
        if pins:
            notes.append(
                f"uvx {' '.join(pins)} in tests/: replaced by the bundled pytest on the image's Python 3.11 (replaykit's uvx shim)"
            )
    return notes
