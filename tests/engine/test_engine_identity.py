"""The engine's identity is measured, not declared: restarting the server with another
--n_ctx never reuses the cassettes recorded under the old one silently."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from replaykit.testing import REPO_ROOT
from replaykit.testing.llama_server import LlamaServer, free_port
from tests.cli_runner import cli


def test_restart_with_another_n_ctx_stops_reuse_with_one_line_naming_it(
    tiny_model: Path, engine_config: Callable[..., Path], tmp_path: Path
) -> None:
    port = free_port()
    small = {"panel.tasks": [str(REPO_ROOT / "envs" / "hello-file")], "panel.seeds": [0, 1]}
    with LlamaServer(tiny_model, n_ctx=2048, port=port, log_path=tmp_path / "a.log") as server:
        config = engine_config(server, small)
        first = json.loads(cli("run", str(config), "--json", check=True).stdout)
    assert first["recorded_count"] == 2
    assert first["engine"] == {"engine": "llama-cpp-python", "models": [str(tiny_model)], "n_ctx": 2048}

    with LlamaServer(tiny_model, n_ctx=4096, port=port, log_path=tmp_path / "b.log"):  # same URL
        refused = cli("run", str(config))
        accepted = cli("run", str(config), "--accept-engine-change", "--json", check=True)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    line = refused.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert "n_ctx 2048 → 4096" in line and "--accept-engine-change" in line and "--record-mode all" in line
    assert json.loads(accepted.stdout)["reused_count"] == 2

    with LlamaServer(tiny_model, n_ctx=2048, port=port, log_path=tmp_path / "c.log"):  # the same engine again
        again = json.loads(cli("run", str(config), "--json", check=True).stdout)
    assert again["reused_count"] == 2 and again["run_id"] == first["run_id"]
