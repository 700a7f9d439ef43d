"""``paired_test``: a criterion whose false-accept rate is bounded by its ``alpha``.

It accepts only when the exact one-sided McNemar test (``significance.mcnemar_exact``) rejects
"the change does nothing" in favour of the candidate at its level, over the task instances both
runs measured. Steps and tokens never accept on their own: a candidate that solves the same set,
however much cheaper, is a tie, and a tie is rejected (a tie-break accepts half of the changes
that do nothing; ``docs/training.md`` has the measured rates). Infrastructure failures are
bracketed: the test is made with each one counted against the candidate (a baseline's infra as
solved, a candidate's as failed), so an acceptance never rests on an episode that was not graded.

``level``: the α this epoch's test spends, when the training has an error budget
(``train.error_budget``, ``error_budget.py``); without one it is ``alpha``. It is a parameter
of the verdict, so the verdict recomputes from its runs alone.
"""

from __future__ import annotations

from replaykit.core.errors import ConfigError
from replaykit.core.records import JSON
from replaykit.core.run_doc import RunDoc
from replaykit.train.significance import mcnemar_exact
from replaykit.train.verdicts import Verdict, movement, pair_runs, with_exclusions


def _alpha(value: float) -> float:
    if not 0 < value < 1:
        raise ConfigError(f"alpha {value}: give a level strictly between 0 and 1, e.g. 0.05")
    return value


def _level(value: float | None) -> float | None:
    if value is not None and not 0 <= value < 1:
        raise ConfigError(f"level {value}: an epoch's share of the error budget is at least 0 and below 1")
    return value


class PairedTest:
    """Accept when the exact McNemar test says the candidate solves more (one-sided p ≤ level)."""

    name = "paired_test"

    def __init__(self, alpha: float = 0.05, level: float | None = None) -> None:
        self.alpha = _alpha(float(alpha))
        self.level = _level(None if level is None else float(level))

    def params(self) -> dict[str, JSON]:
        return {"alpha": self.alpha, **({"level": self.level} if self.level is not None else {})}

    def at_level(self, level: float) -> PairedTest:
        """The same criterion spending ``level`` (an error budget's share for one epoch)."""
        return PairedTest(self.alpha, level)

    @property
    def spends(self) -> float:
        return self.alpha if self.level is None else self.level

    def __call__(self, candidate: RunDoc, baseline: RunDoc, exclude: dict[str, str] | None = None) -> Verdict:
        b, c, units, excluded = pair_runs(candidate, baseline, exclude)
        regressions, new = movement(b, c, units)
        infra = [u for u in units if b[u].infra or c[u].infra]
        base_only = sum(
            1 for u in units if (b[u].passed or b[u].infra) and not (c[u].passed and not c[u].infra)
        )
        cand_only = sum(
            1 for u in units if c[u].passed and not c[u].infra and not (b[u].passed or b[u].infra)
        )
        _, p = mcnemar_exact(base_only, cand_only)
        level = self.spends
        accept = p <= level
        solved_b, solved_c = sum(b[u].passed for u in units), sum(c[u].passed for u in units)
        reason = (
            f"exact McNemar over {len(units)} paired instance(s): {cand_only} solved by the candidate only, "
            f"{base_only} by the baseline only{' (infra counted against the candidate)' if infra else ''}; "
            f"one-sided p={p:.4f} {'≤' if accept else '>'} level {level:.4g}"
            + ("" if self.level is None else f" (its share of the error budget; alpha {self.alpha})")
        )
        return Verdict(
            self.name,
            self.params(),
            accept,
            (solved_b - solved_c) / max(len(units), 1),
            with_exclusions(reason, excluded),
            regressions,
            new,
            excluded,
            {
                "units": len(units),
                "solved_baseline": solved_b,
                "solved_candidate": solved_c,
                "discordant": [base_only, cand_only],
                "p_value": p,
                "level": level,
                "infra": infra,
                "steps": [sum(b[u].steps for u in units), sum(c[u].steps for u in units)],
                "tokens": [sum(b[u].tokens for u in units), sum(c[u].tokens for u in units)],
            },
        )
