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
from typing import Literal, NotRequired, TypedDict

from replaykit.cassette.events import Episode
from replaykit.core.records import JSON
from replaykit.episodes.views import EnvStep
from replaykit.report.documents import CallTurn, ToolCall
from replaykit.report.transcript import transcript

SCHEMA_VERSION = "ATIF-v1.7"  # llm_call_count is v1.7's


class AtifToolCall(TypedDict):
    tool_call_id: str
    function_name: str
    arguments: dict[str, JSON]  # the call's arguments as an object (a non-object: ``{"input": …}``)


class AtifResult(TypedDict):
    """One observation result: an action's output, tied to the tool call it answers (if any)."""

    source_call_id: NotRequired[str]
    content: str


class AtifObservation(TypedDict):
    results: list[AtifResult]


class AtifMetrics(TypedDict, total=False):
    """A model call's token usage, each count only when the endpoint reported it."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


class AtifStep(TypedDict):
    """One step, in the key order Harbor writes (``step_id`` first)."""

    step_id: int
    source: Literal["system", "user", "agent"]
    model_name: NotRequired[str]
    message: str
    llm_call_count: NotRequired[int]
    tool_calls: NotRequired[list[AtifToolCall]]
    metrics: NotRequired[AtifMetrics]
    observation: NotRequired[AtifObservation]


class AtifAgent(TypedDict):
    name: str
    version: str
    model_name: str


class AtifFinalMetrics(TypedDict):
    total_steps: int
    total_prompt_tokens: NotRequired[int]
    total_completion_tokens: NotRequired[int]


class Trajectory(TypedDict):
    """An ATIF trajectory (``agent/trajectory.json``)."""

    schema_version: str
    session_id: str
    agent: AtifAgent
    steps: list[AtifStep]
    final_metrics: AtifFinalMetrics


def _arguments(raw: str) -> dict[str, JSON]:
    try:
        value: JSON = json.loads(raw) if raw else {}
    except ValueError:
        return {"input": raw}
    return dict(value) if isinstance(value, dict) else {"input": value}


def _metrics(usage: JSON) -> AtifMetrics | None:
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    kept: AtifMetrics = {}
    if isinstance(prompt, int):
        kept["prompt_tokens"] = prompt
    if isinstance(completion, int):
        kept["completion_tokens"] = completion
    if isinstance(cached, int):
        kept["cached_tokens"] = cached
    return kept or None


def _observed(turn: EnvStep) -> str:
    """An environment action's observation as text: its output, then its exit."""
    parts = [str(turn.get("stdout") or ""), str(turn.get("stderr") or "")]
    text = "".join(p if p.endswith("\n") or not p else p + "\n" for p in parts)
    end = "timed out" if turn.get("timed_out") else f"exit {turn.get('exit_code')}"
    return f"{text}[{end}]"


class _Builder:
    """The steps, appended in order (``step_id`` from 1)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.steps: list[AtifStep] = []
        self.agent_step: AtifStep | None = None  # the reply the next actions answer
        self.used = 0  # tool calls of that reply already matched to an action

    def add(self, step: AtifStep) -> AtifStep:
        self.steps.append(step)
        return step

    @property
    def next_id(self) -> int:
        return len(self.steps) + 1

    def said(self, source: Literal["system", "user"], message: str) -> AtifStep:
        return self.add({"step_id": self.next_id, "source": source, "message": message})

    def call(self, turn: CallTurn) -> None:
        for msg in turn["new"]:
            if msg["role"] in ("system", "developer"):
                self.said("system", msg["content"])
            elif msg["role"] == "user":
                self.said("user", msg["content"])
        reply = [m for m in turn["reply"] if m["role"] == "assistant"] or turn["reply"]
        calls: list[ToolCall] = [c for m in reply for c in m.get("tool_calls", [])]
        step: AtifStep = {
            "step_id": self.next_id,
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

    def action(self, turn: EnvStep) -> None:
        if self.agent_step is None:  # the harness acted without asking the model
            self.agent_step = self.add(
                {
                    "step_id": self.next_id,
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
        result: AtifResult = {"content": _observed(turn)}
        if self.used < len(calls):
            result = {"source_call_id": calls[self.used]["tool_call_id"], "content": result["content"]}
            self.used += 1
        self.agent_step.setdefault("observation", {"results": []})["results"].append(result)
        if self.agent_step.get("llm_call_count") == 0:
            self.agent_step = None  # the next action without a model call is its own step

    def error(self, message: str) -> None:
        self.said("system", f"error: {message}")
        self.agent_step = None


def _unique_call_ids(steps: list[AtifStep]) -> None:
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
) -> Trajectory:
    """The episode's ATIF trajectory (JSON-ready; see the module docstring)."""
    build = _Builder(model)
    for turn in transcript(episode, cap=None):
        if turn["kind"] == "call":
            build.call(turn)
        elif turn["kind"] == "env":
            build.action(turn)
        elif turn["kind"] == "error":
            build.error(str(turn.get("message", "")))
    if not build.steps:
        build.said("system", why_empty or "the episode recorded no event")
    _unique_call_ids(build.steps)
    metrics = [s.get("metrics") or AtifMetrics() for s in build.steps]
    final: AtifFinalMetrics = {"total_steps": len(build.steps)}
    if any("prompt_tokens" in m for m in metrics):
        final["total_prompt_tokens"] = sum(m.get("prompt_tokens", 0) for m in metrics)
    if any("completion_tokens" in m for m in metrics):
        final["total_completion_tokens"] = sum(m.get("completion_tokens", 0) for m in metrics)
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": episode.id,
        "agent": {"name": agent, "version": version, "model_name": model},
        "steps": build.steps,
        "final_metrics": final,
    }
