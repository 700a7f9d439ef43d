"""Words a newcomer understands: the CLI tables carry a legend, `train` names its accepted
epochs and ends by pointing at `replaykit view` / `report`, a replay says it replays
(not "resuming"), and the HTML report's headers explain themselves."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from markupsafe import escape

from replaykit.core.glossary import SHORT, TERMS
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e


def legend(stdout: str) -> str:
    """The table's legend as one line: it wraps at the terminal's width (continuations indented)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("legend: "))
    cont = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        cont.append(line.strip())
    return " ".join([lines[start].strip(), *cont])


def test_train_names_its_epochs_and_points_at_the_viewer(quickstart_store: dict[str, Any]) -> None:
    proc = cli("train", str(quickstart_store["config"]), env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.rstrip().splitlines()
    epochs = quickstart_store["training"]["epochs"]
    which = {
        d: [f"e{e['epoch']}" for e in epochs if e["decision"] == d]
        for d in ("accepted", "rejected", "skipped")
    }
    assert f"{len(which['accepted'])} accepted ({', '.join(which['accepted'])})" in proc.stdout
    assert f"{len(which['rejected'])} rejected ({', '.join(which['rejected'])})" in proc.stdout
    assert f"loss = {SHORT['loss']}" in " ".join(proc.stdout.split())  # the legend wraps at 80
    store = str(quickstart_store["store"])
    assert lines[-2] == f"see it in your browser: replaykit view --store {store}"
    tid = quickstart_store["training"]["training_id"]
    assert lines[-1] == f"or as one offline HTML file: replaykit report {tid} -o report.html --store {store}"
    commands = ("stored in ", "see it in your browser: ", "or as one offline HTML file: ")
    prose = [ln for ln in lines if not ln.startswith(commands)]  # a command line is never cut
    assert max(map(len, prose)) <= 80, max(prose, key=len)  # proposals, verdict reasons, paid
    assert any("tie-break rejects" in ln for ln in lines)  # epoch 1's reason, on a wrapped line


def test_a_replay_says_it_replays(quickstart_store: dict[str, Any]) -> None:
    tid = quickstart_store["training"]["training_id"]
    proc = cli("replay", tid, "--store", str(quickstart_store["store"]))
    assert proc.returncode == 0, proc.stderr
    assert f"replaying training {tid}" in proc.stderr and "resuming" not in proc.stderr + proc.stdout


def test_cli_tables_and_the_report_explain_their_words(
    quickstart_store: dict[str, Any], tmp_path: Any
) -> None:
    store = str(quickstart_store["store"])
    listing = cli("cassettes", "ls", "--store", store, "--limit", "2", "--wide", env={"COLUMNS": "80"})
    said = legend(listing.stdout)
    assert f"calls = {SHORT['calls']}" in said and f"actions = {SHORT['actions']}" in said
    run = json.loads(cli("run", str(quickstart_store["config"]), "--json").stdout)
    shown = cli("run", str(quickstart_store["config"]))
    assert run["run_id"] in shown.stdout
    lines = shown.stdout.splitlines()
    header = lines[1].split()
    said = legend(shown.stdout)
    explained = dict(part.split(" = ", 1) for part in said.removeprefix("legend: ").split(" · "))
    assert set(header) - {"task", "seed"} == set(explained), said  # every column but the obvious
    assert explained == {w: SHORT[w] for w in explained}
    assert "actions" in header and "steps" not in header  # the word cassettes ls uses (issue 40 item 3)
    shown_outcomes = {e["outcome"] for e in run["episodes"]} | {"infra"}
    assert shown_outcomes <= set(re.findall(r"[a-z_]+", explained["outcome"]))
    assert "infra (not graded" in explained["outcome"]  # the word the table may print, explained
    out = tmp_path / "report.html"
    tid = quickstart_store["training"]["training_id"]
    assert cli("report", tid, "-o", str(out), "--store", store).returncode == 0
    html = out.read_text()
    assert f'<th title="{escape(TERMS["loss"])}">loss</th>' in html
    assert 'id="legend"' in html and escape(TERMS["infra"]) in html
    accepted = [e["epoch"] for e in quickstart_store["training"]["epochs"] if e["decision"] == "accepted"]
    assert f"{len(accepted)} accepted (e{', e'.join(map(str, accepted))})" in html


def test_serve_reference_without_tasks_warns_about_a_foreign_task(tmp_path: Any) -> None:
    import subprocess
    import sys
    import urllib.request

    proc = subprocess.Popen(
        [sys.executable, "-m", "replaykit.cli", "serve", "reference", "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base = ""
        while not base.rstrip().endswith("}"):
            base += proc.stdout.readline()
        url = json.loads(base)["base_url"]

        def ask(text: str) -> str:
            body = {"model": "reference-weak", "messages": [{"role": "user", "content": text}]}
            request = urllib.request.Request(
                url + "/chat/completions",
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=60) as answer:
                return str(json.loads(answer.read())["choices"][0]["message"]["content"])

        for _ in range(2):  # the same conversation twice: one warning
            assert "nothing to run" in ask(
                "# Migrate the billing database\nMove every table to the new schema."
            )
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    warnings = [line for line in err.splitlines() if "no task it knows" in line]
    assert len(warnings) == 1 and "Migrate the billing database" in warnings[0] and "--tasks" in warnings[0]


def test_a_harness_that_stops_early_is_said_so(quickstart_store: dict[str, Any]) -> None:
    """Replaying the baseline's recording with the step-capped candidate: it asks for its
    grade while the recording goes on; the divergence says that in words."""
    epoch = next(e for e in quickstart_store["training"]["epochs"] if "[step-cap]" in e["description"])
    proc = cli(
        "replay",
        epoch["baseline_run"],
        "--harness",
        epoch["candidate_sha"],
        "--config",
        str(quickstart_store["config"]),
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "the harness ended after event" in text, text[-2000:]
    assert "(it asked for its grade); the recording goes on with request POST /v1/chat/completions" in text
    assert "grade 'grade' was not recorded" not in text


def test_small_words(quickstart_store: dict[str, Any]) -> None:
    from replaykit.render.progress_bar import episode_label

    typo = cli("rnu")
    assert typo.returncode == 2 and "Did you mean 'run'? Try 'replaykit --help' for help." in typo.stderr
    assert "?." not in typo.stderr
    from replaykit.cassette.store import Store

    run = Store(quickstart_store["store"], readonly=True).get_run(quickstart_store["training"]["runs"][0])
    cid = run.episodes[0].cassette_id
    shown = cli("cassettes", "show", cid, "--store", str(quickstart_store["store"]))
    grade = next(line for line in shown.stdout.splitlines() if "] grade " in line)
    assert "{" not in grade and ("PASS · reward" in grade or "FAIL · reward" in grade)
    label = episode_label({"label": "baseline 6cc9be88e2", "task_id": "csv-active-emails", "seed": 1})
    assert label == "baseline 6cc9be88e2 · csv-active-emails#1" and "=" not in label
