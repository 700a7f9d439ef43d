"""Every kind's grading semantics (``envs/verifier.py``): a verifier that timed out is named
as such, with how its output began and how it ended."""

from __future__ import annotations

from pathlib import Path

from replaykit.envs.results import Observation
from replaykit.envs.verifier import head_and_tail, verifier_grade


def test_a_timed_out_verifier_says_so_with_the_head_and_tail_of_its_output(tmp_path: Path) -> None:
    lines = "\n".join(f"collecting test {i}" for i in range(500))
    obs = Observation(
        stdout="session starts\n" + lines, stderr="hung in test_network", exit_code=124, timed_out=True
    )
    grade = verifier_grade(obs, tmp_path, 7.5)
    assert grade.infra_failure and not grade.passed
    assert grade.detail.startswith("verifier timed out after 7.5 s; output: session starts")
    assert grade.detail.endswith("hung in test_network")
    assert " … " in grade.detail and len(grade.detail) < 1100


def test_a_silent_timed_out_verifier_is_one_clause(tmp_path: Path) -> None:
    grade = verifier_grade(Observation("", "", 124, timed_out=True), tmp_path, 60)
    assert grade.detail == "verifier timed out after 60 s"


def test_head_and_tail_keeps_short_text_whole() -> None:
    assert head_and_tail("  all of it \n") == "all of it"
    cut = head_and_tail("a" * 50 + "b" * 50, limit=20, head=5)
    assert cut == "aaaaa … " + "b" * 12 and len(cut) == 20
