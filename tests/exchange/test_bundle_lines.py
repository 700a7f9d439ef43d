"""``cassettes export``, ``import`` and ``verify`` piped: their summaries wrap at words to the
width like every other listing (80 columns, or ``$COLUMNS``), and say the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.testing import REPO_ROOT
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI

SHIPPED = REPO_ROOT / "cassettes" / "quickstart-training.tar.gz"


def lines_of(*args: str, cwd: Path, columns: str = "80") -> list[str]:
    proc = cli(*args, env={"COLUMNS": columns}, cwd=cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.rstrip("\n").splitlines()


def test_export_import_and_verify_fit_80_columns(tmp_path: Path) -> None:
    store, again = "store", "again"  # paths a reader would type: short (run in tmp_path)
    imported = lines_of("cassettes", "import", str(SHIPPED), "--store", store, cwd=tmp_path)
    assert imported[0].startswith("imported training ") and len(imported) > 1
    training = imported[0].split()[2]
    bundle = "training.tar.gz"
    exported = lines_of("cassettes", "export", training, "-o", bundle, "--store", store, cwd=tmp_path)
    assert exported[0].startswith(f"exported training {training} to") and len(exported) > 1
    verified = lines_of("cassettes", "verify", bundle, cwd=tmp_path)
    fresh = lines_of("cassettes", "import", bundle, "--store", again, cwd=tmp_path)
    noop = lines_of("cassettes", "import", bundle, "--store", again, cwd=tmp_path)
    for shown in (imported, exported, verified, fresh, noop):
        assert all(len(line) <= 80 for line in shown), shown
        assert all(line.startswith("  ") for line in shown[1:]), shown  # continuation lines indented
    wide = lines_of("cassettes", "import", str(SHIPPED), "--store", "wide", columns="400", cwd=tmp_path)
    assert len(wide) == 1 and " ".join(p.strip() for p in imported) == wide[0].replace("wide", store)
