"""An example third-party replaykit extension: an env kind (with its own settings, graded
by replaykit's verifier over the primitives it implements), an executor kind, a criterion,
an optimizer, a backend."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import replaykit
from replaykit.agents.base import NamedAgent, Requirement
from replaykit.core.run_doc import RunDoc
from replaykit.envs.base import EnvKind, EnvRequest, EnvSection, EnvSettings, NodeNeeds
from replaykit.envs.results import Observation
from replaykit.envs.tasks import Task, load_task
from replaykit.envs.verifier import Sandbox, VerifierPaths
from replaykit.execution.settings import ExecutorKind, ExecutorSettings
from replaykit.models.session import ProposalSession
from replaykit.train.optim.base import ParameterBound, StepInput
from replaykit.train.verdicts import Verdict, outcomes


class ExampleSettings(EnvSettings):
    """The kind's own ``env`` keys: ``env: {kind: example, socket: …}``."""

    socket: str = "/run/example.sock"  # where a real plugin would reach its sandbox daemon


class ExampleEnv(Sandbox):
    """A sandbox of its own (a folder; a real plugin would run somewhere else) that implements
    the environment protocol and the verifier's primitives only: its grading and its oracle
    check are replaykit's verifier (``replaykit.envs.verifier``), nothing here."""

    kind = "example"

    def __init__(
        self, task: Task, root: Path, socket: str, timeout_sec: float, max_output_bytes: int
    ) -> None:
        self.task, self.root, self.socket = task, root, socket
        self.timeout_sec, self.max_output_bytes = timeout_sec, max_output_bytes
        self.step: Any = None  # multi-step tasks are not run by this kind
        self._secrets: dict[str, str] = {}

    # the environment protocol
    def start(self) -> None:
        self.close()
        if self.task.files_dir.is_dir():
            shutil.copytree(self.task.files_dir, self.root / "app")
        for name in ("app", "tests", "logs", "solution"):
            (self.root / name).mkdir(parents=True, exist_ok=True)

    def run(self, command: str, timeout_sec: float | None = None) -> Observation:
        return self.exec(["bash", "-c", command], timeout_sec or self.timeout_sec)

    def state_digest(self) -> str:
        app = self.root / "app"
        files = sorted(p for p in app.rglob("*") if p.is_file())
        return hashlib.sha256(
            b"".join(str(p.relative_to(app)).encode() + p.read_bytes() for p in files)
        ).hexdigest()

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def metadata(self) -> dict[str, Any]:
        return {"kind": self.kind, "socket": self.socket, "task_id": self.task.id}

    # the verifier's primitives
    @property
    def verifier_paths(self) -> VerifierPaths:
        return VerifierPaths(str(self.root / "tests"), str(self.root / "logs"), str(self.root / "solution"))

    @property
    def secrets(self) -> dict[str, str]:
        return dict(self._secrets)

    def exec(
        self, argv: list[str], timeout_sec: float, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> Observation:
        paths = self.verifier_paths
        variables = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.root),
            "APP_DIR": str(self.root / "app"),
        }
        variables.update(TESTS_DIR=paths.tests, LOGS_DIR=paths.logs, **(env or {}))
        try:
            done = subprocess.run(
                argv, cwd=cwd or self.root / "app", env=variables, capture_output=True, timeout=timeout_sec
            )
        except subprocess.TimeoutExpired:
            return Observation("", "", 124, timed_out=True)
        out, err = (b.decode("utf-8", "replace")[: self.max_output_bytes] for b in (done.stdout, done.stderr))
        return Observation(self._scrub(out), self._scrub(err), done.returncode)

    def _scrub(self, text: str) -> str:
        for name, value in self._secrets.items():
            text = text.replace(value, f"<secret:{name}>") if value else text
        return text

    def upload_dir(self, source: Path, target: str) -> None:
        shutil.copytree(source, target, dirs_exist_ok=True)

    def download_file(self, path: str, limit: int) -> bytes | None:
        return Path(path).read_bytes()[:limit] if Path(path).is_file() else None

    def add_secrets(self, secrets: Mapping[str, str]) -> None:
        self._secrets.update(secrets)

    def broken(self) -> str | None:
        return None


def factory(request: EnvRequest[ExampleSettings]) -> ExampleEnv:
    env = request.env  # validated under this kind: its settings are an ExampleSettings, typed
    return ExampleEnv(
        load_task(Path(request.task_path)),
        Path(tempfile.gettempdir()) / "replaykit-example" / request.key.id[:16],
        env.settings.socket,
        env.timeout_sec,
        env.max_output_bytes,
    )


def key_extra(env: EnvSection[ExampleSettings], task: Task) -> tuple[tuple[str, str], ...]:
    return (("sandbox", "example-v1"),)


ENV = EnvKind("example", factory, key_extra, settings=ExampleSettings)  # no oracle: the verifier's


class CountingSettings(ExecutorSettings):
    """The executor kind's own keys: ``executor: {kind: counting, label: …}``."""

    label: str = "counting executor"


class CountingExecutor:
    """An executor kind (``executor: {kind: counting}``): runs jobs inline and says how many
    (a real one would dispatch them to its own machines)."""

    def __init__(self, settings: CountingSettings, needs: NodeNeeds) -> None:
        self.label, self.needs = settings.label, needs

    def map(
        self, fn: Callable[[Any], Any], jobs: Iterable[Any], batch: bool = False
    ) -> Iterator[tuple[Any, Any]]:
        jobs = list(jobs)
        print(f"{self.label}: {len(jobs)} job(s)", file=sys.stderr)
        for job in jobs:
            yield job, fn(job)


COUNTING = ExecutorKind(CountingExecutor, CountingSettings)


class NoWorse:
    """Accept any candidate that solves at least as many task instances as the baseline."""

    name = "no_worse"

    def params(self) -> dict[str, Any]:
        return {}

    def __call__(self, candidate: RunDoc, baseline: RunDoc, exclude: dict[str, str] | None = None) -> Verdict:
        b, c = outcomes(baseline), outcomes(candidate)
        units = sorted(set(b) & set(c))
        solved_b = sum(b[u].passed for u in units)
        solved_c = sum(c[u].passed for u in units)
        accept = solved_c >= solved_b
        return Verdict(
            self.name,
            {},
            accept,
            float(solved_b - solved_c),
            f"solved {solved_b} → {solved_c}",
            [u for u in units if b[u].passed and not c[u].passed],
            [u for u in units if c[u].passed and not b[u].passed],
        )


class AppendNote:
    """A proposer that needs no model: it appends a comment derived from the brief."""

    kind = "append_note"

    def __init__(self, model: str = "reference-proposer", base_url: str = "builtin") -> None:
        self.model, self.base_url = model, base_url

    def propose(self, workdir: Path, brief: str, session: ProposalSession) -> str:
        tag = hashlib.sha256(brief.encode()).hexdigest()[:8]
        path = workdir / "harness.py"
        path.write_text(path.read_text() + f"# note {tag}\n")
        return f"append note {tag}"


class EvenEpochs(ParameterBound):
    """Promote what the criterion accepts, but only on even epochs."""

    name = "even_epochs"

    def decide(self, step: StepInput) -> bool:
        return bool(step.verdict and step.verdict.accept) and step.epoch % 2 == 0


#: a named agent: replaykit's quickstart harness as the template, run as ``--agent example-agent``;
#: its "program" is the interpreter running this test, so its version is that Python's
AGENT = NamedAgent(
    name="example-agent",
    template=Path(replaykit.__file__).parent / "templates" / "quickstart",
    description="the quickstart harness as a named agent (tests/test_plugins.py)",
    requires=Requirement(program=Path(sys.executable).name, install="install Python 3.11"),
)
