"""The ``replaykit view`` command: loopback unless told otherwise, one-line errors, Ctrl-C
exits 130, and the store is byte-identical after a session that read every kind of page."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from replaykit.view.search import index_path
from tests.cli_runner import cli

from .conftest import snapshot

pytestmark = pytest.mark.e2e


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as answer:
        text: str = answer.read().decode("utf-8")
        return text


def test_a_viewer_session_leaves_the_store_byte_identical(
    quickstart_store: dict[str, Any], viewer_of: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = quickstart_store["store"]
    before = snapshot(store)
    viewer = viewer_of(store)
    assert viewer.info["read_only"] is True and viewer.url.startswith("http://127.0.0.1:")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the viewer's (conftest.Viewer)
    assert {k: v for k, v in viewer.info.items() if k != "url"} == {  # `view --json` (view/serve.Serving)
        "store": str(store),  # as --store named it
        "search_index": str(index_path(store)),
        "read_only": True,
    }
    training = quickstart_store["training"]
    pages = [
        "/",
        "/trainings",
        f"/trainings/{training['training_id']}",
        "/runs",
        "/tasks",
        "/tasks?model=reference-weak",
        "/verdicts",
        "/compares",
    ]
    pages += ["/episodes?sort=reward&dir=asc", "/search?q=checksum", "/search?q=release&page=2"]
    pages += [f"/verdicts/{v}" for v in training["verdicts"]]
    pages += [f"/runs/{r}" for r in training["runs"][:2]]
    for path in pages:
        fetch(viewer.url + path)
    episodes = re.findall(r'href="/episodes/([0-9a-f]+)"', fetch(viewer.url + "/episodes"))
    for cid in episodes[:5]:
        fetch(f"{viewer.url}/episodes/{cid}?full=1")
    for link in re.findall(
        r'href="(/verdicts/[^"]+/diff\?unit=[^"]+)"',
        fetch(f"{viewer.url}/verdicts/{training['verdicts'][0]}"),
    ):
        fetch(viewer.url + link.replace("&amp;", "&"))
    code, err = viewer.stop()
    assert code == 130 and "viewer stopped" in err and "Traceback" not in err, err
    assert snapshot(store) == before
    assert (tmp_path / "cache" / "replaykit" / "view").is_dir()  # the search sidecar went to the cache


def test_config_names_the_store(quickstart_store: dict[str, Any], viewer_of: Any) -> None:
    viewer = viewer_of(None, "--config", str(quickstart_store["config"]))
    assert viewer.info["store"] == str(quickstart_store["store"])
    assert quickstart_store["training"]["training_id"] in fetch(viewer.url + "/trainings")


def test_another_host_needs_an_explicit_flag(quickstart_store: dict[str, Any]) -> None:
    proc = cli("view", "--store", str(quickstart_store["store"]), "--host", "0.0.0.0", "--no-open")
    assert proc.returncode == 2
    assert "not a loopback address" in proc.stderr and "--allow-remote" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_missing_store_is_one_line(tmp_path: Path) -> None:
    proc = cli("view", "--store", str(tmp_path / "nowhere"), "--port", "0", "--no-open")
    assert (
        proc.returncode == 1 and "no store at" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    )
    assert not (tmp_path / "nowhere").exists()


def test_a_busy_port_is_one_line(quickstart_store: dict[str, Any], viewer_of: Any) -> None:
    viewer = viewer_of(quickstart_store["store"])
    port = viewer.url.rsplit(":", 1)[1]
    proc = cli("view", "--store", str(quickstart_store["store"]), "--port", port, "--no-open")
    assert proc.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in proc.stderr


def get_with_host(url: str, host: str) -> tuple[int, str]:
    """GET ``url`` sending ``Host: host`` (what a DNS-rebinding page makes the browser send)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    try:
        conn.putrequest("GET", "/runs", skip_host=True)
        conn.putheader("Host", host)
        conn.endheaders()
        answer = conn.getresponse()
        return answer.status, answer.read().decode("utf-8")
    finally:
        conn.close()


def test_the_viewer_answers_only_to_its_own_address(quickstart_store: dict[str, Any], viewer_of: Any) -> None:
    """DNS rebinding: a page of evil.example resolved to 127.0.0.1 makes the browser send
    ``Host: evil.example:PORT``; the viewer refuses it and answers its own address."""
    viewer = viewer_of(quickstart_store["store"])
    port = viewer.url.rstrip("/").rsplit(":", 1)[1]
    run_id = quickstart_store["training"]["runs"][0]
    for good in (f"127.0.0.1:{port}", f"localhost:{port}", "127.0.0.1"):
        status, body = get_with_host(viewer.url, good)
        assert status == 200 and run_id in body, (good, status)
    for bad in (f"evil.example:{port}", "evil.example", f"127.0.0.1.nip.io:{port}", "", f"[::2]:{port}"):
        status, body = get_with_host(viewer.url, bad)
        assert status == 400 and run_id not in body, (bad, status, body)
        assert body.startswith("this viewer answers only to Host 127.0.0.1, not "), body
        assert body.count("\n") == 1


@pytest.mark.parametrize(
    "command", [["view", "--no-open"], ["serve", "reference"], ["engine", "start", "--model", "tiny"]]
)
@pytest.mark.parametrize("port", ["99999", "-1"])
def test_a_port_out_of_range_is_one_line_not_another_port(command: list[str], port: str) -> None:
    """`view --port 99999` served on port 34463 (getaddrinfo wraps the number modulo 65536)."""
    proc = cli(*command, "--port", port, env={"COLUMNS": "80"}, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "'--port'" in lines[0], proc.stdout + proc.stderr
    assert "65535" in lines[0] if port == "99999" else "greater than or equal to 0" in lines[0]
    assert "on http://" not in proc.stdout + proc.stderr
