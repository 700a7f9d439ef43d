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

import functools
import io
import ipaddress
import re
import shlex
import shutil
import subprocess
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


def no_proxy(names: Sequence[str] = (), allow: Sequence[str] = ()) -> str:
    """``NO_PROXY``: the container's loopback and hostname, and ``names`` (its compose services).
    A loopback address that ``env.network_allow`` names (a test upstream on the host's loopback,
    ``127.0.0.1:PORT``) is left to the proxy: it alone reaches the host, and only there."""
    proxied = {a.rsplit(":", 1)[0].strip("[]") for a in allow}
    return ",".join(n for n in dict.fromkeys((*LOCAL_NAMES, *names)) if n not in proxied)


def loopback_names(hosts: str) -> list[str]:
    """The names an ``/etc/hosts`` text maps to a loopback address (``127.0.0.0/8``, ``::1``), in
    order: a task that blocks or serves names itself (its ENTRYPOINT writes them) reaches them in
    its own container, as under Harbor, never through the proxy."""
    found: list[str] = []
    for line in hosts.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) < 2:
            continue
        try:
            loopback = ipaddress.ip_address(fields[0].split("%", 1)[0]).is_loopback
        except ValueError:
            continue
        if loopback:
            found += [name for name in fields[1:] if name not in found]
    return found


def container_env(proxy_url: str, names: Sequence[str] = (), allow: Sequence[str] = ()) -> dict[str, str]:
    """The variables that send a container's clients through the proxy and make them trust its
    CA; what the container serves itself (``no_proxy``) stays local (there is no other route out)."""
    env = dict.fromkeys(("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"), proxy_url)
    env.update(NO_PROXY=no_proxy(names, allow), no_proxy=no_proxy(names, allow))
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


class HostRoute:
    """The host as the container sees it on its network's gateway: only the proxy's port.
    Without this, a host service bound to every interface (``0.0.0.0``) answers the container
    at the gateway directly, unrecorded. Two ``iptables`` rules on the network's bridge (the
    first ``INPUT`` rules: the proxy's port accepted, everything else rejected), removed at
    close. Setting them needs root: without, :meth:`close` says why (the episode's warnings)."""

    def __init__(self, bridge: str, gateway: str, port: int) -> None:
        mark = ["-m", "comment", "--comment", RULE_MARK]
        self.rules = [
            ["-i", bridge, "-p", "tcp", "-d", gateway, "--dport", str(port), *mark, "-j", "ACCEPT"],
            ["-i", bridge, *mark, "-j", "REJECT"],
        ]
        self.closed = False

    def close(self) -> str | None:
        """Cut every route to the host but the proxy's; None, or why it stays open."""
        _sweep_once()
        for rule in reversed(self.rules):  # each on top: the ACCEPT lands above its own REJECT,
            problem = _iptables("-I", "INPUT", "1", *rule)  # whatever other episodes insert meanwhile
            if problem is not None:
                self.open()
                return (
                    "the task container can reach the host's own services on its network's gateway"
                    f" directly (iptables: {problem}; run as root to cut that route)"
                )
            self.closed = True
        return None

    def open(self) -> None:
        if self.closed:
            for rule in self.rules:
                _iptables("-D", "INPUT", *rule)
            self.closed = False


#: the comment on replaykit's own rules (so a sweep never touches anyone else's)
RULE_MARK = "replaykit-host-route"
_RULE_BRIDGE = re.compile(r"-i (\S+) ")


@functools.cache
def _sweep_once() -> int:
    """:func:`sweep_stale_rules` at this process's first host route (what killed processes left
    is there before it starts; one ``iptables -S`` per process, not per episode)."""
    return sweep_stale_rules()


def sweep_stale_rules() -> int:
    """Remove replaykit's ``INPUT`` rules on bridges that no longer exist: those of a process
    killed with SIGKILL before :meth:`HostRoute.open` (its network is gone with its episode).
    A live episode's bridge exists, so its rules stay. How many were removed."""
    binary = shutil.which("iptables") or "/usr/sbin/iptables"
    try:
        listed = subprocess.run([binary, "-w", "-S", "INPUT"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    removed = 0
    for line in listed.stdout.splitlines():
        found = _RULE_BRIDGE.search(line)
        if not line.startswith("-A INPUT ") or RULE_MARK not in line or found is None:
            continue
        if Path("/sys/class/net", found.group(1)).exists():
            continue
        removed += _iptables("-D", *shlex.split(line)[1:]) is None
    return removed


def _iptables(*args: str) -> str | None:
    """Run ``iptables -w ARGS``; None, or its last line when it failed."""
    binary = shutil.which("iptables") or "/usr/sbin/iptables"
    try:
        proc = subprocess.run([binary, "-w", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if proc.returncode == 0:
        return None
    said = (proc.stderr or proc.stdout).strip().splitlines()
    return said[-1] if said else f"exit code {proc.returncode}"


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
        allow: Sequence[str] = (),
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
        self.allow = tuple(allow)  # env.network_allow: host:port the proxy may reach on the host's side
        self.host_route: HostRoute | None = None
        self.warning: str | None = None  # why the container's route to the host stays open

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
        self.host_route = HostRoute(f"br-{info['Id'][:12]}", gateway, PROXY_PORT)
        self.proxy = ProxyServer(
            self.ca, self.proxy_mode, self.spool, self.serve, host=gateway, port=PROXY_PORT, allow=self.allow
        )
        self.warning = self.host_route.close()
        try:
            self.proxy.start()
        except EnvError:
            self.close()
            raise
        return container_env(self.url, allow=self.allow)

    @property
    def url(self) -> str:
        """The proxy as the container names it (the same in every episode: outputs repeat)."""
        return f"http://{PROXY_HOST}:{PROXY_PORT}"

    @property
    def extra_hosts(self) -> dict[str, str]:
        return {PROXY_HOST: self.gateway}

    def local_env(self, container: Any) -> dict[str, str]:
        """``NO_PROXY`` (both spellings) with every name the container's ``/etc/hosts`` maps to a
        loopback address now (what its ENTRYPOINT wrote included); empty when it adds none."""
        result = container.exec_run(["cat", "/etc/hosts"], user="root")
        names = [n for n in loopback_names(result.output.decode(errors="replace")) if n not in LOCAL_NAMES]
        if result.exit_code != 0 or not names:
            return {}
        value = no_proxy(names, self.allow)
        return {"NO_PROXY": value, "no_proxy": value}

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

    def failure(self) -> str | None:
        """Why the proxy can no longer carry the container's traffic (it exited mid-episode:
        killed, crashed), or None while it runs. What the container fetched after that is
        the proxy's absence, not the task's behaviour: the episode is an infrastructure failure."""
        proxy = self.proxy
        if proxy is None or proxy.process is None:
            return None
        code = proxy.process.poll()
        if code is None:
            return None
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return f"the frozen network's proxy died mid-episode ({how})"

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
        route, self.host_route = self.host_route, None
        if route is not None:
            route.open()

    def discard(self) -> None:
        shutil.rmtree(self.spool, ignore_errors=True)
