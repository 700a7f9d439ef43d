"""``reference-noisy``, the reference server's per-task noise mode (issue 37 item 4): each
task's solve probability, draws that follow the conversation's start and the seed, retries
that recover, and the server answering it on loopback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from replaykit.models.reference.noisy import HIGH, LOW, NoisyTaskModel, solve_probability
from replaykit.models.reference.protocol import parse_chat_request
from replaykit.models.reference.server import ReferenceServer
from replaykit.models.reference.simulator import load_tasks

SOLUTION = "echo quartz > answer.txt"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("noisy") / "write-word"
    (folder / "solution").mkdir(parents=True)
    (folder / "instruction.md").write_text("Write the word quartz to answer.txt.\n")
    (folder / "solution" / "solve.sh").write_text("#!/usr/bin/env bash\necho quartz > answer.txt\n")
    return folder


def first_command(model: NoisyTaskModel, seed: int, system: str) -> str:
    body: dict[str, Any] = {
        "model": "reference-noisy",
        "seed": seed,
        "tools": TOOLS,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "Write the word quartz to answer.txt."},
        ],
    }
    turn = model(parse_chat_request(body))
    assert turn.tool_calls
    return str(json.loads(turn.tool_calls[0].arguments)["command"])


def test_a_task_is_solved_first_time_with_its_own_probability(task: Path) -> None:
    model = NoisyTaskModel(load_tasks([task]))
    p = solve_probability("write-word")
    assert LOW <= p <= HIGH and p == solve_probability("write-word")
    assert len({round(solve_probability(f"t{i}"), 6) for i in range(20)}) == 20  # each task its own
    right = sum(first_command(model, seed, "Be brief.") == SOLUTION for seed in range(2000))
    assert abs(right / 2000 - p) < 0.035


def test_draws_follow_the_prompt_and_the_seed(task: Path) -> None:
    model = NoisyTaskModel(load_tasks([task]))
    same = [first_command(model, s, "Be brief.") for s in range(200)]
    assert same == [first_command(model, s, "Be brief.") for s in range(200)]  # a pure function
    other = [first_command(model, s, "Be brief. Keep each command short.") for s in range(200)]
    differ = sum((a == SOLUTION) != (b == SOLUTION) for a, b in zip(same, other, strict=True))
    p = solve_probability("write-word")
    assert abs(differ / 200 - 2 * p * (1 - p)) < 0.12  # two independent draws disagree that often


def test_the_server_answers_it_and_a_nudged_retry_recovers(task: Path) -> None:
    with ReferenceServer(task_dirs=[task]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused")
        assert "reference-noisy" in [m.id for m in client.models.list().data]
        recovered = 0
        for seed in range(400):
            messages: list[dict[str, object]] = [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Write the word quartz to answer.txt."},
            ]
            for attempt in range(4):
                reply = client.chat.completions.create(
                    model="reference-noisy",
                    messages=messages,  # type: ignore[arg-type]
                    tools=TOOLS,  # type: ignore[arg-type]
                    seed=seed,
                )
                call = reply.choices[0].message.tool_calls
                if not call:
                    break
                ok = json.loads(call[0].function.arguments)["command"] == SOLUTION  # type: ignore[union-attr]
                if ok:
                    recovered += attempt > 0
                    break
                messages += [
                    {"role": "assistant", "content": "", "tool_calls": [call[0].model_dump()]},
                    {"role": "tool", "tool_call_id": call[0].id, "content": "exit_code: 127\nretry"},
                ]
        wrong_first = 400 * (1 - solve_probability("write-word"))
        assert 0.6 < recovered / wrong_first < 0.85  # 1 - 0.65 ** 3 = 0.725 of the wrong ones
