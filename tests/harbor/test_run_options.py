"""Differential test of the run options a Harbor user passes (issue 31 item 9): timeout
multipliers and resource overrides, against Harbor 0.25 itself, on the tasks of
``tests/harbor/corpus-options/``: ``slow-solution`` (its solve.sh sleeps 8 s, agent timeout 4 s),
``slow-verifier`` (its test.sh sleeps 8 s, verifier timeout 4 s) and ``resources`` (solved only
when the container's memory limit is 512 MB or less; task.toml asks for 1024).

The same options go to ``harbor run -a oracle`` and to ``replaykit tasks check``; each task must
get the same verdict on both sides, and a timeout on both sides must be named as one (Harbor raises
``AgentTimeoutError`` / ``VerifierTimeoutError`` and still grades an agent that timed out;
replaykit says "solution timed out after N s" / "verifier timed out after N s"). About 3-4
minutes on 2 cores: Harbor's three runs in a thread beside replaykit's.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from replaykit.envs.docker import images
from tests.cli_runner import cli
from tests.harbor import harbor_cli

pytestmark = [pytest.mark.harbor, pytest.mark.docker]
CORPUS = Path(__file__).resolve().parent / "corpus-options"

#: options → the verdict each task must reach (1: solved, 0: not) and, when not, the
#: timeout both sides must name ("agent" / "verifier"; None: a plain failing grade)
CASES: dict[tuple[str, ...], dict[str, tuple[int, str | None]]] = {
    (): {"slow-solution": (0, "agent"), "slow-verifier": (0, "verifier"), "resources": (0, None)},
    ("--timeout-multiplier", "3", "--verifier-timeout-multiplier", "1", "--override-memory-mb", "512"): {
        "slow-solution": (1, None),
        "slow-verifier": (0, "verifier"),  # the verifier's own multiplier wins over the general one
        "resources": (1, None),
    },
    ("--verifier-timeout-multiplier", "3"): {
        "slow-solution": (0, "agent"),
        "slow-verifier": (1, None),
        "resources": (0, None),
    },
}
HARBOR_SAYS = {"agent": "AgentTimeoutError", "verifier": "VerifierTimeoutError"}
WE_SAY = {"agent": "solution timed out after", "verifier": "verifier timed out after"}


def _harbor_verdict(trial: dict[str, Any]) -> tuple[int, str]:
    """(1 solved / 0 not, the exception Harbor recorded or '') of one Harbor trial."""
    error = trial.get("exception_info") or {}
    rewards = (trial.get("verifier_result") or {}).get("rewards") or {}
    reward = rewards.get("reward")
    solved = int(not error and reward is not None and float(reward) >= 1)
    return solved, str(error.get("exception_type", "")) if isinstance(error, dict) else "error"


def _run_both(tasks: list[Path], dataset: Path, jobs: Path) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """Each case's results: replaykit's ``tasks check`` rows and Harbor's trials, by task id."""
    harbor: dict[tuple[str, ...], dict[str, Any]] = {}
    failure: list[BaseException] = []

    def run_harbor() -> None:
        try:
            for n, options in enumerate(CASES):
                harbor[options] = harbor_cli.run_oracle(dataset, jobs / str(n), options=options)
        except BaseException as exc:  # reported below, in the test's thread
            failure.append(exc)

    thread = threading.Thread(target=run_harbor)
    thread.start()
    ours: dict[tuple[str, ...], dict[str, Any]] = {}
    for options in CASES:
        checked = cli("tasks", "check", *map(str, tasks), *options, "--json", timeout=900)
        assert checked.stdout.strip(), checked.stderr
        ours[options] = {r["task_id"]: r for r in json.loads(checked.stdout)["tasks"]}
    thread.join()
    if failure:
        raise failure[0]
    return ours, harbor


def _mismatches(ours: dict[Any, Any], harbor: dict[Any, Any]) -> list[str]:
    """Each (case, task) where a side missed the expected verdict or named no (or the wrong) timeout."""
    table, wrong = [], []
    for options, expected in CASES.items():
        for task_id, (verdict, timeout) in expected.items():
            row, trial = ours[options][task_id], harbor[options].get(task_id, {})
            our_verdict = int((row["solved"] or 0) >= 1)
            their_verdict, raised = _harbor_verdict(trial)
            said = " ".join(options) or "(no options)"
            line = f"{said:70} {task_id:14} replaykit {our_verdict} harbor {their_verdict} {raised}"
            table.append(line)
            named = (
                not raised and "timed out" not in row["problem"]
                if timeout is None
                else raised == HARBOR_SAYS[timeout] and WE_SAY[timeout] in row["problem"]
            )
            if not (our_verdict == their_verdict == verdict and named):
                wrong.append(f"{line}; replaykit said: {row['problem'][:300]}")
    print("\n".join(table))
    return wrong


def test_timeout_multipliers_and_resource_overrides_agree_with_harbor(
    docker_base: str, tmp_path: Path
) -> None:
    reason = harbor_cli.missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the Harbor differential test must run in CI: {reason}", pytrace=False)
        pytest.skip(reason)
    client = images.docker_client()
    dataset = tmp_path / "harbor-tasks"
    dataset.mkdir()
    tasks = sorted(p for p in CORPUS.iterdir() if (p / "task.toml").is_file())
    assert [t.name for t in tasks] == ["resources", "slow-solution", "slow-verifier"]
    for task in tasks:
        harbor_cli.harbor_copy(task, dataset, lambda ref: images.alias_for(client, ref, {}))
    ours, harbor = _run_both(tasks, dataset, tmp_path / "jobs")
    wrong = _mismatches(ours, harbor)
    assert not wrong, "\n".join(wrong)
