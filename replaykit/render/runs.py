"""Runs, replays and compares: the episode table, a replay's verdict and first divergence,
the harness × model table, the list of stored documents."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from replaykit.core.errors import DivergenceReport
from replaykit.core.glossary import legend
from replaykit.render.console import line, short_ids, show_table, wrapped

if TYPE_CHECKING:
    from rich.text import Text

    from replaykit.core.compare_doc import CompareDoc
    from replaykit.episodes.regrade import RegradeReport
    from replaykit.episodes.run_records import MeasureResult, ReplayReport, ReportedEpisode
    from replaykit.report.reproduce import Reproduction


def _outcome(e: ReportedEpisode) -> str:
    """The episode's outcome class (with its exception when the harness raised)."""
    outcome = e.outcome or ("solved" if e.passed else "infra" if e.infra_failure else "failed")
    return f"{outcome} ({e.error})" if e.error else outcome


def run_table(result: MeasureResult) -> None:
    """``replaykit run``: one row per episode (the run's rows as reported), the counts."""
    run = result.run
    episodes = result.rows() if result.reported is None else result.reported
    n = short_ids([e.cassette_id for e in episodes])
    rows: list[list[str | Text]] = [
        [
            e.task_id,
            str(e.seed),
            f"{e.reward:.2f}" if e.reward is not None else "-",
            _outcome(e),
            str(e.steps),
            e.cassette_id[:n],
            "reused" if e.reused else "recorded",
        ]
        for e in episodes
    ]
    show_table(
        f"run {run.run_id} · harness {run.harness_sha[:10]} · model {run.model.name}",
        ["task", "seed", "reward", "outcome", "actions", "cassette", "source"],
        rows,
    )
    wrapped(legend("reward", "outcome", "actions", "cassette", "source"))
    recorded = len(result.recorded)
    paid = {"model_calls": result.model_calls, "reused_events": result.reused_events}
    line(
        f"solved {run.solved}/{run.total} · recorded {recorded} · "
        f"reused {len(result.reused)} cassette(s)"
        + (" (no model calls)" if recorded == 0 else f" · {paid_line(paid)}")
    )
    if result.reuse is not None and recorded:
        line(f"reuse {result.reuse.policy} ({result.reuse.reason})")
    infra = [e for e in episodes if e.infra_failure]
    if infra:
        line(f"infra failures: {len(infra)} episode(s) not graded (they are re-recorded on the next run)")
        reasons: dict[str, list[str]] = {}
        for e in infra:  # one line per distinct reason (a task refused at load is said once)
            reasons.setdefault(e.reason or "not graded", []).append(e.unit)
        for reason, units in reasons.items():
            line(f"  {', '.join(units)}: {reason}")


def paid_line(paid: Mapping[str, object]) -> str:
    """What a run, training or compare sent to endpoints: ``model_calls`` (and, for a training,
    the task model's and the proposer's), the events served from donor cassettes instead."""
    calls = int(str(paid.get("model_calls", 0)))
    parts = []
    if "proposer_calls" in paid:
        parts.append(f"{paid.get('task_model_calls', 0)} task model, {paid['proposer_calls']} proposer")
    text = f"paid {calls} model call(s)" + (f" ({'; '.join(parts)})" if parts else "")
    served = int(str(paid.get("reused_events", 0)))
    return text + (
        f" · {served} event(s) served from donor cassettes instead (prefix reuse)" if served else ""
    )


def replay_report(report: ReplayReport) -> None:
    rows: list[list[str | Text]] = [
        [
            e["task_id"],
            str(e["seed"]),
            "yes" if e["identical"] else "NO",
            e["recorded_digest"][:12],
            (e["replayed_digest"] or "-")[:12],
        ]
        for e in report["episodes"]
    ]
    what = "cassette" if report.get("of") == "cassette" else "run"
    show_table(
        f"replay of {what} {report['run_id']} with harness {report['replayed_harness_sha'][:10]}",
        ["task", "seed", "identical", "recorded digest", "replayed digest"],
        rows,
    )
    divergence(report.get("divergence"))
    claims_line(report.get("claims_checked", 0), report.get("claims_unchecked") or [])
    if report.get("agent_note"):
        line(report["agent_note"])
    line("identical" if report["identical"] else f"DIVERGED ({report.get('divergences', 0)} episode(s))")


def divergence(report: DivergenceReport | None) -> None:
    if not report:
        return
    from rich.text import Text  # styled: loaded for a divergence

    head = Text("divergence", style="bold red")
    head.append(
        f" in episode {report['episode']} at event {report['position']} ({report['kind']}): {report['reason']}",
        style="",
    )
    line(head)
    for label in ("expected", "actual"):
        value = report.get(label)
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)[:600]
        line(f"  {label}: {text}")
    for diff_line in report.get("diff", [])[:80]:
        style = "red" if diff_line.startswith("-") else "green" if diff_line.startswith("+") else ""
        line(Text("  " + diff_line, style=style))


def compare_table(report: CompareDoc) -> None:
    rows: list[list[str | Text]] = []
    for h in report.harnesses:
        cells = {c["model"]: c for c in report.cells if c["harness"] == h}
        sha = next(iter(cells.values()))["harness_sha"] if cells else ""
        rows.append(
            [
                sha[:10] if sha.startswith(h) or not sha else f"{h} ({sha[:10]})",
                *[
                    f"{cells[m]['solved']}/{cells[m]['total']} ({cells[m]['solve_rate']:.0%})"
                    for m in report.models
                ],
            ]
        )
    show_table("solve rate: harness × model", ["harness", *report.models], rows)
    wrapped(legend("solve rate"))
    if report.model_calls is not None:
        line(paid_line(report.to_json()))
    if report.compare_id:
        line(f"compare {report.compare_id} stored; `replaykit report {report.compare_id}` draws it")


def _replicate_cells(stats: Mapping[str, Any] | None) -> list[str]:
    """A measured run's ``k``, pass@k, pass^k, seed disagreement and forked cells (empty: none)."""
    if not stats or not stats.get("pass_at_k"):
        return ["", "", "", "", ""]
    k = str(stats["seeds"])
    disagree = stats.get("seed_flip_rate")
    forked = (
        f"{stats['reexec_forked']}/{stats['reexec_certified']}"
        if stats.get("reexec_flip_rate") is not None
        else ""
    )
    return [
        k,
        f"{stats['pass_at_k'][k]:.2f}",
        f"{stats['pass_hat_k'][k]:.2f}",
        "" if disagree is None else f"{disagree:.2f}",
        forked,
    ]


RUN_COLUMNS = ["id", "kind", "name", "harness", "model", "k", "pass@k", "pass^k", "disagree", "forked"]


def run_rows(rows: Sequence[Mapping[str, Any]], all_ids: list[str] | None = None) -> None:
    """``runs``: one line per stored document (its ``runs`` row's id, kind, name, harness, model,
    a measured run's replicate statistics, the model calls its episodes paid and events reused, time)."""
    n = short_ids(all_ids or [r["id"] for r in rows])
    cells: list[list[str | Text]] = [
        [
            r["id"][:n],
            r["kind"],
            r["name"] or "",
            (r["harness_sha"] or "")[:8],
            _models(r["model"] or ""),
            *_replicate_cells(r.get("stats")),
            str(r["model_calls"]) if "model_calls" in r else "",
            str(r["reused_events"]) if "reused_events" in r else "",
            _when(r["created_at"]),
        ]
        for r in rows
    ]
    columns = show_table(
        f"{len(rows)} document(s)",
        [*RUN_COLUMNS, "paid", "reused", "created (UTC)"],
        cells,
        optional=["created (UTC)", "name", "harness", "forked"],
    )
    shown = [w for w in ("k", "pass@k", "pass^k", "disagree", "forked", "paid", "reused") if w in columns]
    if shown:
        wrapped(legend(*shown))


def _models(names: str) -> str:
    """A row's model, or ``3 models`` for a compare's list (``--json`` names them)."""
    many = [m for m in names.split(",") if m]
    return f"{len(many)} models" if len(many) > 1 else names


def _when(iso: str) -> str:
    """``2026-11-30T08:01:22.123+00:00`` → ``2026-11-30 08:01``."""
    return iso[:16].replace("T", " ") if iso else ""


def regrade_report(report: RegradeReport) -> None:
    """``regrade RUN``: each episode's recorded and new grade, and how its state was rebuilt."""
    rows: list[list[str | Text]] = [
        [
            e["task_id"],
            str(e["seed"]),
            f"{e['recorded_reward']:.2f}",
            f"{e['reward']:.2f}",
            e["outcome"],
            e["restored"],
            "yes" if e["same"] else "NO",
        ]
        for e in report["episodes"]
    ]
    show_table(
        f"run {report['run_id']} regraded from {report['regraded_from']}",
        ["task", "seed", "recorded", "regraded", "outcome", "state from", "same"],
        rows,
    )
    for task, folder in report["tests"].items():
        line(f"{task}: graded with the tests in {folder}")
    if report["reproduced"]:
        line(f"every recorded grade reproduced ({len(report['episodes'])} episode(s))")
    else:
        line(f"grades that differ from the recording: {', '.join(report['differs'])}")
    line(f"the original run {report['regraded_from']} is unchanged · replaykit replay {report['run_id']}")


def claims_line(checked: int, unchecked: list[str]) -> None:
    """The replay's reuse claims: how many were checked against their donors, and which not."""
    if checked or unchecked:
        line(
            f"reuse claims: {checked} episode(s) served a donor's events, each checked against its donor"
            + (f"; {len(unchecked)} unchecked (the donor is not in this store)" if unchecked else "")
        )


def reproduction(done: Reproduction) -> None:
    """``reproduce``: one line per root (identical, or DIVERGED with where, wrapped under it)."""
    for root in done["roots"]:
        head = f"{root['kind']} {root['id'][:16]}: "
        unit = "cassette" if root["kind"] in ("cassette", "fork") else "run"
        tail = f"({root['replayed']} {unit}(s) replayed, {len(root['charts'])} chart(s) redrawn)"
        if root["identical"]:
            line(f"{head}identical {tail}")
        else:
            line(f"{head}DIVERGED {tail}")
            for piece in textwrap.wrap(root["divergence"] or "", 76):
                line(f"    {piece}")
        for chart in root["charts"]:
            for file in chart.get("files", []):
                wrapped(f"    its chart {chart['name']} written to {file}", indent="      ")
