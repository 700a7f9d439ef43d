"""Draw the README's real-model chart from recorded compare results (reads the store only).

    python scripts/real_model_chart.py COMPARE_ID [COMPARE_ID ...] [--store cassettes] \
        [-o docs/real-model-compare.png]

Each compare measured harnesses named by role (``--harness untrained=SHA,trained=main``) on
one or more models; an engine serves one model, so each model usually has its own compare. The
chart has one group of bars per model and one bar per role, in the order first seen. Every bar is
derived again from its run's stored episodes (solved / episodes), never from the compare's cached
figures. Writes the PNG and an SVG beside it, and prints the figures it drew (``--json`` for
scripts).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from replaykit.cassette.stores import open_store
from replaykit.core.errors import ReplaykitError
from replaykit.report.build import stored_compare
from replaykit.report.charts import grouped_bars

TITLE = "solve rate per model, by harness role"


def chart_cells(store_location: str, compare_ids: list[str]) -> list[dict[str, object]]:
    """One row per (role, model): its run, SHA and solve figures, derived from the run."""
    store = open_store(store_location, readonly=True)
    rows: list[dict[str, object]] = []
    for compare_id in compare_ids:
        for cell in stored_compare(store, compare_id).cells:
            run = store.get_run(cell["run_id"]).to_json()
            if run["harness_sha"] != cell["harness_sha"]:
                raise ReplaykitError(
                    f"compare {compare_id}: cell {cell['harness']} names another harness than its run"
                )
            solved = sum(bool(e["passed"]) for e in run["episodes"])
            rows.append(
                {
                    "role": cell["harness"],
                    "model": cell["model"],
                    "harness_sha": run["harness_sha"],
                    "run_id": run["run_id"],
                    "solved": solved,
                    "total": len(run["episodes"]),
                    "solve_rate": solved / max(len(run["episodes"]), 1),
                }
            )
    return rows


def draw(rows: list[dict[str, object]], out: Path) -> None:
    models = list(dict.fromkeys(str(r["model"]) for r in rows))
    roles = list(dict.fromkeys(str(r["role"]) for r in rows))
    rate = {(str(r["role"]), str(r["model"])): float(str(r["solve_rate"])) for r in rows}
    shas = {role: {str(r["harness_sha"]) for r in rows if r["role"] == role} for role in roles}
    named = {
        role: f"{role} ({next(iter(shas[role]))[:7]})" if len(shas[role]) == 1 else role for role in roles
    }
    series = {named[role]: [rate.get((role, m), 0.0) for m in models] for role in roles}
    fig = grouped_bars(models, series, TITLE, "solve rate", "real-model-bars")
    out.parent.mkdir(parents=True, exist_ok=True)
    for path in (out, out.with_suffix(".svg")):
        tmp = path.with_name(path.name + ".tmp")
        fig.savefig(
            tmp,
            format=path.suffix[1:],
            metadata={"Software": None} if path.suffix == ".png" else {"Date": None},
        )
        tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("compare_ids", nargs="+", metavar="COMPARE_ID")
    parser.add_argument("--store", default="cassettes")
    parser.add_argument("-o", "--output", type=Path, default=Path("docs/real-model-compare.png"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        rows = chart_cells(args.store, args.compare_ids)
        draw(rows, args.output)
    except (ReplaykitError, KeyError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"output": str(args.output), "cells": rows}, indent=2))
    else:
        for r in rows:
            print(f"{r['model']:<10} {r['role']:<10} {r['harness_sha']!s:.10} {r['solved']}/{r['total']}")
        print(f"wrote {args.output} and {args.output.with_suffix('.svg')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
