"""The mini-swe-agent template's environment (``mswea_env.py``, standard library only: it runs in
mini-swe-agent's own venv) against a real bridge, without mini-swe-agent installed: what it posts,
the answer shaped as mini-swe-agent's ``LocalEnvironment`` shapes its own, and an answer of another
shape as one error naming the field (never a ``KeyError``)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

import replaykit.agents.bridge
from replaykit.agents.bridge import Bridge
from replaykit.envs.results import Observation
from replaykit.episodes.harness import Context

HERE = Path(replaykit.agents.bridge.__file__).parent / "templates" / "mini_swe_agent"


def mswea_env() -> ModuleType:
    """The module as mini-swe-agent imports it (``PYTHONPATH`` is the template folder)."""
    spec = importlib.util.spec_from_file_location("mswea_env", HERE / "mswea_env.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeEnv:
    def __init__(self, observation: Observation) -> None:
        self.observation = observation
        self.ran: list[tuple[str, float | None]] = []

    def run(self, command: str, timeout_sec: float | None = None) -> Observation:
        self.ran.append((command, timeout_sec))
        return self.observation


def context() -> Context:
    return Context(seed=0, task_id="t", model="m")


def test_a_command_goes_through_the_bridge_and_comes_back_as_mini_shapes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = FakeEnv(Observation("out\n", "err", 3))
    with Bridge(None, env, context()) as bridge:
        bridge.gate.admit(os.getpid())  # this test plays the agent's process
        monkeypatch.setenv("REPLAYKIT_BRIDGE_URL", bridge.url)
        monkeypatch.setenv("REPLAYKIT_BRIDGE_TOKEN", bridge.token)
        box = mswea_env().BridgeEnvironment(timeout=7, extra_key="kept")
        output = box.execute({"command": "ls -l"})
        assert output == {"output": "out\nerr", "returncode": 3, "exception_info": ""}
        assert env.ran == [("ls -l", 7.0)]
        assert box.get_template_vars(x=1) == {
            "timeout": 7,
            "cwd": "",
            "env": {},
            "extra_key": "kept",
            "system": "Linux",
            "release": "",
            "version": "",
            "machine": "x86_64",
            "x": 1,
        }


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"{not json", "the answer is not JSON"),
        (b"[1, 2]", "the answer is not an object"),
        (b'{"stdout": "", "stderr": ""}', "the answer's 'exit_code' is not an integer: None"),
        (b'{"stdout": 3, "stderr": "", "exit_code": 0}', "the answer's 'stdout' is not a string: 3"),
        (
            b'{"stdout": "", "stderr": "", "exit_code": true}',
            "the answer's 'exit_code' is not an integer: True",
        ),
        (
            b'{"stdout": "", "stderr": "", "exit_code": 0, "timed_out": "no"}',
            "the answer's 'timed_out' is not true or false: 'no'",
        ),
    ],
)
def test_an_answer_of_another_shape_is_one_error_naming_it(raw: bytes, says: str) -> None:
    with pytest.raises(RuntimeError) as refused:
        mswea_env().exec_answer(raw)
    assert str(refused.value).startswith("replaykit bridge: ") and says in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_well_formed_answer_is_read_whole() -> None:
    read = mswea_env().exec_answer(b'{"stdout": "a", "stderr": "b", "exit_code": 1, "timed_out": true}')
    assert read == {"stdout": "a", "stderr": "b", "exit_code": 1, "timed_out": True}
