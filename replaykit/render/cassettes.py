"""Cassettes and what moves them: the cassette list and one cassette's events, bundle
export/import/verify, store checks, vcrpy export, proxy sessions, removals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from replaykit.core.glossary import fork_call, legend
from replaykit.render.console import err, line, plain, short_ids, show_table, wrapped
from replaykit.render.runs import divergence

if TYPE_CHECKING:
    from rich.text import Text

    from replaykit.envs.results import GradeDoc
    from replaykit.episodes.fork import ForkResult
    from replaykit.episodes.network import NetListing
    from replaykit.episodes.proxy_session import SessionReport
    from replaykit.episodes.run_records import HarborExport
    from replaykit.episodes.views import CassetteView, ShownEvent
    from replaykit.exchange.bundle_format import BundleReport
    from replaykit.exchange.fsck import StoreCheck
    from replaykit.exchange.gc import RemovalReport
    from replaykit.exchange.oci.pull import PullReport
    from replaykit.exchange.oci.push import PushReport
    from replaykit.exchange.vcr_export import VcrExport


def cassette_rows(rows: Sequence[Mapping[str, object]], total: int | None = None) -> None:
    """``cassettes ls``: the listed columns of each cassette row (``episodes.listing.LS_COLUMNS``)."""
    shown = (
        f"the newest {len(rows)} of {total} cassette(s) (--limit N shows more)"
        if total is not None and total > len(rows)
        else f"{len(rows)} cassette(s)"
    )
    n = short_ids([str(r["id"]) for r in rows])
    cells: list[list[str | Text]] = [
        [
            str(r["id"])[:n],
            *(("-" if r[c] is None else str(r[c])) for c in ("task_id", "seed", "model")),
            "-" if r["harness_sha"] is None else str(r["harness_sha"])[:8],
            *(("-" if r[c] is None else str(r[c])) for c in ("n_llm", "n_env")),
            "-" if r["reward"] is None or r.get("outcome") == "infra" else f"{r['reward']:.2f}",
            str(r.get("outcome", "-")),
        ]
        for r in rows
    ]
    columns = show_table(
        shown,
        ["id", "task", "seed", "model", "harness", "calls", "actions", "reward", "outcome"],
        cells,
        optional=["harness", "actions", "calls", "model"],
    )
    wrapped(legend(*[w for w in ("calls", "actions", "reward", "outcome") if w in columns]))
    damaged(rows)


def damaged(rows: Sequence[Mapping[str, object]]) -> None:
    """One line per listed row that could not be read (the rest of the listing stands)."""
    for r in rows:
        if r.get("damaged"):
            line(f"damaged: {r['id']}: {r['damaged']}")


def cassette_doc(doc: CassetteView, full: bool = False) -> None:
    key = doc["key"]
    line(
        f"cassette {doc['id']} · task {key['task_id']} · seed {key['seed']} · model {key['model']['name']} · harness {key['harness_sha'][:10]}"
    )
    line(f"digest {doc['digest']}")
    facets = doc.get("call_facets") or {}
    if facets:
        line(
            "calls: "
            + " · ".join(f"{name} {n}" for name, n in facets.items())
            + (f" · ended by {doc['ended_by']}" if doc.get("ended_by") else "")
        )
    if doc.get("forked_from"):
        served_calls = doc["fork_step"] or 0
        line(
            f"forked from cassette {doc['forked_from']} at {doc['fork_point']}: its first {served_calls} model call(s) served from it, live from there"
        )
    reused = doc.get("reused")
    served = reused["events"] if reused else 0
    if reused:
        checked = (
            "checked against it"
            if reused["status"] == "checked"
            else "unchecked: that cassette is not in this store"
        )
        line(
            f"events 0..{served - 1} served from cassette {reused['donor']} ({reused['calls']} model call(s) not sent, "
            f"{reused['basis']}; {checked}); marked = below"
            + (f"; live from there: {reused['parted']}" if reused.get("parted") else "")
        )
    for e in doc["events"]:
        mark = "=" if e["position"] < served else " "
        _event(f"{mark}[{e['position']:>3}] {e['kind']}", e)
        if served and e["position"] == served - 1 and served < len(doc["events"]):
            line("  ── live from here ──")
    forks = doc.get("forks") or []
    if forks:
        line(f"{len(forks)} fork(s):")
        for f in forks:
            outcome = "passed" if f["passed"] else "failed"
            line(
                f"  {f['cassette_id']} at {f['fork_point']} · model {f['model']} · harness {f['harness_sha'][:10]} · "
                f"reward {f['reward'] if f['reward'] is not None else '-'} ({outcome})"
            )


def _event(head: str, e: ShownEvent) -> None:
    """One shown event of a cassette, after its ``head`` (position and kind)."""
    if e["kind"] == "llm":
        line(
            f"{head} {e['request']['method']} {e['request']['path']} → {e['response']['status']} ({e['response']['chunks']} chunks, {e['response']['bytes']} bytes)"
            + (f" · {e['response']['facet']}" if e["response"].get("facet") else "")
        )
        line(f"      request: {e['request']['body']}")
        line(f"      response: {e['response']['body']}")
    elif e["kind"] == "env":
        line(
            f"{head} $ {e['action']}  → exit {e['exit_code']}  state {e['state_digest'][:12]}"
            + (f"  snapshot {e['snapshot'][:12]}" if e["snapshot"] else "")
        )
        for stream, text in (("stdout", e["stdout"]), ("stderr", e["stderr"])):
            if text:
                line(f"      {stream}: {text}")
    elif e["kind"] == "net":
        source = "fetched" if e["source"] == "upstream" else "served from the store"
        line(f"{head} {e['method']} {e['url']} → {e['status']} ({e['bytes']} bytes, {source})")
    elif e["kind"] == "error" or e["kind"] == "limit":
        line(f"{head} {e['message']}")
    else:
        line(f"{head} {grade_text(e['grade'])}")


def fork_report(result: ForkResult) -> None:
    """``replaykit fork``: the new cassette, what it was served, how it ended."""
    what = "recorded" if result["recorded"] else "already recorded (reused, no model call)"
    line(
        f"fork {result['cassette_id']} of cassette {result['forked_from']} at {fork_call(result['fork_step'], result['parent_calls'])}: {what}"
    )
    line(
        f"task {result['task_id']} · seed {result['seed']} · model {result['model']} · harness {result['harness_sha'][:10]}"
        f" · reward {result['reward'] if result['reward'] is not None else '-'}"
        f" ({'infra' if result['infra_failure'] else 'passed' if result['passed'] else 'failed'})"
    )
    line(
        f"{result['reused_events']} event(s) served from the parent · {result['model_calls']} model call(s) sent"
    )
    line(
        f"see it: replaykit cassettes show {result['cassette_id'][:12]} --store {result['store']} · "
        f"where it parts: replaykit cassettes diff {result['forked_from'][:12]} {result['cassette_id'][:12]} --store {result['store']}"
    )


def grade_text(grade: GradeDoc | None) -> str:
    """``PASS · reward 1.0 · reward 1 from reward.txt …`` (never a Python dict)."""
    if not grade:
        return "-"
    verdict = "INFRA FAILURE" if grade.get("infra_failure") else ("PASS" if grade.get("passed") else "FAIL")
    detail = grade.get("detail")
    return f"{verdict} · reward {grade.get('reward')}" + (f" · {detail}" if detail else "")


def net_rows(doc: NetListing) -> None:
    """``net ls``: one row per exchange, then the totals."""
    cells: list[list[str | Text]] = [
        [
            r["cassette_id"][:12],
            r["task_id"],
            str(r["seed"]),
            r["method"],
            r["url"],
            str(r["status"]),
            str(r["bytes"]),
            "miss (fetched)" if r["source"] == "upstream" else "hit (store)",
        ]
        for r in doc["exchanges"]
    ]
    show_table(
        f"network exchanges of {doc['kind']} {doc['id']}",
        ["cassette", "task", "seed", "method", "url", "status", "bytes", "source"],
        cells,
    )
    if doc.get("image_builds"):
        show_table(
            "fetched while building the task images",
            ["image", "method", "url", "status", "bytes"],
            [
                [
                    r["image"].removeprefix("sha256:")[:12],
                    r["method"],
                    r["url"],
                    str(r["status"]),
                    str(r["bytes"]),
                ]
                for r in doc["image_builds"]
            ],
        )
    line(
        f"{doc['total']} exchange(s): {doc['misses']} fetched, {doc['hits']} served from the store; "
        f"{doc['bytes']} bytes transferred, {doc['stored_bytes']} bytes of distinct bodies"
    )


def bundle_report(report: BundleReport, action: str) -> None:
    """The summary of ``cassettes export``/``import``/``verify``, wrapped to the width piped."""
    root = report["root"]
    what = f"{root.get('kind', root['table'])} {root['id']}"
    counts = report["counts"]
    summary = ", ".join(
        f"{counts[k]} {k}" for k in ("runs", "cassettes", "trees", "blobs", "certificates") if k in counts
    )
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
    if report.get("images"):
        text += f" · with {len(report['images'])} Docker image(s)"
    if report.get("images_loaded"):
        text += f" · docker-loaded {len(report['images_loaded'])} image(s)"
    wrapped(text)


def push_report(report: PushReport) -> None:
    """One summary line for ``cassettes push``."""
    root = report["root"]
    signed = f" · signed by {report['signed_by']}" if "signed_by" in report else ""
    wrapped(
        f"pushed {root.get('kind', root['table'])} {root['id']} to {report['reference']}"
        f" ({report['digest'][:19]}): {report['blobs_uploaded']} blob(s) uploaded"
        f" ({report['bytes_uploaded']} bytes), {report['blobs_present']} already there{signed}"
    )


def pull_report(report: PullReport) -> None:
    """What ``cassettes pull`` did (an import's summary, from a registry), wrapped to the width."""
    root = report["root"]
    what = f"{root.get('kind', root['table'])} {root['id']}"
    if report["noop"]:
        wrapped(f"{report['reference']}: {what} is already in store {report['store']}; nothing to do")
    else:
        new = ", ".join(f"{n} {k}" for k, n in report["imported"].items())
        wrapped(
            f"pulled {what} from {report['reference']} into {report['store']} (new: {new}); "
            f"replay it with `replaykit replay {root['id']} --store {report['store']}`"
        )
    if "signed_by" in report:
        wrapped(f"signature verified: signed by {report['signed_by']}")


def vcr_export(report: VcrExport) -> None:
    for f in report["files"]:
        line(f"{f['path']}  task {f['task_id']} seed {f['seed']}: {f['interactions']} call(s)")
    line(
        f"wrote {len(report['files'])} vcrpy cassette(s) for {report['base_url']}; replay with "
        "vcr.use_cassette(path, record_mode='none', match_on=['method', 'path', 'body'])"
    )


def harbor_jobs(report: HarborExport) -> None:
    """Where ``--jobs-dir`` / ``--format harbor`` wrote the run as Harbor's job folder."""
    k = ", ".join(f"pass@{k} {v:.2f}" for k, v in report["pass_at_k"].items())
    means = ", ".join(f"{name} {v:.2f}" for m in report.get("metrics") or [] for name, v in m.items())
    line(
        f"wrote Harbor job {report['job_dir']}: {report['trials']} trial(s), {report['errors']} error(s)"
        + (f", {means}" if means else "")
        + (f", {k}" if k else "")
        + f"; harbor view {report['job_dir'].rsplit('/', 1)[0] or '.'}"
    )


def proxy_report(report: SessionReport) -> None:
    """The end of a ``replaykit proxy`` session: what was recorded, or how the replay went."""
    if report["mode"] == "record" and not report.get("stored", True):
        hint = (
            "no answer was a result: nothing is kept, the next session records again"
            if report.get("upstream_errors")
            else "point the client's base_url at the proxy"
        )
        text = f"proxy session {report['name']!r} recorded no call: nothing stored ({hint})"
        for error in report.get("upstream_errors", []):
            err(error)
    elif report["mode"] == "record" and report.get("untouched"):
        text = (
            f"proxy session {report['name']!r} received no request: its recording ({report['llm_calls']} call(s), "
            f"cassette {report['cassette_id']}) is kept as it was"
        )
    elif report["mode"] == "record":
        taken_up = f" ({report['resumed']} kept from its earlier recording)" if report.get("resumed") else ""
        text = f"recorded proxy session {report['name']!r}: {report['llm_calls']} call(s){taken_up} → cassette {report['cassette_id']} (digest {report['digest'][:12]})"
        for error in report.get("upstream_errors", []):
            err(error)
    else:
        state = "identical" if report["identical"] else "NOT identical"
        text = f"replayed proxy session {report['name']!r} (cassette {report['cassette_id']}): served {report['served']} of {report['recorded']} recorded call(s), {state}"
        divergence(report.get("divergence"))
    in_full = 1 if report["mode"] == "replay" and report.get("divergence") else 0
    for d in report.get("divergence_lines", [])[in_full:]:  # a replay's first is shown in full above
        where = f"event {d['position']}" if d["position"] is not None else "no recorded event"
        line(f"  also diverged at {where}: {d['reason'][:200]}")
    line(text)


def removal_report(report: RemovalReport) -> None:
    verb = "would remove" if report["dry_run"] else "removed"
    for r in report["runs"]:
        line(f"{verb} {r['kind'] or 'document'} {r['id']}")
    for c in report["cassettes"]:
        line(f"{verb} cassette {c}")
    line(
        f"{verb} {len(report['runs'])} document(s), {len(report['cassettes'])} cassette(s), {len(report['trees'])} harness tree(s), "
        f"{report['blobs']} blob(s) ({report['bytes']} bytes)"
    )
    if report.get("note"):
        line(str(report["note"]))


def store_check(result: StoreCheck) -> None:
    """``cassettes verify`` without a bundle: each damaged item, then one verdict line."""
    for item in result["damaged"]:
        plain(f"damaged {item['table'][:-1]} {item['id']}: {item['error']}")
    for cid in result.get("unchecked", []):
        plain(
            f"unchecked: cassette {cid} says it was served a donor's events; the donor is not in this store"
        )
    counts = ", ".join(f"{n} {t}" for t, n in result["checked"].items())
    verdict = "ok" if result["ok"] else f"{len(result['damaged'])} damaged"
    plain(f"{verdict}: checked {counts} in {result['store']}")
