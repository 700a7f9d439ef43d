"""Secrets made during an episode: ``keep_secret(name, value)`` from anywhere the harness runs (a
bridge's token, made inside ``solve``) and the episode scrubs ``value`` as ``<secret:NAME>`` from
everything it stores from then on (the rollout installs the keeper around the harness:
:func:`secrets_kept_by`; the tape and the recorder share the scrubber it feeds). Outside an
episode it does nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Keeper = Callable[[str, str], None]
_KEEPER: ContextVar[Keeper | None] = ContextVar("replaykit_keep_secret", default=None)


def keep_secret(name: str, value: str) -> None:
    """Never store ``value`` (it is written ``<secret:NAME>``) in this episode."""
    keeper = _KEEPER.get()
    if keeper is not None:
        keeper(name, value)


@contextmanager
def secrets_kept_by(keeper: Keeper) -> Iterator[None]:
    """While inside, :func:`keep_secret` hands secrets to ``keeper``."""
    token = _KEEPER.set(keeper)
    try:
        yield
    finally:
        _KEEPER.reset(token)
