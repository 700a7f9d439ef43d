"""Image builds through the frozen network: what a task's Dockerfile fetches (apt from a
Debian mirror, pip from PyPI over TLS, …) is recorded for the image it built, and a machine
without that image rebuilds it from the recording alone.

A task that may reach the internet builds on an *internal* Docker network whose only way out
is a mitmproxy on its gateway, named by the build arguments ``http(s)_proxy`` (Docker keeps
them out of the image and its cache key); every ``RUN`` trusts the proxy's CA for its own
duration (``build_trust.py``). The CA is this machine's builds CA
(``~/.cache/replaykit/network-ca/builds``), not a store's: a build is a fact of the image,
whichever store records a run on it.

- Recording (every build from scratch): the exchanges and their bodies are kept beside the
  image, in ``~/.cache/replaykit/image-builds/<image>/`` (``exchanges.jsonl``, ``bodies/``,
  ``build.json``: the image digest of ``image_digest.py``, the task, the base images). While
  a run records (:func:`recording`), every image its keys name has that recording copied into
  the run's store (a ``network-image`` document, ``extras.py``), so bundles carry it.
- Replay (:func:`replaying`): the proxy serves only a recording (an unrecorded request is a
  502 and a line); the rebuilt image's digest is compared with the recorded one.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, cast

from replaykit.core.errors import EnvError
from replaykit.core.files import replace_dir
from replaykit.envs.docker.network.matching import ExchangeRecord, MissRecord


class BuildFacts(TypedDict):
    """``build.json``: what a build made, beside its recording."""

    image: str
    digest: str | None  # the image digest (None: not computable on this engine)
    task: str
    bases: list[str]
    recorded: bool  # its exchanges are here (a build through the proxy)


#: (the image as keys name it, its build's exchange records, the folder holding their bodies,
#: its facts) → kept
Recorder = Callable[[str, list[ExchangeRecord], Path, BuildFacts], None]
_recorders: list[Recorder] = []
_kept: set[tuple[int, str]] = set()


def builds_home() -> Path:
    return Path.home() / ".cache" / "replaykit" / "image-builds"


def builds_ca_home() -> Path:
    return Path.home() / ".cache" / "replaykit" / "network-ca" / "builds"


def recording_folder(image_id: str) -> Path:
    return builds_home() / image_id.removeprefix("sha256:")


def read_facts(image_id: str) -> BuildFacts | None:
    try:
        data = json.loads((recording_folder(image_id) / "build.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("image") != image_id:
        return None
    return cast(BuildFacts, data)


def write_facts(facts: BuildFacts, spool: Path | None = None, bodies: Path | None = None) -> Path:
    """Keep ``facts`` (and a recording's ``spool``: its log and bodies, or for a replayed build
    the bodies of the recording it served, under ``bodies``) beside the image, atomically."""
    target = recording_folder(facts["image"])
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".part-", dir=target.parent))
    if spool is not None:
        if (spool / "exchanges.jsonl").is_file():
            shutil.copy2(spool / "exchanges.jsonl", tmp / "exchanges.jsonl")
        source = (bodies or spool) / "bodies"
        if source.is_dir():
            shutil.copytree(source, tmp / "bodies")
    (tmp / "build.json").write_text(json.dumps(facts, sort_keys=True))
    replace_dir(tmp, target)
    return target


def read_recording(image_id: str) -> list[ExchangeRecord]:
    from replaykit.envs.docker.network.server import read_log

    return read_log(recording_folder(image_id))


@contextlib.contextmanager
def recording(recorder: Recorder) -> Iterator[None]:
    """Inside: every image a run's keys name has its build recording handed to ``recorder``."""
    _recorders.append(recorder)
    try:
        yield
    finally:
        _recorders.remove(recorder)
        _kept.difference_update({k for k in _kept if k[0] == id(recorder)})


def note_image(image_id: str, key: str) -> None:
    """A run's key names the image ``image_id`` (as ``key``: its recipe): hand its build
    recording (when this machine has one) to the recorders installed, once each."""
    for recorder in list(_recorders):
        mark = (id(recorder), image_id)
        facts = read_facts(image_id)
        if mark in _kept or facts is None or not facts["recorded"]:
            continue
        _kept.add(mark)
        recorder(key, read_recording(image_id), recording_folder(image_id), facts)


@dataclass
class BuildNetwork:
    """One build's internal network and proxy (``record`` or ``replay`` of ``serve``)."""

    client: Any
    mode: str
    serve: Path | None = None
    spool: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="replaykit-net-build-")))
    name: str = field(default_factory=lambda: f"replaykit-build-{uuid.uuid4().hex[:12]}")
    server: Any = None

    def start(self) -> "BuildNetwork":
        from replaykit.envs.docker import containers
        from replaykit.envs.docker.network.ca import StoreCA, ensure_ca, network_folder
        from replaykit.envs.docker.network.server import ProxyServer

        ensure_ca(builds_ca_home())
        with containers.live_lock:
            containers.live_networks.add(self.name)
        labels = {containers.LABEL: "1", containers.OWNER_LABEL: containers.owner_id()}
        try:
            self.client.api.create_network(self.name, driver="bridge", internal=True, labels=labels)
            gateway = self.client.api.inspect_network(self.name)["IPAM"]["Config"][0]["Gateway"]
        except Exception as exc:
            self.close()
            raise EnvError(f"cannot create the build's network {self.name}: {exc}") from None
        ca = StoreCA(network_folder(builds_ca_home()))
        self.server = ProxyServer(ca, self.mode, self.spool, self.serve, host=gateway)
        try:
            self.server.start()
        except EnvError:
            self.close()
            raise
        return self

    @property
    def buildargs(self) -> dict[str, str]:
        from replaykit.envs.docker.network.build_trust import CA_ARG
        from replaykit.envs.docker.network.ca import StoreCA, network_folder

        url = self.server.url
        ca = StoreCA(network_folder(builds_ca_home())).cert_pem().decode()
        return {"http_proxy": url, "HTTP_PROXY": url, "https_proxy": url, "HTTPS_PROXY": url, CA_ARG: ca}

    def misses(self) -> list[MissRecord]:
        from replaykit.envs.docker.network.server import read_misses

        return read_misses(self.spool)

    def close(self) -> None:
        from replaykit.envs.docker import containers

        server, self.server = self.server, None
        if server is not None:
            server.stop()
        containers.remove_network(self.name)

    def discard(self) -> None:
        shutil.rmtree(self.spool, ignore_errors=True)


def proxy_available() -> bool:
    from replaykit.envs.docker.network.server import check

    return check() is None


@contextlib.contextmanager
def build_network(
    client: Any, allow_internet: bool, serve: Path | None = None
) -> Iterator[BuildNetwork | None]:
    """The build's network through the proxy (``serve``: replay that recording only), or None:
    a task without the internet (or no mitmproxy here: the build then fetches directly, as Harbor's)."""
    if not allow_internet or (serve is None and not proxy_available()):
        yield None
        return
    network = BuildNetwork(client, "replay" if serve is not None else "record", serve).start()
    try:
        yield network
    finally:
        network.close()
        network.discard()
