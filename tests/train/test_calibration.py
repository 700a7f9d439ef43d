"""The report quotes each criterion's false-accept rate as benchmarks/null_trainings.py measured
it (issue 37 item 3), with the panel it was measured on; docs/training.md holds the same figures."""

from __future__ import annotations

from replaykit.testing import REPO_ROOT
from replaykit.train.calibration import MEASURED, false_accept_line


def test_each_measured_criterion_is_quoted_with_its_panel_and_interval() -> None:
    line = false_accept_line({"name": "strict_pareto", "params": {}})
    assert line.startswith("strict_pareto's measured false-accept rate: 10/200 null trainings")
    assert "(0.050, 95% [0.024, 0.090])" in line and "8 tasks × 2 seeds" in line
    assert "at alpha 0.05, error_budget 0.05: 5/200" in false_accept_line(
        {"name": "paired_test", "params": {}}
    )


def test_a_criterion_never_measured_says_so() -> None:
    assert false_accept_line({"name": "margin_pareto", "params": {}}) == (
        "margin_pareto's false-accept rate was not measured (docs/training.md has those measured)"
    )


def test_the_figures_are_the_docs_figures() -> None:
    docs = (REPO_ROOT / "docs" / "training.md").read_text()
    for name, m in MEASURED.items():
        row = next(r for r in docs.splitlines() if r.startswith(f"| `{name}`"))
        assert (
            f"{m.accepted}/{m.trainings} = {m.accepted / m.trainings:.3f} [{m.low:.3f}, {m.high:.3f}]" in row
        )
