"""The Docker state digest hashes files in chunks: a task writing gigabytes costs no memory."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from replaykit.envs.docker import snapshot


class ChunkOnly(io.BytesIO):
    """A file that refuses whole-file reads."""

    def read(self, size: int | None = -1) -> bytes:
        assert size is not None and 0 < size <= snapshot.CHUNK, f"whole-file read ({size})"
        return super().read(size)


def test_file_hash_reads_in_chunks() -> None:
    data = b"0123456789abcdef" * (snapshot.CHUNK // 8 + 3)  # a little over two chunks
    assert snapshot._file_sha256(ChunkOnly(data)) == hashlib.sha256(data).hexdigest()


def test_overlay_digest_entries_equal_whole_file_hashes(tmp_path: Path) -> None:
    upper = tmp_path / "upper"
    (upper / "work").mkdir(parents=True)
    big = b"x" * (3 * snapshot.CHUNK + 17)
    (upper / "work" / "big.bin").write_bytes(big)
    hashed = {
        name: (info, content)
        for name, info, content in snapshot._overlay_members(upper, "/work", digest_only=True)
    }
    whole = {name: (info, content) for name, info, content in snapshot._overlay_members(upper, "/work")}
    info, digest = hashed["work/big.bin"]
    assert digest == hashlib.sha256(big).hexdigest() and info.size == len(big)
    assert [snapshot._entry(n, *hashed[n]) for n in sorted(hashed)] == [
        snapshot._entry(n, *whole[n]) for n in sorted(whole)
    ]


def test_archive_stream_reader_yields_every_byte() -> None:
    chunks = [b"ab", b"", b"cde", b"f" * 10]
    reader = io.BufferedReader(snapshot._Chunks(iter(chunks)), 4)
    assert reader.read() == b"".join(chunks)
