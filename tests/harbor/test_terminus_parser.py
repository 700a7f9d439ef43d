"""The terminus template's answer parser against Harbor 0.25's own (``TerminusJSONPlainParser``, run
in Harbor's venv): the same commands, completion, error line and warnings for each answer shape,
and for eight answers SmolLM2-135M-Instruct really gave the template (``data/``: recorded on
llama-server, max_tokens 160; cut mid-JSON, code-fenced, the prompt's example copied)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from replaykit.episodes.config_paths import TEMPLATES
from tests.harbor.harbor_cli import HOME, missing

pytestmark = pytest.mark.harbor
PYTHON = HOME / "venv" / "bin" / "python"
GOOD = '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": 0.1}]'
ANSWERS = [
    GOOD + "}",
    GOOD + ', "task_complete": true}',
    GOOD + ', "task_complete": "yes"}',
    "I will just run ls.",
    'Sure.\n{"analysis": "a", "plan": "p"}',
    '{"analysis": "a", "plan": "p", "commands": "ls"}',
    '{"analysis": "a", "plan": "p", "commands": [{"duration": 1}]}',
    '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": 3}]}',
    '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls"}, {"keystrokes": "pwd\\n", "x": 1}]}',
    '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": "fast"}]}',
    'Here:\n{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": 1}]',
    GOOD + "}\nThat is all.",
    '{"analysis": "a", "plan": "p", "commands": [7], "task_complete": true}',
    '{"analysis": "a", "plan": "p", "commands": [], }',
    '{"analysis": "%s", "plan": "p", "commands": [], }' % ("x" * 300),
    'First {"bad": } then {"analysis": "a", "plan": "p", "commands": []} done',  # the mixed-content fix
    '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "echo \\"{\\"\\n"}',  # a brace in a string
    *json.loads((Path(__file__).parent / "data" / "smollm2-terminus-answers.json").read_text()),
]
HARBOR_SIDE = """
import json, sys
from harbor.agents.terminus_2.terminus_json_plain_parser import TerminusJSONPlainParser
out = []
for text in json.load(sys.stdin):
    r = TerminusJSONPlainParser().parse_response(text)
    warnings = [w[2:] for w in r.warning.split("\\n")] if r.warning else []
    out.append({"commands": [[c.keystrokes, c.duration] for c in r.commands], "complete": bool(r.is_task_complete),
                "error": r.error, "warnings": warnings})
print(json.dumps(out))
"""


def ours(text: str) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("terminus_harness", TEMPLATES / "terminus" / "harness.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    answer = dict(module.parse_answer(text))
    answer["commands"] = [list(c) for c in answer["commands"]]
    return answer


def test_the_parser_agrees_with_harbors_terminus_2() -> None:
    why = missing()
    if why:
        pytest.fail(why, pytrace=False)
    proc = subprocess.run(
        [str(PYTHON), "-c", HARBOR_SIDE],
        input=json.dumps(ANSWERS),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    theirs = json.loads(proc.stdout)
    for text, expected in zip(ANSWERS, theirs, strict=True):
        assert ours(text) == expected, text


def test_the_prompt_is_harbors_terminus_2_json_prompt() -> None:
    why = missing()
    if why:
        pytest.fail(why, pytrace=False)
    proc = subprocess.run(
        [
            str(PYTHON),
            "-c",
            "import harbor.agents.terminus_2 as t, pathlib; print(pathlib.Path(t.__file__).parent)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    harbors = Path(proc.stdout.strip()) / "templates" / "terminus-json-plain.txt"
    assert (TEMPLATES / "terminus" / "prompt.txt").read_bytes() == harbors.read_bytes()
