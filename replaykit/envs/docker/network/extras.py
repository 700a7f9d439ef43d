"""The frozen network as the docker kind's episode extras (``envs/extras.py``): what the
episode layer reaches through ``EnvKind.extras``, with a narrow store (``KindStore``).

- ``recording``: the store's CA made once, and while a run records, every task image its keys
  name has its build's recording kept for that image (a ``network-image`` document); every
  recorded episode's environment gets the CA's folder (``NetworkRequest.store``).
- ``serving``: a re-execution of a frozen episode gets a folder serving its recorded
  exchanges only (the proxy's ``index.json`` + ``bodies/``, written chunk by chunk).
- ``forked_reason``: an episode that ran on a live network is never certified deterministic.
- ``build_exchanges``: what an image's build fetched (``net ls``); ``documents``: that
  recording, which a bundle of the cassette carries; ``serving`` hands it to a re-execution
  on an engine without the image (``rebuild``: ``rebuild.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from replaykit.core.determinism import digest_of
from replaykit.core.records import JSON
from replaykit.envs.base import EnvSection
from replaykit.envs.docker.network import build
from replaykit.envs.docker.network.ca import ensure_ca
from replaykit.envs.docker.network.matching import ExchangeRecord, ServedResponse, key_of
from replaykit.envs.docker.recipe import find_image, is_recipe, parse_key
from replaykit.envs.docker.settings import DockerSettings
from replaykit.envs.extras import ExchangeRecord as Reported
from replaykit.envs.extras import Extras, KindStore, StoredExchange
from replaykit.envs.tasks import Task

IMAGE_KIND = "network-image"
#: the environment metadata's ``network`` value of an episode that ran on a live network
NETWORK_UNFROZEN = "unfrozen"


def ca_home(location: str) -> Path:
    """Where a store's CA lives: the store folder; a server store (PostgreSQL) has none, so
    its CA is kept on this machine, under ``~/.cache/replaykit/network-ca/<its location's hash>``
    (a secret never goes into the database: bundles are made from it)."""
    if "://" not in location:
        return Path(location)
    digest = hashlib.sha256(location.encode()).hexdigest()[:16]
    return Path.home() / ".cache" / "replaykit" / "network-ca" / digest


def image_doc_id(image: str) -> str:
    """The id of the document holding the recorded build of ``image`` as a key names it (a
    recipe; format 1: a local image ID)."""
    if is_recipe(image):
        return "net-image-" + digest_of(image)[:32]
    return "net-image-" + image.removeprefix("sha256:")[:32]


def _recorded_build(image: str) -> bool:
    """Can a key's ``image`` have a recorded build (a local ID, or a recipe whose build fetched)?"""
    return image.startswith("sha256:") or (is_recipe(image) and parse_key(image)[1] is not None)


def reported(record: ExchangeRecord, spool: Path) -> Reported:
    """One line of the proxy's exchange log as the episode layer takes it (its body in the spool)."""
    return {
        "method": record["method"],
        "url": record["url"],
        "request_body": record["request_body"],
        "status": record["status"],
        "reason": record.get("reason") or "",
        "headers": [list(h) for h in record.get("headers") or []],
        "body": record["body"],
        "size": record["size"],
        "source": record.get("source") or "upstream",
        "body_path": str(spool / "bodies" / record["body"]),
        "spool": str(spool),
    }


def network_mode(environment: Mapping[str, object]) -> str:
    """How an episode's container reached the network (from its recorded environment
    metadata): ``frozen``, ``live`` or ``none``."""
    state = environment.get("network")
    if state in ("frozen", "none"):
        return str(state)
    if state == NETWORK_UNFROZEN:
        return "live"
    limits = environment.get("limits")
    if not isinstance(limits, Mapping):
        limits = {}
    mode = limits.get("network_mode")
    if mode:
        return str(mode)
    return "live" if limits.get("network") else "none"  # recorded before the frozen network


def serve_folder(get_blob: Callable[[str], bytes], exchanges: list[StoredExchange], folder: Path) -> Path:
    """``folder`` holding ``exchanges`` as the proxy serves them (the first recording of a key wins)."""
    bodies = folder / "bodies"
    bodies.mkdir(parents=True, exist_ok=True)
    index: dict[str, ServedResponse] = {}
    for exchange in exchanges:
        key = key_of(exchange["method"], exchange["url"], exchange["request_body"])
        if key in index:
            continue
        index[key] = {
            "status": exchange["status"],
            "reason": exchange["reason"],
            "headers": exchange["headers"],
            "body": exchange["body"],
            "size": exchange["size"],
        }
        target = bodies / exchange["body"]
        if not target.exists():
            with open(target, "wb") as out:
                for chunk in exchange["chunks"]:
                    out.write(get_blob(chunk))  # verified against its address
    (folder / "index.json").write_text(json.dumps(index, sort_keys=True))
    return folder


def keep_build(
    store: KindStore, image: str, records: list[ExchangeRecord], folder: Path, facts: build.BuildFacts
) -> None:
    """A build's recording (its bodies in ``folder``, which stays) as the document of the image
    a key names (``image``: its recipe)."""
    if store.get_exchanges(image_doc_id(image), IMAGE_KIND) or store.readonly:
        return  # kept already (the same image's build is one recording)
    kept = [{**reported(r, folder), "spool": ""} for r in records]
    fields: dict[str, JSON] = {
        "image": image,
        "image_digest": facts["digest"],
        "task": facts["task"],
        "bases": list(facts["bases"]),
    }
    store.put_exchanges(image_doc_id(image), IMAGE_KIND, kept, image, fields)  # type: ignore[arg-type]


@contextlib.contextmanager
def build_serving(store: KindStore, image: str) -> Iterator[Extras]:
    """For a re-execution on an engine without ``image`` (a key's: a recipe, or a local ID): its
    recorded build, served back (``rebuild``: the folder, the recorded image and its digest), or
    nothing."""
    if not _recorded_build(image) or image_present(image):
        yield {}
        return
    doc = store.get_fields(image_doc_id(image), IMAGE_KIND)
    if doc is None:
        yield {}
        return
    folder = Path(tempfile.mkdtemp(prefix="replaykit-net-build-serve-"))
    try:
        serve_folder(store.get_blob, store.get_exchanges(image_doc_id(image), IMAGE_KIND), folder)
        yield {"rebuild": {"serve": str(folder), "image": image, "digest": doc.get("image_digest")}}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def image_present(image: str) -> bool:
    from replaykit.envs.docker.images import docker_client, image_exists

    try:
        client = docker_client()
        return (find_image(client, image) if is_recipe(image) else image_exists(client, image)) is not None
    except Exception:  # no engine: nothing can be re-executed here anyway
        return True


class FrozenNetwork:
    """The docker kind's ``EpisodeExtras``."""

    @contextlib.contextmanager
    def recording(
        self, store: KindStore, env: EnvSection[DockerSettings], tasks: Sequence[Task]
    ) -> Iterator[Extras]:
        setting = env.settings.network
        if store.readonly or not any(t.allow_internet for t in tasks):
            yield {}
            return
        with build.recording(lambda *kept: keep_build(store, *kept)):  # builds: whatever the setting
            if setting == "none":
                yield {}
                return
            home = ca_home(store.location)
            ensure_ca(home)
            yield {"store": str(home)}  # a NetworkRequest

    @contextlib.contextmanager
    def serving(
        self, store: KindStore, environment: Mapping[str, JSON], exchanges: list[StoredExchange]
    ) -> Iterator[Extras]:
        with contextlib.ExitStack() as stack:
            image = environment.get("image_key") or environment.get("image")  # format 2: its recipe
            rebuild = stack.enter_context(build_serving(store, str(image or "")))
            mode = network_mode(environment)
            if mode == "none":
                yield rebuild
                return
            home = ca_home(store.location)
            ensure_ca(home)  # a store that imported the recording makes its own CA
            request: Extras = {**rebuild, "store": str(home)}  # a NetworkRequest
            if mode != "frozen":
                yield request
                return
            folder = Path(tempfile.mkdtemp(prefix="replaykit-net-serve-"))
            stack.callback(shutil.rmtree, folder, ignore_errors=True)
            serve_folder(store.get_blob, exchanges, folder)
            yield {**request, "serve": str(folder), "serve_only": True}

    def forked_reason(self, environment: Mapping[str, JSON]) -> str | None:
        if environment.get("network") != NETWORK_UNFROZEN:
            return None
        return (
            "network unfrozen: the episode ran with a live network (not the frozen one), so its "
            "observations cannot be certified deterministic; re-record it with env.network: frozen"
        )

    def documents(self, extra: Sequence[tuple[str, str]]) -> list[str]:
        """The build recording of the image a cassette ran in (its bundles carry it)."""
        image = dict(extra).get("image", "")
        return [image_doc_id(image)] if _recorded_build(image) else []

    def build_exchanges(
        self, store: KindStore, extra: Sequence[tuple[str, str]]
    ) -> list[tuple[str, list[StoredExchange]]]:
        image = dict(extra).get("image")
        if not image:
            return []
        return [(image, store.get_exchanges(image_doc_id(image), IMAGE_KIND))]


FROZEN_NETWORK = FrozenNetwork()
