"""``--executor KIND[:k=v,…]`` on the commands that take an executor: validated as a config's
``executor`` section (one line naming the option), then it runs the episodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replaykit.testing import write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    tmp = tmp_path_factory.mktemp("executor-cli")
    config = write_config(
        tmp,
        {
            "panel.tasks": [str(REPO / "envs" / t) for t in ("hello-file", "count-error-lines")],
            "panel.seeds": [0],
        },
    )
    out = cli("run", str(config), "--executor", "local:workers=2", "--json", cwd=REPO)
    assert out.returncode == 0, out.stderr
    return config, json.loads(out.stdout)


def test_run_records_with_the_named_executor(recorded: tuple[Path, dict[str, object]]) -> None:
    _, run = recorded
    assert run["recorded_count"] == 2


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (
            "local:address=auto",
            "field 'executor.address' is a setting of executor kind 'ray', not of 'local'",
        ),
        ("local:workers=0", "field 'executor.workers': Input should be greater than or equal to 1 (got 0)"),
        ("slurm", "field 'executor.kind': unknown executor kind 'slurm'; known:"),
        ("local:workers", "'workers' is not KEY=VALUE"),
    ],
)
def test_a_wrong_executor_is_one_line_and_nothing_runs(
    recorded: tuple[Path, dict[str, object]], option: str, said: str
) -> None:
    config, _ = recorded
    for command in (
        ["run", str(config)],
        ["train", str(config)],
        ["compare", str(config), "--models", "reference-weak", "--harness", "main"],
    ):
        out = cli(*command, "--executor", option, cwd=REPO)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 1 and len(lines) == 1, (command, out.stderr)
        assert lines[0].startswith(f"Error: --executor {option!r}: ") and said in lines[0], lines[0]


def test_replay_takes_an_executor_and_refuses_two(recorded: tuple[Path, dict[str, object]]) -> None:
    config, run = recorded
    out = cli(
        "replay",
        str(run["run_id"]),
        "--config",
        str(config),
        "--executor",
        "local:workers=2",
        "--json",
        cwd=REPO,
    )
    assert out.returncode == 0 and json.loads(out.stdout)["identical"], out.stderr
    both = cli(
        "replay",
        str(run["run_id"]),
        "--config",
        str(config),
        "--executor",
        "local",
        "--workers",
        "2",
        cwd=REPO,
    )
    assert both.returncode == 1 and "--executor and --workers both name an executor" in both.stderr
