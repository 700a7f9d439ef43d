"""Image builds through the frozen network's proxy: what a Dockerfile fetches over HTTP
(``apt-get`` from a Debian mirror, say) is recorded for the image it built.

Only while a recorder is installed (:func:`recording`, by ``run``/``train``, which keep
what it gets in the store) and only for tasks that may reach the internet. The build's
proxy listens on the default bridge's gateway; the build gets ``http_proxy`` /
``HTTP_PROXY`` as build arguments (Docker keeps these out of the image and of its
build cache). HTTPS in a Dockerfile still goes direct: a build cannot be made to trust
the store's CA without changing the Dockerfile.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from replaykit.core.errors import EnvError
from replaykit.envs.docker.network.matching import ExchangeRecord

#: (image ID, the proxy's exchange records, the spool holding their bodies) → kept
Recorder = Callable[[str, list[ExchangeRecord], Path], None]
_recorder: tuple[Path, Recorder] | None = None


@contextlib.contextmanager
def recording(ca_home: Path, recorder: Recorder) -> Iterator[None]:
    """Inside: every task image built from scratch has its HTTP fetches recorded."""
    global _recorder
    previous, _recorder = _recorder, (ca_home, recorder)
    try:
        yield
    finally:
        _recorder = previous


class BuildProxy:
    def __init__(self, server: Any, spool: Path, recorder: Recorder) -> None:
        self.server, self.spool, self.recorder = server, spool, recorder

    @property
    def buildargs(self) -> dict[str, str]:
        url = self.server.url
        return {"http_proxy": url, "HTTP_PROXY": url}

    def built(self, image_id: str) -> None:
        from replaykit.envs.docker.network.server import read_log

        self.server.stop()
        self.recorder(image_id, read_log(self.spool), self.spool)


def _bridge_gateway(client: Any) -> str:
    """The default bridge's address on the host (its gateway; Docker gives it the subnet's first address)."""
    import ipaddress

    config = client.api.inspect_network("bridge")["IPAM"]["Config"][0]
    if config.get("Gateway"):
        return str(config["Gateway"])
    return str(next(ipaddress.ip_network(config["Subnet"], strict=False).hosts()))


@contextlib.contextmanager
def build_proxy(client: Any, allow_internet: bool) -> Iterator[BuildProxy | None]:
    """A recording proxy for one build, or None (no recorder installed, or a no-network task)."""
    active = _recorder
    if active is None or not allow_internet:
        yield None
        return
    from replaykit.envs.docker.network.ca import StoreCA, network_folder
    from replaykit.envs.docker.network.server import ProxyServer

    try:
        gateway = _bridge_gateway(client)
        socket.inet_aton(gateway)
    except Exception as exc:
        raise EnvError(f"cannot find the Docker bridge's gateway for a recorded build: {exc}") from None
    spool = Path(tempfile.mkdtemp(prefix="replaykit-net-build-"))
    server = ProxyServer(StoreCA(network_folder(active[0])), "record", spool, host=gateway)
    server.start()
    try:
        yield BuildProxy(server, spool, active[1])
    finally:
        server.stop()
        shutil.rmtree(spool, ignore_errors=True)
