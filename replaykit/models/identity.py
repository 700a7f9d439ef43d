"""An engine's identity, measured at record time from what the server says about itself.

A recording is reusable only under the engine that produced it. ``measure_identity``
reads, where present: the model's entry in ``/v1/models`` (every OpenAI-compatible
server; vLLM adds ``max_model_len``; the entry named like the model, or the only one), llama.cpp's ``/props`` (model file, context size, chat template,
build, slots), vLLM's ``/version``, SGLang's ``/get_server_info`` (model, context
length, deterministic inference, seed, version). llama-cpp-python's server reports only
its model file; its context size is measured from the error an over-long prompt gets
(the prompt is never evaluated). What is not visible (a thread count, a chat format
llama-cpp-python does not report) belongs in ``model.revision``.

The fields that change answers are kept flat (``{"engine": "llama.cpp", "n_ctx": 2048,
…}``); their digest is compared with the one each reused cassette was recorded under, and a
self-hosted engine's (one measured with the canary) names the model in cassette keys
(``models.endpoint.model_id``: ``engine:<digest>``). Nothing in them says where the engine
runs: a model file reported by its absolute path is kept by its file name, so the same engine
on another machine, port or folder has the same identity.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx2 as httpx  # what the openai client rides on (no second HTTP stack)

from replaykit.core.determinism import digest_of
from replaykit.core.records import JSON
from replaykit.models.canary import measure_canary

#: llama-cpp-python answers an over-long prompt with the context size in its message
_CTX_ERROR = re.compile(r"maximum context length is (\d+) tokens")
#: engines measured with the canary too (their server facts miss the weights or the chat format)
CANARY_ENGINES = ("llama.cpp", "llama-cpp-python", "vllm", "sglang")
#: SGLang /get_server_info keys that change answers
_SGLANG_KEYS = (
    "model_path",
    "context_length",
    "enable_deterministic_inference",
    "random_seed",
    "version",
    "dtype",
    "tp_size",
    "attention_backend",
    "sampling_backend",
    "chat_template",
)


class _DeadlineStream(httpx.SyncByteStream):
    """A response body that stops with ``ReadTimeout`` once the shared deadline passes
    (httpx's own timeouts are per read: a server trickling bytes never trips them)."""

    def __init__(self, inner: httpx.SyncByteStream, end: float, request: httpx.Request) -> None:
        self.inner, self.end, self.request = inner, end, request

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            if time.monotonic() > self.end:
                raise httpx.ReadTimeout("the identity probe's total deadline passed", request=self.request)
            yield chunk

    def close(self) -> None:
        self.inner.close()


class _DeadlineTransport(httpx.HTTPTransport):
    """Every exchange of one identity measurement shares one total deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.end = time.monotonic() + seconds

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if time.monotonic() > self.end:
            raise httpx.ConnectTimeout("the identity probe's total deadline passed", request=request)
        resp = super().handle_request(request)
        assert isinstance(resp.stream, httpx.SyncByteStream)
        return httpx.Response(
            resp.status_code,
            headers=resp.headers,
            stream=_DeadlineStream(resp.stream, self.end, request),
            extensions=resp.extensions,
        )


def _root(base_url: str) -> str:
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _get(client: httpx.Client, url: str) -> Any:
    try:
        resp = client.get(url)
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    try:
        return resp.json()
    except ValueError:
        return None


def _file_name(value: Any) -> Any:
    """A model reported by its absolute file path (llama.cpp's ``/props``, an unaliased
    ``/v1/models`` entry) by its file name: where a machine keeps the file is not identity."""
    if isinstance(value, str) and value.startswith("/"):
        return value.rstrip("/").rsplit("/", 1)[-1]
    return value


def _short(text: Any) -> Any:
    """Long texts (chat templates) enter as a digest."""
    return "sha256:" + digest_of(text)[:16] if isinstance(text, str) and len(text) > 80 else text


def _llama_cpp_python_ctx(client: httpx.Client, base_url: str, model: str) -> int | None:
    body = {"model": model, "prompt": "a " * 131072, "max_tokens": 1}
    try:
        resp = client.post(base_url.rstrip("/") + "/completions", json=body)
    except httpx.HTTPError:
        return None
    found = _CTX_ERROR.search(resp.text)
    return int(found.group(1)) if found else None


def measure_identity(
    base_url: str,
    api_key: str = "",
    model: str = "",
    timeout: float = 5.0,
    params: Mapping[str, JSON] | None = None,
    canary_timeout: float | None = None,
) -> dict[str, JSON] | None:
    """The engine's identity fields for ``model``, or None when the endpoint does not answer.

    Self-hosted engines (llama.cpp, llama-cpp-python, vLLM, SGLang) and endpoints whose
    ``/v1/models`` does not name the model (``transformers serve`` lists none) also get the
    canary (``models.canary``: one short greedy request with ``params``, the config's
    ``model.params``), bounded by ``canary_timeout`` (default: ``timeout``) like a model call;
    unanswered, it is left out (the run's own first call says why: a wrong key, a wrong model).
    A hosted API's listed model gets none: its replies vary at temperature 0, so a canary
    would stop every rerun; declare what you pin in ``model.revision``."""
    fields = _server_facts(base_url, api_key, model, timeout)
    if fields is None:
        return None
    if fields.get("engine") in CANARY_ENGINES or "model" not in fields:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        with httpx.Client(timeout=canary_timeout or timeout, headers=headers) as client:
            fields.update(measure_canary(client, base_url, model, params))
    return fields


def _server_facts(base_url: str, api_key: str, model: str, timeout: float) -> dict[str, JSON] | None:
    """What the server says about itself (see the module docstring)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    fields: dict[str, JSON] = {}
    # one total deadline for every request below: an endpoint that trickles bytes must not
    # hang a run before its first model call (model.timeout_s bounds the calls themselves)
    transport = _DeadlineTransport(2 * timeout)
    with httpx.Client(timeout=timeout, headers=headers, transport=transport) as client:
        try:
            models_resp = client.get(base_url.rstrip("/") + "/models")
        except httpx.HTTPError:
            return None
        try:
            models = models_resp.json() if models_resp.status_code == 200 else None
        except ValueError:  # not JSON: nothing to learn from it
            models = None
        data = models.get("data", []) if isinstance(models, dict) else []
        entries = [m for m in data if isinstance(m, dict)]
        # the served model's own entry (a hosted API lists hundreds, and adds more: never the list)
        chosen = [m for m in entries if m.get("id") == model] or (entries if len(entries) == 1 else [])
        if chosen:
            fields["model"] = _file_name(str(chosen[0].get("id")))
            fields["max_model_len"] = chosen[0].get("max_model_len")  # vLLM
        root = _root(base_url)
        props = _get(client, root + "/props")
        if isinstance(props, dict) and ("default_generation_settings" in props or "total_slots" in props):
            settings = props.get("default_generation_settings") or {}
            fields["engine"] = "llama.cpp"
            fields["n_ctx"] = settings.get("n_ctx", props.get("n_ctx"))
            fields["model_path"] = _file_name(props.get("model_path"))
            fields["chat_template"] = _short(props.get("chat_template"))
            fields["build_info"] = props.get("build_info")
            fields["total_slots"] = props.get("total_slots")
        version = _get(client, root + "/version")
        if isinstance(version, dict) and "version" in version:
            fields.setdefault("engine", "vllm")
            fields["version"] = version["version"]
        info = _get(client, root + "/get_server_info")
        if isinstance(info, dict) and ("model_path" in info or "context_length" in info):
            fields["engine"] = "sglang"
            fields.update({f"sglang.{k}": _short(_file_name(info[k])) for k in _SGLANG_KEYS if k in info})
        if "engine" not in fields and entries and all(m.get("owned_by") == "me" for m in entries):
            fields["engine"] = "llama-cpp-python"
            fields["n_ctx"] = _llama_cpp_python_ctx(client, base_url, str(entries[0].get("id")))
    return {k: v for k, v in fields.items() if v is not None}


def identity_digest(fields: Mapping[str, JSON] | None) -> str:
    return digest_of(fields or {})[:16]


def measured_engine(fields: Mapping[str, JSON] | None) -> bool:
    """Was a self-hosted engine measured (its identity holds the canary's digest)? Such an engine
    is named by its identity; a hosted API (no canary: its replies vary) by its URL."""
    return bool(fields) and "canary" in (fields or {})


def identity_changes(recorded: Mapping[str, JSON], live: Mapping[str, JSON]) -> list[str]:
    """What differs, one short phrase per field: ``n_ctx 2048 → 4096``."""
    out = []
    for name in sorted(set(recorded) | set(live)):
        before, after = recorded.get(name, "-"), live.get(name, "-")
        if before != after:
            out.append(f"{name} {_shown(before)} → {_shown(after)}")
    return out


def _shown(value: Any) -> str:
    text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."
