"""Running Harbor itself (installed by scripts/setup-harbor.sh) on copies of tasks.

``harbor run -a oracle -e docker`` pulls every ``FROM`` image and needs ``docker
compose`` v2; here no registry serves images, so Harbor runs on *copies* of the tasks
in which every ``FROM`` (and ``docker_image``) names the local image replaykit itself
resolves it to (``images.alias_for``): both frameworks run the same bytes on the same
base images. Two more adaptations, each forced by this machine, not by the tasks:

* the copies' network is ``public``: Harbor 0.25's docker environment enforces
  ``no-network`` only through its egress-control sidecar, whose probe image no registry
  serves here (Harbor refuses such tasks: "network_mode='no-network' is not supported
  by EnvironmentType.DOCKER"); replaykit runs the originals (no network);
* Harbor runs Terminal-Bench 1 folders after its own ``harbor tasks migrate`` (replaykit
  loads them as they are).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

HOME = Path(os.environ.get("REPLAYKIT_HARBOR_HOME", Path.home() / ".cache" / "replaykit" / "harbor"))
HARBOR = HOME / "venv" / "bin" / "harbor"
DOCKER_CONFIG = HOME / "docker-config"
_FROM = re.compile(r"^(\s*FROM\s+(?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE | re.MULTILINE)


def missing() -> str | None:
    """Why Harbor cannot run here (None when it can)."""
    if not HARBOR.is_file():
        return f"{HARBOR} is missing: run scripts/setup-harbor.sh"
    if not (DOCKER_CONFIG / "cli-plugins" / "docker-compose").exists():
        return f"{DOCKER_CONFIG}/cli-plugins/docker-compose is missing: run scripts/setup-harbor.sh"
    return None


def environ() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(
        DOCKER_CONFIG=str(DOCKER_CONFIG),
        LITELLM_LOCAL_MODEL_COST_MAP="True",  # no fetch of the model price list (no internet)
        NO_COLOR="1",
        COLUMNS="120",
    )
    return env


def migrate(source: Path, out: Path) -> Path:
    """``harbor tasks migrate`` of one Terminal-Bench 1 folder; the converted folder."""
    proc = subprocess.run(
        [str(HARBOR), "tasks", "migrate", "-i", str(source), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=environ(),
    )
    target = out / source.name
    assert proc.returncode == 0 and target.is_dir(), proc.stdout + proc.stderr
    return target


def harbor_copy(task: Path, dest: Path, resolve: Any) -> Path:
    """A copy of ``task`` Harbor can run here (see the module docstring)."""
    target = dest / task.name
    shutil.copytree(task, target, symlinks=True)
    for dockerfile in (target / "environment").rglob("Dockerfile"):
        text = dockerfile.read_text()
        dockerfile.write_text(_FROM.sub(lambda m: m.group(1) + resolve(m.group(2)) + m.group(3), text))
    toml_path = target / "task.toml"
    text = toml_path.read_text()
    config = tomllib.loads(text)
    env = config.get("environment") or {}
    if isinstance(env.get("docker_image"), str):
        text = text.replace(env["docker_image"], resolve(env["docker_image"]))
    text = re.sub(r"(?m)^allow_internet\s*=\s*false", "allow_internet = true", text)
    text = re.sub(r'(?m)^network_mode\s*=\s*"no-network"', 'network_mode = "public"', text)
    toml_path.write_text(text)
    return target


def run_oracle(
    dataset: Path, jobs: Path, concurrent: int = 2, timeout: float = 1500, options: tuple[str, ...] = ()
) -> dict[str, dict[str, Any]]:
    """``harbor run -a oracle -e docker`` on a folder of tasks (with ``options``, e.g. timeout
    multipliers); task name → its trial result."""
    proc = subprocess.run(
        [
            str(HARBOR),
            "run",
            "-p",
            str(dataset),
            "-a",
            "oracle",
            "-e",
            "docker",
            "-o",
            str(jobs),
            "-n",
            str(concurrent),
            "--yes",  # a task reading host variables (${VAR:-default}) would otherwise ask first
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environ(),
    )
    results: dict[str, dict[str, Any]] = {}
    for path in sorted(jobs.glob("*/*/result.json")):
        data = json.loads(path.read_text())
        if "task_name" in data:
            results[data["task_name"]] = data
    assert results, (
        f"harbor run produced no trial results (exit {proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    )
    return results


def outcome(trial: dict[str, Any]) -> tuple[float | None, str]:
    """(scalar reward, why) of one Harbor trial; None when Harbor raised (an error)."""
    from replaykit.envs.rewards import scalar_reward

    error = trial.get("exception_info")
    if error:
        kind = error.get("exception_type", "error") if isinstance(error, dict) else "error"
        message = error.get("exception_message", "") if isinstance(error, dict) else str(error)
        return None, f"{kind}: {str(message).strip().splitlines()[0][:200] if message else ''}"
    rewards = (trial.get("verifier_result") or {}).get("rewards")
    if rewards is None:
        return None, "no verifier result"
    reward, why = scalar_reward(rewards)
    return reward, why or json.dumps(rewards)
