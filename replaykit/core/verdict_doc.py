"""The verdict document (kind ``verdict``) as one pydantic model: ``VerdictDoc``, what a judged
epoch records (``train/documents.put_verdict``) and ``Store.get_verdict`` returns, and the
verdict it holds (``VerdictRecord``, which a training's epochs hold too).

``VerdictDoc.read`` a stored one, ``to_json`` what the store writes (``core/document.py``).
``VerdictRecord`` is a TypedDict that pydantic validates (extra keys kept), so the training's
epoch records (``core/records.py``, plain dicts) and the audits' JSON hold the same shape.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from replaykit.core.document import Document, Real, StoredJSON, WhenSet


@with_config(ConfigDict(extra="allow"))
class VerdictRecord(TypedDict):
    """A criterion's verdict as stored (``train.verdicts.Verdict.to_dict``)."""

    criterion: Annotated[str, Field(description="The criterion that judged, by its registered name.")]
    params: Annotated[
        dict[str, StoredJSON], Field(description="The criterion's parameters, as it reports them.")
    ]
    accept: Annotated[bool, Field(description="The candidate is accepted over the baseline.")]
    loss: Annotated[Real, Field(description="The criterion's loss (lower: the candidate is better).")]
    reason: Annotated[str, Field(description="Why, in one line.")]
    regressions: Annotated[
        list[str], Field(description="Units the baseline solved and the candidate did not.")
    ]
    new_solves: Annotated[
        list[str], Field(description="Units the candidate solved and the baseline did not.")
    ]
    excluded: Annotated[
        dict[str, str],
        Field(description="Tasks left out of the comparison, each with why (a forked certificate)."),
    ]
    metrics: Annotated[dict[str, StoredJSON], Field(description="The criterion's own numbers.")]


class VerdictDoc(Document):
    """A recorded verdict (kind ``verdict``): (baseline run, candidate run, criterion) → the
    verdict, with its evidence (the certificates its exclusions come from)."""

    verdict_id: str = Field(
        description="The verdict's id: a hash of its runs, criterion, params and certificates (train.loss.verdict_id_of)."
    )
    kind: str = Field(default="verdict", description="The document kind (always verdict).")
    training_id: str = Field(description="The training whose epoch it judged.")
    epoch: int = Field(description="The epoch it judged.")
    baseline_run: str = Field(description="The baseline's run.")
    candidate_run: str | None = Field(description="The candidate's run.")
    baseline_sha: str = Field(description="The baseline's harness commit.")
    candidate_sha: str | None = Field(description="The candidate's harness commit.")
    runs: list[str | None] = Field(
        default_factory=list, description="Its two runs, baseline then candidate (derived)."
    )
    trees: list[str | None] = Field(
        default_factory=list, description="Its two harness commits, baseline then candidate (derived)."
    )
    verdict: VerdictRecord = Field(description="The criterion's verdict.")
    certificates: list[str] | None = Field(
        default=None,
        description="The forked certificates its exclusions come from, sorted (absent: recorded before verdicts named them).",
    )
    certified: Annotated[list[str] | None, WhenSet] = Field(
        default=None,
        description="Every certificate of its baseline's tasks, sorted (a training with train.certify: every_epoch).",
    )

    def _built(self) -> None:
        """``runs`` and ``trees`` are derived; the certificates are stored sorted."""
        self._set("runs", [self.baseline_run, self.candidate_run])
        self._set("trees", [self.baseline_sha, self.candidate_sha])
        self._set("certificates", sorted(self.certificates or []))
        if self.certified is not None:
            self._set("certified", sorted(self.certified))


__all__ = ["VerdictDoc", "VerdictRecord"]
