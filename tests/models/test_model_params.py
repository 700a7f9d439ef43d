"""model.params: validated, sent with every call through ctx.llm_kwargs(), part of the key when set."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.core.errors import ConfigError
from replaykit.episodes.config import load_config
from replaykit.episodes.harness import Context
from replaykit.testing import write_config

pytestmark = pytest.mark.unit


def test_params_are_sent_with_every_call_and_a_fixed_seed_replaces_the_per_call_one() -> None:
    ctx = Context(seed=0, task_id="t", model="m", model_params={"max_tokens": 8, "tool_choice": "auto"})
    first, second = ctx.llm_kwargs(), ctx.llm_kwargs()
    assert first["max_tokens"] == 8 and first["tool_choice"] == "auto" and first["seed"] != second["seed"]
    fixed = Context(seed=0, task_id="t", model="m", model_params={"seed": 42})
    assert fixed.llm_kwargs()["seed"] == fixed.llm_kwargs()["seed"] == 42


def test_params_enter_the_config_digest_only_when_set(tmp_path: Path) -> None:
    plain = load_config(write_config(tmp_path, name="a.yaml"))
    empty = load_config(write_config(tmp_path, {"model.params": {}}, name="b.yaml"))
    capped = load_config(write_config(tmp_path, {"model.params": {"max_tokens": 64}}, name="c.yaml"))
    assert plain.digest() == empty.digest() != capped.digest()
    assert capped.model.params.sent() == {"max_tokens": 64}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"max_tokens": 0}, "model.params.max_tokens"),
        ({"tool_choice": "sometimes"}, "model.params.tool_choice"),
        ({"tool_choice": {"type": "function"}}, "model.params.tool_choice"),
        ({"top_p": 2}, "model.params.top_p"),
        ({"max_tokns": 5}, "model.params.max_tokns"),
    ],
)
def test_bad_params_are_one_line_naming_the_field(
    tmp_path: Path, params: dict[str, object], field: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(write_config(tmp_path, {"model.params": params}))
    assert f"field {field!r}" in str(exc.value) and "\n" not in str(exc.value)
