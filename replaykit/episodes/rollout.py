"""One episode: harness × task × seed × model, recorded or replayed.

Recording runs the harness against the real endpoint and a real environment
through a recording tape. Replaying runs the same harness code against the
recorded tape only: LLM responses, observations and the grade come from the
cassette; nothing touches the network, Docker or a key.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, ClassVar

from replaykit.capture.donor import Donors
from replaykit.capture.failures import DEFAULT_TIMEOUT_S, EndpointFailure, describe, endpoint_failure
from replaykit.capture.inject import InjectMessages
from replaykit.capture.recorder import episode_cassette
from replaykit.capture.tape import Tape
from replaykit.cassette.events import Episode, ErrorEvent, GradeEvent, LimitEvent
from replaykit.cassette.keys import CassetteKey
from replaykit.cassette.outcomes import classify, is_legacy
from replaykit.cassette.scrub import Scrubber
from replaykit.core.determinism import ENV_PINS
from replaykit.core.errors import DivergenceError, DivergenceReport, EnvError
from replaykit.core.meta import AgentMeta, EpisodeMeta, ForkMeta, ModelMeta, TaskMeta
from replaykit.core.records import JSON
from replaykit.core.secrets import secrets_kept_by
from replaykit.envs.base import Environment, EnvSection
from replaykit.envs.extras import Extras
from replaykit.envs.registry import make_env
from replaykit.envs.results import Grade
from replaykit.envs.verifier import verifier_meta
from replaykit.episodes.harness import Context, load_solve
from replaykit.episodes.limits import Budget, EpisodeLimit, EpisodeLimits
from replaykit.episodes.taped_env import TapedEnv
from replaykit.episodes.watchdog import Watchdog
from replaykit.episodes.workspaces import episode_lock
from replaykit.models.clients import openai_client
from replaykit.models.endpoint import OFFLINE_BASE_URL


@dataclass(frozen=True)
class TaskView:
    """What a harness sees of a task (the same in record and replay)."""

    id: str
    instruction: str
    metadata: dict[str, JSON] = field(default_factory=dict)
    steps: tuple[tuple[str, str], ...] = ()  # multi-step tasks: (name, instruction) per step, in order

    @classmethod
    def of(cls, task: Any) -> "TaskView":
        """The view of a loaded ``envs.tasks.Task``."""
        steps = tuple((s.name, s.instruction) for s in getattr(task, "steps", ()))
        return cls(task.id, task.instruction, dict(task.config.get("metadata", {})), steps)

    def for_step(self, name: str, instruction: str) -> "TaskView":
        """What the harness sees during one step of a multi-step task."""
        return replace(self, instruction=instruction, metadata={**self.metadata, "step": name}, steps=())


@dataclass
class EpisodeSpec:
    """Everything needed to record one episode; picklable, so workers can run it."""

    #: folders a remote worker gets by content (replaykit.execution.ray_executor), not by path
    portable_paths: ClassVar[tuple[str, ...]] = ("tree_dir", "task_path")

    key: CassetteKey
    task_path: str
    task: TaskView
    tree_dir: str
    entry: str
    params: dict[str, JSON]
    temperature: float
    base_url: str
    api_key: str
    env: EnvSection  # the config's env section, validated (envs/section.py)
    secrets: dict[str, str] = field(default_factory=dict)
    rules: tuple[str, ...] = ()
    keep_going: bool = False  # an endpoint failure marks the episode infra instead of stopping the run
    api_key_env: str = ""  # named in the endpoint-failure message
    timeout_s: float = DEFAULT_TIMEOUT_S  # each model call's total deadline (model.timeout_s)
    max_retries: int = 0  # the client's retries of a failed call (model.max_retries)
    model_params: dict[str, JSON] = field(default_factory=dict)  # model.params, sent with every call
    engine: dict[str, JSON] | None = None  # the engine identity measured at record time (models.identity)
    extras: Extras = field(default_factory=dict)  # what the env kind's extras hook gave (envs/extras.py)
    unprepared: str = (
        ""  # why the environment could not be prepared (its image failed to build): an infra episode
    )
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)  # the framework's (limits.py)
    donors: list[Episode] = field(default_factory=list)  # served while repeated (episodes/reuse.py)
    reuse_basis: str = "exact"  # what a served answer is: exact (deterministic engine) | shared sample
    fork: ForkMeta | None = None  # a fork: its parent (the one donor) and step (episodes/fork.py)
    agent: AgentMeta | None = None  # the named agent run as the harness (kept in meta, not the key)

    def meta(self) -> EpisodeMeta:
        from replaykit.core.versions import tool_versions

        task = TaskMeta(
            id=self.task.id,
            instruction=self.task.instruction,
            metadata=self.task.metadata,
            path=self.task_path,
        )
        if self.task.steps:
            task["steps"] = [list(s) for s in self.task.steps]
        model = ModelMeta(name=self.key.model.name, temperature=self.temperature)
        if self.model_params:
            model["params"] = self.model_params
        if self.engine is not None:
            model["engine"] = self.engine
        return {
            "task": task,
            "harness": {"entry": self.entry, "params": self.params},
            "model": model,
            "seed": self.key.seed,
            "env": self.env.table(),
            "rules": list(self.rules),
            "pins": ENV_PINS,
            "versions": tool_versions(),
            "secret_env": self.secret_env(),
            **({"fork": self.fork} if self.fork is not None else {}),
            **({"agent": self.agent} if self.agent is not None else {}),
        }

    def secret_env(self) -> dict[str, str]:
        """Secret label → the variable holding it (names, never values): a replay scrubs
        their live values, where set, from what it compares and reports."""
        names = {n: n for n in self.secrets if n != "api_key"}
        if self.api_key_env:
            names["api_key"] = self.api_key_env
        return names


def _client(base_url: str, api_key: str, timeout_s: float, max_retries: int) -> Any:
    return openai_client(base_url, api_key, timeout=timeout_s, max_retries=max_retries)


@dataclass(frozen=True)
class Drive:
    """What one run of the harness needs: an :class:`EpisodeSpec`'s part, or a recording's meta."""

    key: CassetteKey
    task: TaskView
    temperature: float
    params: dict[str, JSON]
    model_params: dict[str, JSON] = field(default_factory=dict)
    rules: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = 0
    fork: ForkMeta | None = None

    @classmethod
    def of(cls, spec: EpisodeSpec) -> Drive:
        s = spec
        timeout_s = s.timeout_s or DEFAULT_TIMEOUT_S
        return cls(
            s.key, s.task, s.temperature, s.params, s.model_params, s.rules, timeout_s, s.max_retries, s.fork
        )


def _drive(
    solve: Callable[..., Any], tape: Tape, run: Drive, env: TapedEnv, base_url: str, api_key: str
) -> dict[str, JSON]:
    """Run the harness once under the episode cassette; errors (and a limit reached) become
    events. What the harness noted of its run (``ctx.notes``: a named agent's output)."""
    budget = env.budget
    if budget.hit is not None:  # a later step of an episode past its limit: the harness is not run again
        return {}
    key = run.key
    ctx = Context.of(key, run.temperature, run.params, run.model_params, run.fork)
    scrubber = tape.scrubber
    client = _client(base_url, api_key, run.timeout_s, run.max_retries)
    budget.start()
    tape.on_call = lambda: budget.check(acting=False)  # before every model call
    with episode_cassette(key.id, tape, scrubber, run.rules, run.timeout_s, InjectMessages.of(run.fork)):
        try:
            _harness(solve, run.task, env, client, ctx)
        except DivergenceError:
            raise
        except EpisodeLimit:
            pass  # recorded below
        except Exception as exc:  # endpoint failures among them: record_episode judges the tape afterwards
            if tape.divergence is not None:
                raise tape.divergence from None
            budget.settle()
            if budget.hit is None:  # past a limit, the limit is what the episode records
                _error(tape, f"{type(exc).__name__}: {exc}")
        finally:
            tape.on_call = None
    budget.settle()  # a replay: the limit the recording reached where the harness was stopped
    if budget.hit is not None and tape.divergence is None:
        _limit(tape, budget.hit)
    if tape.divergence is not None:
        raise tape.divergence
    return ctx.notes


def _harness(solve: Callable[..., Any], task: TaskView, env: TapedEnv, client: Any, ctx: Context) -> None:
    """The one frame right above the harness, under the episode's watchdog (``watchdog.py``)."""
    with Watchdog(env.budget, _harness.__code__), secrets_kept_by(env.tape.scrubber.add):
        solve(task, env.view(), client, ctx)  # a secret it makes (keep_secret) is never stored


def _limit(tape: Tape, event: LimitEvent | ErrorEvent) -> None:
    """A limit stopped the harness: its ``limit`` event (an old recording's ``error`` one, replayed)."""
    if isinstance(event, ErrorEvent):
        _error(tape, event.message)
    elif tape.replaying:
        tape.play_limit(event)
    else:
        tape.record(event)
        tape.sealed = True


def _error(tape: Tape, message: str) -> None:
    """The harness raised: an ``error`` event, recorded or served."""
    if tape.replaying:
        tape.play_error(message)
    else:
        tape.record(ErrorEvent(tape.scrubber.text(message)))


def record_episode(spec: EpisodeSpec) -> Episode:
    """Run the harness for real and return the recorded episode (not yet stored)."""
    solve = load_solve(Path(spec.tree_dir), spec.entry)
    tape = Tape(spec.key.id)
    tape.scrubber = Scrubber(spec.secrets)
    tape.donors = Donors.of(spec.donors, spec.fork)
    meta = spec.meta()
    if spec.unprepared:  # nothing to run the harness in: the episode is that infra failure
        return _unprepared(spec, tape, meta)
    with episode_lock(spec.key):
        inner = make_env(spec)
        started = time.monotonic()
        try:
            inner.start()
            taped = TapedEnv(tape, inner, Budget(spec.limits, tape, spec.env.timeout_sec))
            grade: Grade | None = None
            steps: list[tuple[str, Grade]] = []
            if spec.task.steps:
                grade, meta["task"]["step_actions"], steps = _record_steps(solve, tape, spec, taped, inner)
                meta["task"]["steps_run"] = len(meta["task"]["step_actions"])
            else:
                if notes := _drive(solve, tape, Drive.of(spec), taped, spec.base_url, spec.api_key):
                    meta["notes"] = {
                        k: tape.scrubber.text(v) if isinstance(v, str) else v for k, v in notes.items()
                    }
            failure = endpoint_failure(tape.events, tape.transport_errors)
            if failure is None and grade is None:
                grade = _grade(inner, taped)
            taped.record_network()  # the verifier's fetches come before the grade
            environment = inner.metadata()
            wall_seconds = round(time.monotonic() - started, 3)
        finally:
            inner.close()
    if failure is not None:  # never a graded result: stop, or keep it as an infra failure (never reused)
        message = tape.scrubber.text(describe(failure, spec.base_url, spec.key.model.name, spec.api_key_env))
        if not spec.keep_going:
            raise EndpointFailure(message)
        grade = Grade(reward=0.0, passed=False, infra_failure=True, detail=f"endpoint failure: {message}")
    assert grade is not None
    tape.record(GradeEvent(dataclasses.replace(grade, detail=tape.scrubber.text(grade.detail))))
    meta["limits"] = spec.limits.to_meta()  # what every read holds its actions to (cassette/outcomes.py)
    meta["outcome"] = classify(tape.events).to_doc()  # written once, here: the verifier's result is known
    if (verifier := verifier_meta(grade, steps, tape.scrubber.text)) is not None:
        meta["verifier"] = verifier
    claim = tape.donors.claim(tape.events, spec.reuse_basis) if tape.donors else None
    if claim is not None:  # checked by replay and `cassettes verify` (cassette/lineage.py)
        meta["reused"] = claim
    meta = {**meta, "environment": environment, "wall_seconds": wall_seconds}
    return Episode(key=spec.key, events=tape.events, meta=meta)


def _unprepared(spec: EpisodeSpec, tape: Tape, meta: EpisodeMeta) -> Episode:
    """The episode of a task whose environment could not be prepared: no harness run, an infra grade."""
    detail = tape.scrubber.text(f"environment not prepared: {spec.unprepared}")
    tape.record(GradeEvent(Grade(0.0, False, infra_failure=True, detail=detail)))
    meta["unprepared"] = detail
    meta["limits"] = spec.limits.to_meta()
    meta["outcome"] = classify(tape.events).to_doc()
    return Episode(key=spec.key, events=tape.events, meta={**meta, "environment": {"kind": spec.env.kind}})


def _grade(inner: Environment, taped: TapedEnv) -> Grade:
    """The verifier's grade; an environment failure (during an action or grading) is an infra failure."""
    if taped.env_error is not None:
        return Grade(
            0.0, False, infra_failure=True, detail=f"environment error during the episode: {taped.env_error}"
        )
    try:
        return inner.grade()
    except EnvError as exc:
        return Grade(0.0, False, infra_failure=True, detail=f"environment error while grading: {exc}")


def _record_steps(
    solve: Callable[..., Any], tape: Tape, spec: EpisodeSpec, taped: TapedEnv, inner: Environment
) -> tuple[Grade, list[int], list[tuple[str, Grade]]]:
    """A multi-step task: each step staged, driven with its own instruction, graded (envs/steps.py);
    the combined grade, each step's action count and each graded step's own grade."""
    from replaykit.envs.steps import run_steps

    stepped: Any = inner  # environments that run multi-step tasks have .task and .begin_step (local, docker)
    task = stepped.task
    actions: list[int] = []  # how many actions each step took (certify re-runs them step by step)
    graded: list[tuple[str, Grade]] = []

    class _Graded:  # the env as run_steps sees it: grading goes through the infra-failure guard
        def begin_step(self, step: Any) -> None:
            stepped.begin_step(step)

        def grade(self) -> Grade:
            graded.append((stepped.step.name, _grade(inner, taped)))
            return graded[-1][1]

    def act(step: Any) -> None:
        before = taped.actions
        run = replace(Drive.of(spec), task=spec.task.for_step(step.name, step.instruction))
        _drive(solve, tape, run, taped, spec.base_url, spec.api_key)
        actions.append(taped.actions - before)

    grade = run_steps(_Graded(), task.steps, task.reward_strategy, act)
    return grade, actions, graded


@dataclass
class ReplayResult:
    cassette_id: str
    task_id: str
    seed: int
    recorded_digest: str
    replayed_digest: str | None
    divergence: DivergenceReport | None
    grade: Grade | None = None

    @property
    def identical(self) -> bool:
        return self.divergence is None and self.recorded_digest == self.replayed_digest


def replay_scrubber(meta: EpisodeMeta) -> Scrubber:
    """What a replay scrubs from what it compares and reports: the live values of the
    recording's secret variables (and of ``OPENAI_API_KEY``), where this process has them."""
    names = {"api_key": "OPENAI_API_KEY", **(meta.get("secret_env") or {})}
    return Scrubber({label: os.environ.get(var, "") for label, var in names.items()})


def replay_episode(
    episode: Episode, tree_dir: Path, on_tape: Callable[[Tape], None] | None = None
) -> ReplayResult:
    """Replay one recorded episode offline against the harness files in ``tree_dir`` (``on_tape``
    is handed the replay's tape first: line coverage reads its position, ``train/attribution.py``)."""
    meta = episode.meta
    task_meta = meta["task"]
    recorded = Drive(
        episode.key,
        TaskView(
            id=task_meta["id"], instruction=task_meta["instruction"], metadata=task_meta.get("metadata", {})
        ),
        meta["model"]["temperature"],
        meta["harness"]["params"],
        meta["model"].get("params") or {},
        tuple(meta.get("rules") or ()),
        fork=meta.get("fork"),
    )
    tape = Tape(episode.id, recorded=list(episode.events))
    tape.scrubber = replay_scrubber(meta)
    if on_tape is not None:
        on_tape(tape)
    grade: Grade | None = None
    recorded_steps = task_meta.get("steps", [])
    steps: list[tuple[str, str] | None] = [
        (name, instruction)
        for name, instruction in recorded_steps[: task_meta.get("steps_run", len(recorded_steps))]
    ]
    try:
        solve = load_solve(tree_dir, meta["harness"]["entry"])
        # a replay serves the limits the recording reached; the recorded timeout only tells its
        # watchdog when to look for that limit (a harness stopped mid-sleep is not waited out)
        stops = [e for e in episode.events if isinstance(e, LimitEvent) and e.limit == "episode_timeout_s"]
        budget = Budget(EpisodeLimits(timeout_s=float(stops[0].value) if stops else None), tape)
        budget.legacy = is_legacy(meta)  # recorded before limits had events of their own
        for step in [] if meta.get("unprepared") else steps or [None]:  # unprepared: the harness never ran
            view = recorded.task if step is None else recorded.task.for_step(*step)
            offline = TapedEnv(tape, None, budget)
            _drive(solve, tape, replace(recorded, task=view), offline, OFFLINE_BASE_URL, "replaykit-offline")
        grade = tape.play_grade().grade
        tape.check_complete()
    except DivergenceError as exc:
        return ReplayResult(
            episode.id, episode.key.task_id, episode.key.seed, episode.digest, tape.digest, exc.report, grade
        )
    return ReplayResult(
        episode.id, episode.key.task_id, episode.key.seed, episode.digest, tape.digest, None, grade
    )
