"""A folder's whole state as bytes, and back: what ``env.snapshot: full`` keeps of a
workspace that lives on this machine (the local kind's ``app/``).

``folder_tar`` is a normalised tar (sorted members, owner 0, mtime ``SOURCE_DATE_EPOCH``,
permission bits kept): equal trees give equal bytes. ``restore_folder`` empties the folder
and extracts such a tar into it with tarfile's ``data`` filter (no absolute paths, no
``..``, no device files, nothing outside the folder).
"""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

from replaykit.core.determinism import normal_tarinfo
from replaykit.core.errors import EnvError


def folder_tar(root: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
            info = tar.gettarinfo(str(path), path.relative_to(root).as_posix())
            info.mode &= 0o7777
            normal_tarinfo(info)
            if info.isreg():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                info.size = 0
                tar.addfile(info)
    return buf.getvalue()


def restore_folder(root: Path, data: bytes) -> None:
    try:
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            tar.extractall(root, filter="data")
    except (OSError, tarfile.TarError) as exc:
        raise EnvError(f"cannot restore the snapshot into {root}: {exc}") from None
