"""Rich rendering for the CLI: tables to stdout, progress and errors to stderr."""

from __future__ import annotations

import contextlib
import json
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.markup import escape
from rich.table import Table

out = Console()
_err = Console(stderr=True)


def err(message: str) -> None:
    _err.print(message, markup=False, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def progress(enabled: bool = True) -> Iterator[Callable[[str, dict[str, Any]], None]]:
    """A progress callback for library calls: ``plan`` sets the total, other events advance."""
    if not enabled or not _err.is_terminal:
        yield lambda event, data: err(str(data.get("message", ""))) if event == "note" else None
        return
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=_err, transient=True)
    state: dict[str, Any] = {}

    def callback(event: str, data: dict[str, Any]) -> None:
        if event == "plan":
            state["task"] = bar.add_task("episodes", total=data.get("missing", data.get("total")))
        elif event == "note":
            err(str(data.get("message", "")))
        else:
            if "task" not in state:
                state["task"] = bar.add_task(event, total=None)
            label = " ".join(f"{k}={v}" for k, v in data.items() if k in ("task_id", "seed", "epoch"))
            bar.update(state["task"], advance=1, description=label or event)

    with bar:
        yield callback


def run_table(doc: dict[str, Any]) -> None:
    table = Table(title=f"run {doc['run_id']}  harness {doc['harness_sha'][:10]}  model {doc['model']['name']}")
    for col in ("task", "seed", "reward", "passed", "steps", "cassette", "source"):
        table.add_column(col)
    for e in doc["episodes"]:
        table.add_row(
            e["task_id"], str(e["seed"]), f"{e['reward']:.2f}" if e["reward"] is not None else "-",
            "yes" if e["passed"] else ("infra" if e["infra_failure"] else "no"), str(e["steps"]),
            e["cassette_id"][:12], "reused" if e.get("reused") else "recorded",
        )
    out.print(table)
    out.print(
        f"solved {doc['solved']}/{doc['total']} · recorded {doc['recorded_count']} · "
        f"reused {doc['reused_count']} cassette(s)" + (" (no model calls)" if doc["recorded_count"] == 0 else "")
    )


def replay_report(report: dict[str, Any]) -> None:
    table = Table(title=f"replay of run {report['run_id']} with harness {report['replayed_harness_sha'][:10]}")
    for col in ("task", "seed", "identical", "recorded digest", "replayed digest"):
        table.add_column(col)
    for e in report["episodes"]:
        table.add_row(e["task_id"], str(e["seed"]), "yes" if e["identical"] else "NO", e["recorded_digest"][:12], (e["replayed_digest"] or "-")[:12])
    out.print(table)
    divergence(report.get("divergence"))
    out.print("identical" if report["identical"] else f"DIVERGED ({report.get('divergences', 0)} episode(s))")


def divergence(report: dict[str, Any] | None) -> None:
    if not report:
        return
    out.print(f"[bold red]divergence[/] in episode {report['episode']} at event {report['position']} ({report['kind']}): {report['reason']}", highlight=False)
    for label in ("expected", "actual"):
        value = report.get(label)
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)[:600]
        out.print(f"  {label}: {text}", markup=False, highlight=False)
    for line in report.get("diff", [])[:80]:
        style = "red" if line.startswith("-") else "green" if line.startswith("+") else None
        out.print("  " + line, style=style, markup=False, highlight=False)


def cassette_rows(rows: list[dict[str, Any]], total: int | None = None) -> None:
    shown = f"the newest {len(rows)} of {total} cassette(s) (--limit N shows more)" if total is not None and total > len(rows) else f"{len(rows)} cassette(s)"
    table = Table(title=shown)
    for col in ("id", "task", "seed", "model", "harness", "llm", "env", "reward", "digest"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["id"][:12], r["task_id"], str(r["seed"]), r["model"], r["harness_sha"][:10], str(r["n_llm"]),
            str(r["n_env"]), "-" if r["reward"] is None else f"{r['reward']:.2f}", r["digest"][:12],
        )
    out.print(table)


def cassette_doc(doc: dict[str, Any], full: bool = False) -> None:
    key = doc["key"]
    out.print(f"cassette {doc['id']}  task {key['task_id']}  seed {key['seed']}  model {key['model']['name']}  harness {key['harness_sha'][:10]}", highlight=False)
    out.print(f"digest {doc['digest']}", highlight=False)
    for e in doc["events"]:
        head = f"[{e['position']:>3}] {e['kind']}"
        if e["kind"] == "llm":
            out.print(f"{head} {e['request']['method']} {e['request']['path']} → {e['response']['status']} ({e['response']['chunks']} chunks, {e['response']['bytes']} bytes)", markup=False, highlight=False)
            out.print(f"      request: {e['request']['body']}", markup=False, highlight=False)
            out.print(f"      response: {e['response']['body']}", markup=False, highlight=False)
        elif e["kind"] == "env":
            out.print(f"{head} $ {e['action']}  → exit {e['exit_code']}  state {e['state_digest'][:12]}" + (f"  snapshot {e['snapshot'][:12]}" if e.get("snapshot") else ""), markup=False, highlight=False)
            for stream in ("stdout", "stderr"):
                if e[stream]:
                    out.print(f"      {stream}: {e[stream]}", markup=False, highlight=False)
        elif e["kind"] == "error":
            out.print(f"{head} {e['message']}", markup=False, highlight=False)
        else:
            out.print(f"{head} {e['grade']}", markup=False, highlight=False)


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
    out.print(text, markup=False, highlight=False, soft_wrap=True)


def vcr_export(report: dict[str, Any]) -> None:
    for f in report["files"]:
        out.print(f"{f['path']}  task {f['task_id']} seed {f['seed']}: {f['interactions']} call(s)", markup=False, highlight=False)
    out.print(
        f"wrote {len(report['files'])} vcrpy cassette(s) for {report['base_url']}; replay with "
        "vcr.use_cassette(path, record_mode='none', match_on=['method', 'path', 'body'])",
        markup=False, highlight=False, soft_wrap=True,
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
    out.print(text, markup=False, highlight=False, soft_wrap=True)


def training_table(doc: dict[str, Any]) -> None:
    table = Table(title=f"training {doc['training_id']}  {doc['initial_sha'][:10]} → {doc['final_baseline'][:10]}")
    for col in ("epoch", "candidate", "verdict", "verdict id", "loss", "solved (baseline → candidate)", "why"):
        table.add_column(col)
    for e in doc["epochs"]:
        v = e.get("verdict") or {}
        m = v.get("metrics", {})
        solved = f"{m.get('solved_baseline')} → {m.get('solved_candidate')}" if v else "-"
        why = e["skipped"] or v.get("reason", "")
        table.add_row(str(e["epoch"]), (e["candidate_sha"] or "-")[:10], e["decision"], (e.get("verdict_id") or "-")[:10], f"{e['loss']:+.3f}", solved,
                      escape(f"{e['description'][:60]} · {why[:90]}"))
    out.print(table)
    accepted = sum(e["decision"] == "accepted" for e in doc["epochs"])
    out.print(f"{accepted} accepted, {sum(e['decision'] == 'rejected' for e in doc['epochs'])} rejected, "
              f"{sum(e['decision'] == 'skipped' for e in doc['epochs'])} skipped · baseline branch {doc['branch']} at {doc['final_baseline'][:10]}")


def training_replay(report: dict[str, Any]) -> None:
    table = Table(title=f"replay of training {report['training_id']}")
    for col in ("epoch", "candidate (recorded)", "candidate (replayed)", "decision", "identical"):
        table.add_column(col)
    for e in report["epochs"]:
        table.add_row(str(e["epoch"]), (e["candidate_sha"] or "-")[:10], (e["replayed_candidate_sha"] or "-")[:10],
                      f"{e['decision']} / {e['replayed_decision']}", "yes" if e["identical"] else "NO " + ",".join(e["differs_in"]))
    out.print(table)
    runs_ok = sum(r["identical"] for r in report["runs"])
    out.print(f"runs replayed identically: {runs_ok}/{len(report['runs'])} · final baseline {report['final_baseline'][:10]} / {report['replayed_final_baseline'][:10]}")
    for r in report["runs"]:
        divergence(r.get("divergence"))
    out.print("identical" if report["identical"] else "DIVERGED")


def audit_report(report: dict[str, Any]) -> None:
    rec = report["recorded"]
    out.print(f"verdict {report['verdict_id']} (epoch {report['epoch']}): {rec['criterion']} → {'accept' if rec['accept'] else 'reject'}, loss {rec['loss']:+.3f}", highlight=False)
    out.print(f"  {rec['reason']}", markup=False, highlight=False)
    out.print(f"  regressions: {', '.join(rec['regressions']) or 'none'} · new solves: {', '.join(rec['new_solves']) or 'none'}", markup=False, highlight=False)
    out.print("reproduced offline: " + ("yes" if report["reproduced"] else "NO"))
    cf = report.get("counterfactual")
    if cf:
        out.print(("decision WOULD DIFFER " if cf["differs"] else "decision would be the same ") + f"— {cf['summary']}", markup=False, highlight=False)


def compare_table(report: dict[str, Any]) -> None:
    table = Table(title="solve rate: harness × model")
    table.add_column("harness")
    for m in report["models"]:
        table.add_column(m)
    for h in report["harnesses"]:
        cells = {c["model"]: c for c in report["cells"] if c["harness"] == h}
        sha = next(iter(cells.values()))["harness_sha"][:10] if cells else ""
        table.add_row(f"{h} ({sha})", *[f"{cells[m]['solved']}/{cells[m]['total']} ({cells[m]['solve_rate']:.0%})" for m in report["models"]])
    out.print(table)


def tasks_check(report: dict[str, Any]) -> None:
    table = Table(title=f"oracle check ({report['env']})")
    for col in ("task", "untouched", "solved", "ok", "problem"):
        table.add_column(col)
    for r in report["tasks"]:
        table.add_row(
            r["task_id"], "-" if r["untouched"] is None else f"{r['untouched']:g}", "-" if r["solved"] is None else f"{r['solved']:g}",
            "yes" if r["ok"] else "NO", r["problem"][:200],
        )
    out.print(table)
    out.print(f"{report['passed']}/{report['total']} task(s) pass the oracle check")


def certify_report(report: dict[str, Any]) -> None:
    table = Table(title=f"certification of run {report['run_id']}")
    for col in ("task", "env", "image", "status", "episodes", "source"):
        table.add_column(col)
    for r in report["tasks"]:
        style = {"deterministic": "green", "forked": "yellow"}.get(r["status"], "red")
        table.add_row(
            r["task_id"], r["env"], (r["image"] or "-").removeprefix("sha256:")[:12], f"[{style}]{r['status']}[/]",
            str(r["episodes"]), "reused" if r["reused"] else "re-executed",
        )
    out.print(table)
    for r in report["tasks"]:
        if r["status"] != "deterministic":
            out.print(f"{r['task_id']} {r['status']}: {r['reason']}", markup=False, highlight=False)
    out.print(f"deterministic {report['deterministic']} · forked {report['forked']} · errors {report['error']}"
              + (" (forked tasks are excluded from training verdicts)" if report["forked"] else ""))


def run_rows(rows: list[dict[str, Any]]) -> None:
    table = Table(title=f"{len(rows)} document(s)")
    table.add_column("id", no_wrap=True, min_width=16)
    for col in ("kind", "name", "harness", "model", "created"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["id"], r["kind"], r["name"] or "", (r["harness_sha"] or "")[:10], r["model"] or "", r["created_at"])
    out.print(table)
