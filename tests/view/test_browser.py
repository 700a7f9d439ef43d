"""The viewer in a real browser: Debian's headless Chromium (scripts/setup-browser.sh) driven
by playwright, against ``replaykit view`` on loopback over a store holding the quickstart
training, a Docker run and a compare result. Every request the page makes is recorded;
anything not for the viewer's own loopback address is aborted and fails the test. Every page
loads a script that a second loopback server answers late, so each page is read half-parsed
unless the test waits for it (as on a loaded machine, where that race lost now and then).
Screenshots go to ``$REPLAYKIT_TEST_ARTEFACTS/view`` (default ``build/test-artefacts/view``)."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from replaykit.testing import write_config

from .conftest import DOCKER_TASKS, Viewer, cli

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

CHROMIUM = "/usr/bin/chromium"
FLAGS = [  # as tests/report/test_browser.py launches it
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO = Path(__file__).resolve().parents[2]
ARTEFACTS = Path(os.environ.get("REPLAYKIT_TEST_ARTEFACTS") or REPO / "build" / "test-artefacts") / "view"
TOOL_ONLY_WORD = "edsger"  # only the tool outputs of the quickstart hold it


#: every page (a document request) is held this long before the viewer gets it, as on a loaded
#: machine: an assertion that reads the page a click navigates away from, before the next page
#: has loaded, fails every time instead of now and then
PAGE_DELAY_S = 0.4


class _Held(http.server.BaseHTTPRequestHandler):
    """An empty script served PAGE_DELAY_S late: a page that loads it is half-parsed meanwhile."""

    def do_GET(self) -> None:
        time.sleep(PAGE_DELAY_S)
        self.send_response(200)
        self.send_header("Content-Type", "text/javascript")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def held_script() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Held)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/held.js"
    finally:
        server.shutdown()
        server.server_close()


class Browser:
    """A Chromium context whose every request is checked: the viewer's host:port or aborted;
    pages arrive late (``PAGE_DELAY_S``)."""

    def __init__(self, context: Any, hold: str = "") -> None:
        self.context = context
        self.requests: list[str] = []
        self.foreign: list[str] = []
        self.allowed: set[str] = {urlsplit(hold).netloc} if hold else set()
        self.hold = hold  # a late script every page loads first (see PAGE_DELAY_S)
        context.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        url = route.request.url
        self.requests.append(url)
        parts = urlsplit(url)
        if parts.scheme in ("data", "about") or parts.netloc in self.allowed:
            if route.request.resource_type == "document" and self.hold:
                response = route.fetch()
                html = response.text().replace("<body", f'<script src="{self.hold}"></script><body', 1)
                route.fulfill(response=response, body=html)
            else:
                route.continue_()
        else:
            self.foreign.append(url)
            route.abort()

    def page(self, viewer: Viewer) -> Any:
        self.allowed.add(urlsplit(viewer.url).netloc)
        return self.context.new_page()


@pytest.fixture
def browser(tmp_path: Path, held_script: str) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/setup-browser.sh (Debian's chromium)", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 1000},
        )
        b = Browser(context, held_script)
        try:
            yield b
        finally:
            context.close()
        assert b.foreign == [], f"requests outside loopback: {b.foreign}"
        assert b.requests and all(
            urlsplit(u).hostname == "127.0.0.1" for u in b.requests if u.startswith("http")
        )


def follow(page: Any, link: Any) -> None:
    """Click a link and wait until the page it opens is parsed: ``click()`` returns once the
    navigation has committed, and ``count()`` never waits, so a count read right after a click
    may see a half-parsed page (0 rows, as on a loaded machine)."""
    link.click()
    page.wait_for_load_state("domcontentloaded")


def shot(page: Any, name: str) -> Path:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTEFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    assert path.read_bytes().startswith(b"\x89PNG") and path.stat().st_size > 10_000
    return path


@pytest.mark.docker
def test_the_viewer_in_headless_chromium(
    full_store: dict[str, Any], browser: Browser, viewer_of: Any
) -> None:
    training, compare, docker_run = full_store["training"], full_store["compare"], full_store["docker_run"]
    viewer = viewer_of(full_store["store"])
    page = browser.page(viewer)

    _overview(page, viewer, training, compare, docker_run)
    _training(page, viewer, training)
    filtered, filtered_url = _filtered_episodes(page, viewer)
    _search(page)
    diff_text = _regression(page, viewer)
    _permalinks(page, browser, viewer, diff_text, filtered, filtered_url)
    _compare(page, viewer, compare)
    page.close()


def _overview(
    page: Any, viewer: Any, training: dict[str, Any], compare: dict[str, Any], docker_run: dict[str, Any]
) -> None:
    """The overview lists the training, the Docker run and the compare result."""
    page.goto(viewer.url + "/")
    assert page.locator("#trainings-table tr.training-row").count() == 1
    assert page.locator(f"#trainings-table a[href='/trainings/{training['training_id']}']").count() == 1
    assert page.locator(f"#compares-table a[href='/compares/{compare['compare_id']}']").count() == 1
    shot(page, "home")
    follow(page, page.locator("nav.main a", has_text="runs"))
    docker_row = page.locator(f"#runs-table tr.run-row[data-id='{docker_run['run_id']}']")
    assert (
        docker_row.count() == 1 and f"{docker_run['solved']}/{docker_run['total']}" in docker_row.inner_text()
    )
    follow(page, docker_row.locator("a.run"))
    assert page.locator("#run-grid td a.episode").count() == len(DOCKER_TASKS)
    shot(page, "docker-run")


def _training(page: Any, viewer: Any, training: dict[str, Any]) -> None:
    """The training: one row per epoch with its recorded decision, the accepted epochs named."""
    page.goto(f"{viewer.url}/trainings/{training['training_id']}")
    rows = page.locator("#epochs-table tr.epoch-row")
    assert [rows.nth(i).get_attribute("data-decision") for i in range(rows.count())] == [
        e["decision"] for e in training["epochs"]
    ]
    assert page.locator("#curve svg circle.candidate").count() >= 1
    assert (
        page.locator("abbr.term", has_text="loss")
        .first.get_attribute("title")
        .startswith("The criterion's score")
    )
    shot(page, "training")


def _filtered_episodes(page: Any, viewer: Any) -> tuple[str, str]:
    """The episode list, filtered by task from the form; the URL is the permalink of the filter."""
    page.goto(viewer.url + "/episodes")
    page.select_option("#filters select[name=task]", "hello-file")
    page.locator("#filters button").click()
    page.wait_for_url("**/episodes?*task=hello-file*")
    tasks = page.locator("#episodes-table tr.episode-row")
    assert tasks.count() >= 1
    assert {tasks.nth(i).get_attribute("data-task") for i in range(tasks.count())} == {"hello-file"}
    filtered, filtered_url = page.locator("#episode-total").inner_text(), page.url
    follow(page, page.locator("#episodes-table th a.sort", has_text="tokens"))
    assert "sort=tokens" in page.url
    shot(page, "episodes-filtered")

    return filtered, filtered_url


def _search(page: Any) -> None:
    """Search finds a word that only a tool output holds; the hit opens the episode, where the."""
    # word sits in a collapsed tool output until it is expanded
    page.fill("form.search input[name=q]", TOOL_ONLY_WORD)
    page.press("form.search input[name=q]", "Enter")
    page.wait_for_url("**/search?q=*")
    hits = page.locator("#hits li.hit")
    assert hits.count() >= 1 and TOOL_ONLY_WORD in hits.first.locator("mark").first.inner_text().lower()
    shot(page, "search")
    follow(page, hits.first.locator("a.episode"))
    output = page.locator("#transcript details.tool-output", has_text=TOOL_ONLY_WORD).first
    assert output.count() == 1 and output.get_attribute("open") is None
    assert not output.locator("pre").first.is_visible()
    page.locator("button.toggle-all[data-open='1']").click()
    assert output.locator("pre", has_text=TOOL_ONLY_WORD).first.is_visible()
    shot(page, "episode")


def _regression(page: Any, viewer: Any) -> str:
    """A verdict's regression: the movement list links to the side-by-side diff of its two episodes."""
    page.goto(viewer.url + "/verdicts?movement=regression")
    follow(page, page.locator("#verdicts-table a.verdict").first)
    follow(page, page.locator("#movement a.diff-link.regression").first)
    assert "first difference at event" in page.locator("strong.first-difference").inner_text()
    assert page.locator("#side-by-side tr").count() > 2
    diff_text = page.locator("#main h1").inner_text() + page.locator("strong.first-difference").inner_text()
    shot(page, "regression-diff")

    return str(diff_text)


def _permalinks(
    page: Any, browser: Browser, viewer: Any, diff_text: str, filtered: str, filtered_url: str
) -> None:
    """Permalinks: the diff's own link, and the filtered list's URL, opened fresh, show the same."""
    permalink = page.locator("a.permalink").get_attribute("href")
    other = browser.page(viewer)
    other.goto(viewer.url + permalink)
    assert (
        other.locator("#main h1").inner_text() + other.locator("strong.first-difference").inner_text()
        == diff_text
    )
    other.goto(filtered_url)
    assert other.locator("#episode-total").inner_text() == filtered
    other.close()


def _compare(page: Any, viewer: Any, compare: dict[str, Any]) -> None:
    """The compare result: harness × model, trained vs untrained."""
    page.goto(f"{viewer.url}/compares/{compare['compare_id']}")
    assert page.locator("#compare-table a.run").count() == len(compare["cells"])
    assert "trained vs untrained" in page.locator("#compare-table tr.delta").inner_text()
    shot(page, "compare")


def test_a_training_recorded_while_the_viewer_is_open_shows_up(
    tmp_path: Path, browser: Browser, viewer_of: Any
) -> None:
    config = write_config(tmp_path)
    cli("run", str(config), "--json")  # the store exists before the viewer opens it
    viewer = viewer_of(tmp_path / "store", "--poll", "0.25")
    page = browser.page(viewer)
    page.goto(viewer.url + "/trainings")
    assert page.locator("#trainings-table tr.training-row").count() == 0
    # remember every epoch count the page shows, without reloading it
    page.evaluate(
        """() => {
        window.__sameDocument = true;
        window.__seen = [];
        const look = () => {
          const cell = document.querySelector('#trainings-table td.epochs');
          if (cell && window.__seen[window.__seen.length - 1] !== cell.textContent) window.__seen.push(cell.textContent);
        };
        new MutationObserver(look).observe(document.body, {childList: true, subtree: true});
        }"""
    )
    log = (tmp_path / "train.err").open("w")  # a file, not a pipe nobody reads while it trains
    training = subprocess.Popen(
        [sys.executable, "-m", "replaykit.cli", "train", str(config), "--json"],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        deadline = time.monotonic() + 600
        while training.poll() is None and time.monotonic() < deadline:
            page.wait_for_timeout(100)  # playwright serves the page's requests (the route) meanwhile
        out, _ = training.communicate(timeout=5)
    finally:
        if training.poll() is None:
            training.kill()
        log.close()
    assert training.returncode == 0, (tmp_path / "train.err").read_text()
    summary = json.loads(out)
    # the page polls every 0.25 s; on a loaded 2-core machine the last poll can lag a training that
    # just ended by tens of seconds (CI at load 18 timed out at 30 s), so wait longer, and say what it saw
    try:
        page.wait_for_function("() => (window.__seen || []).includes('5')", timeout=120_000)
    except Exception as exc:
        raise AssertionError(f"epoch counts seen: {page.evaluate('window.__seen')}") from exc
    seen = [int(v) for v in page.evaluate("window.__seen")]
    assert page.evaluate("window.__sameDocument") is True  # updated in place, never reloaded
    assert seen == sorted(seen) and seen[-1] == len(summary["epochs"]) == 5
    assert len(seen) >= 2, f"the page showed only the finished training (epoch counts seen: {seen})"
    row = page.locator(f"#trainings-table tr.training-row[data-id='{summary['training_id']}']")
    assert row.count() == 1
    shot(page, "live-training")


def test_the_curve_and_the_page_links_as_drawn(
    quickstart_store: dict[str, Any], browser: Browser, viewer_of: Any
) -> None:
    """As a reader sees them: the permalink and the live mark are apart (the link used to float
    into "· live"), and the curve's axis labels and values are drawn inside the figure."""
    training = quickstart_store["training"]
    viewer = viewer_of(quickstart_store["store"])
    page = browser.page(viewer)
    page.goto(f"{viewer.url}/trainings/{training['training_id']}")
    link, live = page.locator("#page-links a.permalink"), page.locator("#page-links .live")
    a, b = link.bounding_box(), live.bounding_box()
    assert a and b and a["x"] + a["width"] + 4 <= b["x"], (a, b)  # side by side, a gap between
    assert link.inner_text() == "permalink to this page" and live.inner_text() == "● live"
    figure = page.locator("#curve svg").bounding_box()
    assert figure
    labels = page.locator("#curve svg text.ytick, #curve svg text.xtick, #curve svg text.value")
    assert labels.count() >= 5 + len(training["epochs"])
    for i in range(labels.count()):
        box = labels.nth(i).bounding_box()
        assert box and box["width"] > 0 and figure["x"] <= box["x"] <= figure["x"] + figure["width"]
    assert (page.locator("#curve svg text.xtick.skipped").text_content() or "").endswith("skipped")
    shot(page, "training-curve")

    # a verdict's diff: both transcripts in two columns of one width, a pair's turns on one line
    epoch = next(e for e in training["epochs"] if (e.get("verdict") or {}).get("new_solves"))
    page.goto(f"{viewer.url}/verdicts/{epoch['verdict_id']}")
    follow(page, page.locator("#movement a.diff-link").first)
    heads = page.locator("#transcripts tr.pair-head")
    assert heads.count() >= 2
    a, b = (heads.first.locator("th").nth(i).bounding_box() for i in (0, 1))
    assert (
        a
        and b
        and a["y"] == b["y"]
        and a["x"] + a["width"] <= b["x"] + 1
        and abs(a["width"] - b["width"]) < 2
    )
    hunk = page.locator("a.hunk-link").last
    target = hunk.get_attribute("href") or ""
    hunk.click()
    page.wait_for_function(f"() => location.hash === {json.dumps(target)}")
    assert page.locator(target).is_visible()
    shot(page, "verdict-diff")
