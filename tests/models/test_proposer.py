"""The reference proposer: a deterministic curriculum over the quickstart harness."""

from __future__ import annotations

from replaykit.episodes.config_paths import TEMPLATES
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


def test_a_behaviour_the_harness_already_has_is_not_proposed_again() -> None:
    """The user's own retry after a failure (written their way): no second retry nudge."""
    own = SOURCE.replace(
        '            messages.append({"role": "tool", "tool_call_id": call.id, "content": format_observation(obs)})\n',
        '            messages.append({"role": "tool", "tool_call_id": call.id, "content": format_observation(obs)})\n'
        "            if obs.exit_code:\n"
        '                messages.append({"role": "user", "content": "That failed; retry with a fix."})\n',
    )
    assert own != SOURCE
    found = next_change(brief(own))
    assert found is not None and found[0].id == "verbose-prompt"
    assert "retry" not in "".join(line for line in found[1].splitlines() if line.startswith("+"))


def test_a_harness_not_of_the_quickstart_shape_gets_no_diff_but_one_line_saying_why() -> None:
    from replaykit.models.reference.proposer import FOREIGN, proposer_turn
    from replaykit.models.reference.protocol import ChatRequest

    foreign = "def solve(task, env, llm, ctx):\n    env.run('make')\n    return 'Done'\n"
    messages = [{"role": "user", "content": brief(foreign)}]
    request = ChatRequest(body={}, digest="", model="reference-proposer", messages=messages)
    turn = proposer_turn(request)
    assert turn.content == FOREIGN and "```diff" not in (turn.content or "")
    assert "knows only the quickstart harness's edits" in FOREIGN and "docs/training.md" in FOREIGN
    assert "\n" not in FOREIGN
    assert propose_edit(foreign, brief(foreign)) is None
