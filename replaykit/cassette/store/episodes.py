"""Episodes (cassettes): written in one transaction, decoded with every blob, the key
and the cached columns verified; index listings that never read episode documents.

The episode codec, events and their checks are imported where an episode is written or
decoded: a listing of index rows loads none of them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, cast

from replaykit.cassette.integrity import cassette_columns, cassette_mismatches, run_episode_mismatches
from replaykit.cassette.store.blobs import BlobsMixin
from replaykit.cassette.store.driver import Where
from replaykit.cassette.store.schema import CassetteColumns, CassetteRow, typed_rows
from replaykit.core.determinism import canonical_json
from replaykit.core.errors import CassetteNotFound, StoreCorrupt, StoreError
from replaykit.core.tree_digest import task_tree_parts

if TYPE_CHECKING:
    from replaykit.cassette.codec import Blobs
    from replaykit.cassette.events import Episode
    from replaykit.cassette.lineage import ReuseCounts
    from replaykit.core.run_doc import RunDoc


class EpisodesMixin(BlobsMixin):
    """The ``cassettes`` table: one row (cached columns + document) per episode."""

    def put_episode(self, episode: Episode) -> None:
        """Write an episode atomically (replacing one with the same key)."""
        from replaykit.cassette.codec import encode_episode, put

        blobs: Blobs = {}
        doc = encode_episode(episode, blobs)
        row = {**cassette_columns(episode), "doc": put(blobs, canonical_json(doc).encode("utf-8"))}
        self._write_row("cassettes", row, blobs)
        self._checked.pop(episode.id, None)

    def has(self, cassette_id: str) -> bool:
        return bool(self.driver.select("cassettes", ["id"], {"id": cassette_id}, limit=1))

    def _missing(self, cassette_id: str) -> CassetteNotFound:
        return CassetteNotFound(
            f"no cassette {cassette_id!r} in store {self.location}; list them with `replaykit cassettes ls`"
        )

    def cassette_row(self, cassette_id: str) -> CassetteRow:
        row = self._row(CassetteRow, "cassettes", "id", cassette_id)
        if row is None:
            raise self._missing(cassette_id)
        return row

    def get_episode(self, cassette_id: str) -> Episode:
        """Decode a cassette, verifying every blob, its key against its row and its cached columns
        (the row and its blobs in one round trip where the driver can)."""
        from replaykit.cassette.codec import READABLE_FORMATS, decode_episode
        from replaykit.cassette.lineage import own_problems, reused_counts
        from replaykit.cassette.outcomes import outcome_problems

        found = self._read_document("cassettes", cassette_id)
        if found is None:
            raise self._missing(cassette_id)
        row, read = cast(CassetteRow, found[0]), found[1]
        where = f"cassette {cassette_id}"
        try:
            doc = json.loads(read(row["doc"]))
            fmt = doc.get("format") if isinstance(doc, dict) else None
            if isinstance(fmt, int) and fmt > max(
                READABLE_FORMATS
            ):  # written by a newer replaykit, not damage
                raise StoreError(
                    f"{where} has cassette format {doc.get('format')!r}; this replaykit reads {READABLE_FORMATS} — upgrade replaykit"
                )
            episode = decode_episode(doc, read)
        except StoreCorrupt as exc:
            raise exc.within(where, self.location) from None
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            raise self.corrupt(
                f"document {str(row['doc'])[:12]}… is unreadable ({type(exc).__name__}: {str(exc)[:80]})",
                where,
            ) from None
        derived = cassette_columns(episode)
        if derived["id"] != cassette_id:
            raise self.corrupt(
                f"cassette row {cassette_id} points at the document of cassette {derived['id']}"
            )
        bad = cassette_mismatches(row, episode, derived)
        if bad:
            raise self.corrupt(f"cassette {cassette_id}: column(s) {', '.join(bad)} do not match its events")
        claim = own_problems(episode)  # what it says it was served, against its own events
        if claim:
            raise self.corrupt(f"cassette {cassette_id}: {claim[0]}")
        outcome = outcome_problems(episode)  # its recorded outcome and limits, against its events
        if outcome:
            raise self.corrupt(f"cassette {cassette_id}: {outcome[0]}")
        self._checked[cassette_id] = (row["doc"], derived, reused_counts(episode))
        return episode

    def verified_columns(self, cassette_id: str) -> CassetteColumns:
        """A cassette's derived columns, checked against its events (decoded once per store object)."""
        checked = self._checked.get(cassette_id)
        if checked is None or checked[0] != self.cassette_row(cassette_id)["doc"]:
            self.get_episode(cassette_id)
            checked = self._checked[cassette_id]
        return checked[1].copy()

    def verified_reuse(self, cassette_id: str) -> ReuseCounts:
        """What a cassette's reuse claim counts, the claim checked against its own events."""
        self.verified_columns(cassette_id)
        return self._checked[cassette_id][2]

    def check_run(self, run: RunDoc) -> None:
        """Every episode entry of a run document against its cassette's events (what verdicts
        are computed from)."""
        bases = set()
        tasks = set()
        for entry in run.episodes:
            cid = entry.cassette_id
            reused = self.verified_reuse(cid)
            columns = self.verified_columns(cid)
            tasks.add((columns["task_id"], columns["task_digest"]))
            bad = run_episode_mismatches(entry, columns, reused)
            if bad:
                raise self.corrupt(
                    f"run {run.run_id}: episode {cid} field(s) {', '.join(bad)} do not match its cassette"
                )
            if reused.events:
                bases.add(reused.basis)
        basis = "shared sample" if "shared sample" in bases else "exact" if bases else ""
        if run.reuse_basis != basis:
            raise self.corrupt(f"run {run.run_id}: its reuse_basis does not match its cassettes' claims")
        named = [task_tree_parts(t) for t in run.trees]
        if any(parts is not None and parts not in tasks for parts in named):
            raise self.corrupt(f"run {run.run_id}: it names a task folder none of its episodes ran")

    def list_cassettes(self, where: Where | None = None, limit: int | None = None) -> list[CassetteRow]:
        """Index rows of the cassettes matching ``where``, oldest first (documents not read)."""
        rows = self.driver.select(
            "cassettes", where=where, order=[("created_at", False), ("id", False)], limit=limit
        )
        return typed_rows(CassetteRow, rows)

    def cassette_summaries(self, limit: int | None = None) -> list[CassetteRow]:
        """Index rows of the newest ``limit`` cassettes (all when None), oldest first; episode
        documents are not read."""
        rows = self.driver.select("cassettes", order=[("created_at", True), ("id", True)], limit=limit)
        return typed_rows(CassetteRow, reversed(rows))

    def newest_cassettes(self, limit: int, offset: int = 0) -> list[CassetteRow]:
        """Index rows newest first (by time, then id): ``limit`` of them after the newest
        ``offset`` (what changed since a reader's last look is at the front); documents not read."""
        rows = self.driver.select(
            "cassettes", order=[("created_at", True), ("id", True)], limit=limit, offset=offset
        )
        return typed_rows(CassetteRow, rows)

    def count_cassettes(self) -> int:
        return self.driver.count("cassettes")
