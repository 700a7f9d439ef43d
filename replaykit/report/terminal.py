"""Rich rendering of transcripts, episode diffs and probe results (stdout)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from replaykit.report.documents import CallTurn, EpisodeDiff, Message, TranscriptDoc, VerdictDiff
from replaykit.report.transcript import message_lines

if TYPE_CHECKING:
    from replaykit.models.probe import ProbeResult

out = Console()
ROLE_STYLE = {
    "system": "magenta",
    "user": "cyan",
    "assistant": "green",
    "tool": "yellow",
    "developer": "magenta",
}


def _print(text: str, style: str | None = None) -> None:
    out.print(text, style=style, markup=False, highlight=False, soft_wrap=True)


def _message(msg: Message, indent: str = "  ") -> None:
    lines = message_lines(msg)
    _print(indent + lines[0], ROLE_STYLE.get(msg["role"], "bold"))
    for line in lines[1:]:
        _print(indent + "  " + line)


def transcript(doc: TranscriptDoc) -> None:
    ep = doc["episode"]
    _print(
        f"cassette {ep['id']}  task {ep['task_id']}  seed {ep['seed']}  model {ep['model']}  harness {ep['harness_sha'][:10]}",
        "bold",
    )
    _print(
        f"{ep['llm_calls']} model call(s) · {ep['steps']} action(s) · {ep['tokens']} tokens · digest {ep['digest'][:12]}"
    )
    if ep["call_facets"]:
        _print(facets_line(ep["call_facets"], ep["ended_by"]))
    for turn in doc["turns"]:
        if turn["kind"] == "call":
            _call(turn)
        elif turn["kind"] == "env":
            status = "timed out" if turn["timed_out"] else f"exit {turn['exit_code']}"
            _print(f"── env $ {turn['action']}  → {status}  state {turn['state_digest'][:12]}", "bold yellow")
            for stream, text in (("stdout", turn["stdout"]), ("stderr", turn["stderr"])):
                if text:
                    for line in text.rstrip("\n").splitlines():
                        _print(f"  {stream[3:]}| {line}", "dim" if stream == "stdout" else "red")
        elif turn["kind"] == "error":
            _print(f"── harness error: {turn['message']}", "bold red")
        elif turn["kind"] == "grade":
            verdict = (
                "INFRA FAILURE" if turn.get("infra_failure") else ("PASS" if turn.get("passed") else "FAIL")
            )
            _print(
                f"── grade: {verdict} · reward {turn.get('reward')} · {turn.get('detail', '')}",
                "bold green" if turn.get("passed") else "bold red",
            )


def facets_line(counts: dict[str, int], ended: str | None) -> str:
    """``calls: tool_calls 3 · length 1 · ended by length``."""
    return (
        "calls: "
        + " · ".join(f"{f} {n}" for f, n in counts.items())
        + (f" · ended by {ended}" if ended else "")
    )


def _call(turn: CallTurn) -> None:
    """A model call of the transcript: its request line, the messages new to it, its reply."""
    usage = turn["usage"] if isinstance(turn["usage"], dict) else {}
    extra = f" · {usage.get('total_tokens')} tokens" if usage.get("total_tokens") is not None else ""
    stream = f" · streamed ({turn['chunks']} chunks joined)" if turn["stream"] else ""
    facet = f" · {turn['facet']}" if turn["facet"] else ""
    _print(
        f"── call {turn['call']} · {turn['method']} {turn['path']} → {turn['status']}{stream}{extra}{facet}",
        "bold blue",
    )
    if turn["folded"]:
        _print(f"  … {turn['folded']} earlier message(s) re-sent (folded)", "dim")
    for msg in turn["new"]:
        _message(msg)
    if turn.get("error"):
        _print(f"  error: {turn['error']}", "red")
    for msg in turn["reply"]:
        _message(msg)


def episode_diff(doc: EpisodeDiff) -> None:
    a, b = doc["a"], doc["b"]
    for side, ep in (("a", a), ("b", b)):
        _print(
            f"{side}: {ep['id']}  task {ep['task_id']}  seed {ep['seed']}  harness {ep['harness_sha'][:10]}  "
            f"{ep['llm_calls']} model call(s), {ep['steps']} action(s)",
            "bold",
        )
    grades = [
        "-" if g is None else ("PASS" if g["passed"] else "FAIL") + f" {g['reward']}" for g in doc["grades"]
    ]
    _print(f"grades: a {grades[0]} · b {grades[1]}")
    point = doc.get("fork_point")
    if point:
        parent, step = "a" if point["fork"] == "b" else "b", point["step"]
        served = f"its first {step} model call(s) were served from {parent}" if step else "nothing was served"
        _print(  # calls count from 1, as below
            f"fork point: {point['fork']} forked from {parent} at {point['at']} (event {point['position']}): "
            f"{served}, {point['fork']} is live from there",
            "bold",
        )
    first = doc["first_difference"]
    if first is None:
        _print("identical: every model call, action and the grade are the same", "green")
        return
    _print(f"shared: the first {doc['shared_prefix']} event(s) are identical", "dim")
    _print(f"first difference at event {first['position']}: {first['label']}", "bold red")
    table = Table(show_header=True, expand=True, show_lines=False)
    table.add_column("a", ratio=1, overflow="fold")
    table.add_column("b", ratio=1, overflow="fold")
    style = {"replace": "yellow", "delete": "red", "insert": "green", "skip": "dim"}
    for row in first["side_by_side"]:
        s = style.get(row["tag"])
        left = escape(row["a"]) if row["a"] is not None else ""
        right = escape(row["b"]) if row["b"] is not None else ""
        table.add_row(f"[{s}]{left}[/]" if s and left else left, f"[{s}]{right}[/]" if s and right else right)
    out.print(table)


def probe(r: ProbeResult) -> None:
    _print(
        f"probe {r['probe_id']}: {r['model']} at {r['base_url']} · temperature {r['temperature']} · seed {r['seed']}",
        "bold",
    )
    _print(
        f"{r['requests']} requests ({r['n']} serial, {r['n']} over {r['concurrency']} concurrent connections)"
    )
    _print(
        f"distinct outputs: {r['distinct_outputs']} (serial {r['distinct_serial']}, concurrent {r['distinct_concurrent']})"
    )
    pos = r["first_difference_token"]
    _print(
        f"first differing token: {'-' if pos is None else pos} · system_fingerprints: {', '.join(r['system_fingerprints']) or '-'}"
    )
    ok = r["verdict"] == "deterministic"
    why = {"seed_not_honoured": "seed not honoured", "load_dependent": "load-dependent"}.get(
        r.get("classification", ""), ""
    )
    _print(f"verdict: {r['verdict']}" + (f" ({why})" if why else ""), "bold green" if ok else "bold red")
    if r.get("engine"):
        _print("engine: " + ", ".join(f"{k} {v}" for k, v in sorted(r["engine"].items())), "dim")
    for tip in r["advice"]:
        _print(f"  - {tip}")
    if r.get("saved"):
        _print(f"saved as probe {r['probe_id']} (`replaykit report {r['probe_id']}`)", "dim")


def verdict_diff(report: VerdictDiff) -> None:
    decision = "accepted" if report["accept"] else "rejected"
    _print(
        f"verdict {report['verdict_id']} ({decision}): {report['baseline_sha'][:10]} → {(report['candidate_sha'] or '')[:10]}",
        "bold",
    )
    _print(report["reason"])
    if not report["units"]:
        _print("no task moved: nothing to diff (pick one with --unit TASK#SEED)")
    for unit in report["units"]:
        _print(f"\n═══ {unit['movement']}: {unit['unit']}", "bold magenta")
        episode_diff(unit)
