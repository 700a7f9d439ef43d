"""Scaffolds: a Harbor-layout task (`tasks init`) and a harness repo + config (`init`).

Every scaffold is checked by the tests: the task passes `replaykit tasks check`, the
harness folder is accepted by `replaykit run`. Nothing existing is ever overwritten.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

import yaml

from replaykit.core.errors import ConfigError

NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")

#: The files of a new task; ``{{name}}`` becomes the task id. Executable: the two scripts.
TASK_FILES: dict[str, str] = {
    "environment/Dockerfile": "FROM debian:bookworm-slim\n\nWORKDIR /app\n# the task's starting files (environment/files/), as the local kind copies them\nCOPY files/ /app/\n",
    "environment/files/.gitkeep": "",
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


#: what an init'ed project trains with: the train: defaults (replaykit/train/config.py; a test
#: checks they are the same), written out so the user sees and can change them
TRAINED_WITH: dict[str, dict[str, object]] = {
    "estimator": {
        "kind": "agentic",
        "backend": {"kind": "openai", "model": "reference-proposer", "base_url": "builtin"},
    },
    "criterion": {"name": "strict_pareto"},
    "optimizer": {"name": "greedy_monotonic"},
}


def _flow(value: Mapping[str, object]) -> str:
    """A mapping on one line, keys in their order (YAML's flow style)."""
    return yaml.safe_dump(dict(value), default_flow_style=True, sort_keys=False, width=1000).strip()


#: the env kind a template's project runs in: terminus drives tmux in the task's container
TEMPLATE_KINDS = {"terminus": "docker"}


def project_config(name: str, kind: str = "local") -> str:
    """``replaykit.yaml`` for ``init``: every section it runs and trains with, the training's
    estimator, criterion and optimizer included (the defaults, named), each commented."""
    other = "docker (each task's environment/Dockerfile)" if kind == "local" else "local (temporary folders)"
    return f"""# Written by `replaykit init`; see docs/config.md. Paths are relative to this file.
name: {json.dumps(name)}
store: cassettes
harness:
  repo: harness             # your harness: a git repo; commit your edits before `replaykit run`
  template: null
  branch: main
  entry: harness.py
  params: {{max_steps: 10}}
model:
  # the built-in reference model is a simulator: on each task it plays the task's
  # solution/solve.sh (with simulated mistakes), so a task "solves" because its solution/ does.
  # A real model: base_url: https://…/v1 (any OpenAI-compatible endpoint), name, api_key_env.
  name: reference-strong
  base_url: builtin
  temperature: 0.0
panel:
  tasks: ["tasks/*"]        # add tasks with `replaykit tasks init NAME --dir tasks`
  seeds: [0]
env:
  kind: {kind}               # or {other}
  timeout_sec: 30
train:
  epochs: 3
  seed: 0
  patch_surface: ["harness.py"]   # a candidate editing anything else is skipped
  # what proposes each candidate. The built-in reference proposer knows only the quickstart
  # harness's changes: for your own harness give backend a real model (model, base_url,
  # api_key_env), or kind: codex, or use kind: patch_queue with diffs: [file.diff, ...]
  estimator: {_flow(TRAINED_WITH["estimator"])}
  # what judges a candidate against the baseline: strict_pareto (more solved, none lost;
  # secondary_metrics: [steps, tokens] break ties) or mean_reward (alpha: a sign test's p)
  criterion: {_flow(TRAINED_WITH["criterion"])}
  # what moves the baseline: greedy_monotonic (promote what the criterion accepts),
  # margin_greedy (margin: N more solved), pareto_frontier (see docs/training.md)
  optimizer: {_flow(TRAINED_WITH["optimizer"])}
  # certify: every_epoch   # re-execute each epoch's baseline first; its forked tasks are left out
"""


def init_project(folder: Path, template: str = "quickstart") -> ProjectCreated:
    """A harness repo (committed, from a template), one sample task and a config that
    ``replaykit run`` / ``train`` accept, all under ``folder``."""
    from replaykit.episodes.config_paths import known_templates
    from replaykit.episodes.harness import materialise_template

    if template not in known_templates():  # before anything is made
        raise ConfigError(f"unknown harness template {template!r}; known: {', '.join(known_templates())}")
    _check_new(folder, "folder")
    folder.mkdir(parents=True, exist_ok=True)
    sha = materialise_template(template, folder / "harness")
    task = init_task("first-task", folder / "tasks")
    path = folder / "replaykit.yaml"
    path.write_text(project_config(folder.resolve().name, TEMPLATE_KINDS.get(template, "local")))
    return {
        "path": str(folder),
        "config": str(path),
        "harness": str(folder / "harness"),
        "harness_sha": sha,
        "task": task["path"],
    }
