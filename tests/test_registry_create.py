"""``FactoryRegistry.create``: parameters are validated strictly against the factory's
signature before the call (a bad name or value is one line; ``"2"`` is no int) and the
factory gets the validated values; an error raised inside a constructor comes through
untouched, traceback included. ``entries()`` says where each name comes from."""

from __future__ import annotations

import traceback

import pytest

from replaykit.core.errors import ConfigError
from replaykit.core.registry import FactoryRegistry, Registry
from replaykit.train.criteria import make_criterion
from replaykit.train.optimizers import make_optimizer

pytestmark = pytest.mark.unit


class Margin:
    def __init__(self, margin: int, alpha: float | None = None, *, label: str = "m") -> None:
        self.margin, self.alpha, self.label = margin, alpha, label


class Broken:
    def __init__(self, size: int = 1) -> None:
        table: dict[int, int] = {}
        self.table = table.get(size) + 1  # type: ignore[operator]  # a real bug: TypeError inside


def registry() -> FactoryRegistry[object]:
    reg: FactoryRegistry[object] = FactoryRegistry("widget", "replaykit.test-widgets")
    reg.register("margin", Margin)
    reg.register("broken", Broken)
    return reg


@pytest.mark.parametrize(
    ("params", "line"),
    [
        ({"margin": 1, "lr": 0.1}, "widget 'margin': unknown parameter 'lr' (takes: margin, alpha, label)"),
        ({}, "widget 'margin': missing a required argument: 'margin' (takes: margin, alpha, label)"),
        ({"margin": "many"}, "widget 'margin': parameter 'margin': Input should be a valid integer"),
        ({"margin": 1, "alpha": [1]}, "widget 'margin': parameter 'alpha': "),
        ({"margin": 1, "label": 3}, "widget 'margin': parameter 'label': Input should be a valid string"),
        ({"margin": "2"}, "widget 'margin': parameter 'margin': Input should be a valid integer (got '2')"),
        ({"margin": True}, "widget 'margin': parameter 'margin': Input should be a valid integer (got True)"),
        ({"margin": 1.5}, "widget 'margin': parameter 'margin': Input should be a valid integer"),
    ],
)
def test_bad_parameters_are_one_line_before_the_call(params: dict[str, object], line: str) -> None:
    with pytest.raises(ConfigError) as info:
        registry().create("margin", **params)
    assert str(info.value).startswith(line) and "\n" not in str(info.value)


def test_the_constructor_gets_the_validated_values_and_create_is_typed() -> None:
    widget = registry().create("margin", margin=2, alpha=1, label="x")
    assert isinstance(widget, Margin)
    assert (widget.margin, widget.alpha, widget.label) == (2, 1.0, "x") and isinstance(widget.alpha, float)
    optimizer = make_optimizer("margin_greedy", margin=2, alpha=1)
    assert optimizer.params() == {"margin": 2, "alpha": 1.0}


def test_a_pydantic_model_parameter_is_validated_nested() -> None:
    from replaykit.train.estimators import AgenticEstimator, make_estimator
    from replaykit.train.openai_backend import OpenAIBackend

    built = make_estimator({"kind": "agentic", "backend": {"kind": "openai", "temperature": 1}})
    assert isinstance(built, AgenticEstimator) and isinstance(built.backend, OpenAIBackend)
    assert built.backend.temperature == 1.0 and isinstance(built.backend.temperature, float)
    with pytest.raises(
        ConfigError, match=r"agent backend 'openai': parameter 'temperature': .* \(got 'hot'\)"
    ):
        make_estimator({"kind": "agentic", "backend": {"kind": "openai", "temperature": "hot"}})


def test_an_error_inside_the_constructor_keeps_its_traceback() -> None:
    with pytest.raises(TypeError) as info:
        registry().create("broken", size=2)
    frames = [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
    assert frames[-1] == "__init__"  # raised where the bug is, not re-raised as "bad parameters"
    assert not isinstance(info.value, ConfigError)


def test_the_factories_use_it() -> None:
    with pytest.raises(ConfigError, match=r"criterion 'mean_reward': unknown parameter 'alhpa' \(takes: "):
        make_criterion("mean_reward", alhpa=0.1)
    with pytest.raises(
        ConfigError, match=r"optimizer 'margin_greedy': parameter 'margin': Input should be a valid integer"
    ):
        make_optimizer("margin_greedy", margin="lots")


def test_entries_name_their_source() -> None:
    reg: Registry[object] = Registry("widget", "replaykit.test-widgets", builtins={"b": "json:dumps"})
    reg.register("margin", Margin)
    rows = {row.name: row for row in reg.entries()}
    assert rows["b"].source == "built-in" and rows["b"].ref == "json:dumps"
    assert rows["margin"].source == "registered" and rows["margin"].ref.endswith(":Margin")
