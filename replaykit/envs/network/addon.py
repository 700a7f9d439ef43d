"""The mitmproxy addon behind the frozen network (loaded by ``mitmdump -s``; it runs in
mitmproxy's own virtualenv, so it imports nothing of replaykit but ``matching``).

Its configuration is a JSON file named by ``REPLAYKIT_NET_CONFIG``: ``mode`` (``record``:
serve what ``serve`` holds, fetch and record the rest; ``replay``: serve only, an
unrecorded request is answered 502 and logged; ``live``: fetch and record everything),
``spool`` (where it writes) and ``serve`` (recorded exchanges: ``index.json`` +
``bodies/``). Response bodies stream through it to ``spool/bodies/<sha256>`` in chunks:
memory stays bounded whatever their size. Every exchange ends as one JSON line in
``spool/exchanges.jsonl``; unrecorded requests in ``spool/misses.jsonl``, upstream
failures in ``spool/errors.jsonl``. Request headers and bodies are never written (only
the body's digest, inside the match key).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from mitmproxy import http

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matching

UNRECORDED_HEADER = "x-replaykit-unrecorded"


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


class FrozenNetwork:
    def __init__(self) -> None:
        config = json.loads(Path(os.environ["REPLAYKIT_NET_CONFIG"]).read_text())
        self.mode: str = config["mode"]
        self.spool = Path(config["spool"])
        self.bodies = self.spool / "bodies"
        self.bodies.mkdir(parents=True, exist_ok=True)
        serve = config.get("serve")
        self.serve_dir = Path(serve) if serve else None
        self.index: dict[str, Any] = {}
        if self.serve_dir is not None and (self.serve_dir / "index.json").is_file():
            self.index = json.loads((self.serve_dir / "index.json").read_text())
        self.lock = threading.Lock()
        self.seq = 0

    # -- logs ---------------------------------------------------------------------
    def _log(self, name: str, record: dict[str, Any]) -> None:
        with self.lock:
            record["seq"] = self.seq
            self.seq += 1
            with open(self.spool / name, "a", encoding="utf-8") as out:
                out.write(json.dumps(record, sort_keys=True) + "\n")

    @staticmethod
    def _request_form(flow: http.HTTPFlow) -> dict[str, Any]:
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
    def request(self, flow: http.HTTPFlow) -> None:
        form = self._request_form(flow)
        flow.metadata["replaykit"] = form
        hit = self.index.get(form["match"]) if self.mode != "live" else None
        if hit is not None:
            assert self.serve_dir is not None
            body = (self.serve_dir / "bodies" / hit["body"]).read_bytes()
            response = http.Response.make(
                int(hit["status"]), b"", [(k.encode(), v.encode()) for k, v in hit["headers"]]
            )
            response.reason = hit.get("reason", "")
            response.raw_content = body
            response.headers["content-length"] = str(len(body))
            flow.response = response
            flow.metadata["replaykit_source"] = "store"
            return
        if self.mode == "replay":
            text = f"replaykit: unrecorded request {form['method']} {form['url']}: the frozen network serves only recorded exchanges\n"
            flow.response = http.Response.make(
                502, text.encode(), {"content-type": "text/plain", UNRECORDED_HEADER: "1"}
            )
            flow.metadata["replaykit_source"] = "unrecorded"
            self._log("misses.jsonl", {"method": form["method"], "url": form["url"], "match": form["match"]})

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if flow.metadata.get("replaykit_source") or flow.response is None:
            return
        sink = _Sink(self.bodies)
        flow.metadata["replaykit_sink"] = sink
        flow.response.stream = sink

    def response(self, flow: http.HTTPFlow) -> None:
        source = flow.metadata.get("replaykit_source", "upstream")
        if source == "unrecorded" or flow.response is None:
            return
        form = flow.metadata.get("replaykit") or self._request_form(flow)
        sink = flow.metadata.get("replaykit_sink")
        if sink is not None:
            digest, size = sink.finish(), sink.size
        else:
            content = flow.response.raw_content or b""
            digest, size = hashlib.sha256(content).hexdigest(), len(content)
        headers = matching.stored_headers([(k, v) for k, v in flow.response.headers.items(multi=True)])
        self._log(
            "exchanges.jsonl",
            {
                **form,
                "status": flow.response.status_code,
                "reason": flow.response.reason,
                "headers": headers,
                "body": digest,
                "size": size,
                "source": source,
            },
        )

    def error(self, flow: http.HTTPFlow) -> None:
        form = flow.metadata.get("replaykit") or self._request_form(flow)
        message = str(flow.error.msg if flow.error else "unknown error")
        self._log("errors.jsonl", {"method": form["method"], "url": form["url"], "error": message[:300]})


addons = [FrozenNetwork()]
