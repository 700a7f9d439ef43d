"""`replaykit run` with the oracle model on Harbor-shaped tasks outside the repository
(heredoc solve.sh, multi-step, env tables, a solution folder): the built-in server is
handed the panel, every task is solved, the run replays identically and certifies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replaykit.testing import write_config
from tests.cli_runner import cli as run_cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback

HEAD = 'version = "2.0"\n[metadata]\ndifficulty = "easy"\ncategory = "test"\ntags = []\n'
REWARD_IF = 'mkdir -p "$LOGS_DIR/verifier"\nif {cond}; then echo 1; else echo 0; fi > "$LOGS_DIR/verifier/reward.txt"\n'


def write(folder: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def make_suite(root: Path) -> None:
    write(
        root / "heredoc-notes",
        {
            "task.toml": HEAD,
            "instruction.md": "Write notes.txt with the two lines alpha and beta (heredoc suite).\n",
            "tests/test.sh": REWARD_IF.format(
                cond='[ "$(cat "$APP_DIR/notes.txt")" = "$(printf "alpha\\nbeta")" ]'
            ),
            "solution/solve.sh": "#!/bin/bash\nset -euo pipefail\ncd \"$APP_DIR\"\ncat > notes.txt <<'EOF'\nalpha\nbeta\nEOF\n",
        },
    )
    write(
        root / "two-steps",
        {
            "task.toml": HEAD + '[[steps]]\nname = "create"\n[[steps]]\nname = "extend"\n',
            "steps/create/instruction.md": "Create list.txt holding the single line one (two-steps suite).\n",
            "steps/create/tests/test.sh": REWARD_IF.format(cond='grep -qx one "$APP_DIR/list.txt"'),
            "steps/create/solution/solve.sh": "echo one > list.txt\n",
            "steps/extend/instruction.md": "Append the line two to list.txt (two-steps suite).\n",
            "steps/extend/tests/test.sh": REWARD_IF.format(
                cond='[ "$(cat "$APP_DIR/list.txt")" = "$(printf "one\\ntwo")" ]'
            ),
            "steps/extend/solution/solve.sh": "echo two >> list.txt\n",
        },
    )
    write(
        root / "env-tables",
        {
            "task.toml": HEAD
            + '[environment.env]\nREGION = "eu-west"\nTOKEN = "${RK_HARBOR_TOKEN}"\n[verifier.env]\nEXPECTED = "eu-west:blue"\n[solution.env]\nCOLOR = "blue"\n',
            "instruction.md": "Write region.txt as REGION:COLOR (env-tables suite).\n",
            "tests/test.sh": REWARD_IF.format(cond='[ "$(cat "$APP_DIR/region.txt")" = "$EXPECTED" ]'),
            "solution/solve.sh": 'echo "$REGION:$COLOR" > region.txt\necho "token is $TOKEN"\n',
        },
    )
    write(
        root / "patch-apply",
        {
            "task.toml": HEAD,
            "instruction.md": "Fix value.txt so it reads 42 (patch-apply suite).\n",
            "environment/files/value.txt": "41\n",
            "tests/test.sh": REWARD_IF.format(cond='grep -qx 42 "$APP_DIR/value.txt"'),
            "solution/solve.sh": 'cp "$SOLUTION_DIR/fixed/value.txt" value.txt\n',
            "solution/fixed/value.txt": "42\n",
        },
    )


def cli(*args: str, env: dict[str, str] | None = None, process: bool = False) -> dict[str, Any]:
    proc = run_cli(*args, "--json", env=env, process=process)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def test_oracle_solves_harbor_shaped_tasks_and_replays(tmp_path: Path) -> None:
    make_suite(tmp_path / "suite")
    secret = "tok-5e3f9a1c-host-only"
    host = {"RK_HARBOR_TOKEN": secret}  # a host value templated into [environment.env]: a configured secret
    check = cli("tasks", "check", str(tmp_path / "suite" / "*"), "--env", "local", env=host)
    assert check["passed"] == check["total"] == 4, check
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(tmp_path / "suite" / "*")],
            "panel.seeds": [0],
            "model.name": "reference-oracle",
            "env.kind": "local",
        },
    )
    run = cli("run", str(config), env=host)
    assert run["total"] == 4 and run["solved"] == 4, run
    store = str(tmp_path / "store")
    replay = cli(  # its own process: a Docker client cached by an earlier test would not see DOCKER_HOST
        "replay", run["run_id"], "--store", store, env={"DOCKER_HOST": "unix:///nonexistent"}, process=True
    )
    assert replay["identical"] is True and replay["divergence"] is None, replay
    assert [e["replayed_digest"] for e in replay["episodes"]] == [e["digest"] for e in run["episodes"]]
    cert = cli("certify", run["run_id"], "--store", store, "--tasks", str(tmp_path / "suite" / "*"), env=host)
    assert [t["status"] for t in cert["tasks"]] == ["deterministic"] * 4, cert
    stored = [p for p in Path(store).rglob("*") if p.is_file()]
    assert stored and not [p for p in stored if secret.encode() in p.read_bytes()]  # never in the store
    env_tables = next(e["cassette_id"] for e in run["episodes"] if e["task_id"] == "env-tables")
    shown = json.dumps(cli("cassettes", "show", env_tables, "--store", store, "--full"))
    assert "token is <secret:TOKEN>" in shown and secret not in shown
