"""The tiny model: a llama GGUF with seeded random weights, a locally learned BPE and ChatML;
the same bytes from the same seed (in another process too), in about a second."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replaykit.models.tiny_model import CHAT_TEMPLATE, write_tiny_model

pytestmark = pytest.mark.engine  # a real llama.cpp server (tests/engine/conftest.py)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_seed_same_bytes_across_processes_and_another_seed_differs(tmp_path: Path) -> None:
    started = time.process_time()
    here = write_tiny_model(tmp_path / "a.gguf", seed=0)
    assert time.process_time() - started < 5
    subprocess.run(
        [sys.executable, "-m", "replaykit.testing.tiny_model", str(tmp_path / "b.gguf"), "--seed", "0"],
        check=True,
        capture_output=True,
    )
    other = write_tiny_model(tmp_path / "c.gguf", seed=1)
    assert sha(here) == sha(tmp_path / "b.gguf") != sha(other)
    import gguf

    reader = gguf.GGUFReader(str(here))
    fields = reader.fields
    assert bytes(fields["general.architecture"].parts[-1]).decode() == "llama"
    assert bytes(fields["tokenizer.chat_template"].parts[-1]).decode() == CHAT_TEMPLATE
    assert bytes(fields["tokenizer.ggml.model"].parts[-1]).decode() == "gpt2"
    params = sum(int(t.n_elements) for t in reader.tensors)
    assert 2_000_000 < params < 6_000_000  # "a few million parameters"


def test_the_writer_says_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "replaykit.testing.tiny_model", str(tmp_path / "no" / "t.gguf")],
        capture_output=True,
        text=True,
    )
    assert (
        proc.returncode == 1
        and proc.stderr.startswith("Error: folder")
        and len(proc.stderr.splitlines()) == 1
    )
