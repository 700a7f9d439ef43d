"""The frozen-network proxy on loopback (no Docker): it records an HTTPS exchange with the
store's CA, the body streams into the store's blobs, a re-execution is served only what
was recorded, and an unrecorded request is refused with its URL. Credentials and the CA
key are never stored."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.events import Episode, NetEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.store import Store
from replaykit.envs.docker.network import server
from replaykit.envs.docker.network.ca import ensure_ca
from replaykit.envs.docker.network.extras import reported, serve_folder
from replaykit.envs.docker.network.server import ProxyServer, read_log, read_misses
from replaykit.episodes.network import store_bodies
from tests.envs.docker.network.https_server import FileServer

pytestmark = pytest.mark.e2e


def fetch(proxy: str, cafile: Path, url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(cafile))
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({"https": proxy, "http": proxy}),
        urllib.request.HTTPSHandler(context=context),
    )
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture
def upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    if server.check():
        pytest.fail(server.check() or "", pytrace=False)
    root = tmp_path / "files"
    root.mkdir()
    (root / "data.txt").write_bytes(b"frozen bytes\n" * 1000)
    (root / "other.txt").write_text("never recorded\n")
    with FileServer(root, tmp_path) as srv:
        monkeypatch.setenv("REPLAYKIT_NET_UPSTREAM_CA", str(srv.cert))
        yield srv


def key() -> CassetteKey:
    return CassetteKey(
        harness_sha="0" * 40,
        task_id="t",
        task_digest="d",
        model=ModelId("m", "e", ""),
        seed=0,
        config_digest="c",
        extra=(("env", "docker"),),
    )


def test_record_then_serve_only_what_was_recorded(tmp_path: Path, upstream: Any) -> None:
    store = Store(tmp_path / "store")
    ca = ensure_ca(store.root)
    assert ensure_ca(store.root).cert_pem() == ca.cert_pem()  # generated once
    assert (ca.key_and_cert.stat().st_mode & 0o777) == 0o600
    spool = tmp_path / "spool"
    url = f"{upstream.url}/data.txt?token=hunter2&v=1"
    with ProxyServer(ca, "record", spool) as proxy:
        status, body = fetch(proxy.url, ca.cert, url, {"Authorization": "Bearer sk-canary-auth"})
    assert status == 200 and body == b"frozen bytes\n" * 1000
    records = read_log(spool)
    assert len(records) == 1 and records[0]["source"] == "upstream"
    events = [NetEvent.from_record(reported(r, spool)) for r in records]
    assert events[0].url.endswith("/data.txt?token=%3Cscrubbed%3E&v=1")  # the credential is not kept
    episode = Episode(key(), list(events), {})
    store_bodies(store, episode)
    assert events[0].chunks and events[0].body_path is None and not spool.exists()
    store.put_episode(episode)
    again = store.get_episode(episode.id)
    assert again.net_events[0].chunks == events[0].chunks and again.digest == episode.digest

    serve = serve_folder(store.get_blob, [e.stored() for e in again.net_events], tmp_path / "serve")
    upstream.stop()  # nothing upstream answers any more
    with ProxyServer(ca, "replay", tmp_path / "spool2", serve) as proxy:
        status, body = fetch(proxy.url, ca.cert, f"{upstream.url}/data.txt?token=other-value&v=1")
        assert status == 200 and body == b"frozen bytes\n" * 1000  # served, whatever the token
        status, text = fetch(proxy.url, ca.cert, f"{upstream.url}/other.txt")
    assert status == 502 and f"unrecorded request GET {upstream.url}/other.txt".encode() in text
    misses = read_misses(tmp_path / "spool2")
    assert [m["url"] for m in misses] == [f"{upstream.url}/other.txt"]
    served = read_log(tmp_path / "spool2")
    assert [s["source"] for s in served] == ["store"]

    stored = (store.root / "index.db").read_bytes()
    for secret in (b"hunter2", b"sk-canary-auth", ca.private_key_pem().splitlines()[1]):
        assert secret not in stored
    assert json.dumps(records).find("hunter2") == -1


def test_a_failed_fetch_is_recorded_and_served_back_identically(tmp_path: Path, upstream: Any) -> None:
    """Issue 31 item 2: an upstream that refuses the connection is an exchange (the 502 the
    client got), so a re-execution is served that same answer, not 'unrecorded request'."""
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/install.sh"
    store = Store(tmp_path / "store")
    ca = ensure_ca(store.root)
    with ProxyServer(ca, "record", tmp_path / "spool") as proxy:
        status, recorded = fetch(proxy.url, ca.cert, closed)
    assert status == 502 and b"502 Bad Gateway" in recorded
    records = read_log(tmp_path / "spool")
    assert [(r["url"], r["status"]) for r in records] == [(closed, 502)]
    events = [NetEvent.from_record(reported(r, tmp_path / "spool")) for r in records]
    episode = Episode(key(), list(events), {})
    store_bodies(store, episode)
    store.put_episode(episode)
    serve = serve_folder(
        store.get_blob, [e.stored() for e in store.get_episode(episode.id).net_events], tmp_path / "serve"
    )
    with ProxyServer(ca, "replay", tmp_path / "spool2", serve) as proxy:
        status, served = fetch(proxy.url, ca.cert, closed)
    assert (status, served) == (502, recorded)  # the same answer, byte for byte
    assert read_misses(tmp_path / "spool2") == []
