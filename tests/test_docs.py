"""The docs stay true (sqlite-utils' test_docs.py habit): every command and option of
the typer app is in docs/cli.md, the generated config reference and JSON Schema are
current, and every line of the README tour runs."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replaykit.commands import docgen

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
REGENERATE = "run `python -m replaykit.commands.docgen` and commit docs/"


def test_every_command_and_option_is_in_cli_md() -> None:
    sections = docgen.cli_sections((DOCS / "cli.md").read_text())
    commands = docgen.command_paths()
    missing = [path for path, _ in commands if path not in sections]
    assert not missing, (
        f"commands without a '## <command>' section in docs/cli.md: {missing} ({REGENERATE} for stubs)"
    )
    undocumented = [
        f"{path} {option}"
        for path, command in commands
        for option in docgen.options_of(command)
        if option not in ("--help",) and not re.search(rf"`{re.escape(option)}`", sections[path])
    ]
    assert not undocumented, f"options missing from their command's section in docs/cli.md: {undocumented}"
    stale = sorted(set(sections) - {path for path, _ in commands})
    assert not stale, f"docs/cli.md documents commands that no longer exist: {stale}"


def test_config_reference_and_schema_are_current() -> None:
    assert (DOCS / "config.md").read_text() == docgen.config_markdown(), (
        f"docs/config.md is stale: {REGENERATE}"
    )
    assert (DOCS / "replaykit.schema.json").read_text() == docgen.schema_text(), (
        f"docs/replaykit.schema.json is stale: {REGENERATE}"
    )
    meaningless = [name for name, _, _, meaning in docgen.config_fields() if not meaning]
    assert not meaningless, (
        f"config fields with no meaning: {meaningless}; add Field(description=...) or a line in docgen.NOTES"
    )


def test_schema_accepts_the_shipped_configs() -> None:
    import yaml
    from pydantic import ValidationError

    from replaykit.episodes.config import RunConfig
    from replaykit.train.config import TrainConfig

    schema = json.loads((DOCS / "replaykit.schema.json").read_text())
    for path in sorted((REPO / "configs").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        assert set(data) <= set(schema["properties"]), (path, set(data) - set(schema["properties"]))
        try:  # what the schema describes is what the models accept
            RunConfig.model_validate(data)
            TrainConfig.model_validate(data.get("train") or {})
        except ValidationError as exc:  # pragma: no cover - a failing shipped config
            pytest.fail(f"{path}: {exc}")


def test_guides_exist_and_link() -> None:
    index = (DOCS / "README.md").read_text()
    for page in ("harness.md", "tasks.md", "training.md", "endpoints.md", "cli.md", "config.md"):
        assert (DOCS / page).is_file() and f"({page})" in index


# -- the README tour ---------------------------------------------------------------
SERVERS = ("replaykit proxy", "replaykit serve")  # serve until Ctrl-C: covered by the proxy tests


def tour_lines() -> list[tuple[str, str]]:
    text = (REPO / "README.md").read_text()
    block = text.split("## A tour", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = []
    for raw in block.strip().splitlines():
        command, _, comment = raw.partition(" #")
        lines.append((command.strip(), comment.strip()))
    return lines


def test_tour_lines_are_commands() -> None:
    lines = tour_lines()
    assert len(lines) >= 20 and all(c.startswith("replaykit ") for c, _ in lines)
    assert not [c for c, _ in lines if "[" in c or " / " in c], (
        "tour lines must be runnable as written (no [optional] or a / b)"
    )


@pytest.mark.docker
def test_readme_tour_runs(tmp_path: Path) -> None:
    for folder in ("configs", "envs"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    env = {**os.environ, "COLUMNS": "100"}
    env.pop("REPLAYKIT_STORE", None)
    ids: dict[str, str] = {}
    for command, comment in tour_lines():
        if command.startswith(SERVERS):
            continue
        argv = shlex.split(command)
        for i, word in enumerate(argv):
            for name, value in ids.items():
                word = word.replace(name, value)
            argv[i] = word
        unresolved = [w for w in argv if re.fullmatch(r"[A-Z][A-Z_]+_(ID|SHA|REF)", w)]
        assert not unresolved, f"{command}: no earlier command printed {unresolved}"
        proc = subprocess.run(
            [sys.executable, "-m", "replaykit.cli", *argv[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        expected = 1 if "divergence" in comment else 0  # a line that says it shows one must show one
        assert proc.returncode == expected and "Traceback" not in proc.stderr, (
            f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
        if expected:
            assert "divergence" in proc.stdout, proc.stdout[-2000:]
        if "--json" in argv:
            learn(ids, json.loads(proc.stdout))


def learn(ids: dict[str, str], doc: Any) -> None:
    """Remember the ids a ``--json`` answer names, for the placeholders of later lines."""
    if not isinstance(doc, dict):
        return
    if doc.get("kind") == "measure" and "RUN_ID" not in ids:
        ids["RUN_ID"] = doc["run_id"]
        ids["CASSETTE_ID"] = doc["episodes"][0]["cassette_id"][:6]
    if doc.get("kind") == "training":
        ids["TRAINING_ID"] = doc["training_id"]
        ids["INITIAL_SHA"] = doc["initial_sha"]
        ids["VERDICT_ID"] = doc["verdicts"][0]


# -- the README's sample outputs --------------------------------------------------------
#: ``<!-- sample output: COMMAND [(first N lines)] -->`` then a fenced block: the block is what
#: COMMAND prints on a fresh clone after ``replaykit train configs/quickstart.yaml`` (ids named
#: TRAINING_ID, VERDICT_ID, INITIAL_SHA are that training's), cut to N lines and "...".
#: ``REPLAYKIT_WRITE_DOCS=1`` writes the blocks instead of checking them
#: (scripts/make-shipped-bundle.sh does, with the bundle: both hold the quickstart's ids).
SAMPLE = re.compile(
    r"^<!-- sample output: (?P<command>.+?)(?: \(first (?P<first>\d+) lines\))? -->\n```\n(?P<block>.*?)^```$",
    re.M | re.S,
)


def sample_output(command: str, first: int | None, cwd: Path, ids: dict[str, str]) -> str:
    argv = [ids.get(word, word) for word in shlex.split(command)]
    proc = subprocess.run(
        [sys.executable, "-m", "replaykit.cli", *argv[1:]],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "100"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"{command}\n{proc.stderr[-2000:]}"
    lines = [line.rstrip() for line in proc.stdout.splitlines()]
    lines = [line for line in lines if line.strip("─ ")]  # a table's rule is width, not content
    shown = lines if first is None or len(lines) <= first else [*lines[:first], "..."]
    return "\n".join(shown) + "\n"


def test_readme_sample_outputs_are_what_the_commands_print(tmp_path: Path) -> None:
    text = (REPO / "README.md").read_text()
    samples = list(SAMPLE.finditer(text))
    assert samples, "README.md has no <!-- sample output: ... --> block"
    for folder in ("configs", "envs"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    env = {**os.environ, "COLUMNS": "100"}
    env.pop("REPLAYKIT_STORE", None)
    trained = subprocess.run(
        [sys.executable, "-m", "replaykit.cli", "train", "configs/quickstart.yaml", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert trained.returncode == 0, trained.stderr
    doc = json.loads(trained.stdout)
    ids = {
        "TRAINING_ID": doc["training_id"],
        "VERDICT_ID": doc["verdicts"][0],
        "INITIAL_SHA": doc["initial_sha"],
    }
    written = text
    for match in reversed(samples):
        first = int(match["first"]) if match["first"] else None
        actual = sample_output(match["command"], first, tmp_path, ids)
        if os.environ.get("REPLAYKIT_WRITE_DOCS") == "1":
            written = written[: match.start("block")] + actual + written[match.end("block") :]
        else:
            assert match["block"] == actual, (
                f"README.md's sample output of `{match['command']}` is not what it prints on a fresh "
                "clone: REPLAYKIT_WRITE_DOCS=1 python -m pytest tests/test_docs.py -k sample writes it"
            )
    if written != text:
        (REPO / "README.md").write_text(written)
