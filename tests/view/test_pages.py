"""``replaykit view`` as an HTTP server on loopback, over the quickstart training and a compare
result: every page answers, filters, sorting and pagination do what they say, search finds
text that only a tool output holds, bad input is one line, and nothing can write."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from .conftest import Viewer, cli

pytestmark = pytest.mark.e2e

#: A word that only the tool outputs of the quickstart hold (a name in csv-active-emails' data).
TOOL_ONLY_WORD = "edsger"


def get(url: str, method: str = "GET") -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read().decode("utf-8"), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8"), dict(exc.headers)


@pytest.fixture(scope="module")
def viewer(quickstart_store: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    v = Viewer(quickstart_store["store"], tmp_path_factory.mktemp("view-cache"))
    yield v
    v.stop()


def test_every_page_answers_and_links_to_the_next(viewer: Viewer, quickstart_store: dict[str, Any]) -> None:
    training = quickstart_store["training"]
    status, home, headers = get(viewer.url + "/")
    assert status == 200 and training["training_id"] in home
    assert headers["content-security-policy"].startswith("default-src 'self'")
    status, page, _ = get(
        f"{viewer.url}/trainings/{training['training_id'][:8]}"
    )  # a unique prefix is enough
    assert status == 200
    assert page.count('class="epoch-row"') == len(training["epochs"]) == 5
    accepted = [e["epoch"] for e in training["epochs"] if e["decision"] == "accepted"]
    assert f"{len(accepted)} accepted ({', '.join(f'e{e}' for e in accepted)})" in page
    verdict = next(e["verdict_id"] for e in training["epochs"] if e.get("verdict", {}).get("regressions"))
    status, page, _ = get(f"{viewer.url}/verdicts/{verdict}")
    links = re.findall(r'class="diff-link regression" href="([^"]+)"', page)
    assert status == 200 and links
    status, diff, _ = get(viewer.url + links[0].replace("&amp;", "&"))
    assert status == 200 and "first difference" in diff and 'id="side-by-side"' in diff
    compare = quickstart_store["compare"]
    status, page, _ = get(f"{viewer.url}/compares/{compare['compare_id']}")
    assert status == 200 and "trained vs untrained" in page
    for cell in compare["cells"]:
        assert f'href="/runs/{cell["run_id"]}"' in page
    status, page, _ = get(f"{viewer.url}/runs/{compare['cells'][0]['run_id']}")
    cells = re.findall(r'href="/episodes/([0-9a-f]+)"', page)
    assert status == 200 and len(cells) == 16
    status, page, _ = get(f"{viewer.url}/episodes/{cells[0]}")
    assert status == 200 and 'id="grade"' in page and "raw events" in page and "state digest" in page


def test_the_verdict_page_says_signal_or_noise_and_labels_every_flip(
    viewer: Viewer, quickstart_store: dict[str, Any]
) -> None:
    """Issue 33 items 1 and 6: what `audit VERDICT --json` derives, on the verdict's page."""
    store = str(quickstart_store["store"])
    flips = 0
    for e in quickstart_store["training"]["epochs"]:
        if not e.get("verdict_id"):
            continue
        audit = json.loads(cli("audit", e["verdict_id"], "--json", "--store", store).stdout)
        status, page, _ = get(f"{viewer.url}/verdicts/{e['verdict_id']}")
        noise = audit["noise"]
        assert status == 200 and f"noise floor {noise['noise_floor']:.3f}" in page
        assert ("within noise" if noise["within_noise"] else "outside the noise") in page
        pair = audit["paired"]  # issue 37: the paired difference, McNemar and the panel's mde
        assert f"exact McNemar p {pair['mcnemar_p']:.3f}" in page and f"detects ±{pair['mde']:.3f}" in page
        too_small = 'id="panel-too-small"' in page
        assert too_small == (e["verdict"]["accept"] and not pair["detectable"])
        k = audit["replicates"]["baseline"]["seeds"]
        assert f"baseline: pass@{k} {audit['replicates']['baseline']['pass_at_k'][str(k)]:.2f}" in page
        labels = re.findall(r'<li class="flip (attributed|incidental)">', page)
        assert labels == [f["label"] for f in audit["attribution"]["flips"]]
        assert len(labels) == len(e["verdict"]["regressions"]) + len(e["verdict"]["new_solves"])
        flips += len(labels)
    assert flips > 0  # the quickstart training moves some task instances


def test_a_run_page_shows_its_replicates(viewer: Viewer, quickstart_store: dict[str, Any]) -> None:
    """Issue 33 item 1: a run's pass@k, pass^k and flips, as `runs --json` derives them."""
    store = str(quickstart_store["store"])
    run_id = quickstart_store["training"]["epochs"][0]["baseline_run"]
    listed = json.loads(cli("runs", "--kind", "measure", "--json", "--store", store).stdout)
    stats = next(r["stats"] for r in listed if r["id"] == run_id)
    k = str(stats["seeds"])
    _, page, _ = get(f"{viewer.url}/runs/{run_id}")
    shown = re.search(r'<p id="run-replicates">.*?</abbr>: ([^<]+)</p>', page)
    assert shown is not None, page[:800]
    assert shown.group(1).startswith(
        f"pass@{k} {stats['pass_at_k'][k]:.2f} pass^{k} {stats['pass_hat_k'][k]:.2f} disagree {stats['seed_flip_rate']:.2f}"
    )


def test_episode_list_filters_sorts_and_pages(viewer: Viewer) -> None:
    _, page, _ = get(viewer.url + "/episodes")
    found = re.search(r'id="episode-total">(\d+) episode', page)
    assert found is not None, page[:500]
    total = int(found.group(1))
    assert page.count('class="episode-row"') == 50 and total > 50 and "page 1 of" in page
    _, page2, _ = get(viewer.url + "/episodes?page=2")
    first = set(re.findall(r'href="/episodes/([0-9a-f]+)"', page))
    second = set(re.findall(r'href="/episodes/([0-9a-f]+)"', page2))
    assert first and second and not first & second
    _, page, _ = get(viewer.url + "/episodes?task=hello-file&seed=1&sort=tokens&dir=asc")
    tasks = re.findall(r'class="episode-row" data-task="([^"]+)"', page)
    assert tasks and set(tasks) == {"hello-file"}
    tokens = [int(t) for t in re.findall(r'<td class="num">(\d+)</td><td>\d{4}-', page)]
    assert tokens == sorted(tokens) and len(tokens) == len(tasks)
    _, page, _ = get(viewer.url + "/episodes?outcome=fail")
    assert 'class="pass"' not in page.split('id="episodes-table"')[1]


def test_search_finds_a_word_only_a_tool_output_holds(viewer: Viewer) -> None:
    status, page, _ = get(f"{viewer.url}/search?q={TOOL_ONLY_WORD.upper()}")
    assert status == 200
    hits = re.findall(r'href="/episodes/([0-9a-f]+)"', page)
    assert hits and "<mark>" in page and TOOL_ONLY_WORD in page.lower()
    _, episode, _ = get(f"{viewer.url}/episodes/{hits[0]}")
    outputs = re.findall(
        r'<details class="turn (?:role-tool|env) tool-output">(.*?)</details>', episode, re.S
    )
    assert any(TOOL_ONLY_WORD in o.lower() for o in outputs)
    outside = re.sub(
        r'<details class="turn (?:role-tool|env) tool-output">.*?</details>', "", episode, flags=re.S
    )
    assert TOOL_ONLY_WORD not in outside.split('id="raw-events"')[0].lower()
    status, page, _ = get(f"{viewer.url}/search?q=zzzznotaword")
    assert status == 200 and "0 episode(s)" in page


def test_bad_input_is_one_line_and_nothing_writes(viewer: Viewer) -> None:
    status, page, _ = get(viewer.url + "/episodes?seed=x")
    assert status == 400 and "seed=&#39;x&#39; is not a whole number" in page
    status, page, _ = get(viewer.url + "/episodes?sort=drop")
    assert status == 400 and "is not a column" in page
    for query, said in (
        ("/episodes?page=" + "9" * 30, "page=999999999999999999999999… is out of range; use 1 to 1000000"),
        ("/episodes?page=0", "page=0 is out of range; use 1 to 1000000"),
        ("/runs?page=-3", "page=-3 is out of range"),
        ("/search?q=x&page=" + "1" * 25, "is out of range"),
        ("/episodes?seed=" + "1" * 21, "seed=" + "1" * 20),
    ):
        status, page, _ = get(viewer.url + query)
        assert status == 400 and said in page, (query, status)  # one line, never a 500
    status, home, _ = get(viewer.url + "/")
    assert status == 200 and "<title>replaykit view</title>" in home  # one title, not said twice
    status, page, _ = get(viewer.url + "/episodes/ffffffff")
    assert status == 404 and "no cassette" in page
    status, page, _ = get(viewer.url + "/trainings/" + "0" * 16)
    assert status == 404
    status, _, _ = get(viewer.url + "/episodes", method="POST")
    assert status == 405
    status, body, _ = get(viewer.url + "/api/token")
    assert status == 200 and json.loads(body)["token"]


def test_the_sidecar_index_is_outside_the_store(viewer: Viewer, quickstart_store: dict[str, Any]) -> None:
    get(f"{viewer.url}/search?q=checksum")
    sidecar = Path(viewer.info["search_index"])
    assert sidecar.is_file() and quickstart_store["store"].resolve() not in sidecar.resolve().parents


def test_search_hits_name_their_harness_and_a_run_links_to_its_training(
    viewer: Viewer, quickstart_store: dict[str, Any]
) -> None:
    """14 hits of one task and seed looked alike: each names the harness commit that ran it
    (linking to that commit's runs); a run links back to the training that measured it."""
    training = quickstart_store["training"]
    status, page, _ = get(f"{viewer.url}/search?q={TOOL_ONLY_WORD}")
    assert status == 200
    hits = re.findall(r'<li class="hit">(.*?)</li>', page, re.S)
    shas = {re.search(r'href="/runs\?harness=([0-9a-f]{40})"', h).group(1) for h in hits}  # type: ignore[union-attr]
    assert len(hits) >= 2 and len(shas) >= 2 and training["initial_sha"] in shas
    run_id = training["epochs"][0]["candidate_run"]
    status, page, _ = get(f"{viewer.url}/runs/{run_id}")
    assert status == 200
    assert f'<a class="training" href="/trainings/{training["training_id"]}">' in page
    status, page, _ = get(f"{viewer.url}/runs?harness={training['initial_sha']}")
    assert status == 200 and training["epochs"][0]["baseline_run"] in page


def test_the_training_curve_has_axes_and_the_value_at_every_point(
    viewer: Viewer, quickstart_store: dict[str, Any]
) -> None:
    """The curve had no axes and no numbers: now a y axis 0 to the panel's size with ticks,
    every epoch labelled on the x axis (a skipped one says so), and each point's value."""
    training = quickstart_store["training"]
    _, page, _ = get(f"{viewer.url}/trainings/{training['training_id']}")
    figure = page.split('<figure id="curve">')[1].split("</figure>")[0]
    assert 'id="y-axis"' in figure and 'id="x-axis"' in figure and "solved (of 16)" in figure
    ticks = [  # (the grid line's height, the tick's label)
        (float(y), float(v))
        for y, v in re.findall(
            r'<line class="grid" [^>]*y1="([\d.]+)"[^>]*/><text class="ytick"[^>]*>([\d.]+)</text>', figure
        )
    ]
    assert ticks[0][1] == 0 and ticks[-1][1] == 16 and len(ticks) >= 3
    labels = re.findall(r'<text class="xtick (\w+)"[^>]*>([^<]+)</text>', figure)
    assert labels == [
        (e["decision"], f"e{e['epoch']}" + (" skipped" if e["decision"] == "skipped" else ""))
        for e in training["epochs"]
    ]
    (y0, _), (y16, _) = ticks[0], ticks[-1]
    for side, key in (("baseline", "solved_baseline"), ("candidate", "solved_candidate")):
        want = [e["verdict"]["metrics"][key] for e in training["epochs"] if e.get("verdict")]
        shown = re.findall(rf'<text class="value {side}"[^>]*>([\d.]+)</text>', figure)
        assert [float(v) for v in shown] == want, side
        circles = re.findall(rf'<circle class="{side}" cx="\d+" cy="([\d.]+)"', figure)
        for cy, value in zip(circles, want, strict=True):  # on the axis' scale (y is linear in the value)
            assert abs(float(cy) - (y0 + (y16 - y0) * value / 16)) < 0.2
    accepted = [e for e in training["epochs"] if e["decision"] == "accepted"]
    assert figure.count('class="star"') == len(accepted)


def test_the_permalink_and_the_live_mark_are_two_things_and_live_says_when_it_is_not(
    viewer: Viewer, quickstart_store: dict[str, Any], tmp_path: Path
) -> None:
    """ "· live" and "permalink" ran together (the link floated into the text): two marked
    elements now, and with --poll 0 the page does not claim to be live."""
    _, page, _ = get(viewer.url + "/runs?model=reference-weak")
    links = page.split('<nav class="page-links" id="page-links">')[1].split("</nav>")[0]
    assert re.fullmatch(
        r'<a class="permalink" href="/runs\?model=reference-weak"[^>]*>permalink to this page</a>'
        r'<span class="live" title="[^"]*every 2 s\)">● live</span>',
        links,
    ), links
    still = Viewer(quickstart_store["store"], tmp_path / "cache", "--poll", "0")
    try:
        _, page, _ = get(still.url + "/")
    finally:
        still.stop()
    links = page.split('id="page-links">')[1].split("</nav>")[0]
    assert 'class="live"' not in links and "not live (--poll 0)" in links and 'data-poll="0"' in page


def _turns(store: Path, cassette: str) -> list[tuple[int, str]]:
    shown = json.loads(
        cli("cassettes", "show", cassette, "--transcript", "--json", "--store", str(store)).stdout
    )
    return [(t["position"], t["kind"]) for t in shown["turns"]]


def test_a_verdict_diff_shows_both_transcripts_side_by_side_every_hunk(
    viewer: Viewer, quickstart_store: dict[str, Any]
) -> None:
    """A verdict diff showed only the first differing event's hunk: now both transcripts, the
    turns they share once, then side by side from the first difference on, in order, every
    pair that differs marked and linked."""
    store = quickstart_store["store"]
    pages = []
    for e in quickstart_store["training"]["epochs"]:
        v = e.get("verdict") or {}
        for unit in v.get("new_solves", []) + v.get("regressions", []):
            url = f"{viewer.url}/verdicts/{e['verdict_id']}/diff?unit={unit.replace('#', '%23')}"
            status, page, _ = get(url)
            assert status == 200, page
            pages.append(page)
    assert pages
    most = 0
    for page in pages:
        a, b = re.findall(r'<a class="episode [ab]" href="/episodes/([0-9a-f]+)"', page)
        first = int(re.search(r"first difference</abbr> at event (\d+)", page).group(1))  # type: ignore[union-attr]
        table = page.split('id="transcripts">')[1].split("</table>")[0]
        heads = re.findall(r'<tr class="pair-head"><th>(.*?)</th><th>(.*?)</th></tr>', table)
        for side, cassette in ((0, a), (1, b)):
            shown = [int(m.group(1)) for h in heads if (m := re.search(r"#event-(\d+)\">event", h[side]))]
            turns = _turns(store, cassette)
            assert shown == [p for p, _ in turns if p >= first]  # the whole transcript from there, in order
            shared = page.split('id="shared-prefix">')[1].split("</details>")[0] if first else ""
            assert re.findall(r"<h3>event (\d+) ·", shared) == [str(p) for p, _ in turns if p < first]
        assert (
            f'#event-{first}">event {first}</a>' in heads[0][0] + heads[0][1]
        )  # aligned at the first difference
        differing = re.findall(r'<tbody class="pair differs" id="(pair-\d+)">', table)
        assert int(re.search(r'id="hunk-count">(\d+) differ', page).group(1)) == len(differing) >= 1  # type: ignore[union-attr]
        assert re.findall(r'class="hunk-link" href="#(pair-\d+)"', page) == differing
        most = max(most, len(differing))
        grades = re.findall(r"· grade · (PASS|FAIL) ·", table)
        assert sorted(grades) == ["FAIL", "PASS"]  # the two ends: one solved it, one did not
    assert most >= 3  # later hunks shown too, not only the first


def test_an_episode_says_how_long_it_took(
    viewer: Viewer, quickstart_store: dict[str, Any], tmp_path: Path
) -> None:
    """No page said how long an episode took: a recorded one is timed (environment start to
    grade, in its meta, outside its key and digest) and its page and a diff say so; one
    recorded before that says it was not timed."""
    store = quickstart_store["store"]
    run = quickstart_store["training"]["epochs"][0]["candidate_run"]
    _, page, _ = get(f"{viewer.url}/runs/{run}")
    cassette = re.findall(r'href="/episodes/([0-9a-f]+)"', page)[0]
    shown = json.loads(cli("cassettes", "show", cassette, "--json", "--store", str(store)).stdout)
    seconds = shown["meta"]["wall_seconds"]
    assert 0 < seconds < 120
    _, page, _ = get(f"{viewer.url}/episodes/{cassette}")
    took = re.search(
        r'<span id="duration"><abbr class="term" title="How long[^"]*">took</abbr> ([\d.]+) s</span>', page
    )
    assert took and float(took.group(1)) == round(seconds, 2 if seconds < 10 else 1)
    assert '<abbr class="term" title="How long the episode took when it was recorded' in page
    epoch = next(
        e for e in quickstart_store["training"]["epochs"] if (e.get("verdict") or {}).get("new_solves")
    )
    unit = epoch["verdict"]["new_solves"][0].replace("#", "%23")
    _, page, _ = get(f"{viewer.url}/verdicts/{epoch['verdict_id']}/diff?unit={unit}")
    assert len(re.findall(r'<span class="duration">.*?took</abbr> [\d.]+ s</span>', page)) == 2
    old = tmp_path / "old-store"  # the format-1 bundle was recorded before episodes were timed
    bundle = Path(__file__).resolve().parents[2] / "tests" / "data" / "format1" / "quickstart-training.tar.gz"
    cli("cassettes", "import", str(bundle), "--store", str(old), "--json")
    first = json.loads(cli("cassettes", "ls", "--store", str(old), "--limit", "1", "--json").stdout)[0]["id"]
    older = Viewer(old, tmp_path / "cache")
    try:
        _, page, _ = get(f"{older.url}/episodes/{first}")
    finally:
        older.stop()
    assert re.search(r'<span id="duration">.*?took</abbr> not timed when recorded</span>', page)


def test_each_task_has_its_pass_rate_across_runs(viewer: Viewer, quickstart_store: dict[str, Any]) -> None:
    """No page gave a task's pass rate across runs: /tasks counts, per task, every instance
    the (filtered) runs measured, hardest first, and links to its episodes and failures.
    The quickstart training and compare are deterministic (the reference server): these are
    their counts, fixed (task: rate %, solved, failed, infra, runs), never re-derived here."""
    tables = {
        "": (
            7,
            {
                "organize-files": (43, 6, 8, 0, 7),
                "hello-file": (57, 8, 6, 0, 7),
                "run-build-script": (57, 8, 6, 0, 7),
                "fix-config-port": (71, 10, 4, 0, 7),
                "csv-active-emails": (79, 11, 3, 0, 7),
                "count-error-lines": (86, 12, 2, 0, 7),
                "json-release-tag": (93, 13, 1, 0, 7),
                "checksum-release": (100, 14, 0, 0, 7),
            },
        ),
        "reference-strong": (
            2,
            {
                "count-error-lines": (50, 2, 2, 0, 2),
                "fix-config-port": (75, 3, 1, 0, 2),
                "json-release-tag": (75, 3, 1, 0, 2),
                "organize-files": (75, 3, 1, 0, 2),
                "run-build-script": (75, 3, 1, 0, 2),
                "checksum-release": (100, 4, 0, 0, 2),
                "csv-active-emails": (100, 4, 0, 0, 2),
                "hello-file": (100, 4, 0, 0, 2),
            },
        ),
    }
    for model, (nruns, want) in tables.items():
        status, page, _ = get(f"{viewer.url}/tasks" + (f"?model={model}" if model else ""))
        assert status == 200 and "across <a href=" in page and f">{nruns} run(s)</a>" in page
        rows = re.findall(
            r'<tr class="task-row" data-task="([^"]+)">.*?data-sort="[^"]*">(\d+)%</td><td class="num">(\d+)</td>'
            r'<td class="num">(?:<a href="([^"]+)">)?(\d+)(?:</a>)?</td><td class="num">(\d+)</td><td class="num">(\d+)</td>'
            r'<td class="num">(\d+)</td>',
            page,
            re.S,
        )
        assert {r[0] for r in rows} == set(want) and len(rows) == len(want)
        for task, rate, solved, fail_link, failed, infra, instances, runs in rows:
            r, s, f, i, n = want[task]
            shown = (int(rate), int(solved), int(failed), int(infra), int(instances), int(runs))
            assert shown == (r, s, f, i, s + f + i, n), task
            assert (fail_link == f"/episodes?task={task}&amp;outcome=fail") == (f > 0)
        rates = [int(r[1]) for r in rows]
        assert rates == sorted(rates)  # hardest first
    status, page, _ = get(f"{viewer.url}/tasks?harness=ffffffffff")
    assert status == 200 and "no run recorded matches these filters" in page


def test_search_hits_name_the_runs_that_hold_them(viewer: Viewer, quickstart_store: dict[str, Any]) -> None:
    """A hit named its harness commit but not its run: now each lists the runs that hold it
    (every one, and only those), linked."""
    from replaykit.cassette.stores import open_store

    store = open_store(quickstart_store["store"], readonly=True)
    try:
        holding: dict[str, set[str]] = {}
        for row in store.doc_rows("measure"):
            for e in store.get_run(row["id"]).episodes:
                holding.setdefault(e.cassette_id, set()).add(row["id"])
    finally:
        store.close()  # a reader left open keeps index.db-wal and -shm (the byte-identical test)
    status, page, _ = get(f"{viewer.url}/search?q={TOOL_ONLY_WORD}")
    hits = re.findall(r'<li class="hit">(.*?)</li>', page, re.S)
    assert status == 200 and hits
    proposals = 0
    for hit in hits:
        cassette = re.search(r'href="/episodes/([0-9a-f]+)"', hit).group(1)  # type: ignore[union-attr]
        runs = set(re.findall(r'<a class="run" href="/runs/([0-9a-f]+)">', hit))
        if cassette in holding:
            assert runs == holding[cassette] and runs, hit
        else:  # a proposer's request quotes the workspace's transcripts (issue 41 item 3)
            assert not runs and "a training's proposal" in hit, hit
            proposals += 1
    assert proposals < len(hits)  # the episodes themselves are found too


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_one_word_one_meaning_on_the_pages(viewer: Viewer, quickstart_store: dict[str, Any]) -> None:
    """Issue 40 item 3: an episode's header counted its environment commands as "2 steps" and
    its model calls as "llm calls"; the run page called paid calls "model calls"; the verdict
    page named baseline → candidate movement both "movement" and "flips". One word each,
    the glossary's, with its tooltip."""
    from markupsafe import escape

    from replaykit.core.glossary import TERMS

    store = str(quickstart_store["store"])
    epoch = next(e for e in quickstart_store["training"]["epochs"] if e.get("verdict_id"))
    run = epoch["baseline_run"]
    _, page, _ = get(f"{viewer.url}/runs/{run}")
    head = _text(re.search(r"<p>.*?</p>", page, re.S).group(0))  # type: ignore[union-attr]
    assert " actions · " in head and " paid calls · " in head and not re.search(r"\bsteps?\b", head), head
    assert f'title="{escape(TERMS["paid calls"])}">paid calls</abbr>' in page
    cassette = re.findall(r'href="/episodes/([0-9a-f]+)"', page)[0]
    shown = json.loads(cli("cassettes", "show", cassette, "--json", "--store", store).stdout)
    calls = sum(e["kind"] == "llm" for e in shown["events"])
    actions = sum(e["kind"] == "env" for e in shown["events"])
    _, page, _ = get(f"{viewer.url}/episodes/{cassette}")
    head = _text(re.search(r"<p><code>.*?</p>", page, re.S).group(0))  # type: ignore[union-attr]
    assert f" {calls} model calls · {actions} actions · " in head, head
    assert not re.search(r"\bsteps?\b|llm calls", head), head
    assert "env action · exit" in _text(page) and "env step" not in _text(page)
    _, page, _ = get(f"{viewer.url}/episodes")
    assert ">actions</a>" in page and ">model calls</a>" in page and ">steps<" not in page
    _, page, _ = get(f"{viewer.url}/verdicts/{epoch['verdict_id']}")
    said = _text(page)
    assert "attribution of the movement: " in said and not re.search(r"\bflips?\b", said), said
    assert f'title="{escape(TERMS["movement"])}">movement</abbr>' in page
