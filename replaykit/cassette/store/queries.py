"""Named queries other layers ask (trainings by spec, proxy sessions by name, an episode's
possible donors and its forks, certificates): the SQL they need stays here, behind a method
name."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, cast

from replaykit.cassette.store.documents import DocumentsMixin
from replaykit.cassette.store.driver import Row, Where
from replaykit.cassette.store.schema import CassetteRow, typed_rows

if TYPE_CHECKING:
    from replaykit.cassette.certificates import Certificate
    from replaykit.cassette.keys import CassetteKey
    from replaykit.core.training_doc import TrainingDoc


class QueriesMixin(DocumentsMixin):
    """Look-ups by something other than a primary key."""

    def find_trainings(self, spec_digest: str) -> list[TrainingDoc]:
        """Training documents recorded with this spec (a resumed training is one of them),
        oldest first: the ``runs`` rows of kind ``training`` whose ``config_digest`` is it."""
        rows = self.driver.select(
            "runs",
            ["id"],
            {"kind": "training", "config_digest": spec_digest},
            [("created_at", False), ("id", False)],
        )
        # as stored, each row and its blob as of one version (a training saves after every epoch)
        return [self.training_of(str(r["id"]), json.loads(self.doc_version(str(r["id"]))[1])) for r in rows]

    def find_proxy_sessions(self, name: str, endpoint: str | None = None) -> list[CassetteRow]:
        """Index rows of the proxy sessions called ``name`` (for one upstream endpoint), oldest first."""
        where: Where = {"kind": "proxy", "task_id": name}
        if endpoint is not None:
            where = {**where, "endpoint": endpoint}
        rows = self.driver.select("cassettes", where=where, order=[("created_at", False), ("id", False)])
        return typed_rows(CassetteRow, rows)

    def find_donors(self, key: CassetteKey, limit: int = 32) -> list[CassetteRow]:
        """Index rows of cassettes with ``key``'s kind, task (and its content), model, seed and
        config under another harness SHA, newest first (at most ``limit``): the episodes prefix
        reuse may be served from (the caller checks their keys' extras and engine)."""
        rows = self.driver.select(
            "cassettes",
            where=_same_episode(key),
            order=[("created_at", True), ("id", True)],
            limit=int(limit) + 1,
        )
        return [r for r in typed_rows(CassetteRow, rows) if r["harness_sha"] != key.harness_sha][:limit]

    def find_keyed(self, key: CassetteKey) -> list[CassetteRow]:
        """Index rows of cassettes whose key is ``key`` but for what serves the model, its extras
        (the env kind's part) and its key format, oldest first: what a replay that cannot derive
        those here (a measured engine, a docker image without a daemon to ask) may take them from
        (the caller derives each row's id again from the key it claims)."""
        same = {k: v for k, v in _same_episode(key).items() if k != "endpoint"}
        where: Where = {**same, "harness_sha": key.harness_sha}
        rows = self.driver.select("cassettes", where=where, order=[("created_at", False), ("id", False)])
        return typed_rows(CassetteRow, rows)

    def find_forks(self, parent: CassetteKey) -> list[CassetteRow]:
        """Index rows of the cassettes forked from ``parent``'s (their keys name it; a fork runs
        its parent's task and seed), oldest first."""
        from replaykit.cassette.lineage import FORKED_FROM  # lineage loads the events: for a fork

        rows = self.driver.select(
            "cassettes",
            where={"task_id": parent.task_id, "seed": parent.seed},
            order=[("created_at", False), ("id", False)],
        )
        return [r for r in typed_rows(CassetteRow, rows) if [FORKED_FROM, parent.id] in _extra(r["key_json"])]

    def get_certificate(self, cert_id: str) -> Certificate | None:
        """A certificate by id (its evidence decoded), or None. Never creates the table; a row
        that is not a certificate is store corruption."""
        rows = self.driver.select("certificates", where={"id": cert_id}, limit=1)
        if not rows:
            return None
        from replaykit.cassette.certificates import Certificate  # pydantic: loaded for a certificate found

        try:
            return Certificate.from_row(rows[0])
        except ValueError as exc:
            raise self.corrupt(
                f"its row is not a certificate ({str(exc)[:80]})", f"certificate {cert_id}"
            ) from None

    def put_certificate(self, cert: Certificate) -> None:
        """Store a certificate (its evidence as canonical JSON), replacing one with its id."""
        row = cast(Row, cert.row())
        with self.write_lock():
            self.driver.insert("certificates", [row], conflict="replace")


def _same_episode(key: CassetteKey) -> Where:
    """The index columns of ``key`` but its harness SHA and extras: its kind, task (and its
    content), seed, model and config."""
    m = key.model
    return {
        "kind": key.kind,
        "task_id": key.task_id,
        "seed": key.seed,
        "task_digest": key.task_digest,
        "model": m.name,
        "endpoint": m.endpoint,
        "model_revision": m.revision,
        "config_digest": key.config_digest,
    }


def _extra(key_json: str) -> list[object]:
    """A row's key extras (none when its key is unreadable: reading that cassette says why)."""
    try:
        extra = json.loads(key_json).get("extra", [])
    except (ValueError, AttributeError):
        return []
    return extra if isinstance(extra, list) else []
