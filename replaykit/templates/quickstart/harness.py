"""Quickstart harness: a minimal tool loop around a frozen model.

replaykit calls ``solve(task, env, llm, ctx)``:
- ``task.instruction`` is the task text;
- ``env.run(command)`` runs bash in the task's sandbox and returns an observation
  (``stdout``, ``stderr``, ``exit_code``);
- ``llm`` is a stock ``openai.OpenAI`` client pointed at the configured endpoint;
- ``ctx`` carries the seed, a seeded ``ctx.rng``, a frozen clock ``ctx.now()``,
  the harness params from the config and ``ctx.llm_kwargs()`` (model, temperature,
  a per-call seed and the config's ``model.params``: max_tokens, tool_choice, ...).
"""

import json

SYSTEM_PROMPT = (
    "You are a shell agent. Solve the task with the bash tool, one command at a time. "
    "When the task is complete, reply with the single word Done."
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run one bash command in the task's working directory.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]


def format_observation(obs):
    return f"exit_code: {obs.exit_code}\nstdout:\n{obs.stdout}\nstderr:\n{obs.stderr}"


def solve(task, env, llm, ctx):
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task.instruction},
    ]
    for _ in range(int(ctx.params.get("max_steps", 10))):
        reply = llm.chat.completions.create(messages=messages, tools=TOOLS, **ctx.llm_kwargs())
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content
        messages.append(
            {
                "role": "assistant",
                "content": message.content or "",  # some servers (llama-cpp-python) refuse null
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in message.tool_calls
                ],
            }
        )
        for call in message.tool_calls:
            command = json.loads(call.function.arguments).get("command", "")
            obs = env.run(command)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": format_observation(obs)})
    return None
