"""One episode's container, below the ``Environment`` protocol: ``DockerEnv``
(docker.py) puts the task's semantics (workdir, env tables, steps, grading) on top.

* :func:`start_container` creates it from the image, with a driver storage quota where
  the daemon takes ``--storage-opt size`` (remembered per client), makes the given
  folders and starts it; PID 1 is :data:`INIT`. It is registered for cleanup
  (``containers.live``) and removed again when starting fails.
* :meth:`EpisodeContainer.exec` runs one process with ``docker exec``: output capped
  as every environment caps it (``output.py``), a timeout (exit 124: that process and its
  descendants killed); what it started in the background keeps running, as in Harbor, until
  :meth:`EpisodeContainer.kill_all` (after the verifier has run) and is never waited for;
  then the fault checks of ``faults.py`` (OOM kill, storage, dead PID 1) and of the task's
  sidecars (``compose.py``).
* A fault *stops* the episode (:meth:`EpisodeContainer.stop`): the container is
  killed, the first reason is kept (``dead``), and every later action returns exit 137
  with that reason without running.
"""

from __future__ import annotations

import io
import tarfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from replaykit.core.determinism import SOURCE_DATE_EPOCH, normal_tarinfo
from replaykit.core.errors import EnvError
from replaykit.envs import task_env
from replaykit.envs.docker import compose, containers, faults, services
from replaykit.envs.docker.compose_top import FileMount
from replaykit.envs.docker.containers import remove_container
from replaykit.envs.output import TIMEOUT_EXIT_CODE, CappedOutput, settle_output
from replaykit.envs.results import Observation

# PID 1: bash blocked reading the container's open (never written) stdin: it has no
# child of its own, reaps orphans, and `kill -KILL -1` spares it; so after every step the
# container holds exactly one process, whatever the timing.
INIT = ["bash", "-c", "trap 'exit 0' TERM; while :; do read -r _ || sleep 1; done"]
_POLL_SEC = 0.02
_UNANSWERED_POLLS = 150  # the engine did not answer about a process for ~3 s: the episode stops
_IDLE_PROCS = 1  # PID 1 alone
_SETTLE_QUIET_SEC = 0.25  # what the engine still forwards after a process ended arrives within it
_storage_opt_supported: dict[int, bool] = {}  # per client: does the daemon take --storage-opt size?


def _tar_of(folder: Path, arcname: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(folder), arcname=arcname, filter=normal_tarinfo)
    return buf.getvalue()


def _dirs_tar(*names: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in names:
            info = tarfile.TarInfo(name.strip("/"))
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, SOURCE_DATE_EPOCH
            tar.addfile(info)
    return buf.getvalue()


class ContainerOptions(TypedDict):
    """What an episode's container is created with (keywords of docker's ``containers.create``)."""

    name: str
    command: list[str]
    hostname: str
    working_dir: str
    environment: dict[str, str]
    detach: bool
    tty: bool
    stdin_open: bool
    labels: dict[str, str]
    network_mode: str
    extra_hosts: NotRequired[dict[str, str]]  # the frozen network's proxy host
    nano_cpus: int
    mem_limit: str
    memswap_limit: str
    pids_limit: int
    mounts: NotRequired[list[Any]]  # a compose task's volumes of the service main


def _create(client: Any, image: str, storage_mb: int, options: ContainerOptions) -> tuple[Any, bool]:
    """Create the container, with a driver storage quota where the daemon supports one."""
    import docker.errors

    if _storage_opt_supported.get(id(client)) is not False:
        try:
            made = client.containers.create(image, storage_opt={"size": f"{storage_mb}M"}, **options)
            _storage_opt_supported[id(client)] = True
            return made, True
        except docker.errors.APIError as exc:
            if "storage-opt" not in str(exc).lower() and "storage opt" not in str(exc).lower():
                raise
            _storage_opt_supported[id(client)] = False
    return client.containers.create(image, **options), False


def start_container(
    client: Any,
    image: str,
    storage_mb: int,
    options: ContainerOptions,
    folders: tuple[str, ...],
    files: tuple[FileMount, ...] = (),
) -> tuple[Any, bool]:
    """Create (``options["name"]``) and start a container of ``image`` with ``folders`` made (and a
    compose task's secrets and configs written); returns it and whether the storage driver enforces
    ``storage_mb``. Removed on failure."""
    name = options["name"]
    try:
        container, by_driver = _create(client, image, storage_mb, options)
        with containers.live_lock:
            containers.live[name] = container
        container.put_archive("/", _dirs_tar(*folders))
        compose.put_files(client.api, container.id, files)
        container.start()
    except Exception:
        remove_container(name)
        raise
    return container, by_driver


class EpisodeContainer:
    """A started container of one episode: runs its processes, stops it on a fault."""

    def __init__(
        self,
        client: Any,
        container: Any,
        *,
        storage_by_driver: bool,
        storage_mb: int,
        memory_mb: int,
        pids_limit: int,
        max_output_bytes: int,
        sidecars: compose.Sidecars | None,
    ) -> None:
        self.client = client
        self.container = container
        self.memory_mb = memory_mb
        self.pids_limit = pids_limit
        self.max_output_bytes = max_output_bytes
        self.sidecars = sidecars
        self.dead: str | None = None  # why the episode cannot go on (see faults.py)
        self.procs = containers.cgroup_procs(container)
        self.watchdog = faults.Watchdog(container, storage_mb, storage_by_driver)
        self.services: set[int] = set()  # the image's ENTRYPOINT processes (container PIDs), spared

    def adopt_services(self) -> set[int]:
        """Once the image's ENTRYPOINT has settled, the processes it left running are
        services: kept across steps (``services.py``). Returns their container PIDs."""

        def listing() -> set[int] | None:
            obs = self.exec(["bash", "-c", services.LIST_SCRIPT], 10, "/", None, {})
            return None if self.dead is not None or obs.exit_code != 0 else services.parse_listing(obs.stdout)

        self.services = services.settle(listing)
        return set(self.services)

    def dead_obs(self, out: str = "", err: str = "") -> Observation:
        assert self.dead is not None
        return Observation(
            stdout=out, stderr=err + faults.dead_marker(self.dead), exit_code=faults.DEAD_EXIT_CODE
        )

    def stop(self, reason: str) -> None:
        """The episode cannot go on: remember why (once) and stop every process."""
        if self.dead is None:
            self.dead = reason
        try:
            self.client.api.kill(self.container.id)
        except Exception:
            pass

    def remove(self) -> None:
        remove_container(self.container.name)

    def put(self, folder: Path, target: str) -> None:
        """Copy ``folder`` into the container as ``target``."""
        if not self.container.put_archive("/", _tar_of(folder, target.strip("/"))):
            raise EnvError(f"cannot copy {folder} into container {self.container.name}:{target}")

    def exec(
        self,
        argv: list[str],
        timeout_sec: float,
        workdir: str,
        extra_env: dict[str, str] | None,
        secrets: Mapping[str, str],
    ) -> Observation:
        """Run ``argv`` in ``workdir`` (outputs scrubbed of ``secrets``); exit 124 on timeout,
        the process and its descendants killed. What it leaves in the background runs on
        (:meth:`kill_all` ends it) and is not waited for (``output.settle_output``)."""
        started = None if self.dead is not None else self._start(argv, workdir, extra_env)
        if started is None:
            return self.dead_obs()
        exec_id, sock = started
        out, err = CappedOutput(self.max_output_bytes), CappedOutput(self.max_output_bytes)
        reader = threading.Thread(target=_drain, args=(sock, out, err), daemon=True)
        reader.start()
        timed_out = self._wait(exec_id, argv[0], time.monotonic() + timeout_sec, reader)
        if self.dead is None and timed_out:
            self.kill_tree(exec_id)
        if not settle_output([out, err], lambda: not reader.is_alive(), quiet_sec=_SETTLE_QUIET_SEC):
            out.freeze()  # a background process holds the stream: read on, dropping, until it ends
            err.freeze()
        self._check_after()
        stdout, stderr = (
            task_env.scrub(out.text("stdout"), secrets),
            task_env.scrub(err.text("stderr"), secrets),
        )
        if self.dead is not None:
            return self.dead_obs(stdout, stderr)
        exit_code = TIMEOUT_EXIT_CODE if timed_out else self._exit_code(exec_id)
        if exit_code is None:
            self.stop(f"the {argv[0]} process never finished")
            return self.dead_obs()
        return Observation(stdout=stdout, stderr=stderr, exit_code=exit_code, timed_out=timed_out)

    def _start(
        self, argv: list[str], workdir: str, extra_env: dict[str, str] | None
    ) -> tuple[str, Any] | None:
        """A new process for ``argv`` and its output socket; None (the episode stopped) when the
        container takes no new process."""
        api = self.client.api
        try:
            exec_id = api.exec_create(
                self.container.id,
                argv,
                stdout=True,
                stderr=True,
                stdin=False,
                tty=False,
                workdir=workdir,
                environment=extra_env or None,
            )["Id"]
            sock = api.exec_start(exec_id, socket=True)
            getattr(sock, "_sock", sock).settimeout(None)  # a silent action may run for minutes
        except Exception:
            self.stop(faults.stopped_reason(self.container) or "no new process could start in the container")
            return None
        return str(exec_id), sock

    def _wait(self, exec_id: str, program: str, deadline: float, reader: threading.Thread) -> bool:
        """Poll the process until it ends, the episode stops (storage over its limit, the engine
        silent) or ``deadline`` passes; True when it timed out."""
        unanswered = 0  # polls in a row the engine did not answer: never read as "it finished"
        while True:
            reader.join(_POLL_SEC)
            try:
                running = self.client.api.exec_inspect(exec_id).get("Running")
                unanswered = 0
            except Exception as exc:
                unanswered += 1
                if unanswered < _UNANSWERED_POLLS:
                    continue
                self.stop(f"the Docker engine stopped answering about the {program} process: {exc}")
                return False
            if not running:
                return False  # done (a background child may still hold the stream open)
            over = self.watchdog.storage_exceeded()
            if over:
                self.stop(over)
                return False
            if time.monotonic() >= deadline:
                return True
            if not reader.is_alive():
                time.sleep(0.1)  # stream closed early but still running: keep polling

    def _check_after(self) -> None:
        """After an action: stop the episode when it ran out of memory or storage, the container
        stopped, or a service the task needs died during it (the first of these that holds)."""
        if self.dead is not None:
            return
        watchdog = self.watchdog
        reason = (
            watchdog.oom_killed(self.memory_mb)
            or watchdog.storage_exceeded(force=True)
            or faults.stopped_reason(self.container)
            or (self.sidecars.exited() if self.sidecars is not None else None)
        )
        if reason:
            self.stop(reason)

    def _exit_code(self, exec_id: str) -> int | None:
        """The finished process's exit code; None when the engine never says it finished."""
        for _ in range(250):
            try:
                info = self.client.api.exec_inspect(exec_id)
            except Exception:  # asked again; never answered: the process never finished
                info = {"Running": True}
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            time.sleep(_POLL_SEC)
        return None

    def kill_tree(self, exec_id: str) -> None:
        """Kill a timed-out process and its descendants (what it daemonised, reparented to PID 1,
        runs on like any background process); everything but PID 1 when its tree is unknown."""
        try:
            root = int(self.client.api.exec_inspect(exec_id).get("Pid") or 0)
        except Exception:
            root = 0
        if not root or self.procs is None:
            self.kill_all()
            return

        def spare(pids: list[int]) -> set[int]:
            return set(pids) - services.descendants(pids, root)

        if faults.kill_leftovers(self.client, self.container, self.procs, spare=spare):
            self.stop(f"a timed-out process could not be stopped (pids limit {self.pids_limit} reached?)")

    def kill_all(self) -> None:
        """Kill every process of the container but PID 1, the services and what an action started
        with ``REPLAYKIT_KEEP=1`` (``services.py``): once the verifier has run, as Harbor keeps them
        until then; when that is impossible (no room for a new process: a fork bomb at the pids
        limit), stop the episode."""
        if self.procs is not None and not self.services:
            try:
                if len(self.procs.read_text().split()) <= _IDLE_PROCS:
                    return  # only PID 1: nothing to kill (saves an exec)
            except OSError:
                pass
        argv, env = services.kill_argv(self.services)
        try:
            api = self.client.api
            exec_id = api.exec_create(
                self.container.id, argv, stdout=False, stderr=False, workdir="/", environment=env or None
            )["Id"]
            api.exec_start(exec_id)
        except Exception:
            pass

        def spare(pids: list[int]) -> set[int]:
            return services.spared_host_pids(pids, self.services)

        if self.procs is None or not faults.kill_leftovers(
            self.client, self.container, self.procs, spare=spare
        ):
            return
        self.stop(
            faults.stopped_reason(self.container)
            or f"the processes left by the action could not be stopped (pids limit {self.pids_limit} reached?)"
        )


def _drain(sock: Any, out: CappedOutput, err: CappedOutput) -> None:
    """Read an exec's multiplexed stream into ``out`` and ``err`` until it closes, then close it."""
    from docker.utils.socket import frames_iter

    try:
        for stream_id, data in frames_iter(sock, tty=False):
            (err if stream_id == 2 else out).add(data)
    except Exception:
        pass
    try:
        sock.close()
    except Exception:
        pass
