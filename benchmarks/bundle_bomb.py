"""Benchmark: a bundle bomb (about 1 MB of gzip holding 1 GiB of zeros) is refused in bounded memory.

Writes the bomb (a manifest listing one 1 GiB blob, then that blob), imports it with
the real CLI in a child process, and prints the child's peak RSS and the error line
(target: refused, peak RSS < 200 MB). Usage: python benchmarks/bundle_bomb.py [--gib 1]
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import resource
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

CHUNK = 1 << 20


class Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def write_bomb(path: Path, size: int) -> None:
    name = "blobs/" + "0" * 64
    manifest = json.dumps(
        {
            "format": "replaykit-bundle",
            "version": 1,
            "root": {"table": "runs", "id": "bomb"},
            "members": {name: {"sha256": "0" * 64, "size": size}},
        }
    ).encode()
    with gzip.open(path, "wb", compresslevel=1) as gz, tarfile.open(fileobj=gz, mode="w|") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
        info = tarfile.TarInfo(name)
        info.size = size
        tar.addfile(info, io.BufferedReader(Zeros(size), CHUNK))


def run(gib: float) -> tuple[int, float, str]:
    """(exit code, child peak RSS in MB, stderr) of importing a bomb of ``gib`` GiB."""
    with tempfile.TemporaryDirectory() as tmp:
        bomb = Path(tmp) / "bomb.tar.gz"
        write_bomb(bomb, int(gib * (1 << 30)))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "replaykit.cli",
                "cassettes",
                "import",
                str(bomb),
                "--store",
                str(Path(tmp) / "s"),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        return proc.returncode, peak_mb, proc.stderr.strip()


def os_load() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from measure import load_line

    return load_line() + " (memory, not time, is judged here)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()
    code, peak, err = run(args.gib)
    print(
        f"bomb of {args.gib:g} GiB zeros: exit {code}, peak RSS of the importing process {peak:.0f} MB (target < 200 MB)"
    )
    print(err)
    print(os_load())


if __name__ == "__main__":
    main()
