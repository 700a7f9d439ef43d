"""The quickstart training's report in a real browser: Debian's headless Chromium (scripts/setup-browser.sh),
driven by playwright with the system executable, from file:// with networking disabled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import cli

pytestmark = pytest.mark.browser  # headless Chromium

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/setup-browser.sh (Debian's chromium)", pytrace=False)
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh --user-data-dir
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            offline=True,
            viewport={"width": 1280, "height": 1000},
        )
        try:
            yield context
        finally:
            context.close()


def test_quickstart_training_report_in_headless_chromium(
    quickstart_training: dict[str, Any], browser_page: Any, tmp_path: Path
) -> None:
    t = quickstart_training["summary"]
    out = tmp_path / "report.html"
    summary = json.loads(
        cli(
            "report", t["training_id"], "-o", str(out), "--store", str(quickstart_training["store"]), "--json"
        ).stdout
    )
    url = out.resolve().as_uri()
    page = browser_page.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(url)
    page.wait_for_load_state("load")

    # the curve: matplotlib's SVG, with the baseline line and the accepted marker drawn
    assert page.locator("#curve svg").count() == 1
    assert page.locator("#curve-solved-baseline path").count() >= 1
    assert page.locator("#curve-accepted").count() == 1
    assert page.locator("#curve svg").bounding_box()["height"] > 200
    # the verdict table: one row per epoch, with the recorded decisions
    rows = page.locator("#verdict-table tr.epoch-row")
    assert rows.count() == len(t["epochs"]) == 5
    assert [rows.nth(i).get_attribute("data-decision") for i in range(rows.count())] == [
        e["decision"] for e in t["epochs"]
    ]
    assert page.locator("#verdict-table td.accepted").count() == sum(
        e["decision"] == "accepted" for e in t["epochs"]
    )
    assert page.locator("#verdict-table td.rejected").count() == sum(
        e["decision"] == "rejected" for e in t["epochs"]
    )

    # a transcript link works: its section is hidden until followed, then shown
    link = page.locator("table.grid a.episode").first
    target = link.get_attribute("href")
    assert target and target.startswith("#t-")
    assert not page.locator(target).is_visible()
    link.click()
    assert page.url.endswith(target) and page.locator(target).is_visible()
    assert (
        page.locator(f"{target} h3.call").count() >= 1
        and "grade pass" in page.locator(target).inner_text().lower()
    )

    # a diff link of a new solve works and shows the first difference: the retry nudge
    diff = page.locator("a.diff-link.new-solve").first
    dtarget = diff.get_attribute("href")
    diff.click()
    section = page.locator(dtarget)
    assert section.is_visible()
    assert "first difference at event" in section.inner_text()
    assert "The command failed (exit code" in section.locator("tr.insert").nth(1).inner_text()
    assert summary["diffs"] == page.locator("section.diff").count()

    shot = tmp_path / "report.png"
    page.goto(url)
    page.screenshot(path=str(shot), full_page=False)
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000
    # nothing but the report itself was requested
    assert requests and set(requests) == {url}, requests
    page.close()
