"""Stores for the viewer tests, recorded once per session through the real CLI, and a
running ``replaykit view`` (a real server on loopback) to point a client or a browser at.

``quickstart_store``: the quickstart training (5 epochs) and a compare result (initial vs
trained harness × reference-weak/strong). ``full_store``: a copy of it plus a Docker run
(two tasks, one seed, in containers).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replaykit.testing import write_config
from tests.cli_runner import cli as run_cli

cli = functools.partial(run_cli, check=True)
DOCKER_TASKS = ["hello-file", "fix-config-port"]


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under a store folder (index.db, WAL files if any, cache/)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="session")
def quickstart_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("view-quickstart")
    config = write_config(tmp)
    training = json.loads(cli("train", str(config), "--json").stdout)
    compare = json.loads(
        cli(
            "compare",
            str(config),
            "--models",
            "reference-weak,reference-strong",
            "--harness",
            f"{training['initial_sha']},main",
            "--json",
        ).stdout
    )
    return {"tmp": tmp, "config": config, "store": tmp / "store", "training": training, "compare": compare}


@pytest.fixture(scope="session")
def full_store(
    quickstart_store: dict[str, Any], docker_base: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The quickstart store (copied) plus a run recorded in Docker containers."""
    tmp = tmp_path_factory.mktemp("view-full")
    shutil.copytree(quickstart_store["store"], tmp / "store")
    shutil.copytree(quickstart_store["tmp"] / "harness", tmp / "harness", symlinks=True)
    from replaykit.testing import project_root

    config = write_config(
        tmp,
        {"panel.tasks": [str(project_root() / "envs" / t) for t in DOCKER_TASKS], "panel.seeds": [0]},
        name="docker.yaml",
        base="quickstart-docker.yaml",
    )
    docker_run = json.loads(cli("run", str(config), "--json").stdout)
    return dict(quickstart_store, tmp=tmp, store=tmp / "store", docker_run=docker_run)


class Viewer:
    """``replaykit view --port 0 --no-open --json`` in a subprocess; ``url`` once it listens."""

    def __init__(self, store: Path | None, cache: Path, *extra: str) -> None:
        """``store`` None: the store comes from ``extra`` (``--config CFG``) or the environment."""
        env = {**os.environ, "XDG_CACHE_HOME": str(cache), "COLUMNS": "80"}
        where = ["--store", str(store)] if store is not None else []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "replaykit.cli",
                "view",
                *where,
                "--port",
                "0",
                "--no-open",
                "--json",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        lines = []
        deadline = time.monotonic() + 60
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("}"):
                break
        if not lines or not lines[-1].startswith("}"):
            self.proc.kill()
            raise AssertionError(
                f"replaykit view did not start: {''.join(lines)} {self.proc.stderr.read() if self.proc.stderr else ''}"
            )
        self.info = json.loads("".join(lines))
        self.url = self.info["url"].rstrip("/")

    def stop(self) -> tuple[int, str]:
        """Ctrl-C; the exit code and what it printed on stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err


@pytest.fixture
def viewer_of(tmp_path: Path) -> Iterator[Any]:
    """``viewer_of(store, *options)`` starts a viewer; every one started is stopped after the test."""
    started: list[Viewer] = []

    def start(store: Path | None, *extra: str) -> Viewer:
        v = Viewer(store, tmp_path / "cache", *extra)
        started.append(v)
        return v

    yield start
    for v in started:
        v.stop()
