"""The CLI's tables read at 80 columns and piped: no word split, no cell cut, no
ellipsis; piped output is never wrapped. Rendered from real ``--json`` documents."""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from replaykit import render
from replaykit.core.training_doc import TrainingDoc
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


def cli_json(*args: str, cwd: Path) -> Any:
    proc = cli(*args, "--json", cwd=cwd, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("render")
    config = write_config(
        tmp,
        {
            "panel.tasks": [
                str(REPO_ROOT / "envs" / t) for t in ("csv-active-emails", "fix-config-port", "hello-file")
            ],
            "panel.seeds": [0, 1],
        },
    )
    store = str(tmp / "store")
    run = cli_json("run", str(config), cwd=tmp)
    strong = cli_json("run", str(config), "--model", "reference-strong", cwd=tmp)
    return {
        "run": run,
        "strong": strong,
        "training": cli_json("train", str(config), "--epochs", "2", cwd=tmp),
        "runs": cli_json("runs", "--store", store, cwd=tmp),
        "cassettes": cli_json("cassettes", "ls", "--store", store, cwd=tmp),
        "certify": cli_json(
            "certify", run["run_id"], "--store", store, "--tasks", str(REPO_ROOT / "envs" / "*"), cwd=tmp
        ),
    }


@pytest.fixture(params=["tty80", "piped"])
def capture(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], str]]:
    buffer = io.StringIO()
    if request.param == "tty80":
        console = Console(file=buffer, width=80, force_terminal=True, color_system=None)
    else:
        console = render.make_console(file=buffer)
        assert not console.is_terminal
    monkeypatch.setattr(render.console, "out", console)
    yield buffer.getvalue


def words(*texts: str) -> set[str]:
    return {w for t in texts for w in t.split()}


def check(output: str, expected_words: set[str], ids: list[str], piped: bool) -> None:
    assert "…" not in output and "..." not in output
    tokens = set(re.split(r"\s+", output))
    missing = sorted(w for w in expected_words if w not in tokens)
    assert not missing, (missing, output)
    for full in ids:  # each id shown whole or at a prefix of 8+ characters, never cut shorter
        assert any(len(t) >= 8 and full.startswith(t) for t in tokens), (full, output)
    if not piped:
        assert max(len(line) for line in output.splitlines()) <= 80, output


def test_training_table(
    docs: dict[str, Any], capture: Callable[[], str], request: pytest.FixtureRequest
) -> None:
    doc = docs["training"]
    render.training_table(TrainingDoc.read(doc))  # as `train --json` printed it
    output = capture()
    piped = "piped" in request.node.name
    expected = set()
    for e in doc["epochs"]:
        expected |= words(e["description"], (e.get("verdict") or {}).get("reason", ""), e["decision"])
        if piped:  # a note wraps at words, its continuation lines indented: one note per epoch
            notes = output.replace("\n  ", " ").splitlines()
            assert any(line.startswith(f"epoch {e['epoch']}: {e['description']}") for line in notes), output
    check(output, expected, [e["candidate_sha"] for e in doc["epochs"] if e["candidate_sha"]], piped)


def test_runs(docs: dict[str, Any], capture: Callable[[], str], request: pytest.FixtureRequest) -> None:
    render.run_rows(docs["runs"])
    output = capture()
    models = {r["model"] for r in docs["runs"] if r["model"]}
    assert {"reference-weak", "reference-strong"} <= models
    check(
        output,
        models | {r["kind"] for r in docs["runs"]},
        [r["id"] for r in docs["runs"]],
        "piped" in request.node.name,
    )


def test_cassettes_ls(
    docs: dict[str, Any], capture: Callable[[], str], request: pytest.FixtureRequest
) -> None:
    rows = docs["cassettes"]
    render.cassette_rows(rows)
    check(
        capture(),
        {r["task_id"] for r in rows} | {r["model"] for r in rows},
        [r["id"] for r in rows],
        "piped" in request.node.name,
    )


def test_certify(docs: dict[str, Any], capture: Callable[[], str], request: pytest.FixtureRequest) -> None:
    report = docs["certify"]
    render.certify_report(report)
    check(
        capture(),
        {t["task_id"] for t in report["tasks"]} | {t["status"] for t in report["tasks"]},
        [],
        "piped" in request.node.name,
    )


def test_run_table(docs: dict[str, Any], capture: Callable[[], str], request: pytest.FixtureRequest) -> None:
    from replaykit.core.run_doc import RunDoc
    from replaykit.episodes.run_records import MeasureResult, ReportedEpisode

    strong = docs["strong"]  # ``run --json`` of a run whose cassettes were all recorded
    recorded = [e["cassette_id"] for e in strong["episodes"] if not e["reused"]]
    rows = [ReportedEpisode.read(e) for e in strong["episodes"]]
    result = MeasureResult(
        run=RunDoc.read(strong), recorded=recorded, model_calls=strong["model_calls"], reported=rows
    )
    render.run_table(result)
    check(
        capture(),
        {e["task_id"] for e in docs["strong"]["episodes"]},
        [e["cassette_id"] for e in docs["strong"]["episodes"]],
        "piped" in request.node.name,
    )


def test_too_wide_rows_become_records(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.StringIO()
    monkeypatch.setattr(
        render.console, "out", Console(file=buffer, width=40, force_terminal=True, color_system=None)
    )
    render.show_table("t", ["task", "model"], [["a-very-long-task-name-indeed", "reference-strong-and-more"]])
    output = buffer.getvalue()
    assert "…" not in output
    assert {"a-very-long-task-name-indeed", "reference-strong-and-more"} <= set(output.split())


def test_piped_cassette_show_lines_parse(tmp_path: Path, docs: dict[str, Any]) -> None:
    cid = docs["run"]["episodes"][0]["cassette_id"]
    prefix = cid[
        : render.short_ids([r["id"] for r in docs["cassettes"]], minimum=2)
    ]  # a unique prefix, usually 2-4 chars
    cwd = Path(docs["run"]["harness_repo"]).parent
    proc = cli("cassettes", "show", prefix, "--full", "--store", str(cwd / "store"), cwd=cwd, timeout=120)
    assert proc.returncode == 0, proc.stderr
    bodies = [
        line.split("request: ", 1)[1]
        for line in proc.stdout.splitlines()
        if line.strip().startswith("request: ")
    ]
    assert bodies and all(isinstance(json.loads(b), dict) for b in bodies)


def test_a_record_leaves_empty_fields_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """An 80-column terminal too narrow for the table prints each row as a record: a cell empty in
    that row is left out (never ``calls  · reused``), a column empty in every row is not shown."""
    buffer = io.StringIO()
    monkeypatch.setattr(
        render.console, "out", Console(file=buffer, width=80, force_terminal=True, color_system=None)
    )
    rows: list[list[str | Any]] = [
        ["a611b0c9", "training", "x" * 50, "", "", "251"],
        ["22b1db51", "measure", "y" * 50, "0.50", "", "52"],
    ]
    render.show_table("2 document(s)", ["id", "kind", "name", "pass@k", "never", "paid"], rows)
    output = buffer.getvalue()
    assert "a611b0c9 · kind training · name " in output and "pass@k" in output, output
    assert "never" not in output and not re.search(r"\S  · ", output), output
    first = output.split("a611b0c9", 1)[1].split("22b1db51", 1)[0]
    assert "pass@k" not in first and "paid 251" in " ".join(first.split()), output


@pytest.mark.parametrize("seed", range(40))
def test_a_piped_table_is_rich_s_to_the_byte(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped, ``show_table`` lays plain cells out itself (rich costs ~1 ms a row): the same bytes
    as rich's table, the same choice of what fits $COLUMNS and of the columns left out."""
    import random

    rng = random.Random(seed)
    alphabet = ["a", "b", "x", "0", "9", "-", "_", " ", "·", "≠", "é", "漢", "✓", "[b]", ":+1:", "[/]"]
    headers = [f"h{i}" + "x" * rng.randrange(4) for i in range(rng.randrange(1, 7))]
    rows: list[list[str | Any]] = [
        ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12))) for _ in headers]
        for _ in range(rng.randrange(0, 9))
    ]
    optional = rng.sample(headers, rng.randrange(0, len(headers) + 1))
    monkeypatch.setenv("COLUMNS", str(rng.choice([20, 40, 80, 200])))

    def shown(plain: bool) -> str:
        buffer = io.StringIO()
        monkeypatch.setattr(render.console, "out", render.make_console(file=buffer))
        if not plain:
            monkeypatch.setattr(render.console, "_plain_widths", lambda headers, rows: None)
        render.show_table("t", headers, rows, optional=optional)
        monkeypatch.undo()
        monkeypatch.setenv("COLUMNS", str(columns))
        return buffer.getvalue()

    columns = int(os.environ["COLUMNS"])
    assert shown(plain=True) == shown(plain=False)


def test_a_piped_table_of_other_cells_is_rich_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cell rich must lay out (a line break, a tab, right-justified) or markup in a header: rich."""
    from rich.text import Text

    monkeypatch.setattr(render.console, "out", render.make_console(file=io.StringIO()))
    assert render.console._plain_widths(["a"], [[Text("x")]]) == [1]
    assert render.console._plain_widths(["a", "b"], [["x", "漢"]]) == [1, 2]  # a string is a plain cell
    assert render.console._plain_widths(["a"], [["x\ny"]]) is None
    for headers, cell in ((["a"], Text("x\ny")), (["a"], Text("\tx")), (["a"], Text("x", justify="right"))):
        assert render.console._plain_widths(headers, [[cell]]) is None
    assert render.console._plain_widths(["[b]a"], [[Text("x")]]) is None
