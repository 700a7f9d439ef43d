"""Export replaykit cassettes as plain vcrpy YAML cassettes (one file per episode).

``replaykit cassettes export ID --format vcr -o DIR`` writes ``DIR/<cassette id>.yaml``
for every episode reachable from ``ID`` (a run, a training, or one cassette), and
beside it ``<cassette id>.replaykit.json`` (task, seed, model, harness, digest). The
YAML is plain vcrpy (no ``metadata:`` block), so pytest-recording and vcrpy load it
as is: ``@pytest.mark.vcr`` with ``vcr_cassette_dir`` = DIR. Each
holds the episode's LLM calls only, in order: method, uri, body and the exact
response bytes (streamed SSE bodies included, as one body). Environment steps are
not HTTP and stay in replaykit.

URIs: replaykit stores the request *path* only (hosts and ports never enter a
cassette), so the export rebuilds URIs from ``base_url`` (default
:data:`DEFAULT_BASE_URL`, the reference server's default address). The path the
client used below its own base (``/chat/completions`` under ``/v1``) is kept; give
the ``base_url`` your client will be constructed with.

Matching: replay with ``match_on=["method", "path", "body"]`` (or ``"uri"`` when
the base URL is the same). Each request is written with ``Content-Type:
application/json``, so vcrpy's stock ``body`` matcher compares *parsed* JSON: key
order and whitespace of the client's bytes do not matter. Requests recorded with
normalisation rules or secret scrubbing (``record.rules``/``record.secrets``) hold
the normalised body and will not match a raw client body. For a client that does
not send a JSON content type, register :func:`json_body` as a matcher::

    my_vcr.register_matcher("json_body", json_body)

No headers of the request are exported besides the content type, and replaykit
never stores request headers (API keys never reach a cassette).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit

from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.events import Episode, LlmEvent
from replaykit.cassette.vcr_format import VcrResponse
from replaykit.core.determinism import canonical_json
from replaykit.core.errors import ConfigError
from replaykit.exchange.bundle import collect
from replaykit.exchange.bundle_format import BundleRoot

DEFAULT_BASE_URL = "http://127.0.0.1:8765/v1"
BUILTIN_BASE_PATH = "/v1"  # the reference server's base path (model endpoint "builtin")


def base_path(endpoint: str) -> str:
    """The path prefix of the recorded endpoint that the client's base URL covered."""
    if "://" in endpoint:
        return urlsplit(endpoint).path.rstrip("/")
    return BUILTIN_BASE_PATH


def event_uri(event: LlmEvent, endpoint: str, base_url: str) -> str:
    prefix = base_path(endpoint)
    path = event.path
    if prefix and (path == prefix or path.startswith((prefix + "/", prefix + "?"))):
        return base_url.rstrip("/") + path[len(prefix) :]
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}{path}"


def request_body(body: Any) -> tuple[bytes | None, dict[str, str]]:
    """The body bytes and headers to write for a stored (parsed) request body."""
    if body is None:
        return None, {}
    if isinstance(body, dict) and set(body) == {"$text"}:
        return str(body["$text"]).encode("utf-8"), {}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), {
        "Content-Type": "application/json"
    }


class VcrCassette(TypedDict):
    """vcrpy's in-memory cassette: its ``Request`` objects and their responses, in order."""

    requests: list[Any]  # vcr.request.Request (vcrpy ships no type hints)
    responses: list[VcrResponse]


class CassetteOrigin(TypedDict):
    cassette_id: str
    task_id: str
    seed: int
    model: str
    harness_sha: str
    digest: str
    base_url: str


class VcrMetadata(TypedDict):
    replaykit: CassetteOrigin


class VcrFile(TypedDict):
    path: str
    metadata: str
    cassette_id: str
    task_id: str
    seed: int
    interactions: int


class VcrExport(TypedDict):
    dir: str
    root: BundleRoot
    base_url: str
    files: list[VcrFile]


def episode_to_vcr(episode: Episode, base_url: str = DEFAULT_BASE_URL) -> VcrCassette:
    """vcrpy's in-memory cassette dict (``requests``, ``responses``)."""
    from vcr.request import Request

    requests: list[Any] = []
    responses: list[VcrResponse] = []
    for event in episode.llm_events:
        body, headers = request_body(event.body)
        requests.append(
            Request(event.method, event_uri(event, episode.key.model.endpoint, base_url), body, headers)
        )
        response_headers: dict[str, list[str]] = {}
        for name, value in event.headers:
            response_headers.setdefault(name, []).append(value)
        responses.append(
            {
                "status": {"code": event.status, "message": event.reason},
                "headers": response_headers,
                "body": {"string": event.content},
            }
        )
    return {"requests": requests, "responses": responses}


def episode_metadata(episode: Episode, base_url: str = DEFAULT_BASE_URL) -> VcrMetadata:
    """What the sidecar ``<id>.replaykit.json`` says about a cassette (kept out of the
    YAML: vcrpy 9 returns a third value for a top-level ``metadata:`` block, which
    pytest-recording and other loaders do not expect)."""
    key = episode.key
    return {
        "replaykit": {
            "cassette_id": key.id,
            "task_id": key.task_id,
            "seed": key.seed,
            "model": key.model.name,
            "harness_sha": key.harness_sha,
            "digest": episode.digest,
            "base_url": base_url,
        }
    }


def vcr_yaml(episode: Episode, base_url: str = DEFAULT_BASE_URL) -> str:
    from vcr.serialize import serialize
    from vcr.serializers import yamlserializer

    return str(serialize(episode_to_vcr(episode, base_url), yamlserializer))


def check_base_url(base_url: str) -> str:
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"--base-url {base_url!r} is not an http(s) URL; e.g. {DEFAULT_BASE_URL}")
    return base_url


def export_vcr(
    store: StoreBackend, root_id: str, out_dir: Path | str, base_url: str = DEFAULT_BASE_URL
) -> VcrExport:
    """Write one vcrpy YAML cassette per episode reachable from ``root_id`` into ``out_dir``."""
    check_base_url(base_url)
    out = Path(out_dir)
    sel = collect(store, root_id)
    files: list[VcrFile] = []
    for cassette_id in sorted(sel.rows["cassettes"]):
        episode = store.get_episode(cassette_id)
        path = out / f"{cassette_id}.yaml"
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(vcr_yaml(episode, base_url), encoding="utf-8")
        sidecar = out / f"{cassette_id}.replaykit.json"
        sidecar.write_text(
            json.dumps(episode_metadata(episode, base_url), indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        files.append(
            {
                "path": str(path),
                "metadata": str(sidecar),
                "cassette_id": cassette_id,
                "task_id": episode.key.task_id,
                "seed": episode.key.seed,
                "interactions": len(episode.llm_events),
            }
        )
    return {"dir": str(out), "root": sel.root, "base_url": base_url, "files": files}


def json_body(r1: Any, r2: Any) -> None:
    """A vcrpy matcher: bodies equal as parsed JSON (falls back to raw bytes)."""

    def parse(request: Any) -> Any:
        raw = request.body
        raw = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else raw
        try:
            return canonical_json(json.loads(raw)) if raw else None
        except (TypeError, ValueError):
            return raw

    if parse(r1) != parse(r2):  # not `assert`: kept under python -O and pytest's assertion rewriting
        raise AssertionError("JSON bodies differ")
