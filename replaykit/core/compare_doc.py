"""The compare result (kind ``compare``) as one pydantic model: ``CompareDoc``, what
``episodes.compare.compare`` stores and returns, and its cells (``CompareCell``).

``CompareDoc.read`` a stored one, ``to_json`` what the store writes (``core/document.py``).
``CompareCell`` is a TypedDict that pydantic validates (extra keys kept), so the report's and
the viewer's grids (plain dicts) hold the same shape.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, with_config
from typing_extensions import NotRequired, TypedDict

from replaykit.core.document import Document, Real, WhenSet


@with_config(ConfigDict(extra="allow"))
class CompareCell(TypedDict):
    """One harness × model cell: its run and solve rate (``recorded``, ``reused``,
    ``model_calls``, ``reused_events``: this invocation's, never stored)."""

    harness: Annotated[str, Field(description="The harness, by its role or ref (as --harness gave it).")]
    harness_sha: Annotated[str, Field(description="The harness commit measured.")]
    model: Annotated[str, Field(description="The model, by name.")]
    run_id: Annotated[str, Field(description="The cell's run.")]
    solved: Annotated[int, Field(description="Episodes its run solved.")]
    total: Annotated[int, Field(description="Episodes its run measured.")]
    solve_rate: Annotated[Real, Field(description="solved / total (0 when none).")]
    recorded: NotRequired[Annotated[int, Field(description="Episodes this invocation recorded.")]]
    reused: NotRequired[Annotated[int, Field(description="Episodes this invocation reused from the store.")]]
    model_calls: NotRequired[
        Annotated[int, Field(description="Requests this invocation sent to the endpoint.")]
    ]
    reused_events: NotRequired[
        Annotated[int, Field(description="Events its new episodes were served from donors instead.")]
    ]


class CompareDoc(Document):
    """A compare result (kind ``compare``): every harness × model cell's run and solve rate, the
    "train once, swap models" table; its id derives from its models, harnesses and cells."""

    kind: str = Field(default="compare", description="The document kind (always compare).")
    name: str = Field(default="", description="The config's name.")
    models: list[str] = Field(description="The models compared, in column order.")
    harnesses: list[str] = Field(description="The harnesses compared (roles or refs), in row order.")
    cells: list[CompareCell] = Field(description="One cell per harness × model measured.")
    runs: list[str] = Field(default_factory=list, description="Its cells' runs, in cell order (derived).")
    trees: list[str] = Field(
        default_factory=list, description="Its cells' harness commits, sorted (derived)."
    )
    compare_id: str = Field(
        description="The compare's id: a hash of its models, harnesses and cells' (SHA, model, run)."
    )
    model_calls: Annotated[int | None, WhenSet] = Field(
        default=None,
        description="Requests this invocation sent to endpoints (returned by compare, never stored).",
    )
    reused_events: Annotated[int | None, WhenSet] = Field(
        default=None,
        description="Events this invocation's episodes were served from donors (returned by compare, never stored).",
    )

    def _built(self) -> None:
        """``runs`` and ``trees`` are derived from the cells."""
        self._set("runs", [c["run_id"] for c in self.cells])
        self._set("trees", sorted({c["harness_sha"] for c in self.cells}))


__all__ = ["CompareCell", "CompareDoc"]
