"""A task's certificate, declared once, as one pydantic model: what certification stores per
task and run (a ``certificates`` row, ``doc`` holding the evidence) and hands back
(``certify_task``, ``get_certificate``). ``Certificate.from_row`` reads a row (its evidence
decoded), ``row`` the row the store writes (the evidence as canonical JSON).

The store imports this module when it reads or writes a certificate (a listing loads no
pydantic); ``FirstDifference`` and ``CertificateEvidence`` are TypedDicts pydantic validates
(extra keys kept), which certification's report rows hold too."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Self

from pydantic import ConfigDict, Field, with_config
from typing_extensions import NotRequired, TypedDict

from replaykit.core.determinism import canonical_json
from replaykit.core.document import Document, StoredJSON


@with_config(ConfigDict(extra="allow"))
class FirstDifference(TypedDict):
    """Where a re-execution parted from the recording (``network`` when it ran on a live network)."""

    field: Annotated[
        str, Field(description="What differed: exit_code, timed_out, stdout, stderr, grade or network.")
    ]
    seed: Annotated[int, Field(description="The seed of the episode that differed.")]
    cassette_id: Annotated[str, Field(description="The episode (cassette) that differed.")]
    position: NotRequired[Annotated[int, Field(description="The event's position in the cassette.")]]
    step: NotRequired[Annotated[int | None, Field(description="The environment step (none: the grading).")]]
    action: NotRequired[Annotated[str, Field(description="The action re-executed there.")]]
    recorded: NotRequired[Annotated[StoredJSON, Field(description="What the recording holds.")]]
    reexecuted: NotRequired[Annotated[StoredJSON, Field(description="What the re-execution gave.")]]


@with_config(ConfigDict(extra="allow"))
class CertificateEvidence(TypedDict, total=False):
    """A certificate's evidence (its ``doc``; empty for an error certificate)."""

    first_difference: Annotated[
        FirstDifference | None,
        Field(description="Where a re-execution parted from the recording (none: nowhere)."),
    ]
    cassettes: Annotated[list[str], Field(description="The task's episodes re-executed (cassette ids).")]


class Certificate(Document):
    """A task's certificate: whether re-executing its episodes of a run gave the recording back.
    Its columns are the ``certificates`` table's (``version`` is not one: every certificate is
    format 1)."""

    id: str = Field(
        description="The certificate's id: a hash of its task's content, env, image and episodes."
    )
    task_id: str = Field(description="The task, by its folder name.")
    task_digest: str = Field(description="The digest of the task's folder as recorded.")
    env_kind: str = Field(description="The environment kind that re-executed it.")
    image_id: str = Field(default="", description="The container image (empty: none).")
    status: str = Field(description="deterministic, forked or error (an error is never stored).")
    reason: str = Field(default="", description="Why, in one line (what forked, or the error).")
    run_id: str = Field(description="The run whose episodes were re-executed.")
    episodes: int = Field(description="Episodes re-executed.")
    doc: CertificateEvidence = Field(
        default_factory=lambda: CertificateEvidence(), description="The evidence."
    )
    created_at: str = Field(description="When it was made (ISO 8601, UTC).")

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> Self:
        """A ``certificates`` row (as stored, or as a bundle carries it) as a certificate: its
        ``doc`` decoded (``ValueError`` when it is not a certificate)."""
        doc = row.get("doc")
        return cls.read({**row, "doc": json.loads(str(doc)) if doc else {}})

    def row(self) -> dict[str, str | int]:
        """The ``certificates`` row the store writes: its columns, the evidence as canonical JSON."""
        out: dict[str, str | int] = {k: v for k, v in self.to_json().items() if k not in ("doc", "version")}
        out["doc"] = canonical_json(self.doc)
        return out


__all__ = ["Certificate", "CertificateEvidence", "FirstDifference"]
