"""An episode's ``meta`` as stored (``cassette.events.Episode.meta``), typed: the task its
harness saw, the harness entry and params, the model and its engine identity, a proxy
session's or a pytest test's name and rules, and what it was served from a donor or its
fork's parent (``ReusedClaim``, ``ForkMeta``; checked by ``cassette/lineage.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NotRequired, TypedDict

from replaykit.core.records import JSON


class TaskMeta(TypedDict):
    """The task an episode ran, as its harness saw it (``episodes.rollout.TaskView``)."""

    id: str
    instruction: str
    metadata: dict[str, JSON]
    path: str
    steps: NotRequired[list[list[str]]]  # multi-step tasks: [name, instruction] per step
    step_actions: NotRequired[list[int]]  # how many actions each step took
    steps_run: NotRequired[int]


class HarnessMeta(TypedDict):
    entry: str
    params: dict[str, JSON]


class AgentMeta(TypedDict):
    """A named agent's identity in an episode (``replaykit/agents/``): never part of its key."""

    name: str
    version: str  # what its program reported when the episode was recorded ("builtin": no program)


class ModelMeta(TypedDict):
    name: str
    temperature: float
    params: NotRequired[dict[str, JSON]]  # model.params, sent with every call
    engine: NotRequired[dict[str, JSON]]  # the engine identity measured at record time


class RuleDef(TypedDict):
    """One rule of a proxy rule file (``capture.rule_files``): a regex and its literal replacement."""

    pattern: str
    replace: str


class ProxyMeta(TypedDict):
    name: str
    upstream: NotRequired[str]  # sessions stored by older versions have only the name
    rules: NotRequired[list[str]]
    rule_defs: NotRequired[dict[str, RuleDef]]  # a rule file's rules by name
    models: NotRequired[list[str]]  # the models the session's calls asked for, in order of first use
    #: credential name -> sha256 of what the recorded client presented (never the value)
    credentials: NotRequired[dict[str, str]]


class PytestMeta(TypedDict):
    name: str


class ReusedClaim(TypedDict):
    """What an episode says it was served (``cassette/lineage.py``): its events 0..``events``-1
    equal cassette ``donor``'s (digest forms), ``calls`` of them model calls answered from
    the donor instead of the endpoint, ``digest`` the sha256 of that prefix; ``basis``:
    ``exact`` (a deterministic engine) or ``shared sample`` (common random numbers)."""

    donor: str
    events: int
    calls: int
    digest: str
    basis: str


class ModelSpan(TypedDict):
    """A model name from one model call (``step``) on."""

    step: int
    model: str


class GivenMessage(TypedDict):
    """A user message given to the model from one model call (``step``) on (``fork --message``)."""

    step: int
    text: str


class ForkMeta(TypedDict):
    """A fork (``replaykit fork``): its parent cassette and the step (model call) it went live
    at; the model names of the calls before it (the parent's), the messages given (its
    parent's before the step, its own at the step)."""

    parent: str
    step: int
    models: list[ModelSpan]
    messages: list[GivenMessage]


class OutcomeMeta(TypedDict):
    """An episode's outcome class as its recording keeps it (``cassette/outcomes.py``)."""

    outcome: str  # one of cassette.outcomes.OUTCOMES
    limit: NotRequired[str]  # the framework limit it reached, when it reached one


#: the limits the framework enforces on an episode (``episodes/limits.py``), as a config names them
LIMIT_NAMES = ("max_steps", "episode_timeout_s", "max_tokens")


class LimitsMeta(TypedDict):
    """The framework limits an episode ran under (``episodes/limits.py``; None: none)."""

    max_steps: int | None
    episode_timeout_s: float | None
    max_tokens: int | None


class StepVerifierMeta(TypedDict):
    """One step of a multi-step task as its verifier graded it (Harbor's ``step_results``)."""

    name: str
    reward: float
    passed: bool
    infra_failure: bool
    detail: str
    rewards: dict[str, float]
    stdout: str
    stderr: str


class VerifierMeta(TypedDict):
    """What the verifier wrote beside the grade (``envs.base.VerifierOutput``), scrubbed: never in
    the key or the digest; absent in episodes recorded before replaykit kept it."""

    stdout: str
    stderr: str
    rewards: dict[str, float]  # every named reward of the reward file ({"reward": x} for a number)
    steps: NotRequired[list[StepVerifierMeta]]  # a multi-step task: each step graded, in order


class EpisodeMeta(TypedDict, total=False):
    """An episode's ``meta`` (``cassette.events.Episode.meta``). A rollout writes task to
    environment (``episodes.rollout.EpisodeSpec.meta``), a proxy session ``proxy``, the
    pytest plugin ``pytest`` (those write ``rules`` and ``pins`` too), a training's
    proposer ``kind``, ``brief``, ``epoch`` and ``backend``."""

    task: TaskMeta
    harness: HarnessMeta
    agent: AgentMeta  # a named agent ran as the harness (``harness.agent``)
    #: what the harness noted of its run (``ctx.notes``: a named agent's bounded output, its own
    #: count of model calls); never in the key or the digest
    notes: dict[str, JSON]
    model: ModelMeta
    seed: int
    env: Mapping[str, object]  # the config's env table as recorded (envs.base.EnvTable)
    rules: list[str]
    pins: dict[str, str]
    versions: dict[str, str]
    secret_env: dict[str, str]  # secret label -> the variable holding it (never a value)
    environment: dict[str, JSON]  # the environment's facts (envs.base.Environment.metadata)
    unprepared: str  # set when the environment could not be prepared: the harness never ran
    verifier: VerifierMeta  # the verifier's output and named rewards (Harbor's verifier/ folder)
    proxy: ProxyMeta
    pytest: PytestMeta
    kind: str  # proposal (a training's proposer session); unset otherwise
    brief: str  # a proposal's brief, its epoch and the estimator's identity
    epoch: int
    backend: dict[str, JSON]
    #: a proposal's workspace (``train/workspace_tree.workspace_meta``): digest, listing, task files
    workspace: dict[str, JSON]
    reused: ReusedClaim  # events served from a donor (prefix reuse) or a fork's parent
    #: how long it took when recorded, environment start to grade (wall clock, seconds; never
    #: in its key or digest; absent in episodes recorded before replaykit timed them)
    wall_seconds: float
    fork: ForkMeta  # a fork: its parent and step
    regraded_from: str  # ``replaykit regrade``: the cassette whose final state was graded again
    regrade: dict[str, JSON]  # its verifier's digest and how the state was rebuilt
    #: its outcome class, written once where the verifier's result is known, and the limits it
    #: ran under; every read holds both to its events (absent before outcomes were kept)
    outcome: OutcomeMeta
    limits: LimitsMeta
