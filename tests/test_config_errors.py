"""Every config error is one line: the file, the line, the key, what is expected.

Values YAML and pydantic would accept silently (a seed listed twice, a negative seed,
``true`` as a seed, ``temperature: 99``, ``max_steps: 'x'``, a key given twice) are
refused; pydantic's own wording (``Value error, …``, ``Extra inputs are not permitted``)
never reaches the user; a YAML syntax error names its line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.core.errors import ConfigError
from replaykit.episodes.config import load_config
from replaykit.testing import REPO_ROOT
from replaykit.train.config import train_config
from tests.cli_runner import cli

QUICKSTART = (REPO_ROOT / "configs" / "quickstart.yaml").read_text().replace("../envs/", f"{REPO_ROOT}/envs/")


def edited(tmp: Path, old: str, new: str) -> Path:
    assert old in QUICKSTART, old
    path = tmp / "config.yaml"
    path.write_text(QUICKSTART.replace(old, new, 1))
    return path


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


CASES = [
    ("  seeds: [0, 1]", "  seeds: [0, 0]", "field 'panel.seeds': seed 0 is listed twice"),
    (
        "  seeds: [0, 1]",
        "  seeds: [-1]",
        "field 'panel.seeds.0': Input should be greater than or equal to 0 (got -1)",
    ),
    (
        "  seeds: [0, 1]",
        "  seeds: [true]",
        "field 'panel.seeds.0': expected a whole number, not true (got true)",
    ),
    (
        "  temperature: 0.0",
        "  temperature: 99",
        "field 'model.temperature': Input should be less than or equal to 2 (got 99)",
    ),
    (
        "    max_steps: 10",
        "    max_steps: 'x'",
        "field 'harness.params.max_steps': expected a whole number >= 1 (got 'x')",
    ),
    (
        "  entry: harness.py",
        "  entry: harness.py\n  branch: dev",
        "key 'branch' is given twice (first on line 9)",
    ),
    (
        "  timeout_sec: 30",
        "  timeout_sec: 30\n  timout: 3",
        "field 'env.timout' is not a setting of env kind 'local'",
    ),
    (
        "  temperature: 0.0",
        "  temperature: 0.0\n  temprature: 1",
        "field 'model.temprature': unknown key; known: name, base_url",
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize(("old", "new", "expected"), CASES)
def test_bad_value_is_one_line_with_file_line_and_key(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    path = edited(tmp_path, old, new)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    marker = new.splitlines()[-1].strip()
    assert message.startswith(f"config file {path}, line {line_of(path, marker)}: "), message
    assert expected in message and "\n" not in message, message
    assert "Value error" not in message and "Extra inputs" not in message, message


@pytest.mark.unit
def test_yaml_syntax_error_names_its_line(tmp_path: Path) -> None:
    path = edited(tmp_path, "  seed: 0", "  seed: [0")
    with pytest.raises(
        ConfigError, match=rf"^config file {path}, line \d+: not valid YAML: expected ',' or ']'"
    ):
        load_config(path)


@pytest.mark.unit
def test_train_section_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = edited(tmp_path, "  epochs: 5", "  epochs: 0")
    with pytest.raises(ConfigError) as caught:
        train_config(load_config(path))
    assert str(caught.value) == (
        f"config file {path}, line {line_of(path, 'epochs: 0')}: "
        "field 'train.epochs': Input should be greater than or equal to 1 (got 0)"
    )


@pytest.mark.unit
def test_good_values_still_load(tmp_path: Path) -> None:
    path = edited(tmp_path, "  seeds: [0, 1]", "  seeds: [3, 0, 9223372036854775807]")
    assert load_config(path).panel.seeds == [3, 0, 2**63 - 1]


@pytest.mark.e2e
def test_cli_prints_the_one_line_and_exits_1(tmp_path: Path) -> None:
    path = edited(tmp_path, "  seeds: [0, 1]", "  seeds: [0, 0]")
    proc = cli("run", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr == (
        f"Error: config file {path}, line {line_of(path, 'seeds: [0, 0]')}: field 'panel.seeds': seed 0 is "
        "listed twice (it would measure the same episode twice); list each seed once (got [0, 0])\n"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("  seeds: [0, 1]", "  seeds: &s [0, *s]"),  # a list inside itself
        ("  seeds: [0, 1]", "  seeds: &s [0, [1, *s]]"),  # deeper
    ],
)
def test_a_recursive_alias_is_one_line(tmp_path: Path, old: str, new: str) -> None:
    path = edited(tmp_path, old, new)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"config file {path}, line {line_of(path, '&s')}: the anchor there is used inside itself"
        " (a recursive alias); a config cannot refer to itself"
    )


@pytest.mark.unit
def test_an_alias_used_twice_is_not_recursive(tmp_path: Path) -> None:
    path = edited(tmp_path, "  seeds: [0, 1]", "  seeds: &s [0, 1]\nextra_seeds: [*s, *s]")
    with pytest.raises(ConfigError, match="extra_seeds"):  # an unknown key, not a recursion
        load_config(path)


@pytest.mark.e2e
def test_a_config_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(
        QUICKSTART.replace("name: quickstart", "name: caf@", 1).encode().replace(b"caf@", b"caf\xe9")
    )
    assert b"\xe9" in path.read_bytes()
    proc = cli("run", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr == (
        f"Error: config file {path}, line {line_of_bytes(path, b'caf')}: not UTF-8 text (byte 0xe9);"
        " save it as UTF-8\n"
    )


def line_of_bytes(path: Path, text: bytes) -> int:
    return next(i for i, line in enumerate(path.read_bytes().splitlines(), 1) if text in line)
