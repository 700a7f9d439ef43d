"""Each output in a transcript, a diff and a report is capped (``--output-cap``, default
256 KB) and says how many bytes more there are and which command shows them all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from replaykit.cassette.events import EnvEvent, Episode, GradeEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.envs.results import Grade, Observation
from replaykit.report.diff import diff_episodes
from replaykit.report.transcript import OUTPUT_CAP, transcript
from tests.cli_runner import cli

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def episode(stdout: str) -> Episode:
    key = CassetteKey("0" * 40, "hello-file", "d", ModelId("reference-strong", "builtin"), 0, "c")
    step = EnvEvent("cat big.log", Observation(stdout=stdout, stderr="", exit_code=0), "f" * 64)
    return Episode(key, [step, GradeEvent(Grade(reward=1.0, passed=True))])


@pytest.mark.unit
def test_a_huge_output_is_capped_in_transcripts_and_diffs_and_counted() -> None:
    big = "é" + "x" * (3 * OUTPUT_CAP)  # a two-byte character first: the cut stays valid UTF-8
    ep = episode(big)
    turn = next(t for t in transcript(ep) if t["kind"] == "env")
    shown, _, note = turn["stdout"].rpartition("\n")
    assert len(shown.encode("utf-8")) <= OUTPUT_CAP and shown.startswith("éxxx")
    more = len(big.encode("utf-8")) - len(shown.encode("utf-8"))
    assert note == f"… {more} more bytes — `replaykit cassettes show {ep.id} --transcript --full`"
    assert next(t for t in transcript(ep, None) if t["kind"] == "env")["stdout"] == big  # uncapped
    assert (
        next(t for t in transcript(episode("short"), OUTPUT_CAP) if t["kind"] == "env")["stdout"] == "short"
    )

    other = episode(big.replace("x", "y", 1))
    first = diff_episodes(ep, other, "a" * 24, "b" * 24, cap=4096)["first_difference"]
    assert first is not None
    assert sum(len(line) for line in first["a_lines"]) < 4096 + 200
    assert first["a_lines"][-1].startswith("… ") and "`replaykit cassettes show aaaa" in first["a_lines"][-1]


@pytest.mark.e2e
def test_cassettes_show_transcript_caps_and_full_shows_all(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    from report_size import inflate  # type: ignore[import-not-found]  # benchmarks/ is put on sys.path above

    from replaykit.cassette.store import Store
    from replaykit.episodes.run import measure
    from replaykit.testing import small_config

    run_id = measure(small_config(tmp_path, tasks=["hello-file"], seeds=[0])).run.run_id
    store = Store(tmp_path / "store")
    size = inflate(store, run_id, 2)
    cid = store.get_run(run_id).cassettes[0]
    capped = cli(
        "cassettes", "show", cid, "--transcript", "--output-cap", "65536", "--store", str(tmp_path / "store")
    )
    assert capped.returncode == 0, capped.stderr
    assert len(capped.stdout.encode()) < 200_000 and "more bytes — `replaykit cassettes show" in capped.stdout
    full = cli(
        "cassettes", "show", cid, "--transcript", "--full", "--json", "--store", str(tmp_path / "store")
    )
    env = next(t for t in json.loads(full.stdout)["turns"] if t["kind"] == "env")
    assert len(env["stdout"]) == size
    out = tmp_path / "r.html"
    report = cli("report", run_id, "-o", str(out), "--store", str(tmp_path / "store"))
    assert report.returncode == 0 and out.stat().st_size < 1_000_000, report.stderr


@pytest.mark.e2e
def test_report_size_benchmark_meets_its_bounds() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "report_size.py"), "--mb", "10", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "report under 5 MB: met; peak RSS under 200 MB: met" in proc.stdout, proc.stdout


@pytest.mark.unit
def test_the_cli_default_is_the_library_default() -> None:
    from replaykit.commands.options import OUTPUT_CAP as CLI_CAP

    assert CLI_CAP == OUTPUT_CAP
