"""``run --jobs-dir`` where no folder can go is one line, before anything is recorded."""

from __future__ import annotations

from pathlib import Path

from replaykit.testing import write_config
from tests.cli_runner import cli


def test_a_jobs_dir_under_a_file_is_one_line_and_nothing_is_recorded(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"panel.seeds": [0]})
    (tmp_path / "afile").write_text("x")
    proc = cli("run", str(config), "--jobs-dir", str(tmp_path / "afile" / "jobs"), cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    expected = (
        f"Error: cannot write a Harbor job folder under {tmp_path / 'afile' / 'jobs'}: "
        f"{tmp_path / 'afile'} is not a folder; choose another --jobs-dir (or -o)"
    )
    assert proc.stderr.strip().splitlines() == [expected]
    assert not (tmp_path / "store").exists()
