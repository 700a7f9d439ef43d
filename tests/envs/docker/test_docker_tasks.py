"""`replaykit tasks check` on Harbor-format task folders written here from the published
format (task.toml version "1.0" / schema_version, a Python verifier under tests/ run by a
pytest-based test.sh, FROM python:3.12-slim / ubuntu:24.04 aliased to the local base)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from replaykit.envs.check import check_tasks
from replaykit.envs.tasks import load_task
from tests.cli_runner import cli as run_cli

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[3]

ACCESS_LOG = """\
10.0.0.1 - - [10/Oct/2023:13:55:36 +0000] "GET /index.html HTTP/1.1" 200 512
10.0.0.2 - - [10/Oct/2023:13:55:40 +0000] "GET /about.html HTTP/1.1" 200 301
10.0.0.1 - - [10/Oct/2023:13:56:02 +0000] "GET /index.html HTTP/1.1" 304 0
10.0.0.3 - - [10/Oct/2023:13:57:12 +0000] "POST /login HTTP/1.1" 302 120
"""

TASK_TOML_V1 = """\
version = "1.0"

[metadata]
author_name = "replaykit tests"
author_email = "tests@localhost"
difficulty = "easy"
category = "data-processing"
tags = ["logs", "json"]

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 300.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory = "1G"
storage = "10G"
allow_internet = false
"""

TASK_TOML_SCHEMA = """\
schema_version = "1.1"

[task]
name = "replaykit/log-report-ubuntu"
description = "Summarise an access log as JSON."
authors = [{ name = "replaykit tests", email = "tests@localhost" }]
keywords = ["logs"]

[metadata]
category = "data-processing"

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 300.0

[environment]
cpus = 1
memory_mb = 1024
allow_internet = false
"""

TEST_SH = """\
#!/bin/bash
mkdir -p /logs/verifier
pytest /tests/test_outputs.py -rA -p no:cacheprovider 2>&1
EXIT=$?
if [ $EXIT -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
exit $EXIT
"""

TEST_OUTPUTS = """\
import json
from pathlib import Path

REPORT = Path("/app/report.json")


def test_report_exists():
    assert REPORT.exists(), "report.json was not written"


def test_report_values():
    report = json.loads(REPORT.read_text())
    assert report["total_requests"] == 4
    assert report["unique_ips"] == 3
    assert report["top_path"] == "/index.html"
"""

SOLVE_SH = """\
#!/bin/bash
python3 - <<'EOF'
import collections, json
lines = open("/app/access.log").read().splitlines()
ips = {l.split()[0] for l in lines}
paths = collections.Counter(l.split('"')[1].split()[1] for l in lines)
json.dump({"total_requests": len(lines), "unique_ips": len(ips), "top_path": paths.most_common(1)[0][0]}, open("/app/report.json", "w"))
EOF
"""


def _tagged(folder: Path, tag: str) -> bool:
    tags = load_task(folder).metadata.get("tags")
    return isinstance(tags, list) and tag in tags


def write_harbor_task(folder: Path, toml: str, base: str, solve: str = SOLVE_SH) -> Path:
    for sub in ("environment", "tests", "solution"):
        (folder / sub).mkdir(parents=True)
    (folder / "task.toml").write_text(toml)
    (folder / "instruction.md").write_text(
        "Parse /app/access.log and write /app/report.json with total_requests, unique_ips and top_path.\n"
    )
    (folder / "environment" / "Dockerfile").write_text(
        f"FROM {base}\n\nWORKDIR /app\n\nCOPY access.log /app/access.log\n"
    )
    (folder / "environment" / "access.log").write_text(ACCESS_LOG)
    (folder / "tests" / "test.sh").write_text(TEST_SH)
    (folder / "tests" / "test_outputs.py").write_text(TEST_OUTPUTS)
    (folder / "solution" / "solve.sh").write_text(solve)
    return folder


cli = functools.partial(run_cli, cwd=REPO)


@pytest.fixture(scope="module")
def harbor_suite(docker_base: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    suite = tmp_path_factory.mktemp("harbor") / "suite"
    write_harbor_task(suite / "log-report", TASK_TOML_V1, "python:3.12-slim@sha256:" + "57cd" * 16)
    write_harbor_task(suite / "log-report-ubuntu", TASK_TOML_SCHEMA, "ubuntu:24.04")
    return suite


def test_tasks_check_passes_on_harbor_tasks_with_aliases(harbor_suite: Path, docker_base: str) -> None:
    proc = cli(
        "tasks",
        "check",
        str(harbor_suite),
        "--json",
        "--alias",
        f"python:3.12-slim={docker_base}",
        "--alias",
        f"ubuntu:24.04={docker_base}",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and report["env"] == "docker"
    assert [(r["task_id"], r["untouched"], r["solved"]) for r in report["tasks"]] == [
        ("log-report", 0.0, 1.0),
        ("log-report-ubuntu", 0.0, 1.0),
    ]


def test_tasks_check_table_and_glob(harbor_suite: Path) -> None:
    proc = cli("tasks", "check", str(harbor_suite / "log-*"), "--env", "local")
    assert proc.returncode == 1  # locally /app does not exist: the oracle cannot pass
    proc = cli(
        "tasks", "check", str(harbor_suite / "log-report")
    )  # default aliases (python:3.12-slim absent locally)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "log-report" in proc.stdout and "1/1 task(s) pass the oracle check" in proc.stdout


def test_a_task_whose_solution_fails_is_reported(docker_base: str, tmp_path: Path) -> None:
    write_harbor_task(
        tmp_path / "broken",
        TASK_TOML_V1,
        "debian:bookworm-slim",
        solve="#!/bin/bash\necho '{}' > /app/report.json\n",
    )
    report = check_tasks([str(tmp_path / "broken")], tmp_path, kind="docker")
    assert not report["ok"]
    row = report["tasks"][0]
    assert row["untouched"] == 0.0 and row["solved"] == 0.0 and "solution scored 0" in row["problem"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda f: (f / "task.toml").write_text('version = "1.0"\n[verifier]\ntimeout_sec = "fast"\n'),
            r"task\.toml: field 'verifier\.timeout_sec' must be a number > 0, got 'fast'",
        ),
        (
            lambda f: (f / "task.toml").write_text('version = "1.0"\n[environment]\nmemory = "lots"\n'),
            r"task\.toml: field 'environment\.memory' must be a size string",
        ),
        (
            lambda f: (f / "task.toml").write_text('schema_version = "7.0"\n'),
            r"task\.toml: field 'schema_version' is '7\.0'",
        ),
        (lambda f: (f / "tests" / "test.sh").unlink(), r"tests/test\.sh: missing"),
        (lambda f: (f / "instruction.md").write_text("  \n"), r"instruction\.md: empty"),
    ],
)
def test_malformed_task_is_one_clear_error(tmp_path: Path, edit: object, message: str) -> None:
    folder = write_harbor_task(tmp_path / "bad", TASK_TOML_V1, "debian:bookworm-slim")
    edit(folder)  # type: ignore[operator]
    proc = cli("tasks", "check", str(folder), "--json")  # a malformed task is its row's one-line problem
    assert proc.returncode == 1 and proc.stderr == ""
    (row,) = json.loads(proc.stdout)["tasks"]
    problem = row["problem"]
    assert not row["ok"] and "\n" not in problem and str(folder) in problem
    import re

    assert re.search(message, problem), problem


def test_sample_tasks_pass_in_docker_and_locally() -> None:
    for env in ("docker", "local"):
        proc = cli("tasks", "check", "envs/*", "--env", env, "--json")
        report = json.loads(proc.stdout)
        failed = {r["task_id"]: r["problem"] for r in report["tasks"] if not r["ok"]}
        if env == "local":  # tasks tagged docker-only need their image (a verifier shim, a sidecar)
            failed = {t: p for t, p in failed.items() if not _tagged(REPO / "envs" / t, "docker-only")}
        else:
            assert proc.returncode == 0 and report["passed"] == report["total"], proc.stdout + proc.stderr
        assert report["total"] >= 13 and not failed, failed
