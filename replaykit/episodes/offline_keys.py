"""A replay's env keys where its env kind cannot derive them on this machine (docker without
a daemon to ask for a task image's ID): taken from the recorded cassettes of the same key,
each one's id derived again from the key it claims."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.keys import CassetteKey
from replaykit.core.errors import EnvError


@dataclass
class OfflineKeys:
    """A replay's source of the env extras its kind cannot derive on this machine (docker
    without a daemon: the task image's ID): the recorded cassettes of the same key but for
    its extras, each row's id derived again from the key it claims (a row whose id is not its
    key's is not believed); ``note()`` says which tasks' extras came from the recording."""

    store: StoreBackend
    tasks: list[str] = field(default_factory=list)
    cause: str = ""

    def extra(self, key: CassetteKey, cause: EnvError) -> tuple[tuple[str, str], ...]:
        found: set[tuple[tuple[str, str], ...]] = set()
        for row in self.store.find_keyed(key):
            pairs = _pairs(row["key_json"])
            if pairs is not None and dataclasses.replace(key, extra=pairs).id == row["id"]:
                found.add(pairs)
        if len(found) != 1:
            what = (
                "no recorded cassette"
                if not found
                else f"{len(found)} recorded cassettes with other env extras"
            )
            raise EnvError(f"{cause} (replaying task {key.task_id}: {what} to take them from)") from None
        (extra,) = found
        self.tasks.append(key.task_id)
        self.cause = str(cause).split("; ")[0]  # what failed, without the advice to record live
        return extra

    def note(self) -> str | None:
        """One line saying which tasks' env keys were taken from the recording, and why."""
        if not self.tasks:
            return None
        return (
            f"{self.cause}: replaying {len(self.tasks)} task(s) with the env keys they were recorded with "
            "(their images not checked on this machine)"
        )


def _pairs(key_json: str) -> tuple[tuple[str, str], ...] | None:
    """A stored key's extras as key pairs, or None when they are not pairs of strings."""
    try:
        extra = json.loads(key_json).get("extra", [])
    except (ValueError, AttributeError):
        return None
    if not isinstance(extra, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(v, str) for v in p) for p in extra
    ):
        return None
    return tuple((str(p[0]), str(p[1])) for p in extra)
