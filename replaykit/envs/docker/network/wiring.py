"""Wiring one episode's container to the frozen network.

The container joins a per-episode *internal* Docker network: no route leads out of it.
The proxy (``server.py``) listens on that network's gateway address on the host, so it
is the container's only way out. The container gets the proxy variables, the store's CA
(``/etc/replaykit/mitm-ca.pem``, appended to the system bundle too) and every variable
the usual clients read for a CA (``SSL_CERT_FILE``, ``REQUESTS_CA_BUNDLE``, ``PIP_CERT``,
``CURL_CA_BUNDLE``, ``NODE_EXTRA_CA_CERTS``, ``SSL_CERT_DIR``, ``UV_NATIVE_TLS``), and an
apt proxy configuration.
"""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replaykit.core.determinism import HOSTNAME
from replaykit.core.errors import EnvError
from replaykit.envs.docker import containers
from replaykit.envs.docker.network.ca import StoreCA
from replaykit.envs.docker.network.matching import ExchangeRecord, MissRecord
from replaykit.envs.docker.network.server import ProxyServer, read_log, read_misses

CA_PATH = "/etc/replaykit/mitm-ca.pem"
APT_CONF = "/etc/apt/apt.conf.d/99replaykit-proxy"
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
NETWORK_MODES = ("frozen", "live", "none")
PROXY_HOST = "replaykit-proxy"  # what a container's HTTP(S)_PROXY names (an /etc/hosts entry)
PROXY_PORT = 3128


def resolve_mode(setting: str | None, allow_internet: bool) -> str:
    """``env.network`` for one task: unset means ``frozen`` when it may reach the internet."""
    if not allow_internet:
        return "none"
    if setting is None:
        return "frozen"
    if setting not in NETWORK_MODES:
        raise EnvError(f"env.network is {setting!r}; expected one of {', '.join(NETWORK_MODES)}")
    return setting


#: the container's own names and loopback addresses: its traffic to them never goes through the
#: proxy (in Harbor, with no proxy, ``127.0.0.1`` inside a task's container is the container: an
#: image's ENTRYPOINT service on ``127.0.0.1:8080`` is reached by its solution and verifier)
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1", HOSTNAME)


def no_proxy(names: Sequence[str] = ()) -> str:
    """``NO_PROXY``: the container's loopback and hostname, and ``names`` (its compose services)."""
    return ",".join(dict.fromkeys((*LOCAL_NAMES, *names)))


def container_env(proxy_url: str, names: Sequence[str] = ()) -> dict[str, str]:
    """The variables that send a container's clients through the proxy and make them trust its
    CA; what the container serves itself (``no_proxy``) stays local (there is no other route out)."""
    env = dict.fromkeys(("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"), proxy_url)
    env.update(NO_PROXY=no_proxy(names), no_proxy=no_proxy(names))
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        env[name] = CA_PATH
    env.update(SSL_CERT_DIR="/etc/ssl/certs", UV_NATIVE_TLS="1")
    return env


def apt_conf(proxy_url: str) -> str:
    return f'Acquire::http::Proxy "{proxy_url}";\nAcquire::https::Proxy "{proxy_url}";\n'


def _files_tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class EpisodeNetwork:
    """One episode's internal network and proxy. ``serve`` (recorded exchanges) with
    ``serve_only`` is a re-execution: nothing is fetched."""

    def __init__(
        self,
        client: Any,
        ca: StoreCA,
        mode: str,
        episode: str,
        labels: dict[str, str],
        serve: Path | None = None,
        serve_only: bool = False,
    ) -> None:
        self.client = client
        self.ca = ca
        self.mode = mode
        self.proxy_mode = "live" if mode == "live" else "replay" if serve_only else "record"
        self.name = f"replaykit-net-{(episode or 'ep')[:12]}-{uuid.uuid4().hex[:8]}"
        self.labels = labels
        self.spool = Path(tempfile.mkdtemp(prefix="replaykit-net-spool-"))
        self.serve = serve
        self.proxy: ProxyServer | None = None
        self._drained = 0
        self.gateway = ""

    def start(self) -> dict[str, str]:
        """Create the network, start the proxy on its gateway; the container's variables."""
        with containers.live_lock:
            containers.live_networks.add(self.name)
        try:
            self.client.api.create_network(self.name, driver="bridge", internal=True, labels=self.labels)
            info = self.client.api.inspect_network(self.name)
            gateway = info["IPAM"]["Config"][0]["Gateway"]
        except Exception as exc:
            self.close()
            raise EnvError(f"cannot create the episode's network {self.name}: {exc}") from None
        self.gateway = gateway
        self.proxy = ProxyServer(
            self.ca, self.proxy_mode, self.spool, self.serve, host=gateway, port=PROXY_PORT
        )
        try:
            self.proxy.start()
        except EnvError:
            self.close()
            raise
        return container_env(self.url)

    @property
    def url(self) -> str:
        """The proxy as the container names it (the same in every episode: outputs repeat)."""
        return f"http://{PROXY_HOST}:{PROXY_PORT}"

    @property
    def extra_hosts(self) -> dict[str, str]:
        return {PROXY_HOST: self.gateway}

    def inject(self, container: Any) -> None:
        """The CA and apt's proxy configuration into a started container."""
        assert self.proxy is not None
        files = {CA_PATH: self.ca.cert_pem(), APT_CONF: apt_conf(self.url).encode()}
        if not container.put_archive("/", _files_tar(files)):
            raise EnvError(f"cannot copy the frozen network's CA into container {container.name}")
        script = f"if [ -f {SYSTEM_BUNDLE} ]; then cat {CA_PATH} >> {SYSTEM_BUNDLE}; fi"
        result = container.exec_run(["sh", "-c", script], user="root")
        if result.exit_code != 0:
            raise EnvError(f"cannot add the frozen network's CA to the trust store of {container.name}")

    def drain(self) -> list[ExchangeRecord]:
        """Exchanges completed since the last call (records + bodies under ``spool/bodies``)."""
        records = read_log(self.spool)
        new, self._drained = records[self._drained :], len(records)
        return new

    def misses(self) -> list[MissRecord]:
        """Requests a re-execution could not serve (never recorded)."""
        return read_misses(self.spool)

    def close(self) -> None:
        """Stop the proxy and remove the network (the spool stays until :meth:`discard`)."""
        proxy, self.proxy = self.proxy, None
        if proxy is not None:
            proxy.stop()
        containers.remove_network(self.name)

    def discard(self) -> None:
        shutil.rmtree(self.spool, ignore_errors=True)
