"""A verdict's evidence in words: its noise, both runs' replicates and each flip's label —
worded once, for ``audit VERDICT``'s table, the viewer's verdict page and the report.

:func:`verdict_evidence` audits the verdict (``audit.audit``: verified, recomputed offline;
the flips attributed by line coverage during an offline replay) and keeps what a reader asks
first: was this win signal or noise, and did the change act before each flip?
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from replaykit.cassette.backend import RunStore
from replaykit.train.attribution import Attribution, Flip
from replaykit.train.audit import audit
from replaykit.train.audit_records import FacetsMoved, VerdictAudit
from replaykit.train.stats import Noise, Paired


class FlipLine(TypedDict):
    unit: str  # task#seed
    movement: str  # new solve | regression
    label: str  # attributed | incidental
    reason: str  # the changed lines that ran before the parting, and where the episodes part
    ended_by: str  # the failing episode ended on a call gone wrong: its facet ("" otherwise)


class VerdictEvidence(TypedDict):
    noise: str  # margin, interval, floor, within noise or not ("" without replicates)
    within_noise: bool | None
    replicates: dict[str, str]  # baseline / candidate → pass@k, pass^k, flips
    flips: list[FlipLine]
    summary: str  # "N attributed, M incidental"
    paired: str  # the paired difference, its interval, McNemar's p and the panel's mde ("" without)
    panel: str  # "" unless the panel is too small to detect the change the verdict accepted
    facets: str  # how the calls gone wrong moved: "calls gone wrong: length 14 → 2" ("" when none moved)


def replicates_text(stats: Mapping[str, Any] | None) -> str:
    """A run's replicate statistics in a few characters: ``pass@2 0.50 pass^2 0.38 disagree 0.12``
    (two seeds of a task disagree: never "flips", which names baseline → candidate movement) and,
    where certified, ``forked 0 of 8 certified`` (its denominator named)."""
    if not stats or not stats.get("pass_at_k"):
        return ""
    k = str(stats["seeds"])
    cell = f"pass@{k} {stats['pass_at_k'][k]:.2f} pass^{k} {stats['pass_hat_k'][k]:.2f}"
    if stats.get("seed_flip_rate") is not None:
        cell += f" disagree {stats['seed_flip_rate']:.2f}"
    if stats.get("reexec_flip_rate") is not None:
        cell += f" forked {stats['reexec_forked']} of {stats['reexec_certified']} certified"
    return cell


def noise_text(found: Noise) -> str:
    i = found["interval"]
    return (
        f"margin {found['margin']:+.3f} ({i['score']}), 95% paired bootstrap [{i['low']:+.3f}, {i['high']:+.3f}] "
        f"(seed {i['seed']}, {i['samples']} samples) · noise floor {found['noise_floor']:.3f} · "
        + ("within noise" if found["within_noise"] else "outside the noise")
    )


def paired_text(found: Paired) -> str:
    lo, hi = found["interval"]
    rlo, rhi = found["reward"]["interval"]
    b, c = found["discordant"]
    return (
        f"paired over {found['units']} instance(s) of {found['tasks']} task(s): solve rate "
        f"{found['difference']:+.3f} [{lo:+.3f}, {hi:+.3f}], reward {found['reward']['difference']:+.3f} "
        f"[{rlo:+.3f}, {rhi:+.3f}] (95%, tasks resampled) · exact McNemar p {found['mcnemar_p']:.3f} "
        f"(candidate better: {found['mcnemar_p_better']:.3f}; {b} baseline-only, {c} candidate-only) · "
        f"detects ±{found['mde']:.3f} (α {found['alpha']}, power {found['power']}, "
        f"design effect {found['design_effect']:.2f})"
    )


def panel_line(found: Paired, accepted: bool) -> str:
    """One line when the panel is too small to detect the change a verdict accepted, else ""."""
    if not accepted or found["detectable"]:
        return ""
    return (
        f"this panel is too small for the change it accepted: {found['units']} instance(s) detect "
        f"±{found['mde']:.3f} in solve rate with power {found['power']} (α {found['alpha']}), "
        f"the change is {found['difference']:+.3f}"
    )


def facets_text(found: FacetsMoved | None) -> str:
    """How the calls gone wrong moved: ``calls gone wrong, baseline → candidate: length 14 → 2``."""
    return f"calls gone wrong, baseline → candidate: {found['moved']}" if found and found["moved"] else ""


def flip_line(flip: Flip) -> FlipLine:
    return {
        "unit": flip["unit"],
        "movement": flip["movement"].replace("_", " "),
        "label": flip["label"],
        "reason": flip["reason"],
        "ended_by": flip.get("ended_by", ""),
    }


def flips_summary(attribution: Attribution) -> str:
    return f"{attribution['attributed']} attributed, {attribution['incidental']} incidental"


def evidence_of(report: VerdictAudit) -> VerdictEvidence:
    found, attribution, pair = report.get("noise"), report.get("attribution"), report.get("paired")
    return {
        "noise": noise_text(found) if found else "",
        "within_noise": found["within_noise"] if found else None,
        "replicates": {
            role: replicates_text(dict(stats)) or "one seed: no replicates"
            for role, stats in (report.get("replicates") or {}).items()
        },
        "flips": [flip_line(f) for f in attribution["flips"]] if attribution else [],
        "summary": flips_summary(attribution) if attribution else "",
        "paired": paired_text(pair) if pair else "",
        "panel": panel_line(pair, report["recorded"]["accept"]) if pair else "",
        "facets": facets_text(report.get("facets")),
    }


def verdict_evidence(store: RunStore, verdict_id: str) -> VerdictEvidence:
    """The stored verdict audited offline (verified first), in words."""
    return evidence_of(audit(store, verdict_id))
