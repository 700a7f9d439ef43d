"""Batch-dependent sampling for the reference server's ``--noise`` mode.

Real inference servers batch concurrent requests, and batch-size-dependent kernels
change the floating-point reductions, so the same request at temperature 0 can
decode differently under load. ``--noise`` imitates that without timing: the
server's *load* is the number of client connections open when a request is
handled. Alone (load 1) a reply is the deterministic one; under load the reply's
text changes at a position and in a way derived from (request, load). Tool calls
are left alone. With noise off (the default) nothing changes.
"""

from __future__ import annotations

import dataclasses
import random

from replaykit.core.determinism import derive_seed
from replaykit.models.reference.protocol import AssistantTurn

FILLERS = ("now", "then", "indeed", "first", "simply", "carefully")


def batch_noise(turn: AssistantTurn, request_digest: str, load: int) -> AssistantTurn:
    """The reply as a server under ``load`` concurrent connections would decode it."""
    if load <= 1 or not turn.content:
        return turn
    rng = random.Random(derive_seed(request_digest, "batch", load))
    words = turn.content.split(" ")
    at = rng.randrange(1, len(words) + 1)
    words.insert(at, FILLERS[rng.randrange(len(FILLERS))])
    return dataclasses.replace(turn, content=" ".join(words))
