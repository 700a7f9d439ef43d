"""The proposer's cassette: one per epoch, recorded once, replayed ever after.

A proposal is keyed by the baseline SHA, the brief's digest, the proposer model,
the training seed, the training's spec and the epoch (plus what the estimator adds, and the
digest of the proposer's workspace when it read one: ``workspace.py``; a proposal recorded
before workspaces keeps its key, its epoch naming no ``workspace_digest``).
:func:`proposal_session` replays a stored one (no model call; every recorded call
must be consumed) or opens the proposer's endpoint and records a new one — stored
only if the endpoint did not fail, in which case the training stops.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from replaykit.capture.failures import EndpointFailure, describe, endpoint_failure
from replaykit.capture.tape import Tape
from replaykit.cassette.events import Episode
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.scrub import Scrubber
from replaykit.core.determinism import sha256_hex
from replaykit.core.errors import CassetteNotFound
from replaykit.episodes.engine_check import live_engine
from replaykit.episodes.panel_keys import template_keys
from replaykit.episodes.run import reusable, secrets_for
from replaykit.models.config import ModelConfig
from replaykit.models.endpoint import OFFLINE_BASE_URL, Endpoint, api_key, model_id, open_endpoint
from replaykit.models.session import ProposalSession
from replaykit.train.state import TrainingState
from replaykit.train.workspace_tree import Workspace, workspace_meta


def proposal_key(
    trainer: TrainingState,
    mcfg: ModelConfig,
    epoch: int,
    baseline_sha: str,
    brief: str,
    workspace: str | None = None,
) -> CassetteKey:
    """The key of an epoch's proposal: the one its training recorded when it stands for this
    proposal (a resume, a replay: found through the training document, so no proposer engine is
    measured again and a format-1 training keeps its keys), else derived, the proposer as it is
    served now (``models.endpoint.model_id``)."""
    recorded = _recorded(trainer, mcfg, epoch, baseline_sha, brief, workspace)
    if recorded is not None:
        return recorded
    engine = live_engine(mcfg, trainer.record_mode, trainer.persist)
    return _key(trainer, model_id(mcfg, engine), epoch, baseline_sha, brief, workspace)


def _key(
    trainer: TrainingState,
    mid: ModelId,
    epoch: int,
    baseline_sha: str,
    brief: str,
    workspace: str | None = None,
) -> CassetteKey:
    """``workspace``: the workspace's tree digest (its first 16 hex digits key it); None: the
    key as proposals were keyed before workspaces (a recorded one stays found)."""
    seen = (("workspace", workspace[:16]),) if workspace else ()
    return CassetteKey(
        baseline_sha,
        "proposal",
        sha256_hex(brief),
        mid,
        trainer.train_cfg.seed,
        trainer.spec_digest[:16],
        kind="proposal",
        extra=(("epoch", str(epoch)), *trainer.estimator.key_extra(), *seen),
    )


def _recorded(
    trainer: TrainingState,
    mcfg: ModelConfig,
    epoch: int,
    baseline_sha: str,
    brief: str,
    workspace: str | None,
) -> CassetteKey | None:
    """The proposal cassette the training recorded for ``epoch``, when its key is this
    proposal's in all but what serves the proposer and the key format."""
    rec = trainer.recorded[epoch] if epoch < len(trainer.recorded) else None
    cassette = rec.proposal_cassette if rec else None
    if not cassette or not trainer.store.has(cassette):
        return None
    (key,) = template_keys(trainer.store, [cassette])  # its id derived again from its key
    wanted = _key(trainer, key.model, epoch, baseline_sha, brief, workspace).in_format(key.format)
    same_model = (key.model.name, key.model.revision) == (mcfg.name, model_id(mcfg).revision)
    return key if key == wanted and same_model else None


def _check_endpoint(tape: Tape, scrubber: Scrubber, endpoint: Endpoint, mcfg: ModelConfig) -> None:
    """A proposer's endpoint failure stops the training; nothing is stored."""
    failure = endpoint_failure(tape.events, tape.transport_errors)
    if failure is not None:
        raise EndpointFailure(
            scrubber.text(
                describe(
                    failure,
                    endpoint.base_url,
                    mcfg.name,
                    mcfg.api_key_env,
                    "proposer endpoint",
                    "train.estimator.backend.model",
                )
            )
        )


@contextlib.contextmanager
def proposal_session(
    trainer: TrainingState,
    epoch: int,
    baseline_sha: str,
    brief: str,
    workspace: Workspace | None = None,
) -> Iterator[tuple[ProposalSession | None, str | None]]:
    """``(session, cassette id)`` for the estimator's edit; ``(None, None)`` when it calls no model.
    A recorded proposal's metadata holds its workspace's listing (``audit --workspace``) and its
    task files (a replay where the task folders are not)."""
    mcfg = trainer.estimator.model_config()
    if mcfg is None:
        yield None, None
        return
    key = proposal_key(trainer, mcfg, epoch, baseline_sha, brief, workspace.digest if workspace else None)
    store, seed = trainer.store, trainer.train_cfg.seed
    if trainer.persist:  # the training document will name it (gc and rm keep it until then)
        store.lease("cassettes", [key.id])
    if trainer.record_mode == "none":
        replaying = store.has(key.id)
    else:  # a stored proposal holding an endpoint error (older versions) is re-recorded
        replaying = trainer.record_mode != "all" and reusable(store, key.id)
    if not replaying and (trainer.record_mode == "none" or not trainer.persist):
        raise CassetteNotFound(
            f"no proposal cassette for epoch {epoch} of training {trainer.training_id} (key {key.id}); record it first"
        )
    if replaying:
        tape = Tape(key.id, recorded=list(store.get_episode(key.id).events))
        yield ProposalSession(tape, OFFLINE_BASE_URL, "replaykit-offline", seed), key.id
        tape.check_complete("the proposer")
        trainer.progress(
            "note",
            {"message": f"epoch {epoch}: proposal replayed from cassette {key.id[:12]} (no model calls)"},
        )
        return
    tape = Tape(key.id)
    with open_endpoint(mcfg) as endpoint:
        scrubber = Scrubber(secrets_for(trainer.config, endpoint.api_key or api_key(mcfg)))
        session = ProposalSession(
            tape, endpoint.base_url, endpoint.api_key, seed, scrubber, tuple(trainer.config.record.rules)
        )
        try:
            yield session, key.id
        except Exception:
            _check_endpoint(tape, scrubber, endpoint, mcfg)
            raise
        _check_endpoint(tape, scrubber, endpoint, mcfg)
    store.put_episode(
        Episode(
            key,
            tape.events,
            {
                "kind": "proposal",
                "brief": brief,
                "epoch": epoch,
                "backend": trainer.estimator.identity(),
                **({"workspace": workspace_meta(workspace)} if workspace else {}),
            },
        )
    )
    trainer.paid.proposer_calls += len(tape.llm_events)
