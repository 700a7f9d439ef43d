"""Estimators: propose one candidate change to the baseline harness per epoch.

An estimator edits a worktree of the baseline; the trainer turns the edit into
exactly one child commit (or a skipped epoch with its reason). ``AgenticEstimator``
asks an agent backend (``OpenAIBackend`` in-process, ``CodexAgentBackend`` as an
external CLI) with a brief (the harness source and summaries of failed episodes) and the
epoch's workspace (``workspace.py``: transcripts, prior candidates, scores), when its
backend's ``propose`` takes one.
``PatchQueue`` proposes hand-written diffs in order.

Add an estimator with one file: a class following :class:`Estimator`, then
``register_estimator(kind, factory)`` or an entry point in the
``replaykit.estimators`` group; configs select it with ``train.estimator.kind``
(the other keys of that table are the factory's keyword arguments).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Callable, Protocol

from replaykit.core.errors import ConfigError, TrainError
from replaykit.core.records import JSON
from replaykit.core.registry import FactoryRegistry
from replaykit.models.config import ModelConfig
from replaykit.models.session import ProposalSession
from replaykit.train.backends import AgentBackend, BackendSpec
from replaykit.train.gitops import apply_diff
from replaykit.train.openai_backend import OpenAIBackend
from replaykit.train.workspace_tree import Workspace, takes_workspace

KeyPairs = tuple[tuple[str, str], ...]


class Estimator(Protocol):
    def identity(self) -> dict[str, JSON]: ...

    def model_config(self) -> ModelConfig | None:
        """The proposer model, whose calls are recorded in a proposal cassette; None: no model."""
        ...

    def key_extra(self) -> KeyPairs:
        """What else shapes the proposer's requests (part of the proposal cassette key)."""
        ...

    def edit(self, workdir: Path, brief: str, session: ProposalSession | None, epoch: int) -> str: ...


class AgenticEstimator:
    """A proposer agent reads the brief and edits the worktree through its backend."""

    def __init__(self, backend: AgentBackend | None = None) -> None:
        self.backend = backend or OpenAIBackend()

    def identity(self) -> dict[str, JSON]:
        return {
            "estimator": "agentic",
            "backend": self.backend.kind,
            "model": self.backend.model,
            "base_url": self.backend.base_url,
        }

    def model_config(self) -> ModelConfig:
        return ModelConfig(
            name=self.backend.model,
            base_url=self.backend.base_url,
            api_key_env=getattr(self.backend, "api_key_env", "OPENAI_API_KEY"),
        )

    def key_extra(self) -> KeyPairs:
        version = getattr(self.backend, "version", "")  # an external agent's CLI version shapes its requests
        return (("backend", self.backend.kind), *((("backend_version", str(version)),) if version else ()))

    def edit(
        self,
        workdir: Path,
        brief: str,
        session: ProposalSession | None,
        epoch: int,
        workspace: Workspace | None = None,
    ) -> str:
        """``workspace``: what the proposer may read this epoch, handed to a backend that takes it."""
        assert session is not None
        if workspace is not None and takes_workspace(self.backend.propose):
            return self.backend.propose(workdir, brief, session, workspace=workspace)  # type: ignore[call-arg]
        return self.backend.propose(workdir, brief, session)


class PatchQueue:
    """Hand-written candidates: epoch *i* applies ``diffs[i]`` (past the end: an empty diff)."""

    def __init__(self, diffs: list[str], descriptions: list[str] | None = None) -> None:
        self.diffs = list(diffs)
        self.descriptions = list(descriptions or [])

    def identity(self) -> dict[str, JSON]:
        from replaykit.core.determinism import digest_of

        return {"estimator": "patch_queue", "diffs": digest_of(self.diffs)}

    def model_config(self) -> None:
        return None

    def key_extra(self) -> KeyPairs:
        return ()

    def edit(self, workdir: Path, brief: str, session: ProposalSession | None, epoch: int) -> str:
        if epoch >= len(self.diffs):
            return "(patch queue exhausted)"
        apply_diff(workdir, self.diffs[epoch])
        if epoch < len(self.descriptions):
            return self.descriptions[epoch]
        return f"patch {epoch + 1} of {len(self.diffs)}"


class RecordedProposals:
    """Another training's recorded proposals, re-applied in order (a counterfactual
    recorded live): epoch *i* applies ``diffs[i]`` to whatever baseline this training
    has; ``None`` is an epoch whose recorded proposal had no applicable change
    (``reasons[i]`` says why). The proposer is not asked again."""

    def __init__(
        self,
        training: str,
        diffs: list[str | None],
        descriptions: list[str],
        reasons: list[str | None] | None = None,
    ) -> None:
        self.training, self.diffs, self.descriptions = training, list(diffs), list(descriptions)
        self.reasons = list(reasons or [None] * len(self.diffs))

    def identity(self) -> dict[str, JSON]:
        from replaykit.core.determinism import digest_of

        return {
            "estimator": "recorded_proposals",
            "training": self.training,
            "diffs": digest_of([self.diffs, self.descriptions]),
        }

    def model_config(self) -> None:
        return None

    def key_extra(self) -> KeyPairs:
        return ()

    def edit(self, workdir: Path, brief: str, session: ProposalSession | None, epoch: int) -> str:
        if epoch >= len(self.diffs):
            return "(recorded proposals exhausted)"
        diff = self.diffs[epoch]
        if diff is None:
            raise TrainError(f"recorded proposal of epoch {epoch}: {self.reasons[epoch] or 'no change'}")
        apply_diff(workdir, diff)
        return self.descriptions[epoch]


def _agentic(backend: BackendSpec | None = None) -> AgenticEstimator:
    """``backend``: the agent backend's ``kind`` and parameters (a mapping in a config)."""
    return AgenticEstimator((backend or BackendSpec()).build())


def _patch_queue(
    diffs: list[str] | None = None, descriptions: list[str] | None = None, base_dir: Path | None = None
) -> PatchQueue:
    """Each entry is a diff text, or the path of a diff file relative to the config file's folder."""
    texts = []
    for entry in diffs or []:
        if entry.startswith(("diff", "---")) or "\n" in entry:
            texts.append(entry)
            continue
        path = Path(entry).expanduser()
        path = path if path.is_absolute() or base_dir is None else base_dir / path
        try:
            texts.append(path.read_text())
        except OSError as exc:
            raise ConfigError(
                f"train.estimator.diffs: cannot read {path}: {exc.strerror or exc}; paths are relative to the config file's folder"
            ) from None
    return PatchQueue(texts, descriptions)


ESTIMATORS: FactoryRegistry[Estimator] = FactoryRegistry("estimator", "replaykit.estimators")


def register_estimator(kind: str, factory: Callable[..., Estimator]) -> None:
    ESTIMATORS.register(kind, factory)


register_estimator("agentic", _agentic)
register_estimator("patch_queue", _patch_queue)
register_estimator("recorded_proposals", RecordedProposals)


def make_estimator(spec: Mapping[str, object] | None, base_dir: Path | None = None) -> Estimator:
    """``spec``: ``kind`` and the factory's parameters. ``base_dir``: the config file's folder,
    which relative paths (patch-queue diffs) resolve against."""
    params = dict(spec or {})
    kind = str(params.pop("kind", "agentic"))
    if kind == "patch_queue" and base_dir is not None:
        params["base_dir"] = base_dir
    estimator: Estimator = ESTIMATORS.create(kind, **params)
    return estimator
