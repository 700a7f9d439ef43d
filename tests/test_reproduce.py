"""``replaykit reproduce SOURCE``: a shared bundle imported into a scratch store, every root
replayed and its charts drawn again, one line per root; the charts are the bytes `report` draws."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from replaykit.core.errors import ConfigError, ReplaykitError
from replaykit.report.reproduce import RootResult, chart_file, check_chart_files
from replaykit.testing import REPO_ROOT
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI

SHIPPED = REPO_ROOT / "cassettes" / "quickstart-training.tar.gz"


def test_the_shipped_training_reproduces_identical(tmp_path: Path) -> None:
    charts = tmp_path / "charts"
    named = ("--chart", "curve=docs/curve.svg", "--chart", "curve=docs/curve.png")  # where a README shows it
    proc = cli(
        "reproduce", str(SHIPPED), "--charts", str(charts), *named, "--json", cwd=tmp_path
    )  # not a checkout
    assert proc.returncode == 0, proc.stdout + proc.stderr
    done = json.loads(proc.stdout)
    assert done["identical"] is True and done["roots"][0]["kind"] == "training"
    assert all(r["identical"] and r["divergence"] is None for r in done["roots"])
    training = done["roots"][0]
    assert training["replayed"] >= 2 and {c["name"] for c in training["charts"]} >= {"curve"}
    # the same chart `report` draws from a store the bundle was imported into, byte for byte
    store = tmp_path / "store"
    cli("cassettes", "import", str(SHIPPED), "--store", str(store), check=True)
    html = tmp_path / "report.html"
    cli("report", done["root"], "--store", str(store), "-o", str(html), check=True, cwd=REPO_ROOT)
    drawn = {
        hashlib.sha256(s.encode()).hexdigest() for s in re.findall(r"<svg.*?</svg>", html.read_text(), re.S)
    }
    for chart in training["charts"]:
        written = Path(chart["path"]).read_text()
        assert hashlib.sha256(written.encode()).hexdigest() == chart["sha256"]
        assert hashlib.sha256(written.rstrip("\n").encode()).hexdigest() in drawn
    curve = next(c for c in training["charts"] if c["name"] == "curve")
    assert curve["files"] == ["docs/curve.svg", "docs/curve.png"]
    assert (tmp_path / "docs" / "curve.svg").read_bytes() == Path(curve["path"]).read_bytes()
    assert (tmp_path / "docs" / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (tmp_path / "docs").iterdir()) == ["curve.png", "curve.svg"]
    assert not list(tmp_path.glob("replaykit-reproduce-*"))


def test_one_line_per_root_in_80_columns(tmp_path: Path) -> None:
    deep = "docs/figures/the-training-curve-as-the-readme-shows-it.svg"  # one line would be 89 long
    proc = cli("reproduce", str(SHIPPED), "--chart", f"curve={deep}", cwd=tmp_path, env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines and all(len(line) <= 80 for line in lines), lines
    assert re.match(r"training [0-9a-f]{16}: identical", lines[0]), lines
    assert " ".join(x.strip() for x in lines[1:]) == f"its chart curve written to {deep}"


def test_chart_names_that_name_nothing_or_several_are_one_line() -> None:
    roots: list[RootResult] = [
        {"id": i, "kind": "compare", "identical": True, "replayed": 1, "divergence": None,
         "charts": [{"name": "bars", "sha256": "0" * 64}]}
        for i in ("aaaa1111", "bbbb2222")
    ]  # fmt: skip
    check_chart_files([("aaaa:bars", Path("x.svg"))], roots)  # one root named: fine
    with pytest.raises(
        ReplaykitError, match=r"no chart of that name was drawn; drawn: aaaa1111:bars, bbbb2222:bars"
    ):
        check_chart_files([("curve", Path("x.svg"))], roots)
    with pytest.raises(
        ReplaykitError, match=r"drawn by 2 roots \(aaaa1111:bars, bbbb2222:bars\); name one as ROOT:NAME"
    ):
        check_chart_files([("bars", Path("x.svg"))], roots)
    with pytest.raises(ConfigError, match=r"expected NAME=FILE with FILE ending \.svg or \.png"):
        chart_file("bars=chart.pdf")
    assert chart_file(" bars = docs/b.png ") == ("bars", Path("docs/b.png"))


def test_a_bad_source_is_one_line(tmp_path: Path) -> None:
    missing = cli("reproduce", str(tmp_path / "nope.tar.gz"))
    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1
    assert "cannot read bundle" in missing.stderr
    bad = cli("reproduce", "oci://127.0.0.1/NOPE:1")
    assert bad.returncode == 2 and "is not a repository name" in bad.stderr


@pytest.mark.parametrize("docker", ["as it is", "unserved"])
def test_a_docker_training_reproduces_with_docker_running_or_not(tmp_path: Path, docker: str) -> None:
    """The real-model training ran every command in Docker; reproducing it needs no daemon."""
    env = {"DOCKER_HOST": f"unix://{tmp_path / 'no-docker.sock'}"} if docker == "unserved" else {}
    bundle = REPO_ROOT / "cassettes" / "real-model-training.tar.gz"
    proc = cli("reproduce", str(bundle), "--json", cwd=REPO_ROOT, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    done = json.loads(proc.stdout)
    assert done["identical"] and done["roots"][0]["kind"] == "training" and done["roots"][0]["replayed"] >= 2
