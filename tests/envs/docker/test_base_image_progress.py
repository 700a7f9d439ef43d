"""Building the base image says how far debootstrap is (a stage line every 25 packages) and
an honest estimate, instead of one "about a minute" line and minutes of silence."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.envs.docker.base_image import _debootstrap

pytestmark = pytest.mark.unit


def test_debootstrap_progress_names_each_stage_with_a_count(tmp_path: Path) -> None:
    script = tmp_path / "debootstrap"  # debootstrap's own output shape: I: <Verb> <package>
    script.write_text(
        "#!/bin/sh\n"
        "echo 'I: Retrieving InRelease'\n"
        'for i in $(seq 1 60); do echo "I: Retrieving pkg$i 1.0"; done\n'
        'for i in $(seq 1 30); do echo "I: Unpacking pkg$i..."; done\n'
        "echo 'I: Base system installed successfully.'\n"
    )
    script.chmod(0o755)
    said: list[str] = []
    code, tail = _debootstrap([str(script)], said.append)
    assert code == 0 and tail[-1] == "I: Base system installed successfully."
    assert said == [
        "debootstrap: retrieving packages (1 so far)",
        "debootstrap: retrieving packages (25 so far)",
        "debootstrap: retrieving packages (50 so far)",
        "debootstrap: unpacking packages (1 so far)",
        "debootstrap: unpacking packages (25 so far)",
    ]
    failing = tmp_path / "failing"
    failing.write_text('#!/bin/sh\necho "E: Could not download packages" >&2\nexit 1\n')
    failing.chmod(0o755)
    assert _debootstrap([str(failing)], None) == (1, ["E: Could not download packages"])
