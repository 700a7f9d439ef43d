"""An episode as an ATIF trajectory (Agent Trajectory Interchange Format, ``agent/trajectory.json``):
what Harbor, NeMo Relay and other agents exchange, in the version Harbor 0.25 validates
(``ATIF-v1.7``; its models in ``harbor.models.trajectories``, its validator
``harbor.utils.trajectory_validator``).

Built from the episode's transcript (``report.transcript``), in order:

* each model call's new request messages: ``system`` and ``user`` messages are steps of
  that source (a tool result or a re-sent assistant message is not: it is an observation, or
  already a step);
* each call's reply is one ``agent`` step: its text, its tool calls (arguments parsed as an
  object; a non-object is kept as ``{"input": …}``), the model named, the call's token usage
  (``metrics``) and ``llm_call_count`` 1;
* each environment action the harness ran after a reply is an observation result of that
  step, tied to the reply's tool call in the same position (``source_call_id``) when there
  is one; an action before any reply is an ``agent`` step of its own with no model call
  (``llm_call_count`` 0) whose tool call is the command;
* a harness error is a ``system`` step; the grade is not a step (it is the verifier's, in
  ``verifier/``). An episode with no event at all (an environment never prepared) is one
  ``system`` step saying why.

Step ids run from 1; no wall time is kept (replaykit records none per event).
"""

from __future__ import annotations

import json
from typing import Any

from replaykit.cassette.events import Episode
from replaykit.core.records import JSON
from replaykit.report.documents import CallTurn, ToolCall
from replaykit.report.transcript import transcript

SCHEMA_VERSION = "ATIF-v1.7"  # llm_call_count is v1.7's


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {"input": raw}
    return value if isinstance(value, dict) else {"input": value}


def _metrics(usage: JSON) -> dict[str, Any] | None:
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    found = {
        "prompt_tokens": prompt if isinstance(prompt, int) else None,
        "completion_tokens": completion if isinstance(completion, int) else None,
        "cached_tokens": cached if isinstance(cached, int) else None,
    }
    kept = {k: v for k, v in found.items() if v is not None}
    return kept or None


def _observed(turn: dict[str, Any]) -> str:
    """An environment action's observation as text: its output, then its exit."""
    parts = [str(turn.get("stdout") or ""), str(turn.get("stderr") or "")]
    text = "".join(p if p.endswith("\n") or not p else p + "\n" for p in parts)
    end = "timed out" if turn.get("timed_out") else f"exit {turn.get('exit_code')}"
    return f"{text}[{end}]"


class _Builder:
    """The steps, appended in order (``step_id`` from 1)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.steps: list[dict[str, Any]] = []
        self.agent_step: dict[str, Any] | None = None  # the reply the next actions answer
        self.used = 0  # tool calls of that reply already matched to an action

    def add(self, step: dict[str, Any]) -> dict[str, Any]:
        step = {"step_id": len(self.steps) + 1, **step}
        self.steps.append(step)
        return step

    def call(self, turn: CallTurn) -> None:
        for msg in turn["new"]:
            if msg["role"] in ("system", "developer"):
                self.add({"source": "system", "message": msg["content"]})
            elif msg["role"] == "user":
                self.add({"source": "user", "message": msg["content"]})
        reply = [m for m in turn["reply"] if m["role"] == "assistant"] or turn["reply"]
        calls: list[ToolCall] = [c for m in reply for c in m.get("tool_calls", [])]
        step: dict[str, Any] = {
            "source": "agent",
            "model_name": str(turn["settings"].get("model") or self.model),
            "message": "\n".join(m["content"] for m in reply if m["content"]) or (turn["error"] or ""),
            "llm_call_count": 1,
        }
        if calls:
            step["tool_calls"] = [
                {
                    "tool_call_id": c["id"] or f"call-{turn['call']}-{i}",
                    "function_name": c["name"],
                    "arguments": _arguments(c["arguments"]),
                }
                for i, c in enumerate(calls)
            ]
        if (metrics := _metrics(turn["usage"])) is not None:
            step["metrics"] = metrics
        self.agent_step, self.used = self.add(step), 0

    def action(self, turn: dict[str, Any]) -> None:
        if self.agent_step is None:  # the harness acted without asking the model
            self.agent_step = self.add(
                {
                    "source": "agent",
                    "message": "",
                    "llm_call_count": 0,
                    "tool_calls": [
                        {
                            "tool_call_id": f"action-{turn['position']}",
                            "function_name": "env.run",
                            "arguments": {"command": turn["action"]},
                        }
                    ],
                }
            )
            self.used = 0
        calls = self.agent_step.get("tool_calls") or []
        result: dict[str, Any] = {"content": _observed(turn)}
        if self.used < len(calls):
            result = {"source_call_id": calls[self.used]["tool_call_id"], **result}
            self.used += 1
        self.agent_step.setdefault("observation", {"results": []})["results"].append(result)
        if self.agent_step.get("llm_call_count") == 0:
            self.agent_step = None  # the next action without a model call is its own step

    def error(self, message: str) -> None:
        self.add({"source": "system", "message": f"error: {message}"})
        self.agent_step = None


def _unique_call_ids(steps: list[dict[str, Any]]) -> None:
    """A tool call id repeated inside one step (some servers send the same one) made unique, and
    the observation results pointing at it renamed with it."""
    for step in steps:
        seen: dict[str, int] = {}
        for call in step.get("tool_calls") or []:
            n = seen.get(call["tool_call_id"], 0)
            seen[call["tool_call_id"]] = n + 1
            if n:
                call["tool_call_id"] = f"{call['tool_call_id']}-{n}"


def trajectory(
    episode: Episode,
    agent: str,
    version: str,
    model: str,
    why_empty: str = "",
) -> dict[str, Any]:
    """The episode's ATIF trajectory (a JSON-ready dict; see the module docstring)."""
    build = _Builder(model)
    for turn in transcript(episode, cap=None):
        if turn["kind"] == "call":
            build.call(turn)
        elif turn["kind"] == "env":
            build.action(dict(turn))
        elif turn["kind"] == "error":
            build.error(str(turn.get("message", "")))
    if not build.steps:
        build.add({"source": "system", "message": why_empty or "the episode recorded no event"})
    _unique_call_ids(build.steps)
    metrics = [s.get("metrics") or {} for s in build.steps]
    final: dict[str, Any] = {"total_steps": len(build.steps)}
    for key, total in (
        ("prompt_tokens", "total_prompt_tokens"),
        ("completion_tokens", "total_completion_tokens"),
    ):
        if any(key in m for m in metrics):
            final[total] = sum(int(m.get(key, 0)) for m in metrics)
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": episode.id,
        "agent": {"name": agent, "version": version, "model_name": model},
        "steps": build.steps,
        "final_metrics": final,
    }
