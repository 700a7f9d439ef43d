"""Multi-container tasks: ``environment/docker-compose.yaml``, run with the Docker SDK.

As in Harbor, the service ``main`` is the agent's container (built from
``environment/Dockerfile``, run by ``DockerEnv``); every other service is a
*sidecar*. No ``docker compose`` binary is needed: replaykit reads the file itself
(``compose_spec.py``: parsing, validation, what is refused); this module builds or finds
the sidecars' images and runs them.

* **Network.** Each episode gets its own bridge network (``replaykit-<episode>-<id>``,
  ``internal`` unless the task has ``allow_internet``); ``main`` and every sidecar join
  it, reachable by service name (and ``hostname``). Nothing is published on the host.
* **Sidecars** start in ``depends_on`` order before ``main``; a service with a
  ``healthcheck`` (compose syntax: ``test``, ``interval``, ``timeout``, ``retries``,
  ``start_period``) must report healthy before the next one starts; a sidecar that
  exits, or stays unhealthy past :data:`HEALTH_WAIT_SEC`, makes the episode an
  infrastructure failure. Images: ``build`` (a context folder under ``environment/``,
  optional ``dockerfile``) is built like the main image (aliases, heredocs, cache);
  ``image`` must be present locally (or aliased). ``environment``, ``command``,
  ``entrypoint``, ``working_dir``, ``hostname`` are honoured; ``${VAR}`` /
  ``${VAR:-default}`` in values take ``[environment.env]``, else the default.
* **Volumes, networks, secrets, configs** (``compose_top.py``): each named or anonymous
  volume is a fresh Docker volume of the episode (``<network>-<name>``), mounted where the
  services (``main`` included) ask; declared networks are the one private network, aliases
  honoured on the sidecars; secrets and configs are files under ``environment/`` written into
  each container that lists them before it starts.
* **Cleanup.** Sidecars, the network and the volumes carry the same labels as episode
  containers and are removed on close, at exit, on signals, and as stale leftovers.
* **Refused** (one line, ``TaskError``): bind mounts of host folders, ``privileged``,
  ``cap_add``, ``network_mode``, ``devices``, ``pid``, ``ipc``, ``extends``; ``ports`` are
  ignored (services talk over the private network).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from replaykit.core.determinism import SOURCE_DATE_EPOCH
from replaykit.core.errors import EnvError
from replaykit.envs.docker import containers, image_build, images, recipe
from replaykit.envs.docker.compose_spec import (
    MAIN,
    Compose,
    ComposeHealthcheck,
    Service,
    compose_file,
    load_compose,
)
from replaykit.envs.docker.compose_top import FileMount, Mount
from replaykit.envs.docker.heredoc import rewrite_heredocs
from replaykit.envs.tasks import Task

__all__ = [
    "HEALTH_WAIT_SEC",
    "MAIN",
    "Compose",
    "ComposeHealthcheck",
    "Service",
    "Sidecars",
    "compose_file",
    "load_compose",
    "service_images",
    "service_keys",
]

HEALTH_WAIT_SEC = 120.0


def service_images(
    task: Task, compose: Compose, aliases: dict[str, str] | None = None, build: bool = True
) -> dict[str, str]:
    """Build (cached; ``build=False``: only if built here already) or find each sidecar's
    image; service name -> image ID."""
    return {name: image_id for name, (image_id, _) in _services(task, compose, aliases, build).items()}


def service_keys(
    task: Task, compose: Compose, aliases: dict[str, str] | None = None, build: bool = True
) -> dict[str, str]:
    """Each sidecar's image as a cassette key names it (``recipe.py``: a built one's recipe, a
    named one's base recipe), never its local ID; service name -> that name."""
    return {name: key for name, (_, key) in _services(task, compose, aliases, build).items()}


def _services(
    task: Task, compose: Compose, aliases: dict[str, str] | None, build: bool
) -> dict[str, tuple[str, str]]:
    """Service name -> (its image's local ID, its recipe)."""
    client = images.docker_client()
    found: dict[str, tuple[str, str]] = {}
    for service in compose.sidecars:
        if service.build_context is not None:
            dockerfile = service.build_context / service.dockerfile
            text = rewrite_heredocs(dockerfile.read_text(encoding="utf-8"), str(dockerfile))
            built = image_build.build_cached(
                client,
                task,
                service.build_context,
                text,
                str(dockerfile),
                f"{task.id}-{service.name}",
                aliases,
                build=build,
            )
            found[service.name] = (built.id, built.key)
        else:
            assert service.image is not None
            ref = images.alias_for(client, service.image, dict(aliases or {}))
            image_id = images.image_exists(client, ref)
            if image_id is None:
                raise EnvError(
                    f"{compose.path}: service {service.name!r}: image {service.image!r} is not present locally "
                    "and replaykit never pulls; build it, or map it in env.image_aliases"
                )
            found[service.name] = (image_id, recipe.base_recipe(client, ref))
    return found


class Sidecars:
    """One episode's network and sidecar containers."""

    def __init__(
        self,
        client: Any,
        compose: Compose,
        images_by_service: dict[str, str],
        task: Task,
        episode: str,
        labels: dict[str, str],
    ) -> None:
        self.client = client
        self.compose = compose
        self.images = images_by_service
        self.task = task
        self.labels = labels
        self.network = f"replaykit-{(episode or 'ep')[:12]}-{uuid.uuid4().hex[:8]}"
        self.names: list[str] = []
        self.volumes: dict[str, str] = {}  # a mount's key (its name, or service/target) -> the Docker volume

    def start(self) -> str | None:
        """Create the network and the volumes, start every sidecar; None when all are up (and
        healthy), else why not."""
        with containers.live_lock:
            containers.live_networks.add(self.network)
        self.client.api.create_network(
            self.network, driver="bridge", internal=not self.task.allow_internet, labels=self.labels
        )
        for name in self.compose.volumes:
            self._volume(name)
        for service in self.compose.sidecars:
            name = f"{self.network}-{service.name}"
            with containers.live_lock:
                containers.live[name] = None
            host_config = self.client.api.create_host_config(
                network_mode=self.network,
                mem_limit=f"{self.task.memory_mb}m",
                pids_limit=1024,
                nano_cpus=int(min(self.task.cpus, containers.host_cpus(self.client)) * 1e9),
                mounts=self.mounts(service.name, service.mounts),
            )
            networking = self.client.api.create_networking_config(
                {
                    self.network: self.client.api.create_endpoint_config(
                        aliases=[
                            service.name,
                            *([service.hostname] if service.hostname else []),
                            *service.aliases,
                        ]
                    )
                }
            )
            created = self.client.api.create_container(
                self.images[service.name],
                command=service.command,
                entrypoint=service.entrypoint,
                name=name,
                environment=service.environment or None,
                working_dir=service.working_dir,
                hostname=service.hostname or service.name,
                labels={**self.labels, "replaykit.service": service.name},
                host_config=host_config,
                networking_config=networking,
                healthcheck=service.healthcheck,
                detach=True,
            )
            self.names.append(name)
            put_files(self.client.api, created["Id"], service.files)
            self.client.api.start(created["Id"])
            problem = self._wait(name, service)
            if problem:
                return problem
        return None

    def _wait(self, name: str, service: Service) -> str | None:
        deadline = time.monotonic() + HEALTH_WAIT_SEC
        while True:
            state = self.client.api.inspect_container(name).get("State") or {}
            if not state.get("Running"):
                return (
                    f"service {service.name!r} exited (code {state.get('ExitCode')}) before the episode began"
                )
            health = (state.get("Health") or {}).get("Status")
            if service.healthcheck is None or health == "healthy":
                return None
            if health == "unhealthy":
                return f"service {service.name!r} is unhealthy (its compose healthcheck failed)"
            if time.monotonic() > deadline:
                return f"service {service.name!r} was not healthy within {HEALTH_WAIT_SEC:g}s"
            time.sleep(0.2)

    def exited(self) -> str | None:
        """Why the episode cannot go on when a sidecar stopped during it, else None."""
        for name, service in zip(self.names, self.compose.sidecars, strict=False):
            try:
                state = self.client.api.inspect_container(name).get("State") or {}
            except Exception:
                return f"service {service.name!r} is gone"
            if not state.get("Running"):
                return f"service {service.name!r} exited (code {state.get('ExitCode')}) during the episode"
        return None

    def _volume(self, key: str) -> str:
        """The episode's Docker volume for ``key`` (made once, labelled, removed on close)."""
        if key not in self.volumes:
            name = f"{self.network}-{key.strip('/').replace('/', '-')}"
            with containers.live_lock:
                containers.live_volumes.add(name)
            self.client.api.create_volume(name, driver="local", labels=self.labels)
            self.volumes[key] = name
        return self.volumes[key]

    def mounts(self, service: str, wanted: tuple[Mount, ...]) -> list[Any]:
        """Docker mounts of ``service``'s volumes: the episode's named volumes, a fresh one per
        anonymous volume, tmpfs."""
        from docker.types import Mount as DockerMount

        found = []
        for m in wanted:
            if m.tmpfs:
                found.append(DockerMount(m.target, None, type="tmpfs"))
                continue
            volume = self._volume(m.source if m.source is not None else f"{service}{m.target}")
            found.append(DockerMount(m.target, volume, type="volume", read_only=m.read_only))
        return found

    def close(self) -> None:
        for name in self.names:
            containers.remove_container(name)
        self.names = []
        for volume in self.volumes.values():
            containers.remove_volume(volume)
        self.volumes = {}
        containers.remove_network(self.network)


def put_files(api: Any, container: str, files: tuple[FileMount, ...]) -> None:
    """Write each secret's or config's bytes at its target in a created (not yet started) container."""
    if not files:
        return
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in files:
            info = tarfile.TarInfo(f.target.lstrip("/"))
            info.size, info.mode, info.mtime = len(f.data), f.mode, SOURCE_DATE_EPOCH
            tar.addfile(info, io.BytesIO(f.data))
    api.put_archive(container, "/", buf.getvalue())
