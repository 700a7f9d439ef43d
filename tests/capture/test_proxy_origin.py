"""The recording proxy spends no key for a web page (issue 38, item 1).

`replaykit proxy` holds the user's upstream key. A page the user visits can post to it
cross-site (a ``text/plain`` POST needs no preflight) or, through DNS rebinding, under its own
name; the browser still says who it is in ``Host`` and ``Origin``. The proxy, a real process
here, answers only requests addressed to its own name, with no ``Origin`` or its own (or one
the user allowed with ``--allow-origin``): anything else is a 403 with one line in its log,
never forwarded upstream and never recorded.
"""

from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest

from replaykit.cassette.store import Store
from replaykit.core.hosts import HostCheck, OriginCheck, origin_of
from replaykit.core.loopback import LoopbackHandler, LoopbackServer
from tests.capture.proxy_cli import ProxyProcess
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

KEY = "sk-user-key-4b1e9c2d7a"
ANSWER = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
}


class Counting(LoopbackServer):
    """An upstream that answers every call and remembers the key each one carried."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _CountingHandler)
        self.seen: list[str] = []
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _CountingHandler(LoopbackHandler):
    server: Counting

    def _dispatch(self, method: str) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append(self.headers.get("Authorization", ""))
        self.send_bytes(200, json.dumps(ANSWER).encode())


def post(url: str, headers: dict[str, str], body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    """A raw POST to ``url``'s chat completions, with exactly ``headers`` (Host included)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    payload = (
        body
        if body is not None
        else json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    )
    conn.putrequest("POST", parts.path + "/chat/completions", skip_host=True, skip_accept_encoding=True)
    for name, value in {"Content-Length": str(len(payload)), **headers}.items():
        conn.putheader(name, value)
    conn.endheaders(payload)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data


def netloc(url: str) -> str:
    return urlsplit(url).netloc


@pytest.fixture()
def upstream() -> Any:
    server = Counting()
    yield server
    server.close()


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "evil.example"},  # DNS rebinding: the page's own name
        {"Host": "evil.example:{port}"},
        {"Origin": "http://evil.example"},  # a cross-site form or fetch, our Host
        {"Origin": "null"},  # a sandboxed frame or a file:// page
        {"Origin": "http://127.0.0.1:1"},  # a page served by another local server
    ],
    ids=["host", "host-port", "origin", "origin-null", "origin-other-port"],
)
def test_a_web_page_cannot_spend_the_key(tmp_path: Path, upstream: Counting, headers: dict[str, str]) -> None:
    store = tmp_path / "store"
    with ProxyProcess(
        store, "--upstream", upstream.base_url, "--api-key-env", "RK_TEST_KEY", env={"RK_TEST_KEY": KEY}
    ) as proxy:
        sent = {"Host": netloc(proxy.url), "Content-Type": "text/plain", **headers}
        sent = {k: v.replace("{port}", str(urlsplit(proxy.url).port)) for k, v in sent.items()}
        status, _, body = post(proxy.url, sent)
        line = proxy.wait_for("refused POST")
    assert status == 403, body
    assert "refused" in json.loads(body)["error"]["message"]
    assert upstream.seen == []  # nothing forwarded: the key was never spent
    assert line.count("\n") == 1 and ("Host" in line or "Origin" in line)
    _code, report, _ = proxy.result
    assert report is not None and report["llm_calls"] == 0 and not report["stored"]
    assert not store.exists() or Store(store).list_cassettes({"kind": "proxy"}) == []


def test_its_own_clients_are_served_as_before(tmp_path: Path, upstream: Counting) -> None:
    """A stock client (Host: 127.0.0.1:PORT, no Origin), ``localhost`` by name, and a page the
    proxy's own origin would send are served; the upstream gets the configured key."""
    store = tmp_path / "store"
    with ProxyProcess(
        store, "--upstream", upstream.base_url, "--api-key-env", "RK_TEST_KEY", env={"RK_TEST_KEY": KEY}
    ) as proxy:
        client = openai.OpenAI(base_url=proxy.url, api_key="none", max_retries=0, timeout=30)
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
        port = urlsplit(proxy.url).port
        by_name, _, _ = post(proxy.url, {"Host": f"localhost:{port}", "Content-Type": "application/json"})
        own, cors, _ = post(proxy.url, {"Host": netloc(proxy.url), "Origin": f"http://127.0.0.1:{port}"})
    assert reply.choices[0].message.content == "ok"
    assert (by_name, own) == (200, 200)
    assert "access-control-allow-origin" not in cors  # same origin: nothing to allow
    assert upstream.seen == [f"Bearer {KEY}"] * 3


def test_an_allowed_origin_is_served_with_cors(tmp_path: Path, upstream: Counting) -> None:
    origin = "http://localhost:5173"
    with ProxyProcess(
        tmp_path / "store", "--upstream", upstream.base_url, "--allow-origin", origin + "/"
    ) as proxy:
        parts = urlsplit(proxy.url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        conn.request(
            "OPTIONS",
            parts.path + "/chat/completions",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type",
            },
        )
        pre = conn.getresponse()
        pre.read()
        conn.close()
        status, headers, _ = post(
            proxy.url, {"Host": netloc(proxy.url), "Origin": origin, "Content-Type": "application/json"}
        )
        other, _, _ = post(proxy.url, {"Host": netloc(proxy.url), "Origin": "http://localhost:5174"})
    assert pre.status == 204
    assert pre.getheader("Access-Control-Allow-Origin") == origin
    assert pre.getheader("Access-Control-Allow-Headers") == "authorization, content-type"
    assert status == 200 and headers["access-control-allow-origin"] == origin
    assert other == 403
    assert len(upstream.seen) == 1


def test_a_bad_allow_origin_is_one_line_before_anything(tmp_path: Path) -> None:
    result = cli(
        "proxy",
        "--name",
        "s",
        "--upstream",
        "builtin",
        "--allow-origin",
        "evil",
        "--store",
        str(tmp_path / "s"),
    )
    assert result.returncode == 2 and result.stdout == ""
    assert "--allow-origin" in result.stderr and "scheme://host[:port]" in result.stderr
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("text", "origin"),
    [
        ("http://LocalHost:5173/", "http://localhost:5173"),
        ("https://a.example:443", "https://a.example"),
        ("http://[::1]:8080", "http://[::1]:8080"),
        ("null", None),
        ("http://a.example/path", None),
        ("ftp://a.example", None),
        ("http://u@a.example", None),
        ("http://a.example:99999", None),
    ],
)
def test_origins_are_compared_as_browsers_serialise_them(text: str, origin: str | None) -> None:
    assert origin_of(text) == origin


def test_an_origin_check_knows_its_own_origin() -> None:
    check = OriginCheck(HostCheck("127.0.0.1"), 8080, ["http://localhost:3000"])
    assert check.allows(None)  # not a browser
    assert check.allows("http://127.0.0.1:8080") and check.allows("http://localhost:8080")
    assert check.cross_site("http://localhost:8080") is None
    assert check.cross_site("http://localhost:3000") == "http://localhost:3000"
    assert not check.allows("http://127.0.0.1:8081") and not check.allows("http://evil.example:8080")
