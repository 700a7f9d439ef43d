"""The canary: one short greedy request whose reply is digested into the engine's identity.

Server facts are not enough (llama-cpp-python reports neither the weights nor the chat
format; ``transformers serve`` lists no model at all): the canary asks the engine one fixed
question the way the run asks (the config's ``model.params``: its ``tool_choice`` with the
probe's bash tool, ``extra_body``), greedily, with a fixed seed and a few tokens, and digests
what changes with the weights, the chat format or the template: the reply's text and tool
calls (never their random ids), its finish reason, its prompt and completion token counts
and, where the engine gives them, its log-probabilities. Engines that give none on chat
completions (llama-cpp-python) are asked for a few log-probabilities on ``/completions``
too. Thread and batch settings leave all of this bit-identical on the CPU (measured), so
they never stop reuse. Cost: one or two requests of at most 8 tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx2 as httpx

from replaykit.core.determinism import digest_of
from replaykit.core.records import JSON

PROMPT = "Create a file named ready.txt that contains the word ready."
COMPLETION_PROMPT = "The capital of France is"
MAX_TOKENS = 8


def probe_tool(name: str) -> dict[str, JSON]:
    """A one-argument shell tool (the quickstart harness's), sent by the canary and the probe when a
    tool_choice is."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": "Run one bash command.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }


def canary_body(model: str, params: Mapping[str, JSON] | None) -> dict[str, JSON]:
    """The chat request the canary sends (``model.params`` with its reply capped at 8 tokens)."""
    sent = dict(params or {})
    extra_body = sent.pop("extra_body", None)
    body: dict[str, JSON] = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "temperature": 0,
        "seed": 0,
    }
    if isinstance(extra_body, Mapping):
        body.update(extra_body)
    body.update({k: v for k, v in sent.items() if k in ("tool_choice", "parallel_tool_calls", "stop")})
    choice = body.get("tool_choice")
    if choice == "none":
        body.pop("tool_choice")  # no tools are sent: the same request as none at all
    elif choice is not None:
        function = choice.get("function") if isinstance(choice, dict) else None
        named = function.get("name") if isinstance(function, dict) else None
        body["tools"] = [probe_tool(named if isinstance(named, str) and named else "bash")]
    body["max_tokens"] = MAX_TOKENS
    body["logprobs"] = True
    return body


def _reply_facts(doc: Any) -> dict[str, JSON] | None:
    """What of a chat reply changes with the engine (None: not a chat completion)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("choices"), list) or not doc["choices"]:
        return None
    choice = doc["choices"][0] if isinstance(doc["choices"][0], dict) else {}
    message = choice.get("message") or {}
    calls = [c.get("function") or {} for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    usage = doc.get("usage") or {}
    return {
        "content": message.get("content"),
        "tool_calls": [[c.get("name"), c.get("arguments")] for c in calls],
        "finish_reason": choice.get("finish_reason"),
        "prompt_tokens": usage.get("prompt_tokens"),
        "completion_tokens": usage.get("completion_tokens"),
        "logprobs": choice.get("logprobs"),
    }


def _completion_logprobs(client: httpx.Client, base_url: str, model: str) -> JSON:
    body = {"model": model, "prompt": COMPLETION_PROMPT, "max_tokens": 4, "temperature": 0, "logprobs": 1}
    try:
        resp = client.post(base_url.rstrip("/") + "/completions", json=body)
        doc = resp.json() if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    choices = doc.get("choices") if isinstance(doc, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    return [choices[0].get("text"), choices[0].get("logprobs")]


def measure_canary(
    client: httpx.Client, base_url: str, model: str, params: Mapping[str, JSON] | None
) -> dict[str, JSON]:
    """``{"canary": digest, "canary_prompt_tokens": n}``, or ``{}`` when the engine does not
    answer it with a chat completion (the run's own first call will say why)."""
    try:
        resp = client.post(base_url.rstrip("/") + "/chat/completions", json=canary_body(model, params))
        facts = _reply_facts(resp.json()) if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return {}
    if facts is None:
        return {}
    if not facts["logprobs"]:
        facts["completion_logprobs"] = _completion_logprobs(client, base_url, model)
    out: dict[str, JSON] = {"canary": digest_of(facts)[:16]}
    if isinstance(facts["prompt_tokens"], int):
        out["canary_prompt_tokens"] = facts["prompt_tokens"]
    return out
