"""`compare --harness ROLE=REF`: harnesses named by their role (trained, untrained, agent) in the
compare's cells, its report and its chart; the chart's value labels clear of its legend; the
README's real-model chart drawn from recorded compares (scripts/real_model_chart.py)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replaykit.report.charts import grouped_bars
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI


def small(tmp_path: Path) -> Path:
    return write_config(
        tmp_path, {"panel.tasks": [str(REPO_ROOT / "envs" / "hello-file")], "panel.seeds": [0]}
    )


def test_compare_names_harnesses_by_role_in_cells_report_and_chart(tmp_path: Path) -> None:
    config = small(tmp_path)
    run = json.loads(cli("run", str(config), "--json", check=True).stdout)
    sha = run["harness_sha"]
    doc: dict[str, Any] = json.loads(
        cli(
            "compare", str(config), "--models", "reference-weak,reference-strong",
            "--harness", f"untrained={sha[:10]},trained=main", "--json", check=True,
        ).stdout
    )  # fmt: skip
    assert doc["harnesses"] == ["untrained", "trained"]
    assert {(c["harness"], c["model"], c["harness_sha"]) for c in doc["cells"]} == {
        (role, m, sha) for role in ("untrained", "trained") for m in ("reference-weak", "reference-strong")
    }
    out = tmp_path / "compare.html"
    cli("report", doc["compare_id"], "-o", str(out), "--store", str(tmp_path / "store"), check=True)
    html = out.read_text()
    assert f"untrained ({sha[:7]})" in html and f"trained ({sha[:7]})" in html  # the legend: role, then SHA
    chart = tmp_path / "chart.png"
    drawn = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "real_model_chart.py"), doc["compare_id"][:8],
         "--store", str(tmp_path / "store"), "-o", str(chart), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    cells = json.loads(drawn.stdout)["cells"]
    assert [(c["role"], c["model"]) for c in cells] == [(c["harness"], c["model"]) for c in doc["cells"]]
    assert [c["solved"] for c in cells] == [c["solved"] for c in doc["cells"]]  # derived from the runs
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.with_suffix(".svg").is_file()


@pytest.mark.parametrize("given", ["untrained=", "=main", "a=main,a=main"])
def test_compare_refuses_a_bad_role_in_one_line_before_measuring(tmp_path: Path, given: str) -> None:
    proc = cli("compare", str(small(tmp_path)), "--models", "reference-weak", "--harness", given)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--harness" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "store").exists()  # nothing measured, nothing created


def test_chart_value_labels_stay_clear_of_the_legend() -> None:
    """Full bars (100%) leave an in-axes legend no free corner: legend, bars and labels must not meet."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = grouped_bars(["smollm2", "tiny"], {"untrained": [1.0, 1.0], "trained": [1.0, 0.95], "agent": [1.0, 1.0]},
                       "solve rate", "solve rate", "bars")  # fmt: skip
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # type: ignore[no-untyped-call]
    renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]
    legends = fig.legends + [legend for a in fig.axes if (legend := a.get_legend()) is not None]
    assert len(legends) == 1
    box = legends[0].get_window_extent(renderer)
    labels = [t for ax in fig.axes for t in ax.texts if t.get_text().endswith("%")]
    assert len(labels) == 6
    assert not [t.get_text() for t in labels if t.get_window_extent(renderer).overlaps(box)]
    bars = [p for ax in fig.axes for p in ax.patches]
    assert len(bars) == 6 and not [p for p in bars if p.get_window_extent(renderer).overlaps(box)]
    assert all(t.get_window_extent(renderer).y1 <= fig.bbox.y1 for t in labels)  # inside the picture


def test_chart_tick_labels_never_overlap_and_the_legend_sits_inside() -> None:
    """Long model names and SHA-named harnesses: each tick label stays clear of the next, the
    legend is inside the axes (never beside the figure) and meets no bar or value label."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    models = ["reference-weak", "reference-strong", "SmolLM2-135M-Instruct-Q4_1", "gpt-4o-mini-2024-07-18"]
    series = {
        "6ff33fa": [0.44, 0.62, 0.1, 1.0],
        "main (28377cf)": [0.81, 1.0, 0.2, 1.0],
        "trained (f16fa0f)": [1.0, 1.0, 0.3, 0.9],
    }
    fig = grouped_bars(models, series, "solve rate: harness × model", "solve rate", "bars")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # type: ignore[no-untyped-call]
    renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]
    (ax,) = fig.axes
    ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels()]
    assert len(ticks) == 4 and all(a.x1 < b.x0 for a, b in itertools.pairwise(ticks)), [
        (t.x0, t.x1) for t in ticks
    ]
    legend = ax.get_legend()
    assert not fig.legends and legend is not None
    box = legend.get_window_extent(renderer)
    frame = ax.get_window_extent(renderer)
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
    labels = [t for t in ax.texts if t.get_text().endswith("%")]
    assert not [t.get_text() for t in labels if t.get_window_extent(renderer).overlaps(box)]
    assert not [p for p in ax.patches if p.get_window_extent(renderer).overlaps(box)]
    assert all(t.x1 <= fig.bbox.x1 and t.x0 >= 0 for t in ticks)
