"""The environment protocol: what a harness and a rollout may ask of an environment.

An environment is one episode's sandbox. ``run`` executes a bash action and returns
an :class:`Observation`; ``state_digest`` hashes the sandbox state after a step;
``grade`` runs the task's verifier. Implementations: ``local`` (temporary
directories), ``docker`` (one container per episode). Replay serves the same
protocol from a cassette.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Protocol, Self, TypedDict, TypeGuard, runtime_checkable

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypeVar  # a default (PEP 696) on Python 3.11

from replaykit.core.errors import EnvError, TaskError
from replaykit.core.records import JSON
from replaykit.envs.extras import Extras, KindStore, StoredExchange
from replaykit.envs.results import Grade, Observation

if TYPE_CHECKING:
    from replaykit.envs.tasks import Task


@runtime_checkable
class Environment(Protocol):
    """One episode's sandbox. Use as a context manager: start on enter, close on exit."""

    kind: str

    def start(self) -> None: ...

    def run(self, command: str, timeout_sec: float | None = None) -> Observation: ...

    def state_digest(self) -> str: ...

    def grade(self) -> Grade: ...

    def close(self) -> None: ...

    def metadata(self) -> dict[str, JSON]:
        """Facts for the cassette metadata (image digest, pins in force, ...)."""
        ...


def episode_workspace(episode_id: str) -> Path:
    """An episode's scratch folder, derived from its cassette id so paths in outputs repeat."""
    return Path(tempfile.gettempdir()) / "replaykit-ws" / episode_id[:16]


# -- what an environment kind registers (see registry.py) ------------------------------


class EnvSettings(BaseModel):
    """Base of a kind's own settings: the keys of the config's ``env`` section beyond the
    shared ones (``kind``, ``timeout_sec``, ``max_output_bytes``, ``snapshot``). Unknown keys
    are errors; a kind without settings of its own accepts none."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def of(cls, env: EnvSection) -> Self:
        """These settings of a validated ``env`` section held untyped (``EnvSection``): its
        kind's model instance, typed; never a parse. A kind's own hooks need none of it: they
        get ``EnvSection[S]``, whose ``settings`` is already an ``S``."""
        settings = env.settings
        if not isinstance(settings, cls):
            raise EnvError(
                f"env kind {env.kind!r} has {type(settings).__name__}, not {cls.__name__}: "
                "its hooks were handed another kind's section"
            )
        return settings


#: a kind's settings model: ``EnvKind[S]``'s hooks receive the section with settings ``S``
#: (``EnvSection[S]``); a section of no particular kind has ``EnvSettings``
S = TypeVar("S", bound=EnvSettings, default=EnvSettings)
S_co = TypeVar("S_co", bound=EnvSettings, covariant=True, default=EnvSettings)
S_contra = TypeVar("S_contra", bound=EnvSettings, contravariant=True, default=EnvSettings)

R = TypeVar("R")  # what a node function returns (``WorkerNodes.run_each``)

KeyPairs = tuple[tuple[str, str], ...]


class EpisodeKey(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def extra(self) -> KeyPairs: ...


class EnvRequest(Protocol[S_co]):
    """What a factory gets: the episode's key, its task folder and the config's ``env`` section
    (``EnvRequest[S]``: its settings are ``S``, the kind's model)."""

    @property
    def key(self) -> EpisodeKey: ...

    @property
    def task_path(self) -> str: ...

    @property
    def env(self) -> EnvSection[S_co]: ...

    @property
    def extras(self) -> Extras:
        """What the kind's ``extras`` hook gave this episode (``{}``: nothing; ``extras.py``)."""
        ...


class EnvTable(TypedDict, total=False):
    """The config's ``env`` section flat, as an episode records it (``EnvSection.table()``):
    the shared keys typed here, the kind's own keys beside them."""

    kind: str
    timeout_sec: float
    max_output_bytes: int
    snapshot: str  # digest | full
    # Harbor's multipliers and resource overrides, present only when set (envs/limits.py)
    timeout_multiplier: float
    agent_timeout_multiplier: float
    verifier_timeout_multiplier: float
    build_timeout_multiplier: float
    cpus: float
    memory_mb: int
    storage_mb: int


class EnvSection(Protocol[S_co]):
    """The config's ``env`` section as a kind's hooks receive it, validated once
    (``envs/section.py``'s ``EnvConfig``): the shared keys typed, the kind's own settings
    as its model's instance (``EnvSection[S]``: ``settings`` is an ``S``; ``EnvKind.section``
    checks that), Harbor's limits, the flat table."""

    @property
    def kind(self) -> str: ...

    @property
    def timeout_sec(self) -> float: ...

    @property
    def max_output_bytes(self) -> int: ...

    @property
    def snapshot(self) -> str: ...

    @property
    def settings(self) -> S_co: ...

    def limits(self) -> dict[str, float]:
        """The timeout multipliers and resource overrides set (``envs/limits.py``)."""
        ...

    def table(self) -> EnvTable:
        """The section flat, as an episode records it."""
        ...


class WorkerNodes(Protocol):
    """A multi-machine executor's worker nodes, as an env kind's ``prepare_nodes`` hook sees
    them (``execution/ray_executor.py`` gives the Ray cluster's)."""

    def ids(self, resource: str | None = None) -> list[str]:
        """The alive nodes (carrying ``resource``, when given)."""
        ...

    def run_each(self, calls: Sequence[tuple[str, Callable[..., R], tuple[object, ...]]]) -> list[R]:
        """Run each ``(node, fn, args)`` on its node, concurrently; the results, in order."""
        ...

    def share(self, data: bytes) -> object:
        """``data`` stored once where every node reaches it; pass the handle (opaque) as an argument."""
        ...


PrepareNodes = Callable[[WorkerNodes, EnvSection[S]], None]  # (nodes, env config) → ready


@dataclass(frozen=True)
class NodeNeeds:
    """What an env kind asks of an executor's worker nodes (local executors need none of it)."""

    resource: str | None = None  # a custom resource episodes are scheduled on (``docker``)
    prepare: Callable[[WorkerNodes], None] | None = None  # run on the driver before episodes fan out


EnvFactory = Callable[[EnvRequest[S]], Environment]
KeyExtra = Callable[[EnvSection[S], "Task"], KeyPairs]  # (env config, task) → extra key pairs
Oracle = Callable[["Task", EnvSection[S]], tuple[Grade, Grade]]  # (task, env config) → (untouched, solved)
#: (task, env config) → what the kind applies that the task did not say (``tasks check`` warnings)
TaskWarnings = Callable[["Task", EnvSection[S]], list[str]]


def _holds(env: EnvSection, model: type[S]) -> TypeGuard[EnvSection[S]]:
    """Whether ``env``'s settings are ``model``'s (the section a kind of that model takes)."""
    return isinstance(env.settings, model)


def _holds_request(request: EnvRequest, model: type[S]) -> TypeGuard[EnvRequest[S]]:
    """Whether ``request``'s section has ``model``'s settings."""
    return isinstance(request.env.settings, model)


class EpisodeExtras(Protocol[S_contra]):
    """A kind's recorder and server of what its episodes fetch (docker: the frozen network)."""

    def recording(
        self, store: KindStore, env: EnvSection[S_contra], tasks: Sequence[Task]
    ) -> AbstractContextManager[Extras]:
        """Around a run's key computation (image builds) and the recording of its episodes;
        yields what each recorded episode's environment gets (``EnvRequest.extras``)."""
        ...

    def serving(
        self, store: KindStore, environment: Mapping[str, JSON], exchanges: list[StoredExchange]
    ) -> AbstractContextManager[Extras]:
        """Around a re-execution of one episode (``environment``: its recorded metadata):
        yields what its environment gets to serve its recorded exchanges only."""
        ...

    def forked_reason(self, environment: Mapping[str, JSON]) -> str | None:
        """Why an episode with this recorded environment metadata can never be certified
        deterministic (docker: it ran on a live network), or None."""
        ...

    def build_exchanges(
        self, store: KindStore, extra: Sequence[tuple[str, str]]
    ) -> list[tuple[str, list[StoredExchange]]]:
        """What the builds named by a cassette key's extras fetched: (what was built, its exchanges)."""
        ...

    def documents(self, extra: Sequence[tuple[str, str]]) -> list[str]:
        """The ids of the store documents a cassette with these key extras needs beyond its own
        (docker: its image's recorded build), which its bundles carry when the store has them."""
        ...


class Artefacts(Protocol):
    """What a bundle ``--with-images`` carries for a kind beyond store rows (docker: the
    task images, ``docker save``d). Documents of ``kind``, one per artefact id."""

    kind: str

    def ids(self, extra: Sequence[tuple[str, str]]) -> list[str]:
        """The artefacts a cassette with this key's extras ran in."""
        ...

    def exists(self, ident: str) -> bool: ...

    def save(self, ident: str) -> Iterable[bytes]:
        """The artefact's bytes, streamed (``EnvError`` when it is not here)."""
        ...

    def load(self, ident: str, data: Iterator[bytes]) -> None:
        """Make the artefact exist here again from its bytes; ``EnvError`` when it came back as another."""
        ...


@runtime_checkable
class RestorableEnvironment(Protocol):
    """An environment that snapshots its whole state after each step (``env.snapshot: full``)
    and restores such a snapshot into a fresh environment (``replaykit regrade``)."""

    def snapshot_bytes(self) -> bytes | None:
        """The state as bytes (equal states, equal bytes), or None unless snapshots are full."""
        ...

    def restore_snapshot(self, data: bytes) -> None:
        """Make this started, fresh environment's state the one ``data`` holds."""
        ...


@dataclass(frozen=True)
class EnvKind(Generic[S]):
    """One environment kind: how to build an episode's environment, key it, and oracle-check a
    task. ``EnvKind[S]``: ``S`` is its settings model, and every hook receives the section with
    settings ``S`` (``EnvSection[S]``); callers go through the methods below, which check that."""

    kind: str
    factory: EnvFactory[S]
    key_extra: KeyExtra[S] | None = None
    #: ``tasks check``: grade a task untouched, then solved (None: the verifier's
    #: ``oracle_grades`` on an environment of the factory, ``check.py``)
    oracle: Oracle[S] | None = None
    uses_docker: bool = False  # `replaykit doctor` checks the engine
    #: the kind's own ``env`` keys (a pydantic model; validated when a config is loaded); the
    #: default, for a kind with no keys of its own, is ``EnvKind[EnvSettings]``'s
    settings: type[S] = EnvSettings  # type: ignore[assignment]
    #: on a multi-machine executor: the resource its episodes need, and a hook that readies
    #: every node carrying it before episodes fan out (Docker: the driver's base images)
    node_resource: str | None = None
    prepare_nodes: PrepareNodes[S] | None = None
    #: what its episodes fetch, recorded and served back (``extras.py``; docker: the frozen network)
    extras: EpisodeExtras[S] | None = None
    #: ``tasks check``'s warnings for a task: what the kind applies that the task did not say
    task_warnings: TaskWarnings[S] | None = None
    #: what a bundle ``--with-images`` carries for its cassettes (docker: the task images)
    artefacts: Artefacts | None = None
    #: its episodes' recorded actions can run again in a fresh environment (certify, regrade);
    #: a kind that cannot is regraded from full snapshots only (``env.snapshot: full``)
    reexecutable: bool = True
    #: a replay's extras, derived without preparing anything (docker: an image already built
    #: here, never a build); raises ``EnvError`` where it cannot, and the replay takes the
    #: recording's (``episodes/panel_keys.py``). None: ``key_extra`` serves replays too
    replay_key_extra: KeyExtra[S] | None = None

    def section(self, env: EnvSection) -> EnvSection[S]:
        """``env`` as this kind's hooks take it: its settings are this kind's model's
        (``EnvError`` when the section was validated under another kind's)."""
        if not _holds(env, self.settings):
            raise EnvError(self._mismatch(env))
        return env

    def build(self, request: EnvRequest) -> Environment:
        """One episode's environment, from this kind's factory."""
        if not _holds_request(request, self.settings):
            raise EnvError(self._mismatch(request.env))
        return self.factory(request)

    def _mismatch(self, env: EnvSection) -> str:
        return (
            f"env kind {self.kind!r} takes {self.settings.__name__}, not {type(env.settings).__name__}: "
            "its hooks were handed a section validated under another kind"
        )

    def node_needs(self, env: EnvSection) -> NodeNeeds:
        """What this kind's episodes, under the config's ``env`` table, ask of worker nodes."""
        hook = self.prepare_nodes
        if hook is None:
            return NodeNeeds(self.node_resource)
        own = self.section(env)
        return NodeNeeds(self.node_resource, lambda nodes: hook(nodes, own))

    def key(self, env: EnvSection, task: Task, replaying: bool = False) -> KeyPairs:
        """This kind's part of a cassette key: the kind first, then its extras (``replaying``:
        derived without preparing the environment, where the kind can tell them apart)."""
        derive = (self.replay_key_extra if replaying else None) or self.key_extra
        extras = derive(self.section(env), task) if derive else ()
        return (("env", self.kind), *(pair for pair in extras if pair[0] != "env"))

    def warnings(self, task: Task, env: EnvSection) -> list[str]:
        """What this kind applies to ``task`` that it did not say (empty when it cannot tell)."""
        if self.task_warnings is None:
            return []
        own = self.section(env)
        try:
            return self.task_warnings(task, own)
        except (EnvError, TaskError):
            return []
