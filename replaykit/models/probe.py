"""Is an endpoint deterministic? Send the same request N times, serially and concurrently.

    result = probe("http://127.0.0.1:8000/v1", "my-model", n=8, concurrency=4)
    result["verdict"]  # "deterministic" | "nondeterministic"
    result["classification"]  # "seed_not_honoured" | "load_dependent" | "deterministic"

Serially: one connection, one request at a time. Concurrently: ``concurrency``
clients, each on its own connection, all connected before any request is sent (so
the server sees them together, as a batch), sharing the N requests. The report
gives the distinct outputs (serial, concurrent, all), the first differing token
position (word-level tokens: runs of letters/digits, or single symbols), the
distinct ``system_fingerprint``s, the engine's measured identity (``models.identity``),
the classification and the settings that would help on that engine
(``models.probe_advice``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, NotRequired, TypedDict

from replaykit.core.determinism import digest_of
from replaykit.core.errors import ConfigError, ModelError
from replaykit.core.records import JSON
from replaykit.models.canary import probe_tool
from replaykit.models.identity import identity_digest, measure_identity
from replaykit.models.probe_advice import advice, classify

if TYPE_CHECKING:
    from replaykit.cassette.backend import DocumentStore
    from replaykit.core.progress import Progress

DEFAULT_PROMPT = "List three prime numbers and say in one sentence why each is prime."
TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def first_difference(a: str, b: str) -> int | None:
    """The index of the first token where ``a`` and ``b`` differ (None when equal)."""
    ta, tb = tokens(a), tokens(b)
    for i, (x, y) in enumerate(zip(ta, tb, strict=False)):
        if x != y:
            return i
    return None if len(ta) == len(tb) else min(len(ta), len(tb))


def _output(status: int, body: bytes) -> tuple[str, str | None]:
    """The text a response decodes to (content + tool calls) and its system_fingerprint."""
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise ModelError(
            f"the endpoint answered HTTP {status} with a body that is not JSON: {body[:200]!r}"
        ) from exc
    if status >= 400 or not isinstance(doc, dict) or "choices" not in doc:
        err = doc.get("error") if isinstance(doc, dict) else None
        message = err.get("message") if isinstance(err, dict) else str(doc)[:200]
        raise ModelError(
            f"the endpoint answered HTTP {status}: {message}; check --base-url, --model and the API key"
        )
    message = (doc["choices"][0] or {}).get("message") or {}
    calls = [(c.get("function") or {}) for c in message.get("tool_calls") or []]
    text = (message.get("content") or "") + "".join(f"\n{c.get('name')}({c.get('arguments')})" for c in calls)
    return text, doc.get("system_fingerprint")


class _Client:
    def __init__(self, base_url: str, api_key: str) -> None:
        import httpx2

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx2.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=120)

    def connect(self) -> None:
        """Open the connection (a cheap GET) so it is counted before any request is sent."""
        with contextlib.suppress(Exception):
            self.http.get("/models")

    def send(self, body: Mapping[str, JSON]) -> tuple[str, str | None]:
        import httpx2

        try:
            resp = self.http.post("/chat/completions", json=body)
        except httpx2.HTTPError as exc:
            raise ModelError(f"cannot reach {self.http.base_url}: {exc}; check --base-url") from exc
        return _output(resp.status_code, resp.content)

    def close(self) -> None:
        self.http.close()


def _concurrent(
    base_url: str, api_key: str, body: Mapping[str, JSON], n: int, k: int
) -> list[tuple[str, str | None]]:
    clients = [_Client(base_url, api_key) for _ in range(k)]
    results: list[tuple[str, str | None] | None] = [None] * n
    errors: list[BaseException] = []
    connected, done = threading.Barrier(k), threading.Barrier(k)

    def work(slot: int) -> None:
        client = clients[slot]
        try:
            client.connect()
            connected.wait(timeout=120)
            for i in range(slot, n, k):
                results[i] = client.send(body)
        except BaseException as exc:  # reported below, in the caller's thread
            errors.append(exc)
            connected.abort()
        finally:
            with contextlib.suppress(threading.BrokenBarrierError):
                done.wait(timeout=120)  # keep every connection open until all requests are answered

    threads = [threading.Thread(target=work, args=(slot,), daemon=True) for slot in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for client in clients:
        client.close()
    if errors:
        first = next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)), errors[0])
        raise first if isinstance(first, ModelError) else ModelError(f"concurrent probe failed: {first!r}")
    return [r for r in results if r is not None]


@contextlib.contextmanager
def _endpoint(base_url: str, api_key_env: str) -> Iterator[tuple[str, str]]:
    if base_url == "builtin":
        from replaykit.models.endpoint import BUILTIN_KEY
        from replaykit.models.reference.server import ReferenceServer

        with ReferenceServer() as server:
            yield server.base_url, BUILTIN_KEY
        return
    if not base_url.startswith(("http://", "https://")):
        raise ConfigError(
            f"--base-url {base_url!r} is not an http(s) URL; give e.g. http://127.0.0.1:8000/v1, or builtin"
        )
    yield base_url, os.environ.get(api_key_env, "") if api_key_env else ""


class ProbeResult(TypedDict):
    """A determinism probe's outcome (kind ``probe``; ``probe_id`` digests all but ``advice``)."""

    kind: str
    base_url: str
    model: str
    requests: int
    n: int
    concurrency: int
    temperature: float
    seed: int
    prompt: str
    distinct_outputs: int
    distinct_serial: int
    distinct_concurrent: int
    serial_vs_concurrent_differ: bool
    first_difference_token: int | None
    system_fingerprints: list[str]
    verdict: str  # deterministic | nondeterministic
    outputs: list[str]
    request: NotRequired[dict[str, JSON]]  # what was sent beside model and messages
    engine: NotRequired[dict[str, JSON]]  # models.identity fields
    engine_digest: NotRequired[str]
    classification: NotRequired[str]
    advice: NotRequired[list[str]]
    probe_id: NotRequired[str]
    saved: NotRequired[bool]  # set by ``replaykit probe``: kept in the store


def _probe_body(
    model: str,
    prompt: str,
    temperature: float,
    seed: int,
    max_tokens: int | None,
    params: Mapping[str, JSON] | None,
) -> dict[str, JSON]:
    """The request every probe sends: the prompt, with the config's ``model.params`` (its
    ``extra_body`` merged in) and, for a ``tool_choice`` without tools, the tool it names."""
    body: dict[str, JSON] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "temperature": temperature,
        "seed": seed,
    }
    extra = dict(params or {})
    extra_body = extra.pop("extra_body", None) or {}
    if not isinstance(extra_body, Mapping):
        raise ConfigError(f"model.params.extra_body {extra_body!r}: give a mapping of request fields")
    body.update(extra_body)
    body.update(extra)
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    choice = body.get("tool_choice")
    if choice not in (None, "none") and "tools" not in body:  # a tool_choice needs its tool
        function = choice.get("function") if isinstance(choice, dict) else None
        named = function.get("name") if isinstance(function, dict) else None
        body["tools"] = [probe_tool(named if isinstance(named, str) and named else "bash")]
    return body


def probe(
    base_url: str,
    model: str,
    n: int = 8,
    concurrency: int | None = None,
    temperature: float = 0.0,
    seed: int = 0,
    prompt: str = DEFAULT_PROMPT,
    api_key_env: str = "OPENAI_API_KEY",
    progress: Progress | None = None,
    max_tokens: int | None = None,
    params: Mapping[str, JSON] | None = None,
    engine: Mapping[str, JSON] | None = None,
) -> ProbeResult:
    """Probe an OpenAI-compatible chat endpoint for nondeterminism (see the module docstring).

    ``max_tokens`` caps each reply; ``params`` (a config's ``model.params``) are sent too;
    ``engine``: its identity, when the caller has just measured it (else measured here)."""
    if n < 2:
        raise ConfigError(f"-n {n}: send at least 2 requests to compare outputs")
    concurrency = min(4, n) if concurrency is None else concurrency  # 4, or n when fewer requests
    if concurrency < 1 or concurrency > n:
        raise ConfigError(f"--concurrency {concurrency}: use 1 to {n} (-n) concurrent clients")
    note = progress or (lambda event, data: None)
    body = _probe_body(model, prompt, temperature, seed, max_tokens, params)
    if max_tokens is not None and max_tokens < 1:
        raise ConfigError(f"--max-tokens {max_tokens}: give at least 1")
    with _endpoint(base_url, api_key_env) as (url, key):
        if engine is None and base_url != "builtin":
            engine = measure_identity(url, key, model, params=params)
        note("note", {"message": f"probe: {n} request(s) serially to {url}"})
        client = _Client(url, key)
        try:
            serial = [client.send(body) for _ in range(n)]
        finally:
            client.close()
        note("note", {"message": f"probe: {n} request(s) over {concurrency} concurrent connection(s)"})
        concurrent = _concurrent(url, key, body, n, concurrency)
    outputs = [text for text, _ in serial + concurrent]
    reference = outputs[0]
    positions = [p for p in (first_difference(reference, o) for o in outputs[1:]) if p is not None]
    fingerprints = sorted({fp for _, fp in serial + concurrent if fp})
    d_serial, d_conc, d_all = len({t for t, _ in serial}), len({t for t, _ in concurrent}), len(set(outputs))
    result: ProbeResult = {
        "kind": "probe",
        "base_url": "builtin" if base_url == "builtin" else base_url.rstrip("/"),
        "model": model,
        "requests": len(outputs),
        "n": n,
        "concurrency": concurrency,
        "temperature": temperature,
        "seed": seed,
        "prompt": prompt,
        "distinct_outputs": d_all,
        "distinct_serial": d_serial,
        "distinct_concurrent": d_conc,
        "serial_vs_concurrent_differ": {t for t, _ in serial} != {t for t, _ in concurrent},
        "first_difference_token": min(positions) if positions else None,
        "system_fingerprints": fingerprints,
        "verdict": "deterministic" if d_all == 1 and len(fingerprints) <= 1 else "nondeterministic",
        "outputs": sorted(set(outputs)),
    }
    if max_tokens is not None or params:
        result["request"] = {k: v for k, v in body.items() if k not in ("model", "messages")}
    if engine is not None:
        result["engine"] = dict(engine)
        result["engine_digest"] = identity_digest(engine)
    load_varies = d_serial == 1 and (d_conc > 1 or result["serial_vs_concurrent_differ"])
    result["classification"] = classify(d_serial, load_varies)
    engine_name = (engine or {}).get("engine")
    result["advice"] = advice(
        result["classification"],
        engine_name if isinstance(engine_name, str) else None,
        temperature,
        len(fingerprints),
    )
    result["probe_id"] = digest_of({k: v for k, v in result.items() if k != "advice"})[:16]
    return result


def save_probe(store: DocumentStore, result: ProbeResult) -> str:
    """Keep a probe result in the store (kind ``probe``) so reports can show it."""
    store.put_doc(
        result["probe_id"],
        "probe",
        result,
        name=result["model"],
        model=result["model"],
        endpoint=result["base_url"],
        config_digest=result.get("engine_digest", ""),  # the engine identity it probed
    )
    return str(result["probe_id"])
