"""Smoke test: the benchmarks run end to end at a tiny size (their figures are not checked here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def bench(name: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(BENCH / name), *args], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_client_overhead_runs_small() -> None:
    out = bench("client_overhead.py", "--sizes", "50", "--repeats", "1", "--min-pairs", "1")
    assert "replay overhead" in out and "\n     50 " in out


def test_training_replay_runs_small(tmp_path: Path) -> None:
    out = bench(
        "training_replay.py",
        "--epochs",
        "1",
        "--tasks",
        "2",
        "--workers",
        "0",
        "--cache",
        str(tmp_path / "cache"),
    )
    assert "identical=True" in out and "1 real candidates" in out


def test_verify_on_read_runs_small() -> None:
    out = bench("verify_on_read.py", "--repeats", "1")
    assert "verification costs" in out and "of offline replay time" in out


def test_bundle_bomb_is_refused_in_bounded_memory() -> None:
    """1 GiB of zeros in about 1 MB of gzip: refused, the importing process stays under 200 MB."""
    out = bench("bundle_bomb.py", "--gib", "1")
    first = out.splitlines()[0]
    assert "exit 1" in first and "Error: bundle" in out and "refusing" in out, out
    peak = float(first.split("peak RSS of the importing process ")[1].split(" MB")[0])
    assert peak < 200, first


def test_a_bundle_takes_the_same_memory_whatever_its_size() -> None:
    """Issue 29: export, verify and import of a 96 MB bundle peak within 40 MB of an 8 MB one's
    (each in its own process; before streaming the whole bundle was held, twice over on read)."""
    out = bench("bundle_size.py", "--sizes", "8,96", "--blob-mb", "8", "--json")
    report = json.loads(out.splitlines()[-1])
    for op in ("export", "verify", "import"):
        peak = report["ops"][op]["peak_mb"]
        assert peak["96"] - peak["8"] < 40, (op, peak, out)


def test_view_benchmark_runs_small() -> None:
    out = bench("view.py", "--sizes", "20,60", "--repeats", "1", "--batch", "1")
    assert (
        "first page" in out
        and "search index built from the first search on" in out
        and "\n    search " in out
    )


def test_store_listing_benchmark_runs_small() -> None:
    out = bench("store_listing.py", "--sizes", "20,60", "--repeats", "1")
    assert "floor (python + typer" in out and "the floor" in out
    for command in ("cassettes ls", "runs", "cassettes show"):
        assert f"    {command}" in out and "60 episodes" in out, out


def test_cli_start_benchmark_runs_small(tmp_path: Path) -> None:
    """Each case measured against the baseline; ``--keep`` builds the store once and reuses it."""
    first = bench("cli_start.py", "--size", "20", "--repeats", "1", "--keep", str(tmp_path))
    assert "python -c 'import typer'" in first and "store of 20 episodes" in first
    for case in ("replaykit --help", "cassettes ls", "runs"):
        assert f"\n    {case} " in first and "x the baseline" in first, first
    built = (tmp_path / "build-20" / "done").stat().st_mtime_ns
    bench("cli_start.py", "--size", "20", "--repeats", "1", "--keep", str(tmp_path))
    assert (tmp_path / "build-20" / "done").stat().st_mtime_ns == built  # reused, not built again


def test_network_proxy_runs_small() -> None:
    out = bench("network_proxy.py", "--mb", "8", "--files", "20", "--repeats", "1")
    assert "8 MB body through the proxy: proxy peak RSS" in out and "proxy overhead:" in out


def test_live_cost_runs_small() -> None:
    out = bench("live_cost.py", "--epochs", "1", "--no-engine")
    assert (
        "calls with reuse:" in out
        and "floor of any identical-request reuse:" in out
        and "decisions, candidate SHAs, verdicts and final baseline: identical" in out
    )


def test_null_trainings_runs_small(tmp_path: Path) -> None:
    """Issue 37 item 4 at its smallest: one null and one real training of one epoch per criterion."""
    args = [
        "--trainings",
        "1",
        "--real",
        "1",
        "--epochs",
        "1",
        "--workers",
        "1",
        "--cache",
        str(tmp_path / "c"),
    ]
    report = json.loads(bench("null_trainings.py", *args, "--json"))
    assert set(report["criteria"]) == {"strict_pareto", "mean_reward", "paired_test"}
    for c in report["criteria"].values():
        assert c["false_accept"]["of"] == 1 and c["power"]["of"] == 1
        low, high = c["false_accept"]["interval"]
        assert 0 <= low <= high <= 1
    assert report["criteria"]["paired_test"]["error_budget"] == 0.05 and report["model_calls"] > 0
    again = json.loads(bench("null_trainings.py", *args, "--json"))  # replayed from the cache
    assert again["criteria"] == report["criteria"] and again["model_calls"] == 0
    table = bench("null_trainings.py", *args)
    assert "false accepts, per training" in table and "power on the real change" in table


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--criteria", "strict_pareto,nope"],
            "error: --criteria nope: the benchmark knows strict_pareto, mean_reward, paired_test",
        ),
        (["--alpha", "1.5"], "error: --alpha 1.5: give a level strictly between 0 and 1"),
        (["--epochs", "0"], "error: --epochs 0: give a whole number from 1 to 16"),
    ],
)
def test_null_trainings_refuses_bad_input_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "null_trainings.py"), *args, "--cache", str(tmp_path / "c")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stderr.startswith(message)
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "c").exists()


def test_adaptive_seeds_runs_small(tmp_path: Path) -> None:
    """Issue 37 item 5 at its smallest: one null training, fixed 3 seeds against adaptive 2..3."""
    args = ["--trainings", "1", "--real", "0", "--epochs", "1", "--max", "3", "--cache", str(tmp_path / "c")]
    report = json.loads(bench("adaptive_seeds.py", *args, "--json"))
    fixed, adaptive = report["modes"]["fixed"], report["modes"]["adaptive"]
    assert fixed["episodes"] == 2 * 8 * 3  # both runs, eight tasks, three seeds
    assert 2 * 8 * 2 <= adaptive["episodes"] <= fixed["episodes"]  # at least min, at most max seeds
    assert report["first_epoch_agreement"]["of"] == 1 and fixed["false_accept"]["of"] == 1
    assert "fewer episodes on its verdicts" in bench("adaptive_seeds.py", *args)  # replayed from the cache


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--min", "5", "--max", "3"], "error: --min 5 is above --max 3; give min <= max"),
        (["--max", "65"], "error: --max 65: give a whole number from 1 to 64"),
    ],
)
def test_adaptive_seeds_refuses_bad_input_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "adaptive_seeds.py"), *args, "--cache", str(tmp_path / "c")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stderr.startswith(message)
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "c").exists()
