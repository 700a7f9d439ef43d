"""`cassettes export ID --format inspect`: Inspect AI eval logs that round-trip through read_eval_log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replaykit.cassette.store import Store
from replaykit.testing import write_config

from .conftest import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback
# inspect_ai is imported by the tests that read a log (~1.8 s of CPU: not at collection)

REPO = Path(__file__).resolve().parents[2]


def test_run_export_round_trips_through_read_eval_log(tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log
    from inspect_ai.model import ChatMessageAssistant

    tasks = ["fix-config-port", "hello-file"]
    config = write_config(
        tmp_path, {"panel.tasks": [str(REPO / "envs" / t) for t in tasks], "panel.seeds": [0, 1]}
    )
    run = json.loads(cli("run", str(config), "--json").stdout)
    store = tmp_path / "store"
    out = tmp_path / "logs"
    report = json.loads(
        cli(
            "cassettes",
            "export",
            run["run_id"],
            "--format",
            "inspect",
            "-o",
            str(out),
            "--store",
            str(store),
            "--json",
        ).stdout
    )
    assert [f["samples"] for f in report["files"]] == [4]
    log = read_eval_log(report["files"][0]["path"])
    assert (
        log.status == "success"
        and log.eval.model == "replaykit/reference-weak"
        and log.eval.run_id == run["run_id"]
    )
    assert log.eval.revision is not None and log.eval.revision.commit == run["harness_sha"]
    assert log.samples is not None and len(log.samples) == 4
    by_unit = {(e["task_id"], e["seed"]): e for e in run["episodes"]}
    st = Store(store)
    for sample in log.samples:
        meta = sample.metadata
        episode = by_unit[(sample.id, meta["seed"])]
        assert sample.epoch == [0, 1].index(meta["seed"]) + 1
        assert meta["harness_sha"] == run["harness_sha"] and meta["cassette_id"] == episode["cassette_id"]
        assert sample.scores is not None and sample.scores["reward"].value == episode["reward"]
        assert sample.scores["reward"].metadata == {"passed": episode["passed"], "infra_failure": False}
        roles = [m.role for m in sample.messages]
        assert roles[:3] == ["system", "user", "assistant"]
        instruction = (REPO / "envs" / str(sample.id) / "instruction.md").read_text()
        assert sample.input == sample.messages[1].text == instruction
        # each message once: as many tool results as environment steps, as many assistant turns as calls
        recorded = st.get_episode(episode["cassette_id"])
        assert roles.count("tool") == len(recorded.env_events) == episode["steps"]
        assert roles.count("assistant") == len(recorded.llm_events)
        assistant = sample.messages[2]
        assert isinstance(assistant, ChatMessageAssistant)
        first_call = assistant.tool_calls
        assert (
            first_call
            and first_call[0].function == "bash"
            and first_call[0].arguments["command"] == recorded.env_events[0].action
        )
    assert log.results is not None
    metrics = log.results.scores[0].metrics
    assert metrics["accuracy"].value == run["solved"] / run["total"]
    # the same run exports to the same bytes; a single cassette exports as one sample
    again = json.loads(
        cli(
            "cassettes",
            "export",
            run["run_id"],
            "--format",
            "inspect",
            "-o",
            str(tmp_path / "again"),
            "--store",
            str(store),
            "--json",
        ).stdout
    )
    assert Path(again["files"][0]["path"]).read_bytes() == Path(report["files"][0]["path"]).read_bytes()
    one = json.loads(
        cli(
            "cassettes",
            "export",
            run["episodes"][0]["cassette_id"][:10],
            "--format",
            "inspect",
            "-o",
            str(tmp_path / "one"),
            "--store",
            str(store),
            "--json",
        ).stdout
    )
    single = read_eval_log(one["files"][0]["path"])
    assert single.samples is not None and [s.metadata["cassette_id"] for s in single.samples] == [
        run["episodes"][0]["cassette_id"]
    ]


def test_export_to_a_file_path_is_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"panel.tasks": [str(REPO / "envs" / "hello-file")], "panel.seeds": [0]})
    run = json.loads(cli("run", str(config), "--json").stdout)
    target = tmp_path / "file.txt"
    target.write_text("keep me")
    done = cli(
        "cassettes",
        "export",
        run["run_id"],
        "--format",
        "inspect",
        "-o",
        str(target),
        "--store",
        str(tmp_path / "store"),
        check=False,
    )
    assert (
        done.returncode == 1
        and done.stderr.startswith("Error: ")
        and "is a file" in done.stderr
        and target.read_text() == "keep me"
    )


def test_exported_logs_are_listed_by_inspect_with_model_and_scores(tmp_path: Path) -> None:
    """``list_eval_logs`` lists only timestamp-first names; the header alone gives the model,
    its token usage and the reward metrics (what `inspect view` shows in its list)."""
    from inspect_ai.log import list_eval_logs, read_eval_log

    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(REPO / "envs" / t) for t in ("hello-file", "fix-config-port")],
            "panel.seeds": [0],
        },
    )
    run = json.loads(cli("run", str(config), "--json").stdout)
    out = tmp_path / "logs"
    report = json.loads(
        cli(
            "cassettes",
            "export",
            run["run_id"],
            "--format",
            "inspect",
            "-o",
            str(out),
            "--store",
            str(tmp_path / "store"),
            "--json",
        ).stdout
    )
    listed = list_eval_logs(str(out))
    assert [Path(info.name.removeprefix("file://")).name for info in listed] == [
        Path(f["path"]).name for f in report["files"]
    ]
    info = listed[0]
    assert Path(info.name).name.startswith(tuple("0123456789")) and info.task == "quickstart"
    assert info.task_id == run["run_id"]
    header = read_eval_log(info.name, header_only=True)
    assert header.eval.model == "replaykit/reference-weak"
    usage = header.stats.model_usage["replaykit/reference-weak"]
    assert usage.total_tokens == sum(e["tokens"] for e in run["episodes"]) > 0
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert header.results is not None
    score = header.results.scores[0]
    assert score.name == "reward" and score.scored_samples == 2 and score.unscored_samples == 0
    assert score.metrics["accuracy"].value == run["solved"] / run["total"]
    assert score.metrics["mean"].value == sum(e["reward"] for e in run["episodes"]) / 2
