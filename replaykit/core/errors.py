"""Library errors: small named classes under one root.

The CLI turns any ``ReplaykitError`` into ``Error: <message>`` and exit 1, in one
place (``replaykit.commands.shell.run``). Messages are one line: what, which value, what to do.
"""

from __future__ import annotations

from typing import TypedDict


class ReplaykitError(Exception):
    """Root of every error replaykit raises on purpose."""


class ConfigError(ReplaykitError):
    """A config file or option is missing, malformed or inconsistent."""


class TaskError(ReplaykitError):
    """A task folder is malformed (names the file and the field)."""


class EnvError(ReplaykitError):
    """An environment could not start, run an action or grade."""


class HarnessError(ReplaykitError):
    """The harness repository is missing, dirty, or does not import."""


class StoreError(ReplaykitError):
    """The cassette store is unreadable or a lookup failed."""


class StoreCorrupt(StoreError):
    """Stored data does not match its address, its row or its events: the store is damaged.

    Never reported as "identical" and never as a divergence of the harness. ``what``
    names the damaged item (``blob 11299b…``, ``cassette 3fa2… column passed``),
    ``where`` the document that reached it.
    """

    def __init__(self, what: str, where: str = "", store: str = "") -> None:
        self.what, self.where, self.store = what, where, store
        text = f"store corrupt: {what}" + (f" ({where})" if where else "")
        if store:
            text += f" in store {store}; `replaykit cassettes verify --store {store}` lists all damage"
        super().__init__(text)

    def within(self, where: str, store: str = "") -> "StoreCorrupt":
        """The same damage, reached from ``where`` (kept when already set)."""
        return StoreCorrupt(self.what, self.where or where, self.store or store)


#: what a store error ends with when writing to another store is its fix: the CLI names how, with
#: the options the command has (``commands.shell``); a library caller reads it as it is
ANOTHER_STORE = "or write to another store"


class CassetteNotFound(StoreError):
    """No cassette (or run, training, verdict) with that id or key."""


class DivergenceReport(TypedDict, total=False):
    """Where a replay parted from its cassette (secrets scrubbed): the event, why, both sides."""

    episode: str
    position: int | None  # the recorded event's index (None: no recorded event matched)
    kind: str  # llm | env | grade | end | ...
    reason: str
    expected: object  # what was recorded there (a request form, an action, ...)
    actual: object  # what the replay produced
    diff: list[str]


class DivergenceError(ReplaykitError):
    """Replay produced a request or action that differs from the recorded one."""

    def __init__(self, message: str, report: DivergenceReport | None = None) -> None:
        super().__init__(message)
        self.report = report or {}


class ModelError(ReplaykitError):
    """A model endpoint answered with an error or could not be reached."""


class TrainError(ReplaykitError):
    """The training loop was driven wrongly or its git state is inconsistent."""


class EngineChanged(ReplaykitError):
    """The endpoint reports another engine identity than a reused cassette was recorded under."""
