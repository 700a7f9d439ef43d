"""One episode's network behind the proxy, as ``DockerEnv`` uses it (``env.py``): the frozen
network, or a live one through the same proxy, of a task that may reach the internet.

``network/`` makes it (``wiring.py``'s ``EpisodeNetwork``: the internal Docker network, the
proxy on its gateway, the container's variables and trust); this module holds one episode's
use of it: attached and started (``network.attach``: none for a no-network task, nor without
a store to keep what it fetches), its warning kept with the run's, the CA put into the
created container, the names its ``/etc/hosts`` maps to a loopback address kept local
(``NO_PROXY``: read once the container started and again after its first action, for what
an ENTRYPOINT wrote there), the episode stopped once the proxy is gone, its exchanges and
misses handed over, and closed (what it fetched dropped unless the spool is kept). A compose
task's services have their own network (``compose.py``) and none of this.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from replaykit.envs.docker import network
from replaykit.envs.docker.episode_container import EpisodeContainer
from replaykit.envs.docker.network import NetworkRequest
from replaykit.envs.docker.network.extras import reported
from replaykit.envs.extras import ExchangeRecord, Miss


class ProxiedNetwork:
    """One episode's network behind the proxy; ``net`` is ``wiring.EpisodeNetwork`` once
    attached, None while the episode has none."""

    def __init__(
        self, mode: str, request: NetworkRequest | None, allow: Sequence[str], keep_spool: bool
    ) -> None:
        self.mode = mode  # frozen | live | none
        self.allow = tuple(allow)  # host:port the proxy may reach on the host's side
        self._request = request  # the store's CA, and what to serve (network/extras.py)
        self._keep_spool = keep_spool  # False: what the network fetched is dropped at close
        self.net: Any = None
        self.local_env: dict[str, str] = {}  # NO_PROXY naming what /etc/hosts maps to loopback
        self._hosts_read = 0

    def attach(
        self, client: Any, episode: str, labels: dict[str, str], warnings: list[str]
    ) -> dict[str, str]:
        """The network (when the task has one) started, its warning added to ``warnings``; the
        environment it gives the container."""
        self.net = network.attach(client, self._request, self.mode, episode, labels, self.allow)
        if self.net is None:
            return {}
        net_env: dict[str, str] = self.net.start()
        if self.net.warning and self.net.warning not in warnings:
            warnings.append(self.net.warning)
        return net_env

    def inject(self, container: Any) -> None:
        """The CA and the proxy's settings put into the created container (before it starts)."""
        if self.net is not None:
            self.net.inject(container)

    def read_hosts(self, container: Any) -> None:
        """The names the started container's ``/etc/hosts`` maps to loopback, kept local."""
        self.local_env, self._hosts_read = self.net.local_env(container) if self.net else {}, 1

    def after_action(self, box: EpisodeContainer) -> None:
        """After the first action, those names read again (what an ENTRYPOINT wrote there)."""
        if self.net is not None and self._hosts_read == 1 and box.dead is None:
            self.local_env, self._hosts_read = self.net.local_env(box.container) or self.local_env, 2

    def check(self, box: EpisodeContainer) -> bool:
        """Stop the episode (an infrastructure failure) once the proxy is gone; whether it is."""
        why = self.net.failure() if self.net is not None else None
        if why is not None and box.dead is None:
            box.stop(why)
        return why is not None

    def close(self) -> None:
        if self.net is not None:
            self.net.close()
            if not self._keep_spool:
                self.net.discard()

    def exchanges(self) -> list[ExchangeRecord]:
        """The exchanges since the last call (their bodies in the network's spool)."""
        if self.net is None:
            return []
        return [reported(record, self.net.spool) for record in self.net.drain()]

    def misses(self) -> list[Miss]:
        """Requests a re-execution's frozen network had no recording for."""
        return list(self.net.misses()) if self.net is not None else []
