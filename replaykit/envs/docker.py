"""The Docker environment: one container per episode, removed whatever happens.

``DockerEnv`` implements the ``Environment`` protocol like ``LocalEnv`` does, with the
same observations, timeouts, output caps and grading semantics, inside a container
of the task's image (``images.ensure_task_image``):

* limits from task.toml: ``cpus`` → ``nano_cpus`` (capped at the host's cores),
  ``memory_mb`` → ``mem_limit``, ``workdir``; no network unless ``allow_internet``;
* pins: hostname ``replaykit``, ``determinism.ENV_PINS``, ``APP_DIR`` (the workdir,
  ``/app`` by default), ``TESTS_DIR=/tests``, ``LOGS_DIR=/logs``,
  ``PYTHONDONTWRITEBYTECODE=1`` (a .pyc embeds source mtimes);
* every action is ``bash -c`` through ``docker exec``; when it ends (or its timeout
  fires: exit 124, ``timed_out``) every process but PID 1 is killed, so nothing
  outlives a step, as locally;
* the state digest after a step is ``snapshot.state_digest`` (filesystem diff +
  content hashes); with ``env.snapshot: full`` ``snapshot_bytes()`` returns a
  normalised tar that the rollout stores as a blob.

Containers carry the label ``replaykit=1`` plus the episode and the owning process
(``replaykit.owner = host:pid:start-time``). They are removed on close, at exit
(atexit), on SIGTERM/SIGHUP (turned into ``SystemExit`` so ``finally`` blocks run),
and containers whose owner process is gone are removed when the next one starts
(``containers.py``).
"""

from __future__ import annotations

import io
import tarfile
import tempfile
import threading
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

from replaykit.determinism import ENV_PINS, HOSTNAME, SOURCE_DATE_EPOCH, normal_tarinfo
from replaykit.envs import compose, containers, faults, healthcheck, images, snapshot, task_env
from replaykit.envs.containers import (  # noqa: F401  (re-exported for callers and tests)
    EPISODE_LABEL,
    LABEL,
    OWNER_LABEL,
    cleanup_all,
    install_cleanup,
    owner_id,
    remove_container,
    remove_stale_containers,
)
from replaykit.envs.base import EnvKind, EnvRequest, Grade, Observation
from replaykit.envs.grading import oracle_grades, verifier_grade, verifier_vars
from replaykit.envs.output import TIMEOUT_EXIT_CODE, CappedOutput
from replaykit.envs.steps import Step
from replaykit.envs.tasks import Task, load_task
from replaykit.errors import EnvError, TaskError

TESTS_DIR = "/tests"
LOGS_DIR = "/logs"
SOLUTION_DIR = "/solution"
# PID 1: bash blocked reading the container's open (never written) stdin: it has no
# child of its own, reaps orphans, and `kill -KILL -1` spares it; so after every step the
# container holds exactly one process, whatever the timing.
_INIT = ["bash", "-c", "trap 'exit 0' TERM; while :; do read -r _ || sleep 1; done"]
_KILL_ALL = ["bash", "-c", "kill -KILL -1 2>/dev/null; exit 0"]
_POLL_SEC = 0.02
_IDLE_PROCS = 1  # PID 1 alone
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


class DockerEnv:
    """One episode of ``task`` in a container of ``image`` (implements ``Environment``)."""

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
    ) -> None:
        if timeout_sec <= 0:
            raise EnvError(f"timeout_sec must be > 0, got {timeout_sec!r}")
        if max_output_bytes <= 0:
            raise EnvError(f"max_output_bytes must be > 0, got {max_output_bytes!r}")
        self.task = task
        self.image = image
        self.timeout_sec = float(timeout_sec)
        self.max_output_bytes = int(max_output_bytes)
        self.snapshot_mode = snapshot_mode
        self.episode = episode
        self.aliases = dict(aliases or {})
        self.container: Any = None
        self._sidecars: compose.Sidecars | None = None
        self._state: str | None = None
        self._client: Any = None
        self._procs: Path | None = None
        self._image_workdir: str | None = None
        self.step: Step | None = None
        self._env = task_env.ResolvedEnv()
        self._dead: str | None = None  # why the episode cannot go on (see faults.py)
        self._watchdog: faults.Watchdog | None = None
        self._storage_by_driver = False
        self._secrets: dict[str, str] = {}

    @property
    def workdir(self) -> str:
        """task.toml's ``environment.workdir``, else the image's WORKDIR, else ``/app``."""
        table = self.task.config.get("environment")
        explicit = isinstance(table, dict) and "workdir" in table
        chosen = self.task.workdir if explicit or not self._image_workdir else self._image_workdir
        return "/" + chosen.strip("/")

    def env_vars(self) -> dict[str, str]:
        env = dict(ENV_PINS)
        env.update(APP_DIR=self.workdir, TESTS_DIR=TESTS_DIR, LOGS_DIR=LOGS_DIR, PYTHONDONTWRITEBYTECODE="1")
        env.update(self._env.values)  # [environment.env]
        return env

    @property
    def secrets(self) -> dict[str, str]:
        """Values of this episode's env tables that came from the host (scrubbed from outputs)."""
        return dict(self._env.secrets)

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        """(Re)create the episode's container from the image and start it."""
        self.close()
        self._env = task_env.task_env(self.task.path, self.task.config, "environment")
        self._secrets = dict(self._env.secrets)
        self.step = None
        self._client = images.docker_client()
        install_cleanup()
        name = f"replaykit-{(self.episode or 'ep')[:16]}-{uuid.uuid4().hex[:8]}"
        labels = {
            LABEL: "1",
            OWNER_LABEL: owner_id(),
            EPISODE_LABEL: self.episode or "-",
            "replaykit.task": self.task.id,
        }
        spec = compose.load_compose(self.task, self._env.values)
        unhealthy: str | None = None
        if spec is not None:
            self._sidecars = compose.Sidecars(
                self._client,
                spec,
                compose.service_images(self.task, spec, self.aliases),
                self.task,
                self.episode,
                labels,
            )
            try:
                unhealthy = self._sidecars.start()
            except Exception as exc:
                self._sidecars.close()
                self._sidecars = None
                raise EnvError(
                    f"cannot start the services of task {self.task.id!r}: {images.plain(str(exc))}"
                ) from None
        with containers.live_lock:
            containers.live[name] = None
        ncpu = containers.host_cpus(self._client)
        self._image_workdir = images.image_workdir(self._client, self.image)
        options: dict[str, Any] = {
            "command": _INIT,
            "name": name,
            "hostname": HOSTNAME,
            "working_dir": self.workdir,
            "environment": {**(spec.main_env if spec else {}), **self.env_vars()},
            "detach": True,
            "tty": False,
            "stdin_open": True,
            "labels": labels,
            "network_mode": self._sidecars.network
            if self._sidecars
            else "default"
            if self.task.allow_internet
            else "none",
            "nano_cpus": int(min(self.task.cpus, ncpu) * 1e9),
            "mem_limit": f"{self.task.memory_mb}m",
            "memswap_limit": f"{self.task.memory_mb}m",
            "pids_limit": self.pids_limit,
        }
        try:
            container, self._storage_by_driver = self._create(options)
            with containers.live_lock:
                containers.live[name] = container
            container.put_archive("/", _dirs_tar(TESTS_DIR, LOGS_DIR))
            container.start()
        except EnvError:
            remove_container(name)
            self.close()
            raise
        except Exception as exc:
            remove_container(name)
            self.close()
            raise EnvError(
                f"cannot start a container of {self.image[:19]} for task {self.task.id!r}: {exc}"
            ) from None
        self.container = container
        self._state = None
        self._dead = None
        self._procs = containers.cgroup_procs(container)
        self._watchdog = faults.Watchdog(container, self.task.storage_mb, self._storage_by_driver)
        if unhealthy:
            self._stop(unhealthy)
            return
        unhealthy = healthcheck.wait_healthy(self, self.task)
        if unhealthy:
            self._stop(unhealthy)

    @property
    def pids_limit(self) -> int:
        table = self.task.config.get("environment")
        value = table.get("pids_limit") if isinstance(table, dict) else None
        return (
            int(value)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0
            else faults.DEFAULT_PIDS_LIMIT
        )

    def _create(self, options: dict[str, Any]) -> tuple[Any, bool]:
        """Create the container, with a driver storage quota where the daemon supports one."""
        import docker.errors

        if _storage_opt_supported.get(id(self._client)) is not False:
            try:
                made = self._client.containers.create(
                    self.image, storage_opt={"size": f"{self.task.storage_mb}M"}, **options
                )
                _storage_opt_supported[id(self._client)] = True
                return made, True
            except docker.errors.APIError as exc:
                if "storage-opt" not in str(exc).lower() and "storage opt" not in str(exc).lower():
                    raise
                _storage_opt_supported[id(self._client)] = False
        return self._client.containers.create(self.image, **options), False

    def close(self) -> None:
        """Remove the container (idempotent)."""
        container, self.container = self.container, None
        if container is not None:
            remove_container(container.name)
        sidecars, self._sidecars = self._sidecars, None
        if sidecars is not None:
            sidecars.close()

    def __enter__(self) -> "DockerEnv":
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _require_started(self) -> Any:
        if self.container is None:
            raise EnvError(f"environment for task {self.task.id!r} is not started; call start()")
        return self.container

    # -- actions --------------------------------------------------------------------
    def _dead_obs(self, out: str = "", err: str = "") -> Observation:
        assert self._dead is not None
        return Observation(
            stdout=out, stderr=err + faults.dead_marker(self._dead), exit_code=faults.DEAD_EXIT_CODE
        )

    def _stop(self, reason: str) -> None:
        """The episode cannot go on: remember why (once) and stop every process."""
        if self._dead is None:
            self._dead = reason
        try:
            self._client.api.kill(self.container.id)
        except Exception:
            pass

    def _exec(
        self,
        argv: list[str],
        timeout_sec: float,
        extra_env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> Observation:
        container = self._require_started()
        if self._dead is not None:
            return self._dead_obs()
        api = self._client.api
        self._state = None
        try:
            exec_id = api.exec_create(
                container.id,
                argv,
                stdout=True,
                stderr=True,
                stdin=False,
                tty=False,
                workdir=cwd or self.workdir,
                environment=extra_env or None,
            )["Id"]
            sock = api.exec_start(exec_id, socket=True)
            getattr(sock, "_sock", sock).settimeout(None)  # a silent action may run for minutes
        except Exception:
            self._stop(faults.stopped_reason(container) or "no new process could start in the container")
            return self._dead_obs()
        out, err = CappedOutput(self.max_output_bytes), CappedOutput(self.max_output_bytes)

        def drain() -> None:
            from docker.utils.socket import frames_iter

            try:
                for stream_id, data in frames_iter(sock, tty=False):
                    (err if stream_id == 2 else out).add(data)
            except Exception:
                pass

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout_sec
        timed_out = False
        watchdog = self._watchdog
        while True:
            reader.join(_POLL_SEC)
            try:
                running = api.exec_inspect(exec_id).get("Running")
            except Exception:
                running = False
            if not running:
                break  # done (a background child may still hold the stream open)
            over = watchdog.storage_exceeded() if watchdog else None
            if over:
                self._stop(over)
                break
            if time.monotonic() >= deadline:
                timed_out = True
                break
            if not reader.is_alive():
                time.sleep(0.1)  # stream closed early but still running: keep polling
        if self._dead is None:
            self._kill_all()
        reader.join(5)
        try:
            sock.close()
        except Exception:
            pass
        if self._dead is None and watchdog is not None:
            reason = watchdog.oom_killed(self.task.memory_mb) or watchdog.storage_exceeded(force=True)
            if reason:
                self._stop(reason)
        if self._dead is None:
            reason = faults.stopped_reason(container)
            if reason:
                self._stop(reason)
        if self._dead is None and self._sidecars is not None:
            reason = self._sidecars.exited()  # a service the task needs died during the action
            if reason:
                self._stop(reason)
        if self._dead is not None:
            return self._dead_obs(
                task_env.scrub(out.text("stdout"), self._secrets),
                task_env.scrub(err.text("stderr"), self._secrets),
            )
        exit_code = None
        for _ in range(250):
            info = api.exec_inspect(exec_id)
            if not info.get("Running") and info.get("ExitCode") is not None:
                exit_code = int(info["ExitCode"])
                break
            time.sleep(_POLL_SEC)
        if timed_out:
            exit_code = TIMEOUT_EXIT_CODE
        elif exit_code is None:
            self._stop(f"the {argv[0]} process never finished")
            return self._dead_obs()
        return Observation(
            stdout=task_env.scrub(out.text("stdout"), self._secrets),
            stderr=task_env.scrub(err.text("stderr"), self._secrets),
            exit_code=exit_code,
            timed_out=timed_out,
        )

    def _kill_all(self) -> None:
        """Kill every process of the container but PID 1 (nothing outlives a step); when that
        is impossible (no room for a new process: a fork bomb at the pids limit), stop the episode."""
        if self._procs is not None:
            try:
                if len(self._procs.read_text().split()) <= _IDLE_PROCS:
                    return  # only PID 1: nothing to kill (saves an exec)
            except OSError:
                pass
        try:
            api = self._client.api
            exec_id = api.exec_create(self.container.id, _KILL_ALL, stdout=False, stderr=False, workdir="/")[
                "Id"
            ]
            api.exec_start(exec_id)
        except Exception:
            pass
        if self._procs is None or not faults.kill_leftovers(self._client, self.container, self._procs):
            return
        self._stop(
            faults.stopped_reason(self.container)
            or f"the processes left by the action could not be stopped (pids limit {self.pids_limit} reached?)"
        )

    def run(self, command: str, timeout_sec: float | None = None) -> Observation:
        """``bash -c command`` in the workdir; exit code 124 and ``timed_out`` on timeout."""
        timeout = self.timeout_sec if timeout_sec is None else float(timeout_sec)
        if timeout <= 0:
            raise EnvError(f"timeout_sec must be > 0, got {timeout_sec!r}")
        return self._exec(["bash", "-c", command], timeout)

    def state_digest(self) -> str:
        """Digest of the container's filesystem diff and changed contents (no mtimes)."""
        container = self._require_started()
        if self._dead is not None:
            return "dead:" + self._dead  # nothing more can be read reliably from a stopped episode
        if self._state is None:
            try:
                self._state = snapshot.state_digest(container)
            except EnvError:
                self._stop(faults.stopped_reason(container) or "the container's state could not be read")
                return "dead:" + str(self._dead)
        return self._state

    def snapshot_bytes(self) -> bytes | None:
        """A full filesystem snapshot when ``env.snapshot: full``, else None."""
        if self.snapshot_mode != "full":
            return None
        return snapshot.full_snapshot(self._require_started(), self.workdir)

    def _put(self, folder: Path, target: str) -> None:
        container = self._require_started()
        if not container.put_archive("/", _tar_of(folder, target.strip("/"))):
            raise EnvError(f"cannot copy {folder} into container {container.name}:{target}")

    def begin_step(self, step: Step) -> None:
        """Multi-step tasks: stage ``step`` (its workdir/ files, then its setup.sh) before the agent works on it."""
        self._require_started()
        self.step = step
        if step.workdir_dir is None:
            return
        self._put(step.workdir_dir, self.workdir)
        if (step.workdir_dir / "setup.sh").is_file():
            self._exec(["bash", f"{self.workdir}/setup.sh"], self.task.agent_timeout_sec)

    def run_solution(self) -> Observation:
        """Oracle: copy solution/ (or the current step's) to /solution and run
        ``bash /solution/solve.sh`` in the workdir with ``[solution.env]``."""
        env = task_env.task_env(self.task.path, self.task.config, "solution")
        source, timeout = self.task.solution_dir, self.task.agent_timeout_sec
        if self.step is not None:
            if self.step.solution_dir is None:
                raise TaskError(
                    f"{self.step.dir / 'solution' / 'solve.sh'}: missing; step {self.step.name!r} has no oracle"
                )
            source, timeout = self.step.solution_dir, self.step.agent_timeout_sec or timeout
            env = env.merged(
                task_env.resolve(
                    self.step.solution_env, f"{self.task.path / 'task.toml'} [steps.solution.env]"
                )
            )
        elif not (source / "solve.sh").is_file():
            raise TaskError(f"{self.task.solution_dir / 'solve.sh'}: missing; the task has no oracle")
        self._exec(["bash", "-c", f"rm -rf {SOLUTION_DIR}"], 60, cwd="/")
        self._put(source, SOLUTION_DIR)
        self._secrets.update(env.secrets)
        return self._exec(
            ["bash", f"{SOLUTION_DIR}/solve.sh"], timeout, {**env.values, "SOLUTION_DIR": SOLUTION_DIR}
        )

    def grade(self) -> Grade:
        """Copy tests/ to /tests fresh, clear /logs/verifier, run ``bash /tests/test.sh``,
        read the reward it wrote (same semantics as ``LocalEnv.grade``)."""
        container = self._require_started()
        if self._dead is not None:
            return Grade(0.0, False, infra_failure=True, detail=f"infrastructure failure: {self._dead}")
        prep = self._exec(
            ["bash", "-c", f"rm -rf {TESTS_DIR} {LOGS_DIR}/verifier && mkdir -p {LOGS_DIR}/verifier"],
            60,
            cwd="/",
        )
        if self._dead is not None:
            return Grade(0.0, False, infra_failure=True, detail=f"infrastructure failure: {self._dead}")
        if prep.exit_code != 0:
            said = (prep.stderr or prep.stdout).strip().splitlines()
            why = said[-1][:200] if said else f"exit {prep.exit_code}"
            return Grade(
                0.0,
                False,
                infra_failure=True,
                detail=f"infrastructure failure: cannot prepare the verifier: {why}",
            )
        verifier_env = verifier_vars(self.task, self.step)
        tests, timeout = (
            (self.step.tests_dir, self.step.verifier_timeout_sec)
            if self.step
            else (self.task.tests_dir, None)
        )
        timeout = timeout or self.task.verifier_timeout_sec
        try:
            self._put(tests, TESTS_DIR)
        except OSError as exc:
            raise EnvError(f"cannot copy the tests of task {self.task.id!r}: {exc}") from None
        self._secrets.update(verifier_env.secrets)
        obs = self._exec(["bash", f"{TESTS_DIR}/test.sh"], timeout, verifier_env.values)
        with tempfile.TemporaryDirectory(prefix="replaykit-reward-") as tmp:
            for name in ("reward.txt", "reward.json"):
                data = snapshot.read_file(container, f"{LOGS_DIR}/verifier/{name}")
                if data is not None:
                    (Path(tmp) / name).write_bytes(data)
            if self._dead is not None:
                return Grade(
                    0.0,
                    False,
                    infra_failure=True,
                    detail=f"infrastructure failure while verifying: {self._dead}",
                )
            return verifier_grade(obs, Path(tmp), timeout)

    def metadata(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "image": self.image,
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
                "pids": self.pids_limit,
                "storage_mb": self.task.storage_mb,
                "storage_enforced": self._watchdog.enforced if self._watchdog else "no",
            },
            "workdir": self.workdir,
            "env_vars": sorted(self.env_vars()),
            "snapshot": self.snapshot_mode,
        }


# -- the "docker" environment kind (envs/registry.py) --------------------------------------


def key_extra(env: dict[str, Any], task: Task) -> tuple[tuple[str, str], ...]:
    """Build or reuse the task image; its ID enters the cassette key."""
    aliases = env.get("image_aliases") or {}
    image = images.ensure_task_image(task, aliases)
    extra: tuple[tuple[str, str], ...] = (("image", image.id),)
    spec = compose.load_compose(task, task_env.task_env(task.path, task.config, "environment").values)
    if spec is not None:  # sidecar images enter the key too (only for multi-container tasks)
        services = compose.service_images(task, spec, aliases)
        extra += (("services", ",".join(f"{k}={v}" for k, v in sorted(services.items()))),)
    return extra


def factory(spec: EnvRequest) -> DockerEnv:
    task = load_task(Path(spec.task_path))
    image = dict(spec.key.extra).get("image")
    if image:
        if images.image_exists(images.docker_client(), image) is None:
            raise EnvError(
                f"the recorded image {image[:19]} of task {task.id!r} no longer exists; re-record the run"
            )
    else:
        image = images.ensure_task_image(task, spec.env.get("image_aliases") or {}).id
    return DockerEnv(
        task,
        image,
        timeout_sec=float(spec.env.get("timeout_sec", 30)),
        max_output_bytes=int(spec.env.get("max_output_bytes", 65536)),
        snapshot_mode=str(spec.env.get("snapshot", "digest")),
        episode=spec.key.id,
        aliases=spec.env.get("image_aliases") or {},
    )


def oracle(task: Task, env: dict[str, Any]) -> tuple[Grade, Grade]:
    """Grade an untouched container, then a fresh one where solution/solve.sh ran."""
    aliases = env.get("image_aliases") or {}
    image = images.ensure_task_image(task, aliases)
    return oracle_grades(DockerEnv(task, image.id, episode=f"oracle-{task.id}", aliases=aliases))


ENV = EnvKind("docker", factory, key_extra, oracle, uses_docker=True)
