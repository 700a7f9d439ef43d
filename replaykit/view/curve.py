"""The training curve's geometry: solved task instances per epoch (baseline and candidate),
on axes with ticks and the value at every point, as SVG coordinates the template draws.

    c = curve(epochs, total=16)
    c["yticks"]     # [{"y": 150.0, "value": 0}, …, {"y": 20.0, "value": 16}]
    c["xticks"]     # [{"x": 70, "label": "e0", "decision": "accepted"}, …] (every epoch, skipped ones too)
    c["candidate"]  # [{"x": 70, "y": 63.1, "value": 13, "epoch": 0}, …]

Drawn by hand (a few lines, no inline style: the viewer's CSP allows only its stylesheet)
and cheap enough to redraw on every refresh of a training being recorded.
"""

from __future__ import annotations

import math

from replaykit.core.training_doc import EpochRecord
from replaykit.view.pages import Curve, CurvePoint, CurveTick, EpochTick

#: the plot area inside the SVG: left margin (y tick labels and title), top, bottom (epoch labels)
LEFT, TOP, BOTTOM, RIGHT, STEP, PLOT_HEIGHT = 48, 16, 36, 16, 64, 130


def _metric(epoch: EpochRecord, name: str) -> int | float | None:
    """A number an epoch's verdict recorded among its metrics (None: none recorded)."""
    value = v["metrics"].get(name) if (v := epoch.verdict) else None
    return value if isinstance(value, (int, float)) else None


def _ticks(top: float) -> list[float]:
    """About five round values from 0 to ``top`` (``top`` itself the last)."""
    step = max(1, math.ceil(top / 4))
    values: list[float] = list(range(0, math.ceil(top), step))
    if len(values) > 1 and top - values[-1] < step / 2:
        values.pop()  # too close to the top to label both
    return [*values, top]


def curve(epochs: list[EpochRecord], total: int | None) -> Curve:
    """Solved instances per epoch (baseline and candidate) on axes scaled 0 to ``total`` (the
    panel's size; the largest value when unknown)."""
    base = [_metric(e, "solved_baseline") for e in epochs]
    cand = [_metric(e, "solved_candidate") for e in epochs]
    top = max([v for v in base + cand if v is not None] + [total or 0, 1])
    bottom = TOP + PLOT_HEIGHT

    def y(value: float) -> float:
        return round(bottom - PLOT_HEIGHT * value / top, 1)

    def x(i: int) -> int:
        return LEFT + STEP // 2 + STEP * i

    def points(values: list[float | None]) -> list[CurvePoint]:
        return [
            {"x": x(i), "y": y(v), "value": v, "epoch": epochs[i].epoch}
            for i, v in enumerate(values)
            if v is not None
        ]

    b, c = points(base), points(cand)
    decisions = {e.epoch: e.decision for e in epochs}
    yticks: list[CurveTick] = [{"y": y(v), "value": v} for v in _ticks(top)]
    xticks: list[EpochTick] = [
        {"x": x(i), "label": f"e{e.epoch}", "decision": e.decision} for i, e in enumerate(epochs)
    ]
    return {
        "width": LEFT + STEP * max(len(epochs), 1) + RIGHT,
        "height": bottom + BOTTOM,
        "top": top,
        "left": LEFT,
        "plot_top": TOP,
        "plot_bottom": bottom,
        "plot_right": LEFT + STEP * max(len(epochs), 1),
        "yticks": yticks,
        "xticks": xticks,
        "baseline": b,
        "candidate": c,
        "baseline_path": " ".join(f"{p['x']},{p['y']}" for p in b),
        "accepted": [p for p in c if decisions.get(p["epoch"]) == "accepted"],
        "summary": "; ".join(
            f"e{e.epoch} {e.decision}"
            + (f" {_n(base[i])} → {_n(cand[i])}" if base[i] is not None and cand[i] is not None else "")
            for i, e in enumerate(epochs)
        ),
    }


def _n(value: float | None) -> str:
    return f"{value:g}" if value is not None else "-"
