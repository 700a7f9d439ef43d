"""An example third-party replaykit extension: an env kind (with its own settings), an
executor kind, a criterion, an optimizer, a backend."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from replaykit.core.records import RunDoc
from replaykit.envs.base import EnvKind, EnvRequest, EnvSettings, EnvTable, Grade, NodeNeeds
from replaykit.envs.grading import oracle_grades
from replaykit.envs.local import LocalEnv
from replaykit.envs.local import factory as local_factory
from replaykit.envs.tasks import Task
from replaykit.models.session import ProposalSession
from replaykit.train.criteria import Verdict, outcomes
from replaykit.train.optim.base import ParameterBound, StepInput


class ExampleSettings(EnvSettings):
    """The kind's own ``env`` keys: ``env: {kind: example, socket: …}``."""

    socket: str = "/run/example.sock"  # where a real plugin would reach its sandbox daemon


class ExampleEnv(LocalEnv):
    """The local sandbox under another kind (a real plugin would run somewhere else)."""

    kind = "example"
    socket = ExampleSettings().socket

    def metadata(self) -> dict[str, Any]:
        return {**super().metadata(), "socket": self.socket}


def factory(request: EnvRequest) -> ExampleEnv:
    env = local_factory(request)
    sandbox = ExampleEnv(env.task, env.workspace, env.timeout_sec, env.max_output_bytes)
    sandbox.socket = ExampleSettings.of(request.env).socket
    return sandbox


def key_extra(env: EnvTable, task: Task) -> tuple[tuple[str, str], ...]:
    return (("sandbox", "example-v1"),)


def oracle(task: Task, env: EnvTable) -> tuple[Grade, Grade]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="example-check-") as tmp:
        return oracle_grades(ExampleEnv(task, Path(tmp) / "ws"))


ENV = EnvKind("example", factory, key_extra, oracle, settings=ExampleSettings)


class CountingExecutor:
    """An executor kind (``executor: {kind: counting}``): runs jobs inline and says how many
    (a real one would dispatch them to its own machines)."""

    def __init__(self, config: Any, needs: NodeNeeds) -> None:
        self.needs = needs

    def map(
        self, fn: Callable[[Any], Any], jobs: Iterable[Any], batch: bool = False
    ) -> Iterator[tuple[Any, Any]]:
        jobs = list(jobs)
        print(f"counting executor: {len(jobs)} job(s)", file=sys.stderr)
        for job in jobs:
            yield job, fn(job)


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
