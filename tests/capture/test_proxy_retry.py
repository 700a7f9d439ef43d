"""A divergence at the proxy ends the stock openai client's call at once (no retries),
and ``proxy --agent codex`` applies the rules Codex needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from replaykit.capture.proxy import recording_proxy
from replaykit.capture.tape import Tape
from replaykit.episodes.proxy_keys import AGENT_RULES, rules_for
from replaykit.models.reference.server import ReferenceServer
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


MESSAGES: list[Any] = [  # the wire form: plain dicts
    {"role": "user", "content": "hello"}
]


def test_divergence_is_not_retried_by_the_stock_openai_client() -> None:
    tape = Tape("retry")
    with ReferenceServer() as upstream, recording_proxy(tape, upstream.base_url) as url:
        openai.OpenAI(base_url=url, api_key="k").chat.completions.create(
            model="reference-strong", messages=MESSAGES
        )
    sent: list[str] = []
    http = httpx2.Client(event_hooks={"request": [lambda request: sent.append(str(request.url))]})
    with recording_proxy(Tape("retry", recorded=list(tape.events)), None) as url:
        client = openai.OpenAI(base_url=url, api_key="k", http_client=http)  # default max_retries (2)
        assert client.max_retries >= 2
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(
                model="reference-strong", messages=[{"role": "user", "content": "bye"}]
            )
    assert info.value.status_code == 409 and info.value.response.headers["x-should-retry"] == "false"
    assert len(sent) == 1, sent  # exactly one request: no retry, no backoff


def test_agent_codex_rules() -> None:
    assert rules_for("codex") == ("uuids", "timestamps", "codex-session") == AGENT_RULES["codex"]
    assert rules_for("codex", ("uuids", "extra")) == ("uuids", "timestamps", "codex-session", "extra")
    assert rules_for(None, ("uuids",)) == ("uuids",)


def test_unknown_agent_is_a_usage_error(tmp_path: Path) -> None:
    proc = cli("proxy", "--name", "s", "--agent", "claude", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "codex" in proc.stderr
