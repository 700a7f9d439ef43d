"""Shell-text harness: an agent loop for a model that cannot call tools.

Small instruct models (SmolLM2-135M-Instruct) have chat templates that render no tools, so a
forced tool call never reaches them and a ``tool`` message is never shown to them. This harness
speaks plain text instead: the model answers with a shell command in a ```bash block, the harness
takes the command out of its reply, runs it in the task's sandbox and sends what it printed back
as the next user message (a user message is rendered by every chat template, so the model sees
what its command did). The episode ends when the model says DONE, gives no command, or after
``max_steps`` commands.

replaykit calls ``solve(task, env, llm, ctx)``; ``ctx.llm_kwargs()`` carries the model, the
temperature, a per-call seed and the config's ``model.params`` (max_tokens, ...).
"""

import re

SYSTEM_PROMPT = (
    "You are a shell agent in a Linux container. Reply with exactly one short bash command in a "
    "```bash block and nothing else. Examples:\n"
    "Task: Create a directory named src.\n```bash\nmkdir src\n```\n"
    "Task: Write hi into a.txt.\n```bash\necho hi > a.txt\n```\n"
    "Task: Move a.txt to b.txt.\n```bash\nmv a.txt b.txt\n```\n"
    "After you see its output, reply with the next command, or with DONE when the task is complete."
)

FENCE = re.compile(r"```[A-Za-z]*\n(.*?)(?:```|\Z)", re.S)


def extract_command(text):
    """The command of a reply: its first fenced block (else its first line), comments dropped."""
    found = FENCE.search(text)
    body = found.group(1) if found else text.strip().split("\n", 1)[0]
    lines = [line for line in body.splitlines() if line.strip() and not line.strip().startswith("#")]
    return "\n".join(lines).strip()


def format_observation(obs):
    return f"exit_code: {obs.exit_code}\nstdout:\n{obs.stdout}\nstderr:\n{obs.stderr}"


def next_prompt(obs):
    return (
        f"The command ran.\n{format_observation(obs)}\n"
        "Reply with the next command in a ```bash block, or DONE if the task is complete."
    )


def solve(task, env, llm, ctx):
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task.instruction},
    ]
    for _ in range(int(ctx.params.get("max_steps", 5))):
        reply = llm.chat.completions.create(messages=messages, **ctx.llm_kwargs())
        text = reply.choices[0].message.content or ""
        messages.append({"role": "assistant", "content": text})
        command = extract_command(text)
        if "DONE" in text or not command:
            return text
        obs = env.run(command)
        messages.append({"role": "user", "content": next_prompt(obs)})
    return None
