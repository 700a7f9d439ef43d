"""``ParetoFrontier``: in the spirit of GEPA's Pareto selection.

It keeps every candidate that no other kept candidate dominates by its solved set
of task instances (task × seed), and proposes from each of them in turn (round
robin, so a replay or a resume picks the same parents). The baseline branch
still only fast-forwards: a candidate is promoted only when the criterion accepts
it *and* it was proposed from the current baseline HEAD. The HEAD always stays in
the frontier.
"""

from __future__ import annotations

from replaykit.core.records import JSON
from replaykit.core.run_doc import RunDoc
from replaykit.train.optim.base import ParameterBound, StepInput


def solved_set(run: RunDoc | None) -> frozenset[str]:
    if run is None:
        return frozenset()
    return frozenset(e.unit for e in run.episodes if e.passed and not e.infra_failure)


class ParetoFrontier(ParameterBound):
    name = "pareto_frontier"

    def __init__(self) -> None:
        super().__init__()
        self.members: list[tuple[str, frozenset[str]]] = []
        self.turn = 0

    def parent(self, head: str) -> str:
        if not self.members:
            return head
        return self.members[self.turn % len(self.members)][0]

    def state(self) -> dict[str, JSON]:
        return {"frontier": [{"sha": sha, "solved": sorted(s)} for sha, s in self.members], "turn": self.turn}

    def _add(self, sha: str, solved: frozenset[str]) -> None:
        if all(sha != m for m, _ in self.members):
            self.members.append((sha, solved))

    def decide(self, step: StepInput) -> bool:
        if not self.members:
            self._add(
                step.head, solved_set(step.baseline_run) if step.baseline_sha == step.head else frozenset()
            )
        self.turn += 1
        if not step.measurable or step.candidate_sha is None:
            return False
        cand = solved_set(step.candidate_run)
        promote = bool(step.verdict and step.verdict.accept and step.baseline_sha == step.head)
        dominated = any(s >= cand and s != cand for _, s in self.members) or any(
            s == cand for _, s in self.members
        )
        if promote or not dominated:
            head = step.candidate_sha if promote else step.head
            self.members = [(m, s) for m, s in self.members if m == head or not (cand >= s and cand != s)]
            self._add(step.candidate_sha, cand)
        return promote
