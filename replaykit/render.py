"""Rich rendering for the CLI: tables to stdout, progress and errors to stderr."""

from __future__ import annotations

import contextlib
import json
from typing import Any, Callable, Iterator

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

PIPE_WIDTH = 1 << 20  # piped output is never wrapped: one record per line, whatever its length


def make_console(**kwargs: Any) -> Console:
    """A terminal gets rich layout at its width; a pipe or file gets plain, unwrapped text."""
    console = Console(**kwargs)
    if console.is_terminal:
        return console
    return Console(**{**kwargs, "width": PIPE_WIDTH, "no_color": True, "highlight": False})


out = make_console()
_err = Console(stderr=True)


def err(message: str) -> None:
    _err.print(message, markup=False, highlight=False, soft_wrap=True)


def line(text: str | Text) -> None:
    """One logical line: wrapped at words by a terminal, never wrapped into a pipe."""
    out.print(text, markup=False, highlight=False, soft_wrap=not out.is_terminal)


def short_ids(ids: list[str], minimum: int = 8) -> int:
    """The shortest length (at least ``minimum``) at which ``ids`` are still distinct, as git does."""
    distinct = set(ids)
    longest = max((len(i) for i in distinct), default=minimum)
    for length in range(minimum, longest):
        if len({i[:length] for i in distinct}) == len(distinct):
            return length
    return longest


def show_table(
    title: str, headers: list[str], rows: list[list[str | Text]], styles: dict[str, str] | None = None
) -> None:
    """A table of short cells when it fits the width; otherwise each row as one wrapped
    record (``header value · …``), so no cell is ever cut or split mid-word."""
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, show_edge=False)
    for h in headers:
        table.add_column(h, no_wrap=True, style=(styles or {}).get(h))
    for r in rows:
        table.add_row(*(Text(c) if isinstance(c, str) else c for c in r))
    line(title)
    if Measurement.get(out, out.options.update_width(PIPE_WIDTH), table).maximum <= out.width:
        out.print(table)
        return
    for r in rows:
        record = Text()
        for i, (h, cell) in enumerate(zip(headers, r, strict=True)):
            record.append(("" if i == 0 else " · ") + ("" if i == 0 else f"{h} "))
            record.append(cell if isinstance(cell, Text) else Text(cell))
        line(record)


@contextlib.contextmanager
def progress(enabled: bool = True) -> Iterator[Callable[[str, dict[str, Any]], None]]:
    """A progress callback for library calls, drawn with rich on a terminal (stderr).

    Events: ``outer`` {total, label} starts an outer bar (epochs of a training, cells
    of a compare) that ``outer_step``/``epoch`` advance; ``plan`` {total|missing,
    label?} (re)starts the inner bar that ``episode``/``task`` advance; ``note``
    {message} prints a line. Off a terminal only notes are printed.
    """
    if not enabled or not _err.is_terminal:
        yield lambda event, data: err(str(data.get("message", ""))) if event == "note" else None
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_err,
        transient=True,
    )
    state: dict[str, Any] = {}

    def callback(event: str, data: dict[str, Any]) -> None:
        if event == "note":
            bar.console.print(str(data.get("message", "")), markup=False, highlight=False, soft_wrap=True)
        elif event == "outer":
            state["outer_label"] = data.get("label", "step")
            state["outer"] = bar.add_task(f"{state['outer_label']}s", total=data.get("total"))
        elif event in ("outer_step", "epoch") and "outer" in state:
            bar.advance(state["outer"])
        elif event == "plan":
            total = data.get("missing", data.get("total"))
            label = str(data.get("label") or "episodes")
            if "inner" in state:
                bar.reset(state["inner"], total=total, description=label)
            else:
                state["inner"] = bar.add_task(label, total=total)
        elif event in ("episode", "task"):
            if "inner" not in state:
                state["inner"] = bar.add_task(event, total=None)
            detail = " ".join(f"{k}={v}" for k, v in data.items() if k in ("task_id", "seed"))
            prefix = f"{data['label']} " if data.get("label") else ""
            bar.update(state["inner"], advance=1, description=f"{prefix}{detail}" or event)

    with bar:
        yield callback


def _passed(e: dict[str, Any]) -> str:
    if e["passed"]:
        return "yes"
    if e.get("infra_failure"):
        return "infra"
    return f"no ({e['error']})" if e.get("error") else "no"


def run_table(doc: dict[str, Any]) -> None:
    n = short_ids([e["cassette_id"] for e in doc["episodes"]])
    rows: list[list[str | Text]] = [
        [
            e["task_id"],
            str(e["seed"]),
            f"{e['reward']:.2f}" if e["reward"] is not None else "-",
            _passed(e),
            str(e["steps"]),
            e["cassette_id"][:n],
            "reused" if e.get("reused") else "recorded",
        ]
        for e in doc["episodes"]
    ]
    show_table(
        f"run {doc['run_id']} · harness {doc['harness_sha'][:10]} · model {doc['model']['name']}",
        ["task", "seed", "reward", "passed", "steps", "cassette", "source"],
        rows,
    )
    line(
        f"solved {doc['solved']}/{doc['total']} · recorded {doc['recorded_count']} · "
        f"reused {doc['reused_count']} cassette(s)"
        + (" (no model calls)" if doc["recorded_count"] == 0 else "")
    )
    infra = [e for e in doc["episodes"] if e["infra_failure"]]
    if infra:
        line(f"infra failures: {len(infra)} episode(s) not graded (they are re-recorded on the next run)")


def replay_report(report: dict[str, Any]) -> None:
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
    show_table(
        f"replay of run {report['run_id']} with harness {report['replayed_harness_sha'][:10]}",
        ["task", "seed", "identical", "recorded digest", "replayed digest"],
        rows,
    )
    divergence(report.get("divergence"))
    line("identical" if report["identical"] else f"DIVERGED ({report.get('divergences', 0)} episode(s))")


def divergence(report: dict[str, Any] | None) -> None:
    if not report:
        return
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


def cassette_rows(rows: list[dict[str, Any]], total: int | None = None) -> None:
    shown = (
        f"the newest {len(rows)} of {total} cassette(s) (--limit N shows more)"
        if total is not None and total > len(rows)
        else f"{len(rows)} cassette(s)"
    )
    n = short_ids([r["id"] for r in rows])
    cells: list[list[str | Text]] = [
        [
            r["id"][:n],
            r["task_id"],
            str(r["seed"]),
            r["model"],
            r["harness_sha"][:8],
            str(r["n_llm"]),
            str(r["n_env"]),
            "-" if r["reward"] is None else f"{r['reward']:.2f}",
        ]
        for r in rows
    ]
    show_table(shown, ["id", "task", "seed", "model", "harness", "llm", "env", "reward"], cells)


def cassette_doc(doc: dict[str, Any], full: bool = False) -> None:
    key = doc["key"]
    line(
        f"cassette {doc['id']} · task {key['task_id']} · seed {key['seed']} · model {key['model']['name']} · harness {key['harness_sha'][:10]}"
    )
    line(f"digest {doc['digest']}")
    for e in doc["events"]:
        head = f"[{e['position']:>3}] {e['kind']}"
        if e["kind"] == "llm":
            line(
                f"{head} {e['request']['method']} {e['request']['path']} → {e['response']['status']} ({e['response']['chunks']} chunks, {e['response']['bytes']} bytes)"
            )
            line(f"      request: {e['request']['body']}")
            line(f"      response: {e['response']['body']}")
        elif e["kind"] == "env":
            line(
                f"{head} $ {e['action']}  → exit {e['exit_code']}  state {e['state_digest'][:12]}"
                + (f"  snapshot {e['snapshot'][:12]}" if e.get("snapshot") else "")
            )
            for stream in ("stdout", "stderr"):
                if e[stream]:
                    line(f"      {stream}: {e[stream]}")
        elif e["kind"] == "error":
            line(f"{head} {e['message']}")
        else:
            line(f"{head} {e['grade']}")


def bundle_report(report: dict[str, Any], action: str) -> None:
    """One summary line for ``cassettes export``/``import``/``verify``."""
    root = report["root"]
    what = f"{root.get('kind', root['table'])} {root['id']}"
    counts = report["counts"]
    summary = ", ".join(f"{counts[k]} {k}" for k in ("runs", "cassettes", "trees", "blobs"))
    if action == "export":
        text = f"exported {what} to {report['path']}: {summary} ({report['bytes']} bytes, sha256 {report['sha256'][:12]})"
    elif action == "import" and report["noop"]:
        text = f"{report['path']}: already in store {report['store']}; nothing to do"
    elif action == "import":
        new = ", ".join(f"{n} {k}" for k, n in report["imported"].items())
        text = f"imported {what} into {report['store']} (new: {new}); replay it with `replaykit replay {root['id']} --store {report['store']}`"
    else:
        text = f"{report['path']}: OK, replaykit bundle v{report['version']} of {what}: {summary}"
        if "would_import" in report:
            text += " · would import " + ", ".join(f"{n} {k}" for k, n in report["would_import"].items())
    line(text)


def vcr_export(report: dict[str, Any]) -> None:
    for f in report["files"]:
        line(f"{f['path']}  task {f['task_id']} seed {f['seed']}: {f['interactions']} call(s)")
    line(
        f"wrote {len(report['files'])} vcrpy cassette(s) for {report['base_url']}; replay with "
        "vcr.use_cassette(path, record_mode='none', match_on=['method', 'path', 'body'])"
    )


def proxy_report(report: dict[str, Any]) -> None:
    """The end of a ``replaykit proxy`` session: what was recorded, or how the replay went."""
    if report["mode"] == "record":
        text = f"recorded proxy session {report['name']!r}: {report['llm_calls']} call(s) → cassette {report['cassette_id']} (digest {report['digest'][:12]})"
        for error in report.get("upstream_errors", []):
            err(error)
    else:
        state = "identical" if report["identical"] else "NOT identical"
        text = f"replayed proxy session {report['name']!r} (cassette {report['cassette_id']}): served {report['served']} of {report['recorded']} recorded call(s), {state}"
        divergence(report.get("divergence"))
    line(text)


def training_table(doc: dict[str, Any]) -> None:
    """Short cells in the table; each epoch's proposal and the verdict's reason below it, in full."""
    rows: list[list[str | Text]] = []
    notes: list[str] = []
    for e in doc["epochs"]:
        v = e.get("verdict") or {}
        m = v.get("metrics", {})
        solved = f"{m.get('solved_baseline')} → {m.get('solved_candidate')}" if v else "-"
        rows.append(
            [
                str(e["epoch"]),
                (e["candidate_sha"] or "-")[:10],
                e["decision"],
                (e.get("verdict_id") or "-")[:10],
                f"{e['loss']:+.3f}",
                solved,
            ]
        )
        why = e["skipped"] or v.get("reason", "")
        notes.append(f"epoch {e['epoch']}: {e['description']}" + (f" — {why}" if why else ""))
    show_table(
        f"training {doc['training_id']} · {doc['initial_sha'][:10]} → {doc['final_baseline'][:10]}",
        ["epoch", "candidate", "verdict", "verdict id", "loss", "solved"],
        rows,
    )
    resumed = doc.get("resumed_epochs")
    if resumed:
        line(f"resumed {resumed} epoch(s) recorded earlier (recomputed from cassettes, no model calls)")
    line("solved: baseline → candidate (episodes passed)")
    for note in notes:
        line(note)
    accepted = sum(e["decision"] == "accepted" for e in doc["epochs"])
    line(
        f"{accepted} accepted, {sum(e['decision'] == 'rejected' for e in doc['epochs'])} rejected, "
        f"{sum(e['decision'] == 'skipped' for e in doc['epochs'])} skipped · baseline branch {doc['branch']} at {doc['final_baseline'][:10]}"
    )


def training_replay(report: dict[str, Any]) -> None:
    rows: list[list[str | Text]] = [
        [
            str(e["epoch"]),
            (e["candidate_sha"] or "-")[:10],
            (e["replayed_candidate_sha"] or "-")[:10],
            f"{e['decision']} / {e['replayed_decision']}",
            "yes" if e["identical"] else "NO " + ",".join(e["differs_in"]),
        ]
        for e in report["epochs"]
    ]
    show_table(
        f"replay of training {report['training_id']}",
        ["epoch", "candidate (recorded)", "candidate (replayed)", "decision", "identical"],
        rows,
    )
    runs_ok = sum(r["identical"] for r in report["runs"])
    line(
        f"runs replayed identically: {runs_ok}/{len(report['runs'])} · final baseline {report['final_baseline'][:10]} / {report['replayed_final_baseline'][:10]}"
    )
    for r in report["runs"]:
        divergence(r.get("divergence"))
    line("identical" if report["identical"] else "DIVERGED")


def audit_report(report: dict[str, Any]) -> None:
    rec = report["recorded"]
    line(
        f"verdict {report['verdict_id']} (epoch {report['epoch']}): {rec['criterion']} → {'accept' if rec['accept'] else 'reject'}, loss {rec['loss']:+.3f}"
    )
    line(f"  {rec['reason']}")
    line(
        f"  regressions: {', '.join(rec['regressions']) or 'none'} · new solves: {', '.join(rec['new_solves']) or 'none'}"
    )
    line("reproduced offline: " + ("yes" if report["reproduced"] else "NO"))
    cf = report.get("counterfactual")
    if cf:
        line(
            ("decision WOULD DIFFER " if cf["differs"] else "decision would be the same ")
            + f"— {cf['summary']}"
        )


def compare_table(report: dict[str, Any]) -> None:
    rows: list[list[str | Text]] = []
    for h in report["harnesses"]:
        cells = {c["model"]: c for c in report["cells"] if c["harness"] == h}
        sha = next(iter(cells.values()))["harness_sha"][:10] if cells else ""
        rows.append(
            [
                f"{h} ({sha})",
                *[
                    f"{cells[m]['solved']}/{cells[m]['total']} ({cells[m]['solve_rate']:.0%})"
                    for m in report["models"]
                ],
            ]
        )
    show_table("solve rate: harness × model", ["harness", *report["models"]], rows)
    if report.get("compare_id"):
        line(f"compare {report['compare_id']} stored; `replaykit report {report['compare_id']}` draws it")


def tasks_check(report: dict[str, Any]) -> None:
    rows: list[list[str | Text]] = [
        [
            r["task_id"],
            "-" if r["untouched"] is None else f"{r['untouched']:g}",
            "-" if r["solved"] is None else f"{r['solved']:g}",
            "yes" if r["ok"] else "NO",
        ]
        for r in report["tasks"]
    ]
    show_table(f"oracle check ({report['env']})", ["task", "untouched", "solved", "ok"], rows)
    problems: dict[str, list[str]] = {}
    for r in report["tasks"]:
        if r["problem"]:
            problems.setdefault(r["problem"], []).append(r["task_id"])
    for problem, tasks in problems.items():  # one line per distinct problem (Docker down is said once)
        line(f"{', '.join(tasks)}: {problem}")
    for r in report["tasks"]:
        if not r["problem"] and r.get("warning"):
            line(f"{r['task_id']}: warning: {r['warning']}")
    warned = f" ({report['warnings']} with a warning)" if report.get("warnings") else ""
    line(f"{report['passed']}/{report['total']} task(s) pass the oracle check{warned}")


def certify_report(report: dict[str, Any]) -> None:
    rows: list[list[str | Text]] = []
    for r in report["tasks"]:
        style = {"deterministic": "green", "forked": "yellow"}.get(r["status"], "red")
        rows.append(
            [
                r["task_id"],
                r["env"],
                (r["image"] or "-").removeprefix("sha256:")[:12],
                Text(r["status"], style=style),
                str(r["episodes"]),
                "reused" if r["reused"] else "re-executed",
            ]
        )
    show_table(
        f"certification of run {report['run_id']}",
        ["task", "env", "image", "status", "episodes", "source"],
        rows,
    )
    reasons: dict[str, list[str]] = {}
    for r in report["tasks"]:
        if r["status"] != "deterministic":
            reasons.setdefault(f"{r['status']}: {r['reason']}", []).append(r["task_id"])
    for reason, tasks in reasons.items():  # one line per distinct reason (Docker down is said once)
        line(f"{', '.join(tasks)} {reason}")
    line(
        f"deterministic {report['deterministic']} · forked {report['forked']} · errors {report['error']}"
        + (" (forked tasks are excluded from training verdicts)" if report["forked"] else "")
    )


def run_rows(rows: list[dict[str, Any]], all_ids: list[str] | None = None) -> None:
    n = short_ids(all_ids or [r["id"] for r in rows])
    cells: list[list[str | Text]] = [
        [
            r["id"][:n],
            r["kind"],
            r["name"] or "",
            (r["harness_sha"] or "")[:8],
            r["model"] or "",
            _when(r["created_at"]),
        ]
        for r in rows
    ]
    show_table(f"{len(rows)} document(s)", ["id", "kind", "name", "harness", "model", "created (UTC)"], cells)


def _when(iso: str) -> str:
    """``2026-11-30T08:01:22.123+00:00`` → ``2026-11-30 08:01``."""
    return iso[:16].replace("T", " ") if iso else ""


def doctor_report(report: dict[str, Any]) -> None:
    marks = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}
    for c in report["checks"]:
        line(
            f"{marks[c['status']]}  {c['name']}: {c['detail']}"
            + (f" — fix: {c['fix']}" if c["fix"] and c["status"] != "ok" else "")
        )
    line("ready" if report["ok"] else "not ready: fix the FAIL lines above")


def removal_report(report: dict[str, Any]) -> None:
    verb = "would remove" if report["dry_run"] else "removed"
    for r in report["runs"]:
        line(f"{verb} {r['kind'] or 'document'} {r['id']}")
    for c in report["cassettes"]:
        line(f"{verb} cassette {c}")
    line(
        f"{verb} {len(report['runs'])} document(s), {len(report['cassettes'])} cassette(s), {len(report['trees'])} harness tree(s), "
        f"{report['blobs']} blob(s) ({report['bytes']} bytes)"
    )
