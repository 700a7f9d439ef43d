"""mini-swe-agent 2.4.6 as a named agent (``replaykit run CONFIG --agent mini-swe-agent``).

Its own CLI (``mini``), with its own text-based configuration (``mini_textbased.yaml``: system and
instance prompts, the ```mswea_bash_command parser, observation and format-error messages, exit on
COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT) and its ``DefaultAgent`` loop, runs as a separate process.
Its model is litellm's ``openai/MODEL`` with ``api_base`` at this episode's recording bridge
(``replaykit/agents/bridge.py``), so every call goes through the episode's recorded client; its
environment is ``mswea_env.BridgeEnvironment`` (beside this file, standard library only), which
posts each command to the bridge, so each one runs in the task's environment as a recorded step.
What this file sets: the step limit (``harness.params.max_steps``), no cost limit, no
confirmation, a fixed ``system`` template variable, and an environment that keeps it offline and
deterministic (no price-list fetch, one attempt per model call, no start-up banner, no user
config). Its stdout/stderr (bounded) and its trajectory's counts go into the episode's meta
(``notes``); a process that fails is the episode's ``crash``.
"""

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from replaykit.agents.bridge import Bridge
from replaykit.agents.process import agent_scratch, run_process
from replaykit.agents.registry import get_agent
from replaykit.core.determinism import ENV_PINS
from replaykit.core.records import JSON

HERE = Path(__file__).resolve().parent
HIDDEN = "<bridge-token>"  # the bearer token, wherever the agent printed it


class AgentSection(TypedDict):
    step_limit: int
    cost_limit: int
    mode: str
    confirm_exit: bool


class ModelKwargs(TypedDict):
    api_base: str
    drop_params: bool


class ModelSection(TypedDict):
    model_class: str
    model_name: str
    cost_tracking: str
    model_kwargs: ModelKwargs


class EnvironmentSection(TypedDict):
    environment_class: str
    timeout: int


class Overrides(TypedDict):
    """``replaykit.yaml``: what this file sets of mini-swe-agent's configuration."""

    agent: AgentSection
    model: ModelSection
    environment: EnvironmentSection


class Ran(TypedDict, total=False):
    """What the trajectory says of the run (nothing when mini-swe-agent wrote none)."""

    exit_status: JSON
    submission: JSON
    api_calls: JSON


def overrides(ctx: Any, bridge: Bridge) -> Overrides:
    """The configuration layered on ``mini_textbased.yaml`` (JSON is YAML)."""
    return {
        "agent": {
            "step_limit": int(ctx.params.get("max_steps", 10)),
            "cost_limit": 0,
            "mode": "yolo",
            "confirm_exit": False,
        },
        "model": {
            "model_class": "litellm_textbased",
            "model_name": f"openai/{ctx.model}",
            "cost_tracking": "ignore_errors",
            "model_kwargs": {"api_base": f"{bridge.url}/v1", "drop_params": True},
        },
        "environment": {
            "environment_class": "mswea_env.BridgeEnvironment",
            "timeout": int(ctx.params.get("command_timeout_sec", 60)),
        },
    }


def agent_env(work: Path, bridge: Bridge) -> dict[str, str]:
    """The process's whole environment: nothing of the user's (keys, proxies, config) leaks in."""
    return {
        **ENV_PINS,
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "TERM": "dumb",
        "COLUMNS": "120",
        "PYTHONPATH": str(HERE),  # mswea_env
        "PYTHONDONTWRITEBYTECODE": "1",
        "MSWEA_GLOBAL_CONFIG_DIR": str(work / "config"),
        "MSWEA_CONFIGURED": "true",
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_COST_TRACKING": "ignore_errors",
        "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENAI_API_KEY": bridge.token,
        "REPLAYKIT_BRIDGE_URL": bridge.url,
        "REPLAYKIT_BRIDGE_TOKEN": bridge.token,
    }


def _field(doc: JSON, name: str) -> JSON:
    return doc.get(name) if isinstance(doc, Mapping) else None


def trajectory(path: Path) -> Ran:
    try:
        info = _field(json.loads(path.read_text()), "info")
    except (OSError, ValueError):
        return {}
    return {
        "exit_status": _field(info, "exit_status"),
        "submission": _field(info, "submission"),
        "api_calls": _field(_field(info, "model_stats"), "api_calls"),
    }


def solve(task: Any, env: Any, llm: Any, ctx: Any) -> Any:
    program = get_agent("mini-swe-agent").program()
    timeout = float(ctx.params.get("agent_timeout_sec", 1800))
    with agent_scratch("replaykit-mswea-") as work, Bridge(llm, env, ctx) as bridge:
        (work / "replaykit.yaml").write_text(json.dumps(overrides(ctx, bridge)))
        argv = [str(program), "-y", "--exit-immediately", "-c", "mini_textbased.yaml", "-c", "replaykit.yaml"]
        argv += ["-t", task.instruction, "-o", str(work / "trajectory.json")]
        done = run_process(argv, agent_env(work, bridge), work, timeout, bridge.failed, bridge.gate)
        ran = trajectory(work / "trajectory.json")
    ctx.notes.update(
        agent="mini-swe-agent",
        returncode=done.returncode,
        stdout=done.stdout.replace(bridge.token, HIDDEN),
        stderr=done.stderr.replace(bridge.token, HIDDEN),
        bridge_model_calls=bridge.model_calls,
        bridge_commands=bridge.commands,
        bridge_refused=bridge.gate.refused,
        **{f"trajectory_{k}": v for k, v in ran.items()},
    )
    if bridge.failure is not None:  # a divergence, a limit, an endpoint failure: the episode's own
        raise bridge.failure
    if done.stopped:
        raise TimeoutError(f"mini-swe-agent {done.stopped}")
    if done.returncode != 0:
        last = (done.stderr.replace(bridge.token, HIDDEN).strip().splitlines() or ["(no output on stderr)"])[
            -1
        ]
        raise RuntimeError(f"mini-swe-agent exited with status {done.returncode}: {last}")
    return ran.get("submission") or ran.get("exit_status")
