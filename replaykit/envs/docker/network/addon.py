"""The mitmproxy addon behind the frozen network (loaded by ``mitmdump -s``; it runs in
mitmproxy's own virtualenv, so it imports nothing of replaykit but ``matching``).

Its configuration is a JSON file named by ``REPLAYKIT_NET_CONFIG``: ``mode`` (``record``:
serve what ``serve`` holds, fetch and record the rest; ``replay``: serve only, an
unrecorded request is answered 502 and logged; ``live``: fetch and record everything),
``spool`` (where it writes) and ``serve`` (recorded exchanges: ``index.json`` +
``bodies/``). Response bodies stream through it to ``spool/bodies/<sha256>`` in chunks:
memory stays bounded whatever their size. Every exchange ends as one JSON line in
``spool/exchanges.jsonl``; unrecorded requests in ``spool/misses.jsonl``, upstream
failures in ``spool/errors.jsonl`` and, since the client was answered (mitmproxy's 502 page
naming the failure: refused, reset, timed out), as an exchange too, served back identically. Request headers and bodies are never written (only
the body's digest, inside the match key). With ``allow`` (a list: ``env.network_allow``)
the host's loopback, link-local and private addresses are refused (``policy.py``): a 403
naming the address for a request or a CONNECT, a connection killed before it is made for
anything else; a line in ``spool/refused.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from mitmproxy import http
from mitmproxy.proxy.layers.http._base import (
    format_error,
)  # the 502 page mitmproxy sends for an upstream failure

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matching
import policy
from matching import ErrorRecord, ExchangeRecord, MissRecord, RequestForm, ServedResponse

UNRECORDED_HEADER = "x-replaykit-unrecorded"
KILLED = "Connection killed."  # mitmproxy's message for a flow it dropped itself (never an answer)
READY = ".ready"


class _Sink:
    """Streams one response body to a spool file while hashing it (the client gets each chunk as is)."""

    def __init__(self, bodies: Path) -> None:
        self.bodies = bodies
        fd, name = tempfile.mkstemp(prefix=".part-", dir=bodies)
        self.file = os.fdopen(fd, "wb")
        self.tmp = Path(name)
        self.hash = hashlib.sha256()
        self.size = 0
        self.digest: str | None = None

    def __call__(self, chunk: bytes) -> bytes:
        if chunk:
            self.file.write(chunk)
            self.hash.update(chunk)
            self.size += len(chunk)
        elif self.digest is None:
            self.finish()
        return chunk

    def finish(self) -> str:
        if self.digest is None:
            self.file.close()
            self.digest = self.hash.hexdigest()
            os.replace(self.tmp, self.bodies / self.digest)
        return self.digest


def _body_server(serve_dir: Path, index: dict[str, ServedResponse]) -> ThreadingHTTPServer:
    """A loopback server answering ``GET /<match key>`` with that recorded response, its body
    streamed from ``serve_dir/bodies`` (a recorded hit is re-routed here: mitmproxy streams
    it on, so a served body is never held in memory either)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            hit = index.get(self.path.lstrip("/"))
            if hit is None:
                self.send_error(404)
                return
            body = serve_dir / "bodies" / hit["body"]
            self.send_response_only(int(hit["status"]), hit.get("reason") or None)
            for name, value in hit["headers"]:
                self.send_header(name, value)
            self.send_header("content-length", str(body.stat().st_size))
            self.end_headers()
            with open(body, "rb") as source:
                shutil.copyfileobj(source, self.wfile, 1 << 20)

        do_POST = do_PUT = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class FrozenNetwork:
    def __init__(self) -> None:
        config = json.loads(Path(os.environ["REPLAYKIT_NET_CONFIG"]).read_text())
        self.mode: str = config["mode"]
        self.spool = Path(config["spool"])
        self.bodies = self.spool / "bodies"
        self.bodies.mkdir(parents=True, exist_ok=True)
        serve = config.get("serve")
        self.serve_dir = Path(serve) if serve else None
        self.index: dict[str, ServedResponse] = {}
        if self.serve_dir is not None and (self.serve_dir / "index.json").is_file():
            self.index = json.loads((self.serve_dir / "index.json").read_text())
        self.lock = threading.Lock()
        self.seq = 0
        self.bodies_server = (
            _body_server(self.serve_dir, self.index) if self.serve_dir and self.index else None
        )
        allow = config.get("allow")  # None: no address policy (image builds)
        self.allow: frozenset[str] | None = None if allow is None else frozenset(allow)
        upstream = config.get("upstream")  # the host's own proxy, when mitmproxy goes through it
        self.upstream: tuple[str, int] | None = (str(upstream[0]), int(upstream[1])) if upstream else None

    # -- logs ---------------------------------------------------------------------
    def _log(self, name: str, record: ExchangeRecord | MissRecord | ErrorRecord) -> None:
        with self.lock:
            record["seq"] = self.seq
            self.seq += 1
            with open(self.spool / name, "a", encoding="utf-8") as out:
                out.write(json.dumps(record, sort_keys=True) + "\n")

    @staticmethod
    def _request_form(flow: http.HTTPFlow) -> RequestForm:
        req = flow.request
        content = req.raw_content or b""
        ctype = req.headers.get("content-type", "")
        return {
            "method": req.method,
            "url": matching.scrub_url(req.pretty_url),
            "match": matching.match_key(req.method, req.pretty_url, content, ctype),
            "request_body": matching.body_digest(content, ctype),
            "request_size": len(content),
        }

    # -- hooks --------------------------------------------------------------------
    def running(self) -> None:
        (self.spool / READY).touch()  # the proxy listens with this addon loaded (server.py waits for it)

    def _refused(self, host: str, port: int) -> policy.Judged | None:
        if self.allow is None:
            return None
        judged = policy.judge(host, port, self.allow)
        if judged.refused is not None:
            with self.lock, open(self.spool / "refused.jsonl", "a", encoding="utf-8") as out:
                out.write(json.dumps({"address": policy.entry(host, port), "why": judged.refused}) + "\n")
        return judged

    def _refuse(self, flow: http.HTTPFlow, why: str) -> None:
        flow.response = http.Response.make(
            403, (why + "\n").encode(), {"content-type": "text/plain", policy.REFUSED_HEADER: "1"}
        )
        flow.metadata["replaykit_source"] = "refused"

    def http_connect(self, flow: http.HTTPFlow) -> None:
        judged = self._refused(flow.request.host, flow.request.port)
        if judged is not None and judged.refused is not None:
            self._refuse(flow, judged.refused)

    def server_connect(self, data: Any) -> None:
        """Every connection the proxy opens (a raw tunnel's too) goes to an address judged."""
        host, port = data.server.address
        mine = self.bodies_server is not None and (host, port) == self.bodies_server.server_address[:2]
        if mine or (host, port) == self.upstream:
            return
        judged = self._refused(str(host), int(port))
        if judged is None:
            return
        if judged.refused is not None:
            data.server.error = judged.refused
        elif judged.address is not None:
            data.server.address = (judged.address, port)

    def request(self, flow: http.HTTPFlow) -> None:
        judged = self._refused(flow.request.host, flow.request.port)
        if judged is not None and judged.refused is not None:
            self._refuse(flow, judged.refused)
            return
        form = self._request_form(flow)
        flow.metadata["replaykit"] = form
        hit = self.index.get(form["match"]) if self.mode != "live" else None
        if hit is not None and self.bodies_server is not None:
            req = flow.request  # re-routed to the loopback body server: the client sees the recording
            req.scheme, req.host, req.port = "http", "127.0.0.1", self.bodies_server.server_address[1]
            req.path = "/" + form["match"]
            flow.metadata["replaykit_source"] = "store"
            flow.metadata["replaykit_hit"] = hit
            return
        if self.mode == "replay":
            text = f"replaykit: unrecorded request {form['method']} {form['url']}: the frozen network serves only recorded exchanges\n"
            flow.response = http.Response.make(
                502, text.encode(), {"content-type": "text/plain", UNRECORDED_HEADER: "1"}
            )
            flow.metadata["replaykit_source"] = "unrecorded"
            miss: MissRecord = {"method": form["method"], "url": form["url"], "match": form["match"]}
            self._log("misses.jsonl", miss)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response is None or flow.metadata.get("replaykit_source") in ("unrecorded", "refused"):
            return
        if flow.metadata.get("replaykit_source") == "store":
            flow.response.stream = True  # the recorded body, passed on chunk by chunk
            return
        sink = _Sink(self.bodies)
        flow.metadata["replaykit_sink"] = sink
        flow.response.stream = sink

    def response(self, flow: http.HTTPFlow) -> None:
        source = flow.metadata.get("replaykit_source", "upstream")
        if source in ("unrecorded", "refused") or flow.response is None:
            return
        form: RequestForm = flow.metadata.get("replaykit") or self._request_form(flow)
        sink = flow.metadata.get("replaykit_sink")
        hit: ServedResponse | None = flow.metadata.get("replaykit_hit")
        if hit is not None:
            digest, size = str(hit["body"]), int(hit.get("size") or 0)
        elif sink is not None:
            digest, size = sink.finish(), sink.size
        else:
            content = flow.response.raw_content or b""
            digest, size = hashlib.sha256(content).hexdigest(), len(content)
        headers = matching.stored_headers([(k, v) for k, v in flow.response.headers.items(multi=True)])
        exchange: ExchangeRecord = {
            **form,
            "status": flow.response.status_code,
            "reason": flow.response.reason,
            "headers": headers,
            "body": digest,
            "size": size,
            "source": source,
        }
        self._log("exchanges.jsonl", exchange)

    def error(self, flow: http.HTTPFlow) -> None:
        form: RequestForm = flow.metadata.get("replaykit") or self._request_form(flow)
        message = str(flow.error.msg if flow.error else "unknown error")
        failure: ErrorRecord = {"method": form["method"], "url": form["url"], "error": message[:300]}
        self._log("errors.jsonl", failure)
        if flow.metadata.get("replaykit_source") == "refused" or "the frozen network refuses" in message:
            return  # the policy's answer (policy.py), never an upstream's failure
        if flow.response is None and message != KILLED and flow.metadata.get("replaykit_source") != "store":
            self._failed_exchange(flow, form, message)

    def _failed_exchange(self, flow: http.HTTPFlow, form: RequestForm, message: str) -> None:
        """An upstream that refused, reset or timed out: the client got mitmproxy's 502 page for
        ``message``; that answer is an exchange like any other, served as is to a re-execution."""
        body = format_error(502, message)
        digest = hashlib.sha256(body).hexdigest()
        target = self.bodies / digest
        if not target.exists():
            fd, tmp = tempfile.mkstemp(prefix=".part-", dir=self.bodies)
            with os.fdopen(fd, "wb") as out:
                out.write(body)
            os.replace(tmp, target)
        exchange: ExchangeRecord = {
            **form,
            "status": 502,
            "reason": "Bad Gateway",
            "headers": [("content-type", "text/html")],
            "body": digest,
            "size": len(body),
            "source": "upstream",
        }
        self._log("exchanges.jsonl", exchange)


addons = [FrozenNetwork()]
