"""Scaffolds: a Harbor-layout task (`tasks init`) and a harness repo + config (`init`).

Every scaffold is checked by the tests: the task passes `replaykit tasks check`, the
harness folder is accepted by `replaykit run`. Nothing existing is ever overwritten.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import TypedDict

import yaml

from replaykit.core.errors import ConfigError

NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")

#: The files of a new task; ``{{name}}`` becomes the task id. Executable: the two scripts.
TASK_FILES: dict[str, str] = {
    "environment/Dockerfile": "FROM debian:bookworm-slim\n\nWORKDIR /app\n",
    "instruction.md": "# {{name}}\n\nIn the working directory (`/app`), create the file `done.txt` containing exactly one\nline:\n\n```\n{{name}} done\n```\n\n(followed by a single newline, nothing else).\n",
    "solution/solve.sh": "#!/usr/bin/env bash\nprintf '{{name}} done\\n' > done.txt\n",
    "task.toml": 'version = "2.0"\n\n[metadata]\nauthor_name = "you"\nauthor_email = "you@example.com"\ndifficulty = "easy"\ncategory = "file-operations"\ntags = ["bash"]\n\n[verifier]\ntimeout_sec = 30.0\n\n[agent]\ntimeout_sec = 120.0\n\n[environment]\nbuild_timeout_sec = 300.0\ncpus = 1\nmemory_mb = 512\nstorage_mb = 1024\nworkdir = "/app"\nallow_internet = false\n',
    "tests/test.sh": '#!/usr/bin/env bash\n# Verifier for {{name}}: writes 1 (pass) or 0 (fail) to $LOGS_DIR/verifier/reward.txt.\nAPP_DIR="${APP_DIR:-/app}"\nLOGS_DIR="${LOGS_DIR:-/logs}"\nmkdir -p "$LOGS_DIR/verifier"\n\nfail() { echo "FAIL: $*"; return 1; }\n\ncheck() {\n  local f="$APP_DIR/done.txt"\n  [ -f "$f" ] || fail "done.txt does not exist" || return 1\n  [ "$(cat "$f")" = "{{name}} done" ] || fail "wrong content: $(head -c 200 "$f")" || return 1\n  [ "$(wc -l < "$f")" -eq 1 ] || fail "expected exactly one line" || return 1\n}\n\nif check; then\n  echo "PASS"\n  echo 1 > "$LOGS_DIR/verifier/reward.txt"\nelse\n  echo 0 > "$LOGS_DIR/verifier/reward.txt"\nfi\n',
}
EXECUTABLE = ("tests/test.sh", "solution/solve.sh")


def _check_new(path: Path, what: str) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ConfigError(f"{path} already exists and is not empty; choose a new {what}")


class TaskCreated(TypedDict):
    """What ``replaykit tasks init`` made (its ``--json``)."""

    task: str
    path: str
    files: list[str]


class ProjectCreated(TypedDict):
    """What ``replaykit init`` made (its ``--json``)."""

    path: str
    config: str  # the replaykit.yaml
    harness: str
    harness_sha: str
    task: str  # the sample task's folder


def init_task(name: str, parent: Path) -> TaskCreated:
    """Write a new Harbor-layout task ``parent/name`` that passes the oracle check."""
    if not NAME.fullmatch(name):
        raise ConfigError(
            f"task name {name!r} must be lowercase letters, digits and dashes (e.g. fix-my-bug)"
        )
    folder = parent / name
    _check_new(folder, "task name")
    tmp = parent / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, text in TASK_FILES.items():
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace("{{name}}", name))
        if rel in EXECUTABLE:
            target.chmod(0o755)
    if folder.exists():
        folder.rmdir()
    tmp.rename(folder)  # the task appears whole or not at all
    return {"task": name, "path": str(folder), "files": sorted(TASK_FILES)}


def init_project(folder: Path, template: str = "quickstart") -> ProjectCreated:
    """A harness repo (committed, from a template), one sample task and a config that
    ``replaykit run`` / ``train`` accept, all under ``folder``."""
    from replaykit.episodes.harness import materialise_template

    _check_new(folder, "folder")
    folder.mkdir(parents=True, exist_ok=True)
    sha = materialise_template(template, folder / "harness")
    task = init_task("first-task", folder / "tasks")
    config = {
        "name": folder.resolve().name,
        "store": "cassettes",
        "harness": {
            "repo": "harness",
            "template": None,
            "branch": "main",
            "entry": "harness.py",
            "params": {"max_steps": 10},
        },
        "model": {"name": "reference-strong", "base_url": "builtin", "temperature": 0.0},
        "panel": {"tasks": ["tasks/*"], "seeds": [0]},
        "env": {"kind": "local", "timeout_sec": 30},
        "train": {"epochs": 3, "seed": 0, "patch_surface": ["harness.py"]},
    }
    path = folder / "replaykit.yaml"
    path.write_text(
        "# Written by `replaykit init`; see docs/config.md. Paths are relative to this file.\n"
        "# Swap the builtin simulator for a real endpoint with model.base_url + model.api_key_env.\n"
        + yaml.safe_dump(config, sort_keys=False)
    )
    return {
        "path": str(folder),
        "config": str(path),
        "harness": str(folder / "harness"),
        "harness_sha": sha,
        "task": task["path"],
    }
