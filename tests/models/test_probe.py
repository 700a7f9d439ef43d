"""`replaykit probe`: deterministic on the built-in server, nondeterminism found on `serve reference --noise`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from replaykit.models.probe import first_difference
from replaykit.models.reference.noise import batch_noise
from replaykit.models.reference.protocol import AssistantTurn
from tests.cli_runner import cli as run_cli

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=300)


@pytest.fixture
def noisy_server() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "replaykit.cli", "serve", "reference", "--noise", "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        text = ""
        while not text.rstrip().endswith("}"):
            line = proc.stdout.readline()
            assert line, "the server exited before listening"
            text += line
        yield json.loads(text)["base_url"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_builtin_server_is_deterministic() -> None:
    done = cli(
        "probe",
        "--base-url",
        "builtin",
        "--model",
        "reference-weak",
        "-n",
        "6",
        "--concurrency",
        "3",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    assert r["verdict"] == "deterministic" and r["distinct_outputs"] == 1 and r["requests"] == 12
    assert (
        r["first_difference_token"] is None
        and r["system_fingerprints"] == ["fp_replaykit_reference"]
        and r["advice"] == []
    )


def test_probe_takes_the_endpoint_and_temperature_from_a_config(tmp_path: Path) -> None:
    from replaykit.testing import write_config

    config = write_config(tmp_path, {"model.name": "reference-strong", "model.temperature": 0.0})
    done = cli("probe", "--config", str(config), "-n", "3", "--concurrency", "2", "--json")
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    assert (r["base_url"], r["model"], r["temperature"], r["verdict"]) == (
        "builtin",
        "reference-strong",
        0.0,
        "deterministic",
    )
    missing = cli("probe", "--model", "m")
    assert missing.returncode == 2 and "--base-url and --model, or --config" in missing.stderr


def test_noisy_server_is_caught_and_the_result_is_stored_and_reported(
    noisy_server: str, tmp_path: Path
) -> None:
    store = str(tmp_path / "store")
    done = cli(
        "probe",
        "--base-url",
        noisy_server,
        "--model",
        "reference-weak",
        "-n",
        "6",
        "--concurrency",
        "3",
        "--save",
        "--store",
        store,
        "--json",
    )
    assert done.returncode == 1, done.stderr  # not deterministic: exit 1, like a replay that differs
    r = json.loads(done.stdout)
    assert r["verdict"] == "nondeterministic" and r["distinct_outputs"] >= 2
    assert (
        r["distinct_serial"] == 1 and r["serial_vs_concurrent_differ"]
    )  # alone it is stable; under load it is not
    assert isinstance(r["first_difference_token"], int) and r["first_difference_token"] > 0
    assert any("batch-invariant" in tip for tip in r["advice"])
    listed = json.loads(cli("runs", "--kind", "probe", "--store", store, "--json").stdout)
    assert [row["id"] for row in listed] == [r["probe_id"]]
    out = tmp_path / "probe.html"
    summary = json.loads(cli("report", r["probe_id"], "-o", str(out), "--store", store, "--json").stdout)
    assert summary["kind"] == "probe"
    html = out.read_text()
    assert 'id="probe-table"' in html and "nondeterministic" in html and noisy_server.rstrip("/") in html
    # serially, even the noisy server is deterministic: concurrency 1 is the setting that helps
    serial = json.loads(
        cli(
            "probe",
            "--base-url",
            noisy_server,
            "--model",
            "reference-weak",
            "-n",
            "4",
            "--concurrency",
            "1",
            "--json",
        ).stdout
    )
    assert serial["verdict"] == "deterministic"


def test_first_difference_and_noise_units() -> None:
    assert first_difference("a b c", "a b c") is None
    assert first_difference("the cat sat", "the dog sat") == 1
    assert first_difference("a b", "a b c") == 2
    turn = AssistantTurn(content="Run the tests now please")
    assert batch_noise(turn, "d" * 64, 1) == turn  # alone: the deterministic reply
    assert (
        batch_noise(turn, "d" * 64, 3) == batch_noise(turn, "d" * 64, 3) != turn
    )  # a pure function of (request, load)


def test_a_small_n_picks_a_concurrency_that_fits() -> None:
    """``probe -n 2`` with no ``--concurrency``: 2 concurrent clients, not the default 4 refused."""
    done = cli("probe", "--config", str(REPO / "configs" / "quickstart.yaml"), "-n", "2", "--json")
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    assert (r["n"], r["concurrency"], r["verdict"]) == (2, 2, "deterministic")
    typed = cli(
        "probe", "--base-url", "builtin", "--model", "reference-weak", "-n", "2", "--concurrency", "3"
    )
    assert (
        typed.returncode == 1
        and typed.stderr.strip() == "Error: --concurrency 3: use 1 to 2 (-n) concurrent clients"
    )


def test_bad_probe_input_is_one_line() -> None:
    for args, needle in ((["-n", "1"], "-n 1"), (["--concurrency", "9"], "--concurrency 9")):
        done = cli("probe", "--base-url", "builtin", "--model", "reference-weak", *args)
        assert (
            done.returncode == 1
            and done.stderr.startswith("Error: ")
            and needle in done.stderr
            and "Traceback" not in done.stderr
        )
    done = cli("probe", "--base-url", "not-a-url", "--model", "m")
    assert done.returncode == 1 and "is not an http(s) URL" in done.stderr
    done = cli("probe", "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert (
        done.returncode == 1
        and "Error: cannot reach http://127.0.0.1:9/v1" in done.stderr
        and "Traceback" not in done.stderr
    )
