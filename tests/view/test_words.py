"""Words a newcomer understands: the CLI tables carry a legend, `train` names its accepted
epochs and ends by pointing at `replaykit view` / `report`, a replay says it replays
(not "resuming"), and the HTML report's headers explain themselves."""

from __future__ import annotations

import json
from typing import Any

import pytest
from markupsafe import escape

from replaykit.core.glossary import SHORT, TERMS
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e


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
    assert f"loss = {SHORT['loss']}" in proc.stdout
    store = str(quickstart_store["store"])
    assert lines[-2] == f"see it in your browser: replaykit view --store {store}"
    tid = quickstart_store["training"]["training_id"]
    assert lines[-1] == f"or as one offline HTML file: replaykit report {tid} -o report.html --store {store}"


def test_a_replay_says_it_replays(quickstart_store: dict[str, Any]) -> None:
    tid = quickstart_store["training"]["training_id"]
    proc = cli("replay", tid, "--store", str(quickstart_store["store"]))
    assert proc.returncode == 0, proc.stderr
    assert f"replaying training {tid}" in proc.stderr and "resuming" not in proc.stderr + proc.stdout


def test_cli_tables_and_the_report_explain_their_words(
    quickstart_store: dict[str, Any], tmp_path: Any
) -> None:
    store = str(quickstart_store["store"])
    listing = cli("cassettes", "ls", "--store", store, "--limit", "2", env={"COLUMNS": "80"})
    assert f"llm = {SHORT['llm']}" in listing.stdout and f"env = {SHORT['env']}" in listing.stdout
    run = json.loads(cli("run", str(quickstart_store["config"]), "--json").stdout)
    shown = cli("run", str(quickstart_store["config"]))
    assert f"passed = {SHORT['passed']}" in shown.stdout and run["run_id"] in shown.stdout
    out = tmp_path / "report.html"
    tid = quickstart_store["training"]["training_id"]
    assert cli("report", tid, "-o", str(out), "--store", store).returncode == 0
    html = out.read_text()
    assert f'<th title="{escape(TERMS["loss"])}">loss</th>' in html
    assert 'id="legend"' in html and escape(TERMS["infra"]) in html
    accepted = [e["epoch"] for e in quickstart_store["training"]["epochs"] if e["decision"] == "accepted"]
    assert f"{len(accepted)} accepted (e{', e'.join(map(str, accepted))})" in html
