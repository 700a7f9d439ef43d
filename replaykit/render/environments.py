"""Environments and readiness: the oracle check of tasks, certification, base images, doctor,
what is registered (plugins)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from replaykit.episodes.certify_records import CertifyReport
from replaykit.render.console import line, plain, show_table, wrapped

if TYPE_CHECKING:
    from replaykit.envs.check import TaskCheckReport
    from replaykit.envs.docker.base_image import BaseImage
    from replaykit.workspace.doctor import DoctorReport


def tasks_check(report: TaskCheckReport) -> None:
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
        if r.get("features") or r.get("ignored"):
            ignored = f"; ignored: {', '.join(r['ignored'])}" if r.get("ignored") else ""
            line(f"{r['task_id']}: uses {', '.join(r.get('features') or ['-'])}{ignored}")
        for warning in r.get("warnings") or ([r["warning"]] if r.get("warning") else []):
            if not r["problem"] or warning.startswith("unknown task.toml key"):
                line(f"{r['task_id']}: warning: {warning}")
    for note, tasks in (report.get("notes") or {}).items():  # once per image, not a warning per task
        which = "every task" if len(tasks) == len(report["tasks"]) > 1 else ", ".join(tasks)
        line(f"note: {note} ({which})")
    warned = f" ({report['warnings']} with a warning)" if report.get("warnings") else ""
    line(f"{report['passed']}/{report['total']} task(s) pass the oracle check{warned}")


def certify_report(report: CertifyReport) -> None:
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


def doctor_report(report: DoctorReport) -> None:
    marks = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}
    for c in report["checks"]:
        line(
            f"{marks[c['status']]}  {c['name']}: {c['detail']}"
            + (f" — fix: {c['fix']}" if c["fix"] and c["status"] != "ok" else "")
        )
    line("ready" if report["ok"] else "not ready: fix the FAIL lines above")


def base_image(result: BaseImage) -> None:
    """``images build-base``: built or cached, the tag and the short image id."""
    plain(f"{'built' if result['built'] else 'cached'} {result['tag']} ({result['id'][:19]})")


def plugins_report(report: Any) -> None:
    """``replaykit plugins``: one table of every registry's names and where each comes from."""
    rows: list[list[str | Text]] = []
    for reg in report["registries"]:
        for e in reg["entries"]:
            source = e["source"] + (f" ({e['distribution']})" if e["distribution"] else "")
            if e["shadows"]:
                source += f"; hides entry point {e['shadows']}"
            rows.append([reg["what"], e["name"], source, e["ref"]])
    show_table("registered extensions", ["extension point", "name", "from", "ref"], rows, optional=["ref"])
    groups = ", ".join(sorted(r["group"] for r in report["registries"]))
    wrapped(f"{report['plugins']} from installed package(s); entry-point groups: {groups}")
