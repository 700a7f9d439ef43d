"""`replaykit report`: one self-contained HTML file per training, run, verdict and compare result."""

from __future__ import annotations

import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from replaykit.testing import write_config

from .conftest import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


class Page(HTMLParser):
    """Ids, in-page links and every attribute that could make the browser fetch something."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.fetches: list[str] = []
        self.tags: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            value = value or ""
            if name == "id":
                self.ids.add(value)
            if name == "href" and tag == "a":
                self.links.append(value)
            elif name in ("src", "href", "srcset", "action", "poster", "data") and tag not in ("a",):
                if not value.startswith(("#", "data:")):
                    self.fetches.append(f"{tag} {name}={value}")


def report(store: Path, report_id: str, out: Path, *extra: str) -> tuple[dict[str, Any], str]:
    summary = json.loads(
        cli("report", report_id, "-o", str(out), "--store", str(store), "--json", *extra).stdout
    )
    return summary, out.read_text()


def store_bytes(store: Path) -> str:
    return hashlib.sha256((store / "index.db").read_bytes()).hexdigest()


def test_training_report_is_self_contained_and_complete(
    quickstart_training: dict[str, Any], tmp_path: Path
) -> None:
    t, store = quickstart_training["summary"], quickstart_training["store"]
    before = store_bytes(store)
    summary, html = report(
        store, t["training_id"][:8], tmp_path / "report.html", "--png", str(tmp_path / "png")
    )
    assert store_bytes(store) == before  # reading never writes
    assert summary["kind"] == "training" and summary["id"] == t["training_id"]
    page = Page(html)
    assert page.fetches == [] and "<script" not in html and not re.search(r"\burl\((?!#)", html)
    assert "default-src 'none'" in html  # the page may not fetch anything
    assert {"curve", "heatmap-figure", "verdict-table"} <= page.ids
    assert 'id="curve-solved-baseline"' in html and 'id="curve-accepted"' in html  # matplotlib's SVG, inline
    rows = re.findall(r'class="epoch-row" data-epoch="(\d+)" data-decision="(\w+)"', html)
    assert [(int(e), d) for e, d in rows] == [(e["epoch"], e["decision"]) for e in t["epochs"]]
    # every in-page link lands on an element of the page; every episode of every run has its transcript
    assert all(link.startswith("#") and link[1:] in page.ids for link in page.links)
    episode_links = {link for link in page.links if link.startswith("#t-")}
    runs = {r for e in t["epochs"] for r in (e["baseline_run"], e["candidate_run"]) if r}
    assert summary["runs"] == len(runs)
    assert summary["transcripts"] == len(episode_links) >= 16 * len(runs)
    # each regression/new solve of each verdict links to its diff, whose first difference is shown
    moved = sum(
        len(e["verdict"]["new_solves"]) + len(e["verdict"]["regressions"])
        for e in t["epochs"]
        if e["verdict"]
    )
    assert summary["diffs"] == moved == len({link for link in page.links if link.startswith("#d-")})
    assert html.count('class="first-difference"') == moved
    assert "The command failed (exit code" in html  # the retry nudge, in a diff and in transcripts
    # signal or noise (issue 33 items 1, 6): each verdict's margin and floor, each flip's label,
    # as `audit TRAINING --noise` derives them offline
    noise = json.loads(cli("audit", t["training_id"], "--noise", "--json", "--store", str(store)).stdout)
    judged = [e for e in noise["epochs"] if e.get("margin") is not None]  # a skipped epoch has no verdict
    assert judged
    for e in judged:
        shown = "within-noise" if e["within_noise"] else "outside-noise"
        assert (
            f'data-epoch="{e["epoch"]}">epoch {e["epoch"]} ({e["decision"]}): <span class="{shown}">'
            f"margin {e['margin']:+.3f}"
        ) in html
        assert f"noise floor {e['noise_floor']:.3f}" in html
    assert html.count('<li class="paired">paired over 16 instance(s) of 8 task(s)') == len(judged)
    assert '<p class="false-accept">strict_pareto&#39;s measured false-accept rate: 10/200 null' in html
    labels = re.findall(r'<li class="flip (attributed|incidental)">', html)
    derived = [f["label"] for e in judged for f in e["attribution"]["flips"]]
    assert len(labels) == moved and sorted(labels) == sorted(derived)
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == ["curve.png", "heatmap.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in (tmp_path / "png").iterdir())
    # the same store gives the same bytes
    _, again = report(store, t["training_id"], tmp_path / "again.html")
    assert again == html


def test_run_and_verdict_reports(quickstart_training: dict[str, Any], tmp_path: Path) -> None:
    t, store = quickstart_training["summary"], quickstart_training["store"]
    run_id = t["epochs"][0]["baseline_run"]
    summary, html = report(store, run_id, tmp_path / "run.html")
    assert summary["kind"] == "measure" and summary["transcripts"] == 16 and summary["diffs"] == 0
    assert html.count('class="episode"') == 16 and "infra failure" not in html.split('id="runs"')[0]
    # each episode's outcome class (issue 33 item 4), in its grid cell and its transcript
    from replaykit.cassette.outcomes import outcome_of
    from replaykit.cassette.store import Store

    s = Store(store, readonly=True)
    outcomes = [outcome_of(s.get_episode(c)) for c in s.get_run(run_id).cassettes]
    s.close()
    shown = re.findall(r'<span class="outcome" title="[^"]*">(\w+)</span>', html)
    assert len(shown) == 2 * 16 and sorted(shown) == sorted(outcomes * 2), (shown, outcomes)
    verdict = next(e for e in t["epochs"] if e["decision"] == "accepted")
    summary, html = report(store, verdict["verdict_id"], tmp_path / "verdict.html")
    assert summary["kind"] == "verdict" and summary["diffs"] == len(verdict["verdict"]["new_solves"])
    assert "+            if obs.exit_code != 0:" in html  # the candidate's code change
    flips = re.findall(r'<li class="flip (attributed|incidental)">', html)
    assert len(flips) == len(verdict["verdict"]["new_solves"]) and "noise floor" in html
    assert "exact McNemar p" in html  # issue 37: the verdict's paired comparison


def test_compare_result_is_stored_and_reported(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [
                str(Path(__file__).resolve().parents[2] / "envs" / t)
                for t in ("hello-file", "fix-config-port")
            ],
            "panel.seeds": [0],
        },
    )
    doc = json.loads(
        cli(
            "compare",
            str(config),
            "--models",
            "reference-weak,reference-strong",
            "--harness",
            "main",
            "--json",
        ).stdout
    )
    assert re.fullmatch(r"[0-9a-f]{16}", doc["compare_id"])
    listed = json.loads(cli("runs", "--kind", "compare", "--store", str(tmp_path / "store"), "--json").stdout)
    assert [r["id"] for r in listed] == [doc["compare_id"]]
    summary, html = report(
        tmp_path / "store", doc["compare_id"], tmp_path / "compare.html", "--png", str(tmp_path / "png")
    )
    assert summary["kind"] == "compare" and summary["runs"] == 2 and summary["charts"] == ["compare"]
    assert 'id="compare-table"' in html and 'id="compare-bars-0"' in html
    for cell in doc["cells"]:
        assert f"{cell['solved']}/{cell['total']}" in html
    # each bar's error bar and its cell: the run's seeded bootstrap interval (issue 33 item 1)
    from replaykit.cassette.store import Store
    from replaykit.train.stats import rate_interval

    store = Store(tmp_path / "store", readonly=True)
    for cell in doc["cells"]:
        low, high = rate_interval(store.get_run(cell["run_id"]))
        assert f"95% [{100 * low:.0f}–{100 * high:.0f}%]" in html
    store.close()
    assert 'id="compare-bars-interval-0"' in html


def test_bad_report_ids_and_outputs_are_one_line_errors(
    quickstart_training: dict[str, Any], tmp_path: Path
) -> None:
    store = str(quickstart_training["store"])
    bad = cli("report", "nosuchthing", "-o", str(tmp_path / "x.html"), "--store", store, check=False)
    assert (
        bad.returncode == 1
        and bad.stderr.startswith("Error: no ")
        and len(bad.stderr.strip().splitlines()) == 1
    )
    folder = cli(
        "report",
        quickstart_training["summary"]["training_id"],
        "-o",
        str(tmp_path),
        "--store",
        store,
        check=False,
    )
    assert folder.returncode == 1 and "is a folder" in folder.stderr and "Traceback" not in folder.stderr
    assert not (tmp_path / "x.html").exists()
    nowhere = tmp_path / "no-store"
    missing = cli("report", "abc123", "-o", str(tmp_path / "y.html"), "--store", str(nowhere), check=False)
    assert (
        missing.returncode == 1 and missing.stderr.startswith("Error: no store at") and not nowhere.exists()
    )
    missing = cli("cassettes", "diff", "abc123", "def456", "--store", str(nowhere), check=False)
    assert (
        missing.returncode == 1 and missing.stderr.startswith("Error: no store at") and not nowhere.exists()
    )
