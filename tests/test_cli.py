"""The CLI surface through the real ``replaykit`` process: one-line errors, exit codes,
help conventions, completion, Ctrl-C and closed pipes."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from replaykit.commands.shell import INTERRUPTED
from replaykit.core.progress import ProgressData, ProgressEvent
from replaykit.testing import write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("Error: ")
    return lines[0]


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store holding one small recorded run (2 tasks × 1 seed, built-in model)."""
    tmp = tmp_path_factory.mktemp("cli")
    config = write_config(
        tmp,
        {
            "panel.tasks": [
                str(Path(__file__).parent.parent / "envs" / t) for t in ("hello-file", "organize-files")
            ],
            "panel.seeds": [0],
        },
    )
    proc = cli("run", str(config), "--json", cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return tmp / "store", json.loads(proc.stdout)["run_id"]


@pytest.mark.parametrize(
    ("args", "command"),
    [
        ((), "replaykit"),
        (("run",), "replaykit run"),
        (("run", "X", "--bogus"), "replaykit run"),
        (("train", "c.yaml", "--epochs", "abc"), "replaykit train"),
        (("serve", "reference", "--tasks", "a", "b"), "replaykit serve reference"),
        (("cassettes",), "replaykit cassettes"),
        (("run", "c.yaml", "--record-mode", "sometimes"), "replaykit run"),
        (("runs", "--kind", "bogus"), "replaykit runs"),
    ],
)
def test_usage_errors_are_one_line_exit_2(args: tuple[str, ...], command: str, tmp_path: Path) -> None:
    proc = cli(*args, cwd=tmp_path)
    line = assert_one_line_error(proc, 2)
    assert line.endswith(f"Try '{command} --help' for help.")
    assert proc.stdout == ""


def test_bare_command_names_the_commands(tmp_path: Path) -> None:
    line = assert_one_line_error(cli(cwd=tmp_path), 2)
    assert "Missing command" in line and "train" in line and "cassettes" in line


def test_version_and_short_help(tmp_path: Path) -> None:
    from replaykit.core.versions import tool_versions

    proc = cli("--version", cwd=tmp_path)
    assert (proc.returncode, proc.stdout.strip()) == (0, f"replaykit {tool_versions()['replaykit']}")
    proc = cli("run", "-h", cwd=tmp_path, env={"COLUMNS": "120"})
    assert proc.returncode == 0, proc.stderr
    assert "Usage: replaykit run [OPTIONS] CONFIG" in proc.stdout
    assert "[once|new_episodes|none|all]" in proc.stdout
    for bad in ("<bool>", "<str>", "{config}"):
        assert bad not in proc.stdout


def test_every_option_has_help() -> None:
    import typer

    from replaykit.cli import app
    from replaykit.commands.shell import polish

    def walk(cmd: object, path: str) -> list[str]:
        missing = [
            f"{path} {p.opts[0]}"
            for p in getattr(cmd, "params", [])
            if p.param_type_name == "option" and not p.help
        ]
        missing += [
            f"{path} {p.name}"
            for p in getattr(cmd, "params", [])
            if p.param_type_name == "argument" and not p.help
        ]
        for name, sub in getattr(cmd, "commands", {}).items():
            missing += walk(sub, f"{path} {name}")
        return missing

    assert walk(polish(typer.main.get_command(app)), "replaykit") == []


def test_shell_completion_offers_choices(tmp_path: Path) -> None:
    proc = cli(
        cwd=tmp_path,
        env={
            "_REPLAYKIT_COMPLETE": "complete_bash",
            "COMP_WORDS": "replaykit run x --record-mode ",
            "COMP_CWORD": "4",
        },
    )
    assert proc.returncode == 0
    assert proc.stdout.split() == ["once", "new_episodes", "none", "all"]
    proc = cli(
        cwd=tmp_path,
        env={"_REPLAYKIT_COMPLETE": "complete_bash", "COMP_WORDS": "replaykit cas", "COMP_CWORD": "1"},
    )
    assert proc.stdout.split() == ["cassettes"]


def test_library_error_is_one_line_exit_1(tmp_path: Path) -> None:
    line = assert_one_line_error(cli("run", "missing.yaml", cwd=tmp_path), 1)
    assert "missing.yaml" in line


def test_export_to_unwritable_path(small_store: tuple[Path, str], tmp_path: Path) -> None:
    store, run_id = small_store
    line = assert_one_line_error(
        cli("cassettes", "export", run_id, "-o", "/proc/x.tar.gz", "--store", str(store), cwd=tmp_path), 1
    )
    assert "/proc/x.tar.gz" in line


def test_proxy_on_a_busy_port(small_store: tuple[Path, str], tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = assert_one_line_error(
            cli(
                "proxy",
                "--name",
                "s",
                "--upstream",
                "builtin",
                "--port",
                str(port),
                "--store",
                str(tmp_path / "store"),
                cwd=tmp_path,
            ),
            1,
        )
    assert str(port) in line and "--port" in line


def test_missing_patch_queue_diff(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, {"train.estimator": {"kind": "patch_queue", "diffs": [str(tmp_path / "nope.diff")]}}
    )
    line = assert_one_line_error(cli("train", str(config), "--epochs", "1", cwd=tmp_path), 1)
    assert "nope.diff" in line


def test_closed_pipe_is_silent(small_store: tuple[Path, str], tmp_path: Path) -> None:
    store, _ = small_store
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes anything
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "replaykit.cli", "runs", "--store", str(store)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == 1


def test_ctrl_c_prints_one_line_and_rerun_resumes(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "replaykit.cli", "train", str(config), "--epochs", "4"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()  # a progress line: the training is under way
    assert first.startswith("epoch"), first
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=300)
    assert proc.returncode == 130, (first, rest)
    assert "Traceback" not in rest
    assert rest.strip().splitlines()[-1] == INTERRUPTED
    again = cli("train", str(config), "--epochs", "4", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert len(json.loads(again.stdout)["epochs"]) == 4


def small(tmp_path: Path) -> Path:
    tasks = [str(Path(__file__).parent.parent / "envs" / t) for t in ("hello-file", "fix-config-port")]
    return write_config(tmp_path, {"panel.tasks": tasks, "panel.seeds": [0]})


def test_train_reports_epochs_of_n_and_episodes_within(tmp_path: Path) -> None:
    from replaykit.train.trainer import Trainer

    events: list[tuple[ProgressEvent, ProgressData]] = []
    trainer = Trainer(config_path=small(tmp_path), progress=lambda event, data: events.append((event, data)))
    for loss in trainer.epochs(2):
        loss.backward()
        trainer.optimizer.step()
    assert events[0] == ("outer", {"total": 2, "label": "epoch"})
    assert [d["epoch"] for e, d in events if e == "epoch"] == [0, 1]
    plans = [d["label"] for e, d in events if e == "plan"]
    # the smoke gate (train.smoke, one task × one seed) runs before the candidate's panel
    assert plans[:3] == ["epoch 0: baseline", "epoch 0: smoke", "epoch 0: candidate"]
    episodes = [d for e, d in events if e == "episode"]
    assert episodes and all(str(d["label"]).startswith("epoch ") for d in episodes)


def test_compare_reports_cells(tmp_path: Path) -> None:
    from replaykit.episodes.compare import compare
    from replaykit.episodes.config import load_config

    events: list[tuple[ProgressEvent, ProgressData]] = []
    compare(
        load_config(small(tmp_path)),
        ["reference-weak", "reference-strong"],
        ["main"],
        progress=lambda event, data: events.append((event, data)),
    )
    assert events[0] == ("outer", {"total": 2, "label": "cell"})
    assert [d["label"] for e, d in events if e == "outer_step"] == [
        "main × reference-weak",
        "main × reference-strong",
    ]
    assert sum(e == "episode" for e, _ in events) == 4


def test_train_prints_the_epochs_of_this_invocation(tmp_path: Path) -> None:
    config = small(tmp_path)
    assert cli("train", str(config), "--epochs", "2", cwd=tmp_path).returncode == 0
    proc = cli("train", str(config), "--epochs", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stdout.splitlines() if line.startswith("epoch ") and ": " in line]
    assert [n.split(":")[0] for n in notes] == ["epoch 0"]
    assert "resumed 1 epoch(s)" in proc.stdout
    assert "1 later epoch(s) recorded earlier are not shown" in proc.stdout


def test_tasks_check_keeps_the_end_of_a_problem() -> None:
    from replaykit.envs.check import tail

    noise = "\n".join(f"apt: unpacking package {i}" for i in range(200))
    kept = tail(noise + "\nE: the actual cause\n")
    assert kept.endswith("E: the actual cause") and len(kept) <= 401
    assert kept.startswith("apt: unpacking package 0")  # and how it began
    assert tail("short") == "short"
    # a verifier that timed out: the lead survives whatever the output's length
    timed = tail("verifier timed out after 5 s; output: started\n" + noise + "\nstuck here")
    assert timed.startswith("verifier timed out after 5 s; ") and "started" in timed
    assert timed.endswith("stuck here") and len(timed) <= 401


def test_huge_seed_is_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"panel.seeds": [1180591620717411303424]})
    line = assert_one_line_error(cli("run", str(config), cwd=tmp_path), 1)
    assert "panel.seeds" in line


def test_an_episode_whose_harness_raised_shows_the_exception_type(tmp_path: Path) -> None:
    assert cli("init", "proj", cwd=tmp_path).returncode == 0
    harness = tmp_path / "proj" / "harness"
    (harness / "harness.py").write_text(
        "def solve(task, env, llm, ctx):\n    raise LookupError('no such thing')\n"
    )
    subprocess.run(
        ["git", "commit", "-qam", "raise"],
        cwd=harness,
        check=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        },
    )
    proc = cli("run", str(tmp_path / "proj" / "replaykit.yaml"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "crash (LookupError)" in proc.stdout
    doc = json.loads(cli("run", str(tmp_path / "proj" / "replaykit.yaml"), "--json", cwd=tmp_path).stdout)
    assert doc["episodes"][0]["error"] == "LookupError"
    assert doc["episodes"][0]["outcome"] == "crash"


@pytest.mark.docker
def test_docker_unreachable_is_said_once(tmp_path: Path) -> None:
    tasks = [str(Path(__file__).parent.parent / "envs" / t) for t in ("hello-file", "fix-config-port")]
    config = write_config(tmp_path, {"panel.tasks": tasks, "panel.seeds": [0]}, base="quickstart-docker.yaml")
    run = cli("run", str(config), "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    down = {"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    certify = cli(
        "certify",
        json.loads(run.stdout)["run_id"],
        "--store",
        str(tmp_path / "store"),
        *[arg for t in tasks for arg in ("--tasks", t)],
        cwd=tmp_path,
        env=down,
        process=True,  # the Docker client is one per process: a new DOCKER_HOST needs a new one
    )
    assert certify.returncode == 1 and "Traceback" not in certify.stderr
    reasons = [line for line in certify.stdout.splitlines() if "no-docker.sock" in line or "Docker" in line]
    assert len(reasons) == 1 and "fix-config-port" in reasons[0] and "hello-file" in reasons[0], (
        certify.stdout
    )
    check = cli("tasks", "check", *tasks, cwd=tmp_path, env=down, process=True)
    assert check.returncode == 1 and "Traceback" not in check.stderr
    problems = [
        line
        for line in check.stdout.splitlines()
        if line.startswith(("fix-config-port", "hello-file")) and "Docker daemon" in line
    ]
    assert len(problems) == 1, check.stdout


def test_ctrl_c_promises_a_resume_only_where_a_rerun_resumes(capsys: pytest.CaptureFixture[str]) -> None:
    """run/train/compare take up where they stopped; a rerun of regrade (or any other) starts over."""
    import typer

    from replaykit.commands import shell

    app = typer.Typer()

    def stopped() -> None:
        raise KeyboardInterrupt

    for name in ("run", "regrade", "certify"):
        app.command(name)(stopped)
    for argv, said in (
        (["run"], INTERRUPTED),
        (["regrade"], "interrupted"),
        (["certify"], "interrupted"),
    ):
        assert shell.run(app, argv) == 130
        assert capsys.readouterr().err.strip().splitlines()[-1] == said, argv


@pytest.fixture(scope="module")
def trained_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, object]]:
    """(config, store, train --json) after a 2-epoch training and a compare of two models."""
    tmp = tmp_path_factory.mktemp("listings")
    config = write_config(
        tmp,
        {
            "panel.tasks": [
                str(Path(__file__).parent.parent / "envs" / t) for t in ("hello-file", "fix-config-port")
            ],
            "panel.seeds": [0, 1],
        },
    )
    trained = cli("train", str(config), "--epochs", "2", "--json", cwd=tmp, check=True)
    cli(
        "compare", str(config), "--models", "reference-weak,reference-strong", "--harness",
        f"{json.loads(trained.stdout)['initial_sha']},main", cwd=tmp, check=True,
    )  # fmt: skip
    return config, tmp / "store", json.loads(trained.stdout)


LISTINGS = [
    ("runs",),
    ("runs", "--kind", "training"),
    ("runs", "--kind", "measure"),
    ("runs", "--kind", "verdict"),
    ("runs", "--kind", "compare"),
    ("cassettes", "ls"),
    ("plugins",),
    ("audit", "TRAINING", "--noise"),
    ("tasks", "check", "ENVS/hello-file", "ENVS/fix-config-port", "--env", "local"),
]


@pytest.mark.parametrize("args", LISTINGS, ids=[" ".join(a) for a in LISTINGS])
def test_every_listing_fits_80_columns_piped(
    trained_store: tuple[Path, Path, dict[str, object]], args: tuple[str, ...]
) -> None:
    config, store, trained = trained_store
    envs = str(Path(__file__).parent.parent / "envs")
    argv = [a.replace("TRAINING", str(trained["training_id"])).replace("ENVS", envs) for a in args]
    where = [] if args[0] in ("plugins", "tasks") else ["--store", str(store)]
    proc = cli(*argv, *where, env={"COLUMNS": "80"}, cwd=config.parent)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= 80, "\n".join(x for x in lines if len(x) > 80)
    assert not [x for x in lines if re.search(r"\S  · ", x)], proc.stdout  # no empty "header  · " field


def test_wide_keeps_every_column(trained_store: tuple[Path, Path, dict[str, object]]) -> None:
    _, store, _ = trained_store
    narrow = cli("runs", "--store", str(store), env={"COLUMNS": "80"}, check=True).stdout
    wide = cli("runs", "--store", str(store), "--wide", env={"COLUMNS": "80"}, check=True).stdout
    assert "created (UTC)" not in narrow.splitlines()[1] and "--wide shows them" in narrow
    assert "created (UTC)" in wide.splitlines()[1] and max(len(x) for x in wide.splitlines()) > 80


def test_a_training_lists_its_calls_and_reused_events(
    trained_store: tuple[Path, Path, dict[str, object]],
) -> None:
    """The training's row: the model calls its runs' episodes and its proposer paid, and the events
    served from donors, derived from the store (what `train --json` paid when nothing was there)."""
    _, store, trained = trained_store
    (row,) = json.loads(cli("runs", "--kind", "training", "--store", str(store), "--json", check=True).stdout)
    assert row["model_calls"] == trained["model_calls"] and row["reused_events"] == trained["reused_events"]
    assert row["proposer_calls"] == trained["proposer_calls"] and row["reused_events"] > 0
    table = cli("runs", "--kind", "training", "--store", str(store), env={"COLUMNS": "80"}, check=True).stdout
    header, _, cells = table.splitlines()[1:4]
    assert header.split()[-2:] == ["paid", "reused"], table
    assert cells.split()[-2:] == [str(row["model_calls"]), str(row["reused_events"])], table


# -- messages: each states its fix once, names only what the command has (issue 40 item 7) ----


def test_an_id_not_in_the_store_gives_its_fix_once(small_store: tuple[Path, str], tmp_path: Path) -> None:
    store, _ = small_store
    for args in (
        ("replay", "deadbeef"),
        ("cassettes", "show", "deadbeef"),
        ("cassettes", "export", "deadbeef"),
    ):
        line = assert_one_line_error(cli(*args, "--store", str(store), cwd=tmp_path), 1)
        assert line.count("choose another") == 1 and "pass --store" not in line, (
            line
        )  # one way to another store
        assert line.count("check the id") == 1, line


def test_a_training_id_given_for_a_cassette_says_what_it_is(
    trained_store: tuple[Path, Path, dict[str, object]],
) -> None:
    _, store, trained = trained_store
    training = str(trained["training_id"])
    line = assert_one_line_error(cli("cassettes", "show", training[:10], "--store", str(store)), 1)
    assert f"is a training, not a cassette: `replaykit report {training}`" in line, line


def test_a_read_only_store_names_only_the_options_the_command_has() -> None:
    """The library says "or write to another store"; the CLI names the ways this command has:
    `run` takes no --store (its config's store: field), `replay` does."""
    import typer

    from replaykit.cli import app
    from replaykit.commands.shell import _invoked, _message, polish
    from replaykit.core.errors import ANOTHER_STORE, StoreError

    root = polish(typer.main.get_command(app))
    error = StoreError(
        f"store /s/index.db is read-only for this process (x): check the permissions; {ANOTHER_STORE}"
    )
    for_run = _message(error, _invoked(root, ["run", "c.yaml"]))
    for_replay = _message(error, _invoked(root, ["replay", "ID", "--store", "/s"]))
    assert "--store" not in for_run and "the config's store: field" in for_run, for_run
    assert "--store, --config CFG or $REPLAYKIT_STORE" in for_replay, for_replay


def test_a_flag_error_names_the_flag_not_the_config(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    line = assert_one_line_error(cli("run", str(config), "--agent", "nope", cwd=tmp_path), 1)
    assert line.startswith("Error: --agent nope: unknown agent 'nope'") and "config file" not in line, line


def test_fork_message_that_does_not_exist_is_no_such_file(
    small_store: tuple[Path, str], tmp_path: Path
) -> None:
    store, _ = small_store
    cassette = json.loads(cli("cassettes", "ls", "--store", str(store), "--json").stdout)[0]["id"]
    proc = cli("fork", cassette, "--at", "1", "--message", "missing.txt", "--store", str(store), cwd=tmp_path)
    line = assert_one_line_error(proc, 1)
    assert "missing.txt: no such file" in line and "UTF-8" not in line, line


@pytest.mark.parametrize("models", ["", " , "])
def test_an_empty_models_list_is_its_own_error(tmp_path: Path, models: str) -> None:
    config = write_config(tmp_path)
    line = assert_one_line_error(cli("compare", str(config), "--models", models, cwd=tmp_path), 2)
    assert "'--models': names no model" in line and "--harness" not in line.split("Try")[0], line
    both = cli("compare", str(config), "--models", models, "--harness", "main", cwd=tmp_path)
    assert "names no model" in assert_one_line_error(both, 2)
    assert not (tmp_path / "store").exists()  # nothing measured, nothing stored


def test_doctor_gives_the_proxy_fix_once(tmp_path: Path) -> None:
    proc = cli("doctor", env={"REPLAYKIT_MITMDUMP": str(tmp_path / "no-mitmdump")}, cwd=tmp_path)
    (line,) = [x for x in proc.stdout.splitlines() if "frozen network proxy" in x]
    assert line.count("setup-network.sh") == 1, line
