"""The calibrated criterion ``paired_test`` and ``train.error_budget`` (issue 37 item 3): exact
McNemar decisions, infra counted against the candidate, no tie-breaks, a false-accept rate at most
alpha on simulated null comparisons, the fallback levels, one-line refusals of bad values."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from replaykit.core.errors import ConfigError
from replaykit.core.run_doc import RunDoc
from replaykit.episodes.config import load_config
from replaykit.testing import REPO_ROOT, run_doc
from replaykit.train.config import train_config
from replaykit.train.criteria import make_criterion
from replaykit.train.error_budget import epoch_criterion, epoch_level
from replaykit.train.paired_test import PairedTest


def run(results: dict[str, bool | str], steps: int = 2) -> RunDoc:
    """unit -> True / False / "infra"."""
    episodes: list[dict[str, object]] = []
    for unit, r in results.items():
        task, seed = unit.split("#")
        episodes.append(
            {
                "task_id": task,
                "seed": int(seed),
                "passed": r is True,
                "infra_failure": r == "infra",
                "reward": float(r is True),
                "steps": steps,
                "tokens": 10 * steps,
            }
        )
    return run_doc(episodes)


def panel(solved: set[str], tasks: int = 8, seeds: int = 2) -> dict[str, bool | str]:
    return {f"t{t}#{s}": f"t{t}#{s}" in solved for t in range(tasks) for s in range(seeds)}


def test_it_accepts_only_what_the_exact_test_rejects() -> None:
    none = run(panel(set()))
    six = run(panel({f"t{t}#0" for t in range(6)}))  # 6 of 0: one-sided p = 1/64
    five = run(panel({f"t{t}#0" for t in range(5)}))  # 5 of 0: 1/32
    crit = PairedTest(alpha=0.05)
    accepted = crit(six, none)
    assert (
        accepted.accept and accepted.metrics["p_value"] == 1 / 64 and accepted.metrics["discordant"] == [0, 6]
    )
    assert accepted.loss == -6 / 16 and "one-sided p=0.0156 ≤ level 0.05" in accepted.reason
    assert crit(five, none).accept and not PairedTest(alpha=0.025)(five, none).accept
    assert not crit(none, six).accept  # the baseline better: never accepted
    tie = PairedTest()(run(panel({"t0#0"}), steps=1), run(panel({"t0#0"}), steps=5))
    assert not tie.accept and tie.metrics["p_value"] == 1.0  # far fewer steps: still a tie, rejected


def test_infra_counts_against_the_candidate() -> None:
    base = panel(set())
    cand = panel({f"t{t}#0" for t in range(6)})
    cand["t0#0"] = "infra"  # one of its six wins was not graded: 5 of 0 left
    base["t6#0"] = "infra"  # a baseline episode not graded counts as the baseline's solve
    verdict = PairedTest()(run(cand), run(base))
    assert verdict.metrics["discordant"] == [1, 5] and not verdict.accept  # p = 7/64
    assert (
        verdict.metrics["infra"] == ["t0#0", "t6#0"]
        and "infra counted against the candidate" in verdict.reason
    )


def test_params_levels_and_bad_values() -> None:
    assert make_criterion("paired_test").params() == {"alpha": 0.05}
    assert PairedTest(0.1, 0.02).params() == {"alpha": 0.1, "level": 0.02}
    assert PairedTest(0.05).at_level(0.0).spends == 0.0  # a spent budget accepts nothing
    for bad in (0, 1, 1.5, -0.1):
        with pytest.raises(ConfigError, match=rf"^alpha {float(bad)}: give a level strictly between 0 and 1"):
            make_criterion("paired_test", alpha=bad)
    with pytest.raises(ConfigError, match=r"level 1\.0"):
        PairedTest(level=1.0)


def test_the_null_false_accept_rate_is_at_most_alpha() -> None:
    """4,000 comparisons of two independent draws of the same harness (each task solved with its
    own probability): paired_test accepts at most alpha of them (and some: it is no criterion
    that never accepts)."""
    rng = random.Random(37)
    accepts = {"paired_test": 0, "strict_pareto": 0}
    trials = 4000
    for _ in range(trials):
        rates = [rng.uniform(0.1, 0.9) for _ in range(8)]
        draw = [{f"t{t}#{s}": rng.random() < rates[t] for t in range(8) for s in range(2)} for _ in "bc"]
        base, cand = run(dict(draw[0])), run(dict(draw[1]), steps=rng.choice([1, 2, 3]))
        for name in accepts:
            accepts[name] += make_criterion(name)(cand, base).accept
    assert 0 < accepts["paired_test"] / trials <= 0.05


def test_the_budget_is_split_and_passed_on() -> None:
    assert epoch_level(0.05, 5, []) == pytest.approx(0.01)
    assert epoch_level(0.05, 5, ["rejected", "accepted"]) == pytest.approx(0.02)
    assert epoch_level(0.05, 5, ["skipped", "accepted"]) == pytest.approx(0.03)  # nothing spent, passed on
    assert epoch_level(0.06, 2, ["rejected", "rejected"]) == 0.0  # past the planned epochs: spent
    crit = epoch_criterion(PairedTest(), 0.05, 5, ["accepted"])
    assert crit.params() == {"alpha": 0.05, "level": pytest.approx(0.02)}
    strict = make_criterion("strict_pareto")
    assert epoch_criterion(strict, 0.05, 5, []) is strict  # takes no level: as it is
    assert epoch_criterion(PairedTest(), None, 5, ["accepted"]).params() == {"alpha": 0.05}


QUICKSTART = (REPO_ROOT / "configs" / "quickstart.yaml").read_text().replace("../envs/", f"{REPO_ROOT}/envs/")


@pytest.mark.parametrize(
    ("criterion", "extra", "message"),
    [
        ("{name: paired_test, alpha: 1.5}", "", "field 'train.criterion': alpha 1.5: give a level strictly"),
        ("{name: paired_test, alpha: 0}", "", "field 'train.criterion': alpha 0.0: give a level strictly"),
        (
            "{name: paired_test}",
            "  error_budget: 1.2\n",
            "field 'train.error_budget': error_budget 1.2: give one alpha strictly between 0 and 1",
        ),
        (
            "{name: strict_pareto}",
            "  error_budget: 0.05\n",
            "train.error_budget is spent by a criterion that tests at a level; strict_pareto does not",
        ),
    ],
)
def test_bad_budget_or_alpha_is_one_line(tmp_path: Path, criterion: str, extra: str, message: str) -> None:
    old = "  criterion: {name: strict_pareto, secondary_metrics: [steps, tokens]}\n"
    assert old in QUICKSTART
    path = tmp_path / "config.yaml"
    path.write_text(QUICKSTART.replace(old, f"  criterion: {criterion}\n{extra}"))
    with pytest.raises(ConfigError) as caught:
        train_config(load_config(path))
    text = str(caught.value)
    assert message in text and "\n" not in text and "Value error" not in text, text
