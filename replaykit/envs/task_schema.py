"""task.toml's schema: the versions accepted, each field's type, the Harbor fields refused.

:func:`validate_config` raises a ``TaskError`` naming the file and the field (``…/task.toml:
field 'verifier.timeout_sec' must be a number > 0, got '30'``); ``tasks.py`` calls it on
every task it loads. Unknown keys are not errors: ``features.unknown_keys`` names them as
warnings (Harbor ignores them).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

from replaykit.core.errors import TaskError
from replaykit.envs import features
from replaykit.envs.task_env import validate_env_tables

#: The ``version`` values of task.toml this loader accepts ("1.0": Harbor's published format).
SUPPORTED_VERSIONS: tuple[str, ...] = ("1.0", "2.0")
#: The newer Harbor form: ``schema_version = "1.x"`` (with a ``[task]`` table) instead of ``version``.
SUPPORTED_SCHEMA_VERSIONS: tuple[str, ...] = ("1.0", "1.1", "1.2", "1.3", "1.4")

_NUMBER = "number"
_POS_NUMBER = "number > 0"
_POS_INT = "integer > 0"
_STR = "string"
_BOOL = "boolean"
_STR_LIST = "list of strings"
_SIZE = 'size string such as "2G" or "512M"'
_SIZE_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}

#: (section, key) -> expected kind; checked when the key is present.
_FIELD_TYPES: dict[tuple[str, str], str] = {
    ("metadata", "difficulty"): _STR,
    ("metadata", "category"): _STR,
    ("metadata", "tags"): _STR_LIST,
    ("metadata", "author_name"): _STR,
    ("metadata", "author_email"): _STR,
    ("verifier", "timeout_sec"): _POS_NUMBER,
    ("agent", "timeout_sec"): _POS_NUMBER,
    ("environment", "build_timeout_sec"): _POS_NUMBER,
    ("environment", "cpus"): _POS_INT,
    ("environment", "memory_mb"): _POS_INT,
    ("environment", "storage_mb"): _POS_INT,
    ("environment", "workdir"): _STR,
    ("environment", "allow_internet"): _BOOL,
    ("environment", "network_mode"): _STR,
    ("environment", "memory"): _SIZE,
    ("environment", "storage"): _SIZE,
}
_SECTIONS = ("metadata", "verifier", "agent", "environment", "solution", "task")
#: Harbor fields replaykit cannot honour: refused with one line rather than silently ignored.
_UNSUPPORTED: tuple[tuple[tuple[str, str], Callable[[Any], bool], str], ...] = (
    (("environment", "os"), lambda v: str(v).lower() != "linux", "replaykit runs Linux containers only"),
    (("environment", "gpus"), lambda v: bool(v), "replaykit does not attach GPUs to task containers"),
    (("environment", "tpu"), lambda v: bool(v), "replaykit does not attach TPUs to task containers"),
    (
        ("verifier", "environment_mode"),
        lambda v: v == "separate",
        "replaykit verifies in the agent's environment (shared mode)",
    ),
    (
        ("verifier", "environment"),
        lambda v: bool(v),
        "a separate verifier environment is not supported (shared mode only)",
    ),
)


def size_mb(value: str) -> int | None:
    """``"2G"`` → 2048, ``"512M"`` / ``"512Mi"`` → 512; None when not a size."""
    text = value.strip().upper().removesuffix("B").removesuffix("I")
    unit = text[-1:] if text[-1:] in _SIZE_UNITS else "M"
    number = text[:-1] if text[-1:] in _SIZE_UNITS else text
    try:
        amount = float(number)
    except ValueError:
        return None
    return max(1, int(amount * _SIZE_UNITS[unit])) if amount > 0 else None


def _kind_ok(value: Any, kind: str) -> bool:
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == _NUMBER:
        return is_number
    if kind == _POS_NUMBER:
        return is_number and value > 0
    if kind == _POS_INT:
        return isinstance(value, int) and not isinstance(value, bool) and value > 0
    if kind == _STR:
        return isinstance(value, str)
    if kind == _BOOL:
        return isinstance(value, bool)
    if kind == _STR_LIST:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == _SIZE:
        return isinstance(value, str) and size_mb(value) is not None
    raise AssertionError(kind)


def _table(config: Mapping[str, object], section: str) -> Mapping[str, object]:
    """A section of task.toml (checked to be a table first), or an empty one when absent."""
    table = config.get(section)
    return table if isinstance(table, dict) else {}


def _check_version(config: Mapping[str, object], toml_path: Path) -> None:
    """task.toml names a version replaykit reads (``version``, or Harbor's ``schema_version``)."""
    version = config.get("version")
    expected = " or ".join(f'"{v}"' for v in SUPPORTED_VERSIONS)
    if version is None and "schema_version" in config:
        schema = config["schema_version"]
        if schema not in SUPPORTED_SCHEMA_VERSIONS:
            raise TaskError(
                f"{toml_path}: field 'schema_version' is {schema!r}; expected one of "
                + ", ".join(f'"{v}"' for v in SUPPORTED_SCHEMA_VERSIONS)
            )
    elif version is None:
        raise TaskError(
            f"{toml_path}: field 'version' is missing; expected {expected} (or schema_version = \"1.x\")"
        )
    elif version not in SUPPORTED_VERSIONS:
        raise TaskError(f"{toml_path}: field 'version' is {version!r}; expected {expected}")


def validate_config(config: Mapping[str, object], toml_path: Path) -> None:
    _check_version(config, toml_path)
    for section in _SECTIONS:
        if section in config and not isinstance(config[section], dict):
            raise TaskError(f"{toml_path}: field '{section}' must be a table ([{section}])")
    for (section, key), kind in _FIELD_TYPES.items():
        table = _table(config, section)
        if key in table and not _kind_ok(table[key], kind):
            raise TaskError(f"{toml_path}: field '{section}.{key}' must be a {kind}, got {table[key]!r}")
    validate_env_tables(config, str(toml_path))
    mode = features.network_mode(config)
    if mode not in features.SUPPORTED_NETWORK_MODES:
        raise TaskError(
            f"{toml_path}: field 'environment.network_mode' = {mode!r} is not supported; expected one of "
            + ", ".join(f'"{m}"' for m in features.SUPPORTED_NETWORK_MODES)
            + (" (replaykit cannot enforce allowed_hosts)" if mode == "allowlist" else "")
        )
    for (section, key), bad, why in _UNSUPPORTED:
        table = _table(config, section)
        if key in table and bad(table[key]):
            raise TaskError(f"{toml_path}: field '{section}.{key}' = {table[key]!r} is not supported: {why}")
