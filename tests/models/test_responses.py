"""The reference server's Responses API: Codex-shaped tools, streaming events, determinism, the proposer flow."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pytest

from replaykit.models.reference import server as server_module
from replaykit.models.reference.patches import apply_patch_text, shell_heredoc
from replaykit.models.reference.protocol import AssistantTurn, ChatRequest
from replaykit.models.reference.server import ReferenceServer

INSTRUCTION = "Create a folder `out` holding `a.txt` with the word hello."
SOLVE_SH = "#!/usr/bin/env bash\nset -e\nmkdir -p out\necho hello > out/a.txt\n"
STEPS = ["mkdir -p out", "echo hello > out/a.txt"]
EXEC_TOOL = {  # the shape Codex CLI 0.1xx sends
    "type": "function",
    "name": "exec_command",
    "description": "Runs a command in a PTY.",
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {
            "cmd": {"type": "string"},
            "login": {"type": "boolean"},
            "workdir": {"type": "string"},
        },
        "required": ["cmd"],
    },
}
SHELL_TOOL = {
    "type": "function",
    "name": "shell",
    "parameters": {
        "type": "object",
        "properties": {"command": {"type": "array", "items": {"type": "string"}}},
    },
}
HARNESS = "import json\n\n\ndef solve(task, env, llm, ctx):\n    steps = 10\n    return steps\n"


def codex_output(code: int, text: str = "") -> str:
    return f"Chunk ID: 3fa9c1\nWall time: 0.1042 seconds\nProcess exited with code {code}\nOriginal token count: 3\nOutput:\n{text}"


class StubProposer:
    """A registry handler with ``propose_edit``: the Responses endpoint drives file edits with it."""

    def __call__(self, request: ChatRequest) -> AssistantTurn:
        return AssistantTurn(content="chat proposals are not used here")

    def propose_edit(self, source: str, brief: str) -> tuple[str, str] | None:
        if "steps = 10" not in source:
            return None
        return source.replace("steps = 10", "steps = 3"), "[step-cap] Cap the loop at 3 steps."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceServer]:
    root = tmp_path_factory.mktemp("tasks")
    task = root / "make-out"
    (task / "solution").mkdir(parents=True)
    (task / "instruction.md").write_text(INSTRUCTION + "\n")
    (task / "solution" / "solve.sh").write_text(SOLVE_SH)
    patcher = pytest.MonkeyPatch()
    real = server_module.build_models
    patcher.setattr(
        server_module, "build_models", lambda tasks: {**real(tasks), "stub-proposer": StubProposer()}
    )
    with ReferenceServer(task_dirs=[root]) as srv:
        yield srv
    patcher.undo()


@pytest.fixture(scope="module")
def client(server: ReferenceServer) -> Any:  # the wire protocol with raw dicts: no typed params
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def call(call_id: str, args: dict[str, Any], name: str = "exec_command") -> dict[str, Any]:
    return {"type": "function_call", "name": name, "arguments": json.dumps(args), "call_id": call_id}


def output(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def post(server: ReferenceServer, body: dict[str, Any]) -> httpx2.Response:
    return httpx2.post(server.base_url + "/responses", json=body, timeout=30)


def function_calls(resp: Any) -> list[Any]:
    return [item for item in resp.output if item.type == "function_call"]


def test_a_task_step_becomes_a_call_of_codex_exec_command(client: Any) -> None:
    resp = client.responses.create(model="reference-oracle", input=[user(INSTRUCTION)], tools=[EXEC_TOOL])
    assert resp.id.startswith("resp_") and resp.status == "completed"
    assert [item.type for item in resp.output] == ["message", "function_call"]
    (fc,) = function_calls(resp)
    assert fc.name == "exec_command" and json.loads(fc.arguments) == {"cmd": STEPS[0], "login": False}
    assert (
        resp.usage is not None
        and resp.usage.total_tokens == resp.usage.input_tokens + resp.usage.output_tokens
    )


def test_other_command_tool_shapes(client: Any) -> None:
    resp = client.responses.create(model="reference-oracle", input=INSTRUCTION, tools=[SHELL_TOOL])
    assert json.loads(function_calls(resp)[0].arguments) == {"command": ["bash", "-lc", STEPS[0]]}
    bash = {
        "type": "function",
        "name": "run",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
    resp = client.responses.create(model="reference-oracle", input=INSTRUCTION, tools=[bash])
    assert json.loads(function_calls(resp)[0].arguments) == {"command": STEPS[0]}
    resp = client.responses.create(
        model="reference-oracle", input=INSTRUCTION
    )  # no tool: the command in prose
    assert [item.type for item in resp.output] == ["message"] and STEPS[0] in resp.output_text


MCP_RUN = {  # what Codex 0.171 sends for an MCP server `replaykit` with a `run(command)` tool
    "type": "namespace",
    "name": "mcp__replaykit",
    "description": "Tools in the mcp__replaykit namespace.",
    "tools": [
        {
            "type": "function",
            "name": "run",
            "strict": False,
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        }
    ],
}
MCP_RESOURCES = {
    "type": "function",
    "name": "read_mcp_resource",
    "parameters": {"type": "object", "properties": {"server": {"type": "string"}, "uri": {"type": "string"}}},
}


def test_a_namespaced_mcp_tool_is_called_with_its_namespace(server: ReferenceServer) -> None:
    body = {"model": "reference-oracle", "input": [user(INSTRUCTION)], "tools": [MCP_RESOURCES, MCP_RUN]}
    (fc,) = [item for item in post(server, body).json()["output"] if item["type"] == "function_call"]
    assert (fc["name"], fc["namespace"], json.loads(fc["arguments"])) == (
        "run",
        "mcp__replaykit",
        {"command": STEPS[0]},
    )
    exec_first = post(server, {**body, "tools": [MCP_RUN, EXEC_TOOL]}).json()["output"][-1]
    assert exec_first["name"] == "exec_command" and "namespace" not in exec_first  # a shell tool first
    mcp_output = [
        {"type": "input_text", "text": "Wall time: 0.0032 seconds\nOutput:"},
        {"type": "input_text", "text": "exit_code: 0\n"},
    ]
    then = {
        **body,
        "input": [
            user(INSTRUCTION),
            {**call("c1", {"command": STEPS[0]}, "run"), "namespace": "mcp__replaykit"},
            {"type": "function_call_output", "call_id": "c1", "output": mcp_output},
        ],
    }
    (fc,) = [item for item in post(server, then).json()["output"] if item["type"] == "function_call"]
    assert json.loads(fc["arguments"]) == {"command": STEPS[1]}  # the MCP output advanced the task


def test_streaming_events_in_order_with_usage(client: Any) -> None:
    events = list(
        client.responses.create(
            model="reference-oracle", input=[user(INSTRUCTION)], tools=[EXEC_TOOL], stream=True
        )
    )
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
    assert types[2:4] == ["response.output_item.added", "response.content_part.added"]
    assert "response.output_text.done" in types and "response.function_call_arguments.done" in types
    assert types.count("response.output_item.done") == 2
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = events[-1].response
    assert text == done.output[0].content[0].text and args == done.output[1].arguments
    assert done.usage is not None and done.usage.output_tokens > 0


def test_the_conversation_advances_on_codex_outputs_and_finishes(client: Any) -> None:
    items: list[dict[str, Any]] = [user(INSTRUCTION)]
    for _n, step in enumerate(STEPS):
        resp = client.responses.create(model="reference-oracle", input=items, tools=[EXEC_TOOL])
        (fc,) = function_calls(resp)
        assert json.loads(fc.arguments)["cmd"] == step
        items += [call(fc.call_id, json.loads(fc.arguments)), output(fc.call_id, codex_output(0))]
    final = client.responses.create(model="reference-oracle", input=items, tools=[EXEC_TOOL])
    assert (
        not function_calls(final) and final.output_text == f"Done. I ran all {len(STEPS)} steps of the task."
    )


def test_a_failed_command_is_noticed_and_retried(client: Any) -> None:
    items = [
        user(INSTRUCTION),
        call("c1", {"cmd": "mkdri -p out"}),
        output("c1", codex_output(127, "bash: mkdri: command not found\n")),
    ]
    resp = client.responses.create(model="reference-oracle", input=items, tools=[EXEC_TOOL])
    assert json.loads(function_calls(resp)[0].arguments)["cmd"] == STEPS[0]
    assert resp.output[0].content[0].text.startswith("That failed")


def test_responses_are_deterministic_across_volatile_ids(server: ReferenceServer) -> None:
    def body(session: str, msg: str) -> dict[str, Any]:
        item = dict(user(INSTRUCTION), id=f"msg_{msg}")
        return {
            "model": "reference-oracle",
            "input": [item],
            "tools": [EXEC_TOOL],
            "stream": True,
            "prompt_cache_key": session,
            "client_metadata": {"session_id": session, "turn_started_at_unix_ms": "1796013019941"},
        }

    a = post(
        server, body("01a22ab7-d304-73a2-ae9f-22dd2cdf8af8", "01a22ab7-d35f-71b2-bb97-555fe2e9dfb2")
    ).content
    b = post(
        server, body("01a22ab7-d304-73a2-ae9f-22dd2cdf8af8", "01a22ab7-d35f-71b2-bb97-555fe2e9dfb2")
    ).content
    c = post(
        server, body("7c9e6679-7425-40de-944b-e07fc1f90ae7", "0f8fad5b-d9cb-469f-a165-70867728950e")
    ).content
    assert a == b == c and b"event: response.completed" in a


def test_errors_are_openai_shaped(server: ReferenceServer) -> None:
    missing = post(server, {"model": "no-such-model", "input": "hi"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
    assert post(server, {"model": "reference-oracle"}).status_code == 400
    chained = post(server, {"model": "reference-oracle", "input": "hi", "previous_response_id": "resp_1"})
    assert chained.status_code == 400 and chained.json()["error"]["param"] == "previous_response_id"


def apply_update(patch: str, source: str) -> str:
    """A minimal applier of the ``*** Update File`` hunks we emit (for checking them)."""
    lines = source.splitlines()
    body = patch.splitlines()[2:-1]
    hunks: list[list[str]] = []
    for line in body:
        if line == "@@":
            hunks.append([])
        else:
            hunks[-1].append(line)
    pos = 0
    for hunk in hunks:
        old = [h[1:] for h in hunk if h[0] in " -"]
        new = [h[1:] for h in hunk if h[0] in " +"]
        at = next(i for i in range(pos, len(lines) + 1) if lines[i : i + len(old)] == old)
        lines[at : at + len(old)] = new
        pos = at + len(new)
    return "\n".join(lines) + "\n"


def test_apply_patch_text_round_trips() -> None:
    old = "".join(f"line {i}\n" for i in range(30))
    new = old.replace("line 3\n", "line three\n").replace("line 25\n", "line 25\nextra\n")
    patch = apply_patch_text("harness.py", old, new)
    assert patch.startswith("*** Begin Patch\n*** Update File: harness.py\n@@\n") and patch.endswith(
        "*** End Patch\n"
    )
    assert patch.count("@@") == 2 and apply_update(patch, old) == new
    assert apply_patch_text("new.py", "", "a\n").splitlines()[1:3] == ["*** Add File: new.py", "+a"]
    assert shell_heredoc("apply_patch", "x\nEOF_PATCH\n").startswith("apply_patch <<'EOF_PATCH_'\n")


def test_a_proposer_reads_patches_and_reports(client: Any) -> None:
    brief = "Improve the harness in harness.py. Previously tried proposals: none."
    items: list[dict[str, Any]] = [user(brief)]
    first = client.responses.create(model="stub-proposer", input=items, tools=[EXEC_TOOL])
    (read,) = function_calls(first)
    assert json.loads(read.arguments)["cmd"] == "cat harness.py"
    items += [call(read.call_id, json.loads(read.arguments)), output(read.call_id, codex_output(0, HARNESS))]
    second = client.responses.create(model="stub-proposer", input=items, tools=[EXEC_TOOL])
    (edit,) = function_calls(second)
    cmd = json.loads(edit.arguments)["cmd"]
    assert cmd.startswith("apply_patch <<'EOF_PATCH'\n*** Begin Patch\n*** Update File: harness.py\n")
    patch = cmd.split("\n", 1)[1].rsplit("\n", 1)[0] + "\n"
    assert apply_update(patch, HARNESS) == HARNESS.replace("steps = 10", "steps = 3")
    items += [
        call(edit.call_id, json.loads(edit.arguments)),
        output(edit.call_id, "Exit code: 0\nOutput:\nSuccess. Updated the following files:\nM harness.py\n"),
    ]
    third = client.responses.create(model="stub-proposer", input=items, tools=[EXEC_TOOL])
    assert not function_calls(third) and third.output_text == "[step-cap] Cap the loop at 3 steps."
    nothing = [
        user(brief),
        call("r", {"cmd": "cat harness.py"}),
        output("r", codex_output(0, "print('x')\n")),
    ]
    assert client.responses.create(
        model="stub-proposer", input=nothing, tools=[EXEC_TOOL]
    ).output_text.startswith("No further proposals")


def test_reference_proposer_is_routed_through_the_registry(client: Any) -> None:
    resp = client.responses.create(
        model="reference-proposer", input=[user("Improve harness.py.")], tools=[EXEC_TOOL]
    )
    assert json.loads(function_calls(resp)[0].arguments)["cmd"] == "cat harness.py"
