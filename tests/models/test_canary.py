"""The identity canary: one short greedy request the way the run asks, its reply digested;
ids never count, everything that changes with weights, chat format or template does."""

from __future__ import annotations

from typing import Any

import pytest

from replaykit.models.canary import MAX_TOKENS, canary_body
from replaykit.models.identity import identity_digest, measure_identity
from tests.models.test_identity import reply, serve

pytestmark = pytest.mark.unit

EMPTY = {"/v1/models": {"object": "list", "data": []}}  # what transformers serve lists


def identity(routes: dict[str, Any], params: Any = None) -> tuple[dict[str, Any], list[Any]]:
    posted: list[Any] = []
    for url in serve(routes, posted):
        fields = measure_identity(url, model="m", params=params)
    assert fields is not None
    return fields, posted


def test_an_endpoint_listing_no_model_gets_its_identity_from_the_canary() -> None:
    fields, posted = identity({**EMPTY, "POST /v1/chat/completions": reply})
    assert set(fields) == {"canary", "canary_prompt_tokens"} and fields["canary_prompt_tokens"] == 40
    chat = posted[0]
    assert chat["path"] == "/v1/chat/completions" and chat["temperature"] == 0 and chat["seed"] == 0
    assert chat["max_tokens"] == MAX_TOKENS and chat["logprobs"] is True
    # no log-probabilities on the chat reply: a few are asked of /completions too
    assert [p["path"] for p in posted] == ["/v1/chat/completions", "/v1/completions"]


def test_ids_never_change_the_canary_but_the_reply_the_prompt_and_logprobs_do() -> None:
    base, _ = identity({**EMPTY, "POST /v1/chat/completions": reply})
    again, _ = identity({**EMPTY, "POST /v1/chat/completions": reply})  # other ids, same reply
    assert again == base
    other_command = {**EMPTY, "POST /v1/chat/completions": lambda: reply(arguments='{"command": "ls"}')}
    other_template = {**EMPTY, "POST /v1/chat/completions": lambda: reply(prompt_tokens=52)}
    logprobs = {"tokens": ["Paris"], "token_logprobs": [-0.25]}
    other_weights = {
        **EMPTY,
        "POST /v1/chat/completions": reply,
        "POST /v1/completions": {"choices": [{"text": " Paris", "logprobs": logprobs}]},
    }
    digests = {identity_digest(identity(r)[0]) for r in (other_command, other_template, other_weights)}
    assert len(digests | {identity_digest(base)}) == 4
    assert identity(other_template)[0]["canary_prompt_tokens"] == 52


def test_the_canary_asks_the_way_the_run_asks() -> None:
    forced: dict[str, Any] = {"type": "function", "function": {"name": "shell"}}
    body: dict[str, Any] = canary_body(
        "m", {"max_tokens": 64, "tool_choice": forced, "extra_body": {"cache_prompt": False}}
    )
    assert body["tool_choice"] == forced and body["tools"][0]["function"]["name"] == "shell"
    assert body["max_tokens"] == MAX_TOKENS and body["cache_prompt"] is False
    assert "tools" not in canary_body("m", {"tool_choice": "none"})  # none sends no tools: as if unset
    assert canary_body("m", {"tool_choice": "none"}) == canary_body("m", {"max_tokens": 4})
    assert canary_body("m", {"tool_choice": "auto"})["tools"]  # auto: the tool is offered
