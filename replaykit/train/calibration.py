"""How often each criterion accepted a change that does nothing, as ``benchmarks/null_trainings.py``
measured it (docs/training.md): 200 null trainings of 3 epochs on 8 one-step tasks × 2 seeds of
``reference-noisy``, main at 5f2afd7. A figure of that panel and that noise, never of another:
the report quotes it beside the criterion that decided, with the panel it was measured on."""

from __future__ import annotations

from typing import NamedTuple

from replaykit.core.training_doc import NamedParams


class Measured(NamedTuple):
    accepted: int  # null trainings that accepted any epoch
    trainings: int
    low: float  # the rate's exact 95% interval (Clopper–Pearson)
    high: float
    params: str  # the parameters it was measured with


MEASURED = {
    "strict_pareto": Measured(10, 200, 0.024, 0.090, ""),
    "mean_reward": Measured(25, 200, 0.083, 0.179, "alpha 0.1"),
    "paired_test": Measured(5, 200, 0.008, 0.057, "alpha 0.05, error_budget 0.05"),
}
PANEL = "benchmarks/null_trainings.py: 3 epochs, 8 tasks × 2 seeds, reference-noisy"


def false_accept_line(criterion: NamedParams) -> str:
    """``strict_pareto's measured false-accept rate: 10/200 null trainings (0.050, 95% [0.024,
    0.090]) on …``, or that it was not measured."""
    name = criterion.get("name", "")
    found = MEASURED.get(name)
    if found is None:
        return f"{name}'s false-accept rate was not measured (docs/training.md has those measured)"
    at = f" at {found.params}" if found.params else ""
    return (
        f"{name}'s measured false-accept rate{at}: {found.accepted}/{found.trainings} null trainings "
        f"accepted a change that does nothing ({found.accepted / found.trainings:.3f}, 95% "
        f"[{found.low:.3f}, {found.high:.3f}]) on {PANEL}; a figure of that panel, not of this one"
    )
