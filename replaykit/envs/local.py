"""The local environment: one episode in a workspace folder on this machine.

Layout of a workspace (the caller picks its path, so paths in outputs repeat)::

    <workspace>/app/       APP_DIR: the task's workdir, starting files copied in
    <workspace>/tests/     TESTS_DIR: the task's tests/, copied in only to grade
    <workspace>/logs/      LOGS_DIR: the verifier writes logs/verifier/reward.txt
    <workspace>/home/      HOME
    <workspace>/solution/  SOLUTION_DIR: only for the oracle (``run_solution``)

Every action is ``bash -c`` in its own process group, with a minimal environment
(PATH, HOME, the determinism pins, the three dirs). What an action (or the solution)
starts in the background keeps running until the verifier has run, as in Harbor (a
server the verifier queries); the action itself ends when its own process does, never
waiting on them (``output.settle_output``). When its timeout fires, its whole group is
killed; after the verifier (``end_processes``) and at close, every group an action left is.
This is isolation for reproducibility, not a security sandbox.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from replaykit.core.determinism import ENV_PINS
from replaykit.core.errors import EnvError
from replaykit.core.files import copy_tree
from replaykit.core.records import JSON
from replaykit.envs import task_env
from replaykit.envs.base import EnvKind, EnvRequest, EnvSection, episode_workspace
from replaykit.envs.folder_snapshot import folder_tar, restore_folder
from replaykit.envs.limits import with_limits
from replaykit.envs.output import TIMEOUT_EXIT_CODE, CappedReader, settle_output
from replaykit.envs.results import Grade, Observation
from replaykit.envs.steps import Step
from replaykit.envs.tasks import Task, load_task
from replaykit.envs.verifier import Sandbox, VerifierPaths, oracle_grades

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_MARKER = ".replaykit-workspace"


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def tree_digest(root: Path) -> str:
    """sha256 of a directory tree: sorted relative paths, entry type, executable bit,
    content hash (files) or target (symlinks). Never mtimes, owners or the root's path."""
    h = hashlib.sha256()

    def walk(folder: Path, prefix: str) -> None:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            rel = prefix + entry.name
            st = entry.stat(follow_symlinks=False)
            name = os.fsencode(rel)
            if stat.S_ISLNK(st.st_mode):
                h.update(b"L\0" + name + b"\0" + os.fsencode(os.readlink(entry.path)) + b"\n")
            elif stat.S_ISDIR(st.st_mode):
                h.update(b"D\0" + name + b"\n")
                walk(Path(entry.path), rel + "/")
            elif stat.S_ISREG(st.st_mode):
                content = hashlib.sha256()
                with open(entry.path, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        content.update(block)
                mode = b"X" if st.st_mode & 0o111 else b"F"
                h.update(mode + b"\0" + name + b"\0" + content.hexdigest().encode() + b"\n")
            else:
                h.update(b"O\0" + name + b"\n")

    if root.is_dir():
        walk(root, "")
    return h.hexdigest()


class LocalEnv(Sandbox):
    """One episode of ``task`` in ``workspace`` (implements ``Environment``; graded by the
    verifier over its primitives, ``verifier.py``)."""

    kind = "local"

    def __init__(
        self,
        task: Task,
        workspace: Path,
        timeout_sec: float = 30,
        max_output_bytes: int = 65536,
        snapshot: str = "digest",
    ) -> None:
        if timeout_sec <= 0:
            raise EnvError(f"timeout_sec must be > 0, got {timeout_sec!r}")
        if max_output_bytes <= 0:
            raise EnvError(f"max_output_bytes must be > 0, got {max_output_bytes!r}")
        self.task = task
        self.workspace = Path(workspace).absolute()
        self.timeout_sec = float(timeout_sec)
        self.max_output_bytes = int(max_output_bytes)
        self.snapshot = snapshot  # full: app/ as a tar after each step (folder_snapshot.py)
        self._started = False
        self.step: Step | None = None
        self._env = task_env.ResolvedEnv()
        self._left: list[int] = []  # process groups of actions whose background processes live on

    # -- layout ---------------------------------------------------------------
    @property
    def app_dir(self) -> Path:
        return self.workspace / "app"

    @property
    def tests_dir(self) -> Path:
        return self.workspace / "tests"

    @property
    def logs_dir(self) -> Path:
        return self.workspace / "logs"

    @property
    def home_dir(self) -> Path:
        return self.workspace / "home"

    @property
    def solution_dir(self) -> Path:
        return self.workspace / "solution"

    def env_vars(self) -> dict[str, str]:
        """The complete environment every action (and the verifier) runs with."""
        env = {"PATH": os.environ.get("PATH", DEFAULT_PATH), "HOME": str(self.home_dir)}
        env.update(ENV_PINS)
        env.update(APP_DIR=str(self.app_dir), TESTS_DIR=str(self.tests_dir), LOGS_DIR=str(self.logs_dir))
        env.update(self._env.values)  # [environment.env]
        return env

    @property
    def secrets(self) -> dict[str, str]:
        """Values of this episode's env tables that came from the host (scrubbed from outputs)."""
        return dict(self._env.secrets)

    # -- lifecycle ------------------------------------------------------------
    def _remove_workspace(self) -> None:
        ws = self.workspace
        if not (ws.exists() or ws.is_symlink()):
            return
        if ws.is_symlink() or not ws.is_dir():
            raise EnvError(f"workspace {ws} exists and is not a directory; pick another path")
        if any(ws.iterdir()) and not (ws / _MARKER).exists():
            raise EnvError(
                f"workspace {ws} is a non-empty folder replaykit did not create; "
                "refusing to delete it, pick another path"
            )
        shutil.rmtree(ws)

    def start(self) -> None:
        """Recreate the workspace and copy the task's starting files into app/."""
        for name in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"):
            if (self.task.environment_dir / name).is_file():
                raise EnvError(
                    f"{self.task.environment_dir / name}: task {self.task.id!r} has several containers; "
                    "it runs only in Docker (env.kind: docker, or tasks check --env docker)"
                )
        self._env = task_env.task_env(self.task.path, self.task.config, "environment")
        self.step = None
        self.end_processes()  # a restart (the oracle's second episode) starts with none
        self._remove_workspace()
        try:
            self.workspace.mkdir(parents=True)
            (self.workspace / _MARKER).write_text("created by replaykit.envs.local\n")
            for folder in (self.tests_dir, self.logs_dir, self.home_dir):
                folder.mkdir()
            if self.task.files_dir.is_dir():
                shutil.copytree(self.task.files_dir, self.app_dir, symlinks=True)
            else:
                self.app_dir.mkdir()
        except OSError as exc:
            raise EnvError(f"cannot prepare workspace {self.workspace}: {exc}") from exc
        self._started = True
        from replaykit.envs.healthcheck import wait_healthy

        unhealthy = wait_healthy(self, self.task)
        if unhealthy:
            raise EnvError(f"task {self.task.id!r}: {unhealthy}")

    def close(self) -> None:
        """End what the actions left running; remove the workspace (idempotent)."""
        self._started = False
        self.end_processes()
        if (self.workspace / _MARKER).exists():
            # rename first (atomic), so an interrupted removal never leaves a marker-less workspace behind
            doomed = self.workspace.with_name(f".{self.workspace.name}.removing-{os.getpid()}")
            try:
                os.replace(self.workspace, doomed)
            except OSError:
                doomed = self.workspace
            shutil.rmtree(doomed, ignore_errors=True)

    def __enter__(self) -> "LocalEnv":
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _require_started(self) -> None:
        if not self._started:
            raise EnvError(f"environment for task {self.task.id!r} is not started; call start()")

    # -- actions --------------------------------------------------------------
    def _run_process(
        self,
        argv: list[str],
        timeout_sec: float,
        extra_env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> Observation:
        env = self.env_vars()
        env.update(extra_env or {})
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd or self.app_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise EnvError(f"cannot run {argv[0]!r} in {self.app_dir}: {exc}") from exc
        assert proc.stdout is not None and proc.stderr is not None
        readers = [
            CappedReader(proc.stdout, self.max_output_bytes),
            CappedReader(proc.stderr, self.max_output_bytes),
        ]
        for reader in readers:
            reader.start()
        timed_out = False
        try:
            returncode = proc.wait(timeout=timeout_sec)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            returncode = proc.wait()
        self._collect(proc.pid, readers, left=not timed_out and _group_alive(proc.pid))
        if timed_out:
            exit_code = TIMEOUT_EXIT_CODE
        elif returncode < 0:
            exit_code = 128 - returncode  # killed by a signal, as bash reports it
        else:
            exit_code = returncode
        return Observation(
            stdout=task_env.scrub(readers[0].text("stdout"), self._env.secrets),
            stderr=task_env.scrub(readers[1].text("stderr"), self._env.secrets),
            exit_code=exit_code,
            timed_out=timed_out,
        )

    def _collect(self, pgid: int, readers: list[CappedReader], left: bool) -> None:
        """The action's output: to the streams' end when nothing of it is left; else what came
        until they went quiet, its group kept (ended after the verifier: ``end_processes``)."""
        if left:
            self._left.append(pgid)
            if not settle_output([r.output for r in readers], lambda: not any(r.is_alive() for r in readers)):
                for reader in readers:
                    reader.detach()
                return
        deadline = time.monotonic() + 5
        for reader in readers:
            reader.join(timeout=max(0.0, deadline - time.monotonic()))
        for reader in readers:
            if not reader.is_alive():  # a reader still blocked keeps its fd (no reuse race)
                reader.pipe.close()

    def end_processes(self) -> None:
        """Kill what the actions and the solution left running (after the verifier has run)."""
        for pgid in self._left:
            _kill_group(pgid)
        self._left.clear()

    def run(self, command: str, timeout_sec: float | None = None) -> Observation:
        """Run ``bash -c command`` in app/; exit code 124 and ``timed_out`` on timeout."""
        self._require_started()
        timeout = self.timeout_sec if timeout_sec is None else float(timeout_sec)
        if timeout <= 0:
            raise EnvError(f"timeout_sec must be > 0, got {timeout_sec!r}")
        return self._run_process(["bash", "-c", command], timeout)

    def snapshot_bytes(self) -> bytes | None:
        """app/ as a normalised tar when ``env.snapshot: full``, else None."""
        return folder_tar(self.app_dir) if self.snapshot == "full" else None

    def restore_snapshot(self, data: bytes) -> None:
        """app/ becomes the snapshot's tree (``replaykit regrade``)."""
        self._require_started()
        restore_folder(self.app_dir, data)

    def state_digest(self) -> str:
        """sha256 of the app/ tree (paths, types, executable bits, contents; no mtimes)."""
        self._require_started()
        return tree_digest(self.app_dir)

    def begin_step(self, step: Step) -> None:
        """Multi-step tasks: stage ``step`` (its workdir/ files, then its setup.sh) before the agent works on it."""
        self._require_started()
        self.step = step
        if step.workdir_dir is None:
            return
        try:
            shutil.copytree(step.workdir_dir, self.app_dir, symlinks=True, dirs_exist_ok=True)
        except OSError as exc:
            raise EnvError(f"cannot stage step {step.name!r} of task {self.task.id!r}: {exc}") from exc
        if (step.workdir_dir / "setup.sh").is_file():
            self._run_process(["bash", str(self.app_dir / "setup.sh")], self.task.agent_timeout_sec)

    # -- the verifier's primitives (verifier.Sandbox) ---------------------------
    @property
    def verifier_paths(self) -> VerifierPaths:
        return VerifierPaths(str(self.tests_dir), str(self.logs_dir), str(self.solution_dir))

    def exec(
        self, argv: list[str], timeout_sec: float, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> Observation:
        self._require_started()
        return self._run_process(argv, timeout_sec, env, cwd)

    def upload_dir(self, source: Path, target: str) -> None:
        try:
            copy_tree(source, Path(target))  # in chunks, sparse files kept sparse
        except OSError as exc:
            raise EnvError(
                f"cannot copy {source} into the workspace of task {self.task.id!r}: {exc}"
            ) from exc

    def download_file(self, path: str, limit: int) -> bytes | None:
        try:
            if not os.path.isfile(path) or os.path.islink(path):
                return None
            with open(path, "rb") as f:
                return f.read(limit)
        except OSError:
            return None

    def add_secrets(self, secrets: Mapping[str, str]) -> None:
        self._env = task_env.ResolvedEnv(self._env.values, {**self._env.secrets, **secrets})

    def broken(self) -> str | None:
        return None

    def metadata(self) -> dict[str, JSON]:
        return {
            "kind": self.kind,
            "pins": dict(ENV_PINS),
            "task_id": self.task.id,
            "task_digest": self.task.digest,
            "timeout_sec": self.timeout_sec,
            "max_output_bytes": self.max_output_bytes,
            "env_vars": sorted(self.env_vars()),
        }


# -- the "local" environment kind (envs/registry.py) ---------------------------------------


def factory(request: EnvRequest) -> LocalEnv:
    env = request.env
    return LocalEnv(
        with_limits(load_task(Path(request.task_path)), env.limits()),
        workspace=episode_workspace(request.key.id),
        timeout_sec=env.timeout_sec,
        max_output_bytes=env.max_output_bytes,
        snapshot=env.snapshot,
    )


def oracle(task: Task, env: EnvSection) -> tuple[Grade, Grade]:
    """Grade the untouched environment, then one where solution/solve.sh ran, in a scratch
    workspace removed afterwards. A sound task gives (reward 0, reward 1)."""
    with tempfile.TemporaryDirectory(prefix="replaykit-check-") as tmp:
        return oracle_grades(LocalEnv(with_limits(task, env.limits()), Path(tmp) / "ws"))


ENV = EnvKind("local", factory, oracle=oracle)
