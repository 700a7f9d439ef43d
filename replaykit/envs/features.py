"""Which Harbor task.toml features a task uses, which replaykit honours, which it ignores.

Harbor (0.25) reads task.toml into pydantic models that silently drop unknown keys;
replaykit names them instead. :func:`feature_report` is what ``replaykit tasks check``
prints per task: the Harbor features the task uses (``multi-step``, ``env tables``,
``healthcheck``, ``compose sidecars``, ``network public``, …), the ones replaykit
ignores (``agent.user``, ``mcp_servers``, …) and a warning per key neither Harbor nor
replaykit knows (a typo such as ``[enviroment]`` or ``timeout_secs``).

:func:`network_mode` is Harbor's network policy for the task's container: schema 1.4's
``[environment] network_mode`` (``"public"``, ``"no-network"``; ``"allowlist"`` is
refused: replaykit cannot enforce a host allow-list), else the deprecated
``allow_internet`` (true → public, false → no-network), else **public**, Harbor's
default. Builds always have the network, as in Harbor.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from replaykit.envs import tb1

#: Harbor's network modes (``NetworkMode``) and the ones replaykit runs.
NETWORK_MODES: tuple[str, ...] = ("public", "no-network", "allowlist")
SUPPORTED_NETWORK_MODES: tuple[str, ...] = ("public", "no-network")

#: Keys of Harbor 0.25's TaskConfig models, per table ("" is the top level), plus the
#: few replaykit accepts of its own or from older Harbor releases.
KNOWN_KEYS: dict[str, frozenset[str]] = {
    "": frozenset(
        {
            "version",  # Harbor's pre-1.x format
            "schema_version",
            "task",
            "metadata",
            "verifier",
            "agent",
            "environment",
            "solution",
            "source",
            "multi_step_reward_strategy",
            "steps",
            "artifacts",
        }
    ),
    "environment": frozenset(
        {
            "allow_internet",
            "allowed_hosts",
            "build_timeout_sec",
            "cpus",
            "docker_image",
            "env",
            "gpu_types",
            "gpus",
            "healthcheck",
            "mcp_servers",
            "memory_mb",
            "network_mode",
            "os",
            "skills_dir",
            "storage_mb",
            "tpu",
            "workdir",
            "memory",  # older Harbor: "2G"
            "storage",  # older Harbor: "10G"
            "pids_limit",  # replaykit's own
        }
    ),
    "verifier": frozenset(
        {
            "allowed_hosts",
            "collect",
            "env",
            "environment",
            "environment_mode",
            "network_mode",
            "timeout_sec",
            "user",
        }
    ),
    "agent": frozenset({"allowed_hosts", "network_mode", "timeout_sec", "user"}),
    "solution": frozenset({"env"}),
    "task": frozenset({"authors", "description", "keywords", "name", "version"}),
    "step": frozenset({"agent", "artifacts", "healthcheck", "min_reward", "name", "verifier"}),
    "healthcheck": frozenset(
        {"command", "interval_sec", "retries", "start_interval_sec", "start_period_sec", "timeout_sec"}
    ),
}

#: Keys Harbor honours and replaykit does not (runs without them), with what that means.
IGNORED: dict[str, str] = {
    "agent.user": "actions run as the image's user",
    "verifier.user": "the verifier runs as the image's user",
    "agent.network_mode": "one network policy per episode: the environment's",
    "verifier.network_mode": "one network policy per episode: the environment's",
    "verifier.collect": "no verifier collection commands",
    "environment.mcp_servers": "no MCP servers are started",
    "environment.skills_dir": "no skills are installed",
    "environment.gpu_types": "no GPUs",
    "artifacts": "no artifacts are collected",
    "step.artifacts": "no artifacts are collected",
    "step.healthcheck": "only the environment's healthcheck runs",
}


def network_mode(config: Mapping[str, Any]) -> str:
    """The task's network policy (see the module docstring); not validated here."""
    env = config.get("environment")
    table = env if isinstance(env, Mapping) else {}
    mode = table.get("network_mode")
    if isinstance(mode, str):
        return mode
    allow = table.get("allow_internet")
    if isinstance(allow, bool):
        return "public" if allow else "no-network"
    return "public"


def unknown_keys(config: Mapping[str, Any]) -> list[str]:
    """Dotted names of the task.toml keys neither Harbor nor replaykit knows."""
    found: list[str] = []

    def check(table: Any, kind: str, prefix: str) -> None:
        if not isinstance(table, Mapping):
            return
        for key in table:
            if key not in KNOWN_KEYS[kind]:
                found.append(f"{prefix}{key}")

    check(config, "", "")
    for section in ("environment", "verifier", "agent", "solution", "task"):
        check(config.get(section), section, f"{section}.")
    env = config.get("environment")
    if isinstance(env, Mapping):
        check(env.get("healthcheck"), "healthcheck", "environment.healthcheck.")
    steps = config.get("steps")
    for i, step in enumerate(steps if isinstance(steps, list) else []):
        check(step, "step", f"steps[{i}].")
        if isinstance(step, Mapping):
            for section in ("agent", "verifier"):
                check(step.get(section), section, f"steps[{i}].{section}.")
    return found


def _present(config: Mapping[str, Any], dotted: str) -> bool:
    if dotted.startswith("step."):
        key = dotted.removeprefix("step.")
        steps = config.get("steps")
        return any(isinstance(s, Mapping) and s.get(key) for s in (steps if isinstance(steps, list) else []))
    table: Any = config
    for part in dotted.split("."):
        if not isinstance(table, Mapping) or part not in table:
            return False
        table = table[part]
    return bool(table) or table is False or table == 0


def feature_report(config: Mapping[str, Any], folder: Path) -> dict[str, list[str]]:
    """``{"used": [...], "ignored": [...], "unknown": [...]}`` for one task (see the module docstring)."""
    used: list[str] = []
    if tb1.is_converted(folder):
        used.append("Terminal-Bench 1 layout (mapped as `harbor tasks migrate` does)")
    if "schema_version" in config:
        used.append(f"schema {config['schema_version']}")
    if config.get("steps"):
        used.append(f"multi-step ({len(config['steps'])} steps)")
        if (folder / "tests").is_dir():
            used.append("shared tests/")
    tables = [s for s in ("environment", "verifier", "solution") if _present(config, f"{s}.env")]
    if tables:
        used.append("env tables (" + ", ".join(f"[{s}.env]" for s in tables) + ")")
    used += _environment_features(config, folder)
    if (folder / "tests" / "test.sh").is_file() and "uvx" in _text(folder / "tests" / "test.sh"):
        used.append("uvx verifier")
    ignored = [f"{key} ({why})" for key, why in IGNORED.items() if _present(config, key)]
    return {"used": used, "ignored": ignored, "unknown": unknown_keys(config)}


def _environment_features(config: Mapping[str, Any], folder: Path) -> list[str]:
    """What of Harbor's [environment] (and environment/ folder) a task uses."""
    env = config.get("environment")
    env_table = env if isinstance(env, Mapping) else {}
    used = []
    if env_table.get("healthcheck"):
        used.append("healthcheck")
    if env_table.get("docker_image") and not (folder / "environment" / "Dockerfile").is_file():
        used.append("docker_image")
    if any(
        (folder / "environment" / name).is_file() for name in ("docker-compose.yaml", "docker-compose.yml")
    ):
        used.append("compose sidecars")
    used.append(f"network {network_mode(config)}")
    if "workdir" in env_table:
        used.append("workdir")
    return used


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
