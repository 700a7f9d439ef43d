"""The Docker environment: one container per episode, removed whatever happens.

``DockerEnv`` implements the ``Environment`` protocol like ``LocalEnv`` does (same
observations, timeouts, output caps and grading semantics) inside a container of the
task's image (``image_build.ensure_task_image``). This module holds the task's side: limits
from task.toml (``cpus`` capped at the host's cores, ``memory_mb``, ``pids_limit``; the
network unless ``network_mode = "no-network"`` / ``allow_internet = false``), the workdir, the pins (hostname ``replaykit``,
``ENV_PINS``, ``APP_DIR``, ``TESTS_DIR=/tests``, ``LOGS_DIR=/logs``,
``PYTHONDONTWRITEBYTECODE=1``: a .pyc embeds source mtimes), steps, the verifier's
primitives (``envs/verifier.py`` grades and runs the oracle over them) and the state
digest (``snapshot.py``); the ``docker`` kind is ``kind.py``. As in Harbor, the
image's ``ENTRYPOINT`` runs (PID 1's command is its arguments) and the processes it
started stay up across steps (``services.py``); the workdir is task.toml's, else the
image's WORKDIR, else ``/``; the network is Harbor's policy (``features.network_mode``).
The container's mechanics (create, ``docker exec``, nothing outliving a step, faults) are
``episode_container.py``; labels and cleanup at exit or on signals, ``containers.py``; the
episode's network behind the proxy (attached, its hosts kept local, its proxy's death, its
exchanges and misses), ``proxied_network.py``; the pids limit's default, ``faults.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from replaykit.core.determinism import ENV_PINS, HOSTNAME
from replaykit.core.errors import EnvError
from replaykit.core.records import JSON
from replaykit.envs import healthcheck, task_env
from replaykit.envs.docker import compose, containers, faults, images, snapshot
from replaykit.envs.docker.compose_top import FileMount
from replaykit.envs.docker.containers import episode_labels, install_cleanup
from replaykit.envs.docker.episode_container import INIT, ContainerOptions, EpisodeContainer, start_container
from replaykit.envs.docker.network import NetworkRequest
from replaykit.envs.docker.network.wiring import resolve_mode
from replaykit.envs.docker.proxied_network import ProxiedNetwork
from replaykit.envs.extras import ExchangeRecord, Miss
from replaykit.envs.results import Observation
from replaykit.envs.steps import Step
from replaykit.envs.tasks import Task
from replaykit.envs.verifier import Sandbox, VerifierPaths

TESTS_DIR = "/tests"
LOGS_DIR = "/logs"
SOLUTION_DIR = "/solution"


class DockerEnv(Sandbox):
    """One episode of ``task`` in a container of ``image`` (implements ``Environment``;
    graded by the verifier over its primitives, ``envs/verifier.py``)."""

    kind = "docker"

    def __init__(
        self,
        task: Task,
        image: str,
        timeout_sec: float = 30,
        max_output_bytes: int = 65536,
        snapshot_mode: str = "digest",
        episode: str = "",
        aliases: dict[str, str] | None = None,
        warnings: list[str] | None = None,
        network_mode: str | None = None,
        network_request: NetworkRequest | None = None,
        keep_network_spool: bool = True,
        network_allow: Sequence[str] = (),
        image_key: str = "",
    ) -> None:
        if timeout_sec <= 0:
            raise EnvError(f"timeout_sec must be > 0, got {timeout_sec!r}")
        if max_output_bytes <= 0:
            raise EnvError(f"max_output_bytes must be > 0, got {max_output_bytes!r}")
        self.task = task
        self.image = image
        self.image_key = image_key  # how the cassette key names the image (its recipe)
        self.timeout_sec = float(timeout_sec)
        self.max_output_bytes = int(max_output_bytes)
        self.snapshot_mode = snapshot_mode
        self.episode = episode
        self.aliases = dict(aliases or {})
        self._box: EpisodeContainer | None = None
        self._sidecars: compose.Sidecars | None = None
        self._state: str | None = None
        self._image_workdir: str | None = None
        self._entrypoint: list[str] = []
        self._services = 0
        self.step: Step | None = None
        self._env = task_env.ResolvedEnv()
        self._storage_enforced = "no"
        self._secrets: dict[str, str] = {}
        self._warnings: list[str] = list(warnings or ())
        self.network_mode = resolve_mode(network_mode, task.allow_internet)  # frozen | live | none
        self.network_allow = tuple(network_allow)  # host:port the proxy may reach on the host's side
        # the episode's network behind the proxy (proxied_network.py); keep_network_spool False:
        # what it fetched is dropped at close
        self._network = ProxiedNetwork(self.network_mode, network_request, network_allow, keep_network_spool)

    @property
    def container(self) -> Any:
        """The episode's Docker container (None until started)."""
        return self._box.container if self._box is not None else None

    @property
    def workdir(self) -> str:
        """task.toml's ``environment.workdir``, else the image's WORKDIR, else ``/`` (as
        Harbor: no ``/app`` is made when the image sets no WORKDIR)."""
        table = self.task.config.get("environment")
        explicit = isinstance(table, dict) and "workdir" in table
        chosen = self.task.workdir if explicit else self._image_workdir or "/"
        return "/" + chosen.strip("/")

    def env_vars(self) -> dict[str, str]:
        env = dict(ENV_PINS)
        env.update(APP_DIR=self.workdir, TESTS_DIR=TESTS_DIR, LOGS_DIR=LOGS_DIR, PYTHONDONTWRITEBYTECODE="1")
        env.update(self._env.values)  # [environment.env]
        return env

    @property
    def network_state(self) -> str:
        """``none`` (no-network task) or ``unfrozen`` (a live network, Harbor's default;
        the frozen network, when it serves the episode, reports ``frozen``)."""
        if self._network.net is not None and self.network_mode == "frozen":
            return "frozen"
        return "unfrozen" if self.task.allow_internet and self.network_mode != "none" else "none"

    @property
    def warnings(self) -> list[str]:
        """What replaykit applied that the task did not say (aliases, swapped pins): stored with the run."""
        return list(self._warnings)

    @property
    def secrets(self) -> dict[str, str]:
        """Values of this episode's env tables that came from the host (scrubbed from outputs)."""
        return dict(self._env.secrets)

    @property
    def pids_limit(self) -> int:
        """task.toml's, else the default (``faults.py``: the task's limits)."""
        return faults.pids_limit(self.task.config)

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        """(Re)create the episode's container from the image and start it."""
        self.close()
        self._env = task_env.task_env(self.task.path, self.task.config, "environment")
        self._secrets = dict(self._env.secrets)
        self.step = None
        client = images.docker_client()
        install_cleanup()
        name = f"replaykit-{(self.episode or 'ep')[:16]}-{uuid.uuid4().hex[:8]}"
        labels = episode_labels(self.episode, self.task.id)
        spec = compose.load_compose(self.task, self._env.values)
        unhealthy = self._start_sidecars(client, spec, labels) if spec is not None else None
        with containers.live_lock:
            containers.live[name] = None
        net_env = (  # compose: its own network
            self._network.attach(client, self.episode, labels, self._warnings) if spec is None else {}
        )
        options = self._options(client, name, labels, spec.main_env if spec else {}, net_env)
        if spec is not None and self._sidecars is not None and spec.main_mounts:
            options["mounts"] = self._sidecars.mounts(compose.MAIN, spec.main_mounts)
        container, by_driver = self._start_container(client, options, spec.main_files if spec else ())
        self._box = box = EpisodeContainer(
            client,
            container,
            storage_by_driver=by_driver,
            storage_mb=self.task.storage_mb,
            memory_mb=self.task.memory_mb,
            pids_limit=self.pids_limit,
            max_output_bytes=self.max_output_bytes,
            sidecars=self._sidecars,
        )
        self._state = None
        self._storage_enforced = box.watchdog.enforced
        if unhealthy:
            box.stop(unhealthy)
            return
        if self._entrypoint:  # INIT ran as the entrypoint's arguments: what it started stays up
            self._services = len(box.adopt_services())
            if box.dead is not None:
                return
        self._network.read_hosts(container)
        unhealthy = healthcheck.wait_healthy(self, self.task)
        if unhealthy:
            box.stop(unhealthy)

    def _start_sidecars(self, client: Any, spec: compose.Compose, labels: dict[str, str]) -> str | None:
        """The task's other services, started and waited on; why one is unhealthy (None when all are)."""
        self._sidecars = compose.Sidecars(
            client,
            spec,
            compose.service_images(self.task, spec, self.aliases),
            self.task,
            self.episode,
            labels,
        )
        try:
            return self._sidecars.start()
        except Exception as exc:
            self._sidecars.close()
            self._sidecars = None
            raise EnvError(
                f"cannot start the services of task {self.task.id!r}: {images.plain(str(exc))}"
            ) from None

    def _options(
        self,
        client: Any,
        name: str,
        labels: dict[str, str],
        main_env: dict[str, str],
        net_env: dict[str, str],
    ) -> ContainerOptions:
        """The main container's options: its limits, network, environment (the compose file's main
        service, then the task's own variables, then the frozen network's) and the image's working
        directory and entrypoint, kept."""
        ncpu = containers.host_cpus(client)
        config = images.image_config(client, self.image)
        self._image_workdir = str(config.get("WorkingDir") or "") or None
        self._entrypoint = list(config.get("Entrypoint") or [])  # kept, as Harbor keeps it
        options: ContainerOptions = {
            "command": INIT,
            "name": name,
            "hostname": HOSTNAME,
            "working_dir": self.workdir,
            "environment": {**main_env, **self.env_vars(), **net_env},
            "detach": True,
            "tty": False,
            "stdin_open": True,
            "labels": labels,
            "network_mode": self._network_mode(),
            "nano_cpus": int(min(self.task.cpus, ncpu) * 1e9),
            "mem_limit": f"{self.task.memory_mb}m",
            "memswap_limit": f"{self.task.memory_mb}m",
            "pids_limit": self.pids_limit,
        }
        if self._network.net is not None:
            options["extra_hosts"] = self._network.net.extra_hosts
        return options

    def _network_mode(self) -> str:
        """The services' network, the frozen network, the default bridge (internet allowed) or none."""
        if self._sidecars:
            return str(self._sidecars.network)
        if self._network.net is not None:
            return str(self._network.net.name)
        return "default" if self.task.allow_internet and self.network_mode != "none" else "none"

    def _start_container(
        self, client: Any, options: ContainerOptions, files: tuple[FileMount, ...] = ()
    ) -> tuple[Any, bool]:
        """The main container, started (and joined to the frozen network); closed on failure."""
        try:
            container, by_driver = start_container(
                client, self.image, self.task.storage_mb, options, (TESTS_DIR, LOGS_DIR), files
            )
        except EnvError:
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise EnvError(
                f"cannot start a container of {self.image[:19]} for task {self.task.id!r}: {exc}"
            ) from None
        try:
            self._network.inject(container)
        except EnvError:
            self.close()
            raise
        return container, by_driver

    def close(self) -> None:
        """Remove the container (idempotent)."""
        box, self._box = self._box, None
        if box is not None:
            box.remove()
        sidecars, self._sidecars = self._sidecars, None
        if sidecars is not None:
            sidecars.close()
        self._network.close()

    def network_exchanges(self) -> list[ExchangeRecord]:
        """The frozen network's exchanges since the last call (their bodies in its spool)."""
        return self._network.exchanges()

    def network_misses(self) -> list[Miss]:
        """Requests a re-execution's frozen network had no recording for."""
        return self._network.misses()

    def __enter__(self) -> "DockerEnv":
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _require_started(self) -> EpisodeContainer:
        if self._box is None:
            raise EnvError(f"environment for task {self.task.id!r} is not started; call start()")
        return self._box

    # -- actions --------------------------------------------------------------------
    def _exec(
        self,
        argv: list[str],
        timeout_sec: float,
        extra_env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> Observation:
        box = self._require_started()
        self._network.check(box)  # the episode stopped once the proxy is gone
        if box.dead is None:
            self._state = None
        env = {**self._network.local_env, **(extra_env or {})}  # names its /etc/hosts keeps local
        obs = box.exec(argv, timeout_sec, cwd or self.workdir, env or None, self._secrets)
        self._network.after_action(box)  # and after the first, those names read again
        if box.dead is None and self._network.check(box):  # the proxy died during this action
            return box.dead_obs(obs.stdout, obs.stderr)
        return obs

    def run(self, command: str, timeout_sec: float | None = None) -> Observation:
        """``bash -c command`` in the workdir; exit code 124 and ``timed_out`` on timeout."""
        timeout = self.timeout_sec if timeout_sec is None else float(timeout_sec)
        if timeout <= 0:
            raise EnvError(f"timeout_sec must be > 0, got {timeout_sec!r}")
        return self._exec(["bash", "-c", command], timeout)

    def state_digest(self) -> str:
        """Digest of the container's filesystem diff and changed contents (no mtimes)."""
        box = self._require_started()
        if box.dead is not None:
            return "dead:" + box.dead  # nothing more can be read reliably from a stopped episode
        if self._state is None:
            try:
                self._state = snapshot.state_digest(box.container)
            except EnvError:
                box.stop(faults.stopped_reason(box.container) or "the container's state could not be read")
                return "dead:" + str(box.dead)
        return self._state

    def snapshot_bytes(self) -> bytes | None:
        """A full filesystem snapshot when ``env.snapshot: full``, else None."""
        if self.snapshot_mode != "full":
            return None
        return snapshot.full_snapshot(self._require_started().container, self.workdir)

    def restore_snapshot(self, data: bytes) -> None:
        """Make this fresh container's filesystem the snapshot's (``replaykit regrade``)."""
        box = self._require_started()
        deleted = snapshot.restore_full(box.container, data)
        if deleted:
            self._exec(["rm", "-rf", "--", *deleted], self.timeout_sec)
        self._state = None

    def begin_step(self, step: Step) -> None:
        """Multi-step tasks: stage ``step`` (its workdir/ files, then its setup.sh) before the agent works on it."""
        box = self._require_started()
        self.step = step
        if step.workdir_dir is None:
            return
        box.put(step.workdir_dir, self.workdir)
        if (step.workdir_dir / "setup.sh").is_file():
            self._exec(["bash", f"{self.workdir}/setup.sh"], self.task.agent_timeout_sec)

    # -- the verifier's primitives (verifier.Sandbox): it grades and runs the oracle ----
    @property
    def verifier_paths(self) -> VerifierPaths:
        return VerifierPaths(TESTS_DIR, LOGS_DIR, SOLUTION_DIR)

    def exec(
        self, argv: list[str], timeout_sec: float, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> Observation:
        return self._exec(argv, timeout_sec, env, cwd)

    def upload_dir(self, source: Path, target: str) -> None:
        try:
            self._require_started().put(source, target)
        except OSError as exc:
            raise EnvError(
                f"cannot copy {source} into the container of task {self.task.id!r}: {exc}"
            ) from None

    def download_file(self, path: str, limit: int) -> bytes | None:
        return snapshot.read_file(self._require_started().container, path, limit)

    def add_secrets(self, secrets: Mapping[str, str]) -> None:
        self._secrets.update(secrets)

    def broken(self) -> str | None:
        box = self._require_started()
        self._network.check(box)
        return box.dead

    def end_processes(self) -> None:
        box = self._require_started()
        if box.dead is None:
            box.kill_all()

    def metadata(self) -> dict[str, JSON]:
        return {
            "kind": self.kind,
            "image": self.image,  # where it ran (this engine's ID); what it is: the key's ``image``
            **({"image_key": self.image_key} if self.image_key else {}),
            "pins": dict(ENV_PINS),
            "hostname": HOSTNAME,
            "task_id": self.task.id,
            "task_digest": self.task.digest,
            "timeout_sec": self.timeout_sec,
            "max_output_bytes": self.max_output_bytes,
            "limits": {
                "cpus": self.task.cpus,
                "memory_mb": self.task.memory_mb,
                "network": self.task.allow_internet,
                "network_mode": self.network_mode,
                "network_allow": list(self.network_allow),
                "pids": self.pids_limit,
                "storage_mb": self.task.storage_mb,
                "storage_enforced": self._storage_enforced,
            },
            # a live network is an uncontrolled input: certify never calls such an episode deterministic
            "network": self.network_state,
            "warnings": list(self.warnings),
            "workdir": self.workdir,
            "entrypoint": list(self._entrypoint),
            "services": self._services,
            "env_vars": sorted(self.env_vars()),
            "snapshot": self.snapshot_mode,
        }
