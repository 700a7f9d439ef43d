"""The reference proposer: a deterministic curriculum over the quickstart harness."""

from __future__ import annotations

from replaykit.episodes.harness import TEMPLATES
from replaykit.models.reference.proposer import CURRICULUM, next_change, propose_edit

SOURCE = (TEMPLATES / "quickstart" / "harness.py").read_text()


def brief(source: str, tried: list[str] | None = None) -> str:
    history = [f"- epoch {i}: [{t}] something => rejected" for i, t in enumerate(tried or [])] or ["- (none)"]
    lines = ["Previously tried proposals:", *history, ""]
    return "\n".join([*lines, "Files:", f"=== harness.py ===\n{source}=== end harness.py ==="])


def test_curriculum_in_order_skipping_tried() -> None:
    first = next_change(brief(SOURCE))
    assert (
        first is not None
        and first[0].id == CURRICULUM[0].id
        and first[1].startswith("diff --git a/harness.py")
    )
    second = next_change(brief(SOURCE, [CURRICULUM[0].id]))
    assert second is not None and second[0].id == CURRICULUM[1].id


def test_an_applied_change_is_not_proposed_again() -> None:
    edited = propose_edit(SOURCE, brief(SOURCE))
    assert edited is not None
    new_source, description = edited
    assert description.startswith(f"[{CURRICULUM[0].id}]")
    again = next_change(brief(new_source))
    assert again is not None and again[0].id != CURRICULUM[0].id


def test_exhausted_curriculum_proposes_nothing() -> None:
    assert next_change(brief(SOURCE, [c.id for c in CURRICULUM])) is None
