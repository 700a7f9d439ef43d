"""One frozen-network proxy: ``mitmdump`` with replaykit's addon, as a child process.

mitmproxy lives in its own virtualenv (``scripts/setup-network.sh`` makes it under
``~/.cache/replaykit/mitmproxy``; ``REPLAYKIT_MITMDUMP`` names another ``mitmdump``):
its pinned dependencies would fight replaykit's. The proxy listens on ``host`` (the
gateway of the episode's Docker network), uses the store's CA for the client side, and
for the upstream side this host's trust store and proxy settings plus any
``REPLAYKIT_NET_UPSTREAM_CA`` bundle (tests trust their own loopback server that way).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from replaykit.core.errors import EnvError
from replaykit.envs.docker.network.ca import StoreCA
from replaykit.envs.docker.network.matching import ExchangeRecord, MissRecord

ADDON = Path(__file__).resolve().parent / "addon.py"
MODES = ("record", "replay", "live")


def mitmdump_path() -> Path:
    """Where ``mitmdump`` is (it may not exist: :func:`check` says so)."""
    named = os.environ.get("REPLAYKIT_MITMDUMP")
    if named:
        return Path(named)
    return Path.home() / ".cache" / "replaykit" / "mitmproxy" / "bin" / "mitmdump"


def check() -> str | None:
    """None when the proxy can start, else why not (one line)."""
    path = mitmdump_path()
    if not path.is_file():
        return (
            f"mitmproxy is not installed at {path}; run scripts/setup-network.sh (or set REPLAYKIT_MITMDUMP)"
        )
    return None


def host_ca_bundle() -> str | None:
    """This host's trust store, as the host's own clients find it."""
    for var in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        value = os.environ.get(var)
        if value and Path(value).is_file():
            return value
    cafile = ssl.get_default_verify_paths().cafile
    return cafile if cafile and Path(cafile).is_file() else None


def upstream_proxy() -> str | None:
    """The host's own proxy for outgoing HTTPS/HTTP, if it has one."""
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        value = os.environ.get(var)
        if value:
            return value if "://" in value else f"http://{value}"
    return None


def _address(url: str) -> tuple[str, int]:
    """``(host, port)`` of a proxy URL (the addon lets the proxy connect to it)."""
    parts = urlsplit(url)
    return (parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class ProxyServer:
    """``with ProxyServer(...) as proxy:`` — ``proxy.url`` is what a container's HTTP(S)_PROXY names."""

    ca: StoreCA
    mode: str
    spool: Path
    serve: Path | None = None
    host: str = "127.0.0.1"
    port: int = 0
    #: ``env.network_allow``: with a tuple the host's loopback, link-local and private addresses
    #: are refused but for these ``host:port`` (``policy.py``); None: no address policy
    allow: tuple[str, ...] | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _confdir: Path | None = field(default=None, init=False)
    _scratch: Path | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> "ProxyServer":
        if self.mode not in MODES:
            raise EnvError(f"unknown proxy mode {self.mode!r}; expected one of {', '.join(MODES)}")
        problem = check()
        if problem:
            raise EnvError(problem)
        self.spool.mkdir(parents=True, exist_ok=True)
        (self.spool / ".ready").unlink(missing_ok=True)
        self._scratch = Path(tempfile.mkdtemp(prefix="replaykit-mitm-"))
        self._confdir = self.ca.confdir()
        config = self._scratch / "config.json"
        upstream = upstream_proxy() if self.mode != "replay" else None
        config.write_text(
            json.dumps(
                {
                    "mode": self.mode,
                    "spool": str(self.spool),
                    "serve": str(self.serve or ""),
                    "allow": None if self.allow is None else list(self.allow),
                    "upstream": _address(upstream) if upstream else None,
                }
            )
        )
        trust = self._scratch / "upstream-ca.pem"
        with open(trust, "wb") as out:
            for part in [
                host_ca_bundle(),
                *filter(None, os.environ.get("REPLAYKIT_NET_UPSTREAM_CA", "").split(os.pathsep)),
            ]:
                if part and Path(part).is_file():
                    out.write(Path(part).read_bytes().rstrip(b"\n") + b"\n")
        self.port = self.port or _free_port(self.host)
        argv = [
            str(mitmdump_path()),
            "--quiet",
            "--listen-host",
            self.host,
            "--listen-port",
            str(self.port),
            "--set",
            f"confdir={self._confdir}",
            "--set",
            f"ssl_verify_upstream_trusted_ca={trust}",
            "--set",
            "connection_strategy=lazy",
            "--set",
            "stream_large_bodies=1m",
            "--set",
            "termlog_verbosity=error",
            "-s",
            str(ADDON),
        ]
        if upstream:
            argv += ["--mode", f"upstream:{upstream}"]
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env["REPLAYKIT_NET_CONFIG"] = str(config)
        log = open(self._scratch / "mitmdump.log", "wb")
        self.process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                said = (self._scratch / "mitmdump.log").read_text(errors="replace").strip().splitlines()
                self.stop()
                raise EnvError(
                    f"the frozen-network proxy exited at start: {(said or ['no output'])[-1][:200]}"
                )
            if (self.spool / ".ready").exists():  # written by the addon's running hook
                try:
                    with socket.create_connection((self.host, self.port), timeout=0.5):
                        return self
                except OSError:
                    pass
            time.sleep(0.05)
        self.stop()
        raise EnvError(
            f"the frozen-network proxy did not listen on {self.host}:{self.port} within {timeout:.0f}s"
        )

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for folder in (self._confdir, self._scratch):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        self._confdir = self._scratch = None

    def __enter__(self) -> "ProxyServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def read_log(spool: Path) -> list[ExchangeRecord]:
    """The exchanges the addon logged in ``spool``, in the order it wrote them."""
    return [json.loads(line) for line in _lines(spool / "exchanges.jsonl")]


def read_misses(spool: Path) -> list[MissRecord]:
    """The requests a replaying proxy logged as unrecorded, in order."""
    return [json.loads(line) for line in _lines(spool / "misses.jsonl")]


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        return []
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
