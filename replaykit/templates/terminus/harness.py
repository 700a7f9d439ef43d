"""Terminus harness: a Terminus-2-like agent driving one tmux session in the task's container.

Harbor's Terminus-2 (laude-institute/harbor, ``src/harbor/agents/terminus_2/``, Apache-2.0; its
JSON prompt, parse-error, confirmation and output-limit texts are used here as written there)
keeps a tmux session open; each turn the model answers JSON ``{"analysis", "plan", "commands":
[{"keystrokes", "duration"}], "task_complete"}``, every keystroke string is sent with ``tmux
send-keys``, and the new terminal output goes back as the next user message. This harness does
the same through ``env.run`` only, so every keystroke and every capture is a recorded environment
step and a replay needs neither Docker nor tmux; the wait after a command happens inside its
step, so a replay never sleeps it again.

What differs from Terminus-2 (``replaykit/templates/README.md``): a command's wait ends early
when the shell shows its next prompt (a ``PROMPT_COMMAND`` counter), else after its duration;
new output is read from where the last capture's cursor was (tmux's history size and cursor),
not by searching the previous full buffer; no field-order warning, no summarisation or
context unwinding.

``harness.params``: ``max_turns`` (50), ``max_duration`` (60 s, a command's longest wait),
``output_limit`` (10000 bytes to the model), ``capture_bytes`` (50000: the newest part of a
capture kept in the step), ``width``/``height`` (160 × 40), ``install_tmux`` (false: a task
image without tmux is an infrastructure failure naming the task; true: apt-get installs it).
"""

import base64
import hashlib
import json
import re
import shlex
from pathlib import Path

#: Terminus-2's prompt (its ``templates/terminus-json-plain.txt``), formatted with the task's
#: instruction and the terminal's first screen
PROMPT = (Path(__file__).parent / "prompt.txt").read_text(encoding="utf-8")

CONFIRM = (
    "Current terminal state:\n{terminal_output}\n\n"
    "Are you sure you want to mark the task as complete? "
    "This will trigger your solution to be graded and you won't be able to "
    'make any further corrections. If so, include "task_complete": true '
    "in your JSON response again."
)
PARSE_ERROR = "Previous response had parsing errors:\n{feedback}\n\nPlease fix these issues and provide a proper JSON response."
WARNINGS = "Previous response had warnings:\n{feedback}\n\n{terminal_output}"
NO_TMUX = (
    "task {task!r}: its image has no tmux, which the terminus harness drives; build the task FROM "
    "replaykit/base:bookworm (or -python), add `RUN apt-get install -y tmux` to its Dockerfile, or set "
    "harness.params.install_tmux: true (needs the task's network)"
)
SEND_KEYS_MAX = 8000  # a longer keystroke string goes through a paste buffer (tmux's command limit is ~16 KB)
PASTE_CHUNK = 60000  # base64 characters per step of a paste (an argv string must stay under 128 KiB)


# -- the model's answer ------------------------------------------------------------------------


def json_object(text):
    """The first balanced ``{...}`` of ``text`` (quotes and escapes respected) and what surrounds it."""
    start, depth, quoted, escaped = -1, 0, False, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif not quoted and ch == "{":
            start = i if depth == 0 else start
            depth += 1
        elif not quoted and ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                return text[start : i + 1], text[:start].strip(), text[i + 1 :].strip()
    return None, "", ""


def parse_commands(items, warnings):
    """(keystrokes, duration) pairs of the ``commands`` array, or an error line."""
    commands = []
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict):
            return [], f"Command {i} must be an object"
        keys = item.get("keystrokes")
        if not isinstance(keys, str):
            return (
                [],
                f"Command {i} missing required 'keystrokes' field"
                if keys is None
                else f"Command {i} 'keystrokes' must be a string",
            )
        duration = item.get("duration")
        if not isinstance(duration, (int, float)) or isinstance(duration, bool):
            warnings.append(
                f"Command {i}: {'Missing duration field' if duration is None else 'Invalid duration value'}, using default 1.0"
            )
            duration = 1.0
        unknown = sorted(set(item) - {"keystrokes", "duration"})
        if unknown:
            warnings.append(f"Command {i}: Unknown fields: {', '.join(unknown)}")
        if i < len(items) and keys and not keys.endswith("\n"):
            warnings.append(
                f"Command {i} should end with newline when followed by another command. Otherwise the "
                "two commands will be concatenated together on the same line."
            )
        commands.append((keys, float(duration)))
    return commands, ""


def parse_answer(text):
    """``{"commands", "complete", "error", "warnings"}`` of one answer (Terminus-2's JSON parser):
    an answer with an error is tried again after each auto-fix, the first that parses is kept."""
    answer = parse_once(text)
    if not answer["error"]:
        return answer
    for name, fixed in auto_fixes(text, answer["error"]):
        again = parse_once(fixed)
        if not again["error"]:
            again["warnings"].insert(0, f"AUTO-CORRECTED: {name} - please fix this in future responses")
            return again
    return answer


MIXED = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}", re.DOTALL)


def auto_fixes(text, error):
    """Terminus-2's two fixes, in order: the missing closing braces added; a JSON object of mixed text."""
    if any(k in error for k in ("Invalid JSON", "Expecting", "Unterminated", "No valid JSON found")):
        if text.count("{") > text.count("}"):
            yield (
                "Fixed incomplete JSON by adding missing closing brace",
                text + "}" * (text.count("{") - text.count("}")),
            )
    for match in MIXED.findall(text):
        try:
            json.loads(match)
        except json.JSONDecodeError:
            continue
        yield "Extracted JSON from mixed content", match
        return


def parse_once(text):
    found, before, after = json_object(text)
    warnings = [
        w
        for w, on in (
            ("Extra text detected before JSON object", before),
            ("Extra text detected after JSON object", after),
        )
        if on
    ]
    answer = {"commands": [], "complete": False, "error": "", "warnings": warnings}
    if found is None:
        warnings.append("No valid JSON object found")
        answer["error"] = "No valid JSON found in response"
        return answer
    try:
        data = json.loads(found)
    except json.JSONDecodeError as exc:
        shown = f"Content: {found!r}" if len(found) < 200 else f"Content preview: {found[:100]!r}..."
        answer["error"] = f"Invalid JSON: {exc} | {shown}"
        return answer
    missing = [name for name in ("analysis", "plan", "commands") if name not in data]
    if missing:
        answer["error"] = f"Missing required fields: {', '.join(missing)}"
        return answer
    if not isinstance(data["commands"], list):
        answer["error"] = "Field 'commands' must be an array"
        return answer
    complete = data.get("task_complete", False)
    answer["complete"] = (
        complete.lower() in ("true", "1", "yes") if isinstance(complete, str) else bool(complete)
    )
    answer["commands"], error = parse_commands(data["commands"], warnings)
    if error and answer["complete"]:
        warnings.append(error)  # a finished task's bad command is only a warning
    elif error:
        answer["error"] = error
    return answer


def feedback_of(answer):
    lines = [f"ERROR: {answer['error']}"] if answer["error"] else []
    if answer["warnings"]:
        lines.append("WARNINGS: " + "\n".join(f"- {w}" for w in answer["warnings"]))
    return "\n".join(lines)


def limit_output(text, limit):
    """At most ``limit`` bytes: the head and the tail, the middle omitted (as Terminus-2 does)."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    half = limit // 2
    head = data[:half].decode("utf-8", errors="ignore")
    tail = data[-half:].decode("utf-8", errors="ignore")
    omitted = len(data) - len(head.encode("utf-8")) - len(tail.encode("utf-8"))
    return f"{head}\n[... output limited to {limit} bytes; {omitted} interior bytes omitted ...]\n{tail}"


# -- the tmux session, through env.run -----------------------------------------------------------


class Terminal:
    """One tmux session in the task's sandbox; every call is one ``env.run`` step."""

    def __init__(self, env, name, params):
        self.env = env
        self.tmux = f"tmux -L {name}"
        self.target = f"-t {name}"
        self.name = name
        self.width = int(params.get("width", 160))
        self.height = int(params.get("height", 40))
        self.capture_bytes = int(params.get("capture_bytes", 50000))
        self.mark = 0  # the absolute line (history + screen) the cursor was on at the last capture

    def settle(self):
        """Shell text that waits (at most ~1 s) until two captures 20 ms apart are the same."""
        cap = f"{self.tmux} capture-pane -p {self.target}"
        return (
            f'a=$({cap}); for i in $(seq 50); do sleep 0.02; b=$({cap}); [ "$a" = "$b" ] && break; a=$b; done'
        )

    def prompts(self):
        return f"{self.tmux} show-options -gv @rk_prompts 2>/dev/null"

    def start(self):
        """Start the session (its shell counts its prompts in a tmux option); None, or why it cannot."""
        counter = f'rk_prompts=$((rk_prompts+1)); {self.tmux} set-option -g @rk_prompts "$rk_prompts"'
        script = "\n".join(
            [
                "command -v tmux >/dev/null 2>&1 || { echo 'tmux: command not found' >&2; exit 127; }",
                f"export TERM=xterm-256color SHELL=/bin/bash REPLAYKIT_KEEP=1 PROMPT_COMMAND={shlex.quote(counter)}",
                f"{self.tmux} new-session -d -s {self.name} -x {self.width} -y {self.height} 'bash --login' || exit",
                f"{self.tmux} set-option -g history-limit 10000000",
                f'for i in $(seq 250); do [ -n "$({self.prompts()})" ] && break; sleep 0.02; done',
                self.settle(),
            ]
        )
        obs = self.env.run(script, 30)
        return None if obs.exit_code == 0 else (obs.stderr or obs.stdout).strip() or f"exit {obs.exit_code}"

    def send(self, keys, duration):
        """Type ``keys``; wait until the shell shows its next prompt, at most ``duration`` seconds."""
        if len(shlex.quote(keys).encode("utf-8")) > SEND_KEYS_MAX:
            self.paste(keys)
            keys = ""
        lines = [f"n=$({self.prompts()})"]
        if keys:
            lines.append(
                f"{self.tmux} send-keys {self.target} -- {shlex.quote(keys.replace(chr(0), ''))} || exit"
            )
        if duration >= 0.001:  # `timeout 0` would never time out
            wait = f'until [ "$({self.prompts()})" != "$0" ]; do sleep 0.02; done'
            lines.append(f'timeout {duration:.3f} bash -c {shlex.quote(wait)} "$n"')
        lines.append(self.settle())
        self.env.run("\n".join(lines), duration + 30)

    def paste(self, keys):
        """A long keystroke string: written to a file in base64 chunks, then pasted (Terminus-2's way)."""
        payload = base64.b64encode(keys.encode("utf-8")).decode("ascii")
        path = f"/tmp/.{self.name}-paste"
        for offset in range(0, len(payload), PASTE_CHUNK):
            redirect = ">>" if offset else ">"
            self.env.run(
                f"printf %s {payload[offset : offset + PASTE_CHUNK]} | base64 -d {redirect} {path}", 30
            )
        self.env.run(
            f"{self.tmux} load-buffer -b rk {path} && rm -f {path} && {self.tmux} paste-buffer -d -b rk {self.target}",
            30,
        )

    def output(self):
        """What is new since the last capture ("New Terminal Output"), else the screen; None when
        the session has ended."""
        fmt = "#{history_size} #{cursor_y} #{alternate_on}"
        script = "\n".join(
            [
                f"set -- $({self.tmux} display-message -p {self.target} '{fmt}')",
                '[ -n "$2" ] || exit 1',
                f'if [ "$3" = 1 ] || [ $(($1 + $2)) -le {self.mark} ]; then kind=screen; range=""',
                f'else kind=new; range="-S $(({self.mark} - $1)) -E $2"; fi',
                'echo "$1 $2 $kind"',
                f"{self.tmux} capture-pane -p {self.target} $range | tail -c {self.capture_bytes}",
            ]
        )
        obs = self.env.run(script, 30)
        head, _, body = obs.stdout.partition("\n")
        fields = head.split()
        if obs.exit_code != 0 or len(fields) != 3 or not all(f.isdigit() for f in fields[:2]):
            return None
        self.mark = int(fields[0]) + int(fields[1])
        body = "\n".join(line.rstrip() for line in body.rstrip().splitlines())
        title = "New Terminal Output" if fields[2] == "new" and body.strip() else "Current Terminal Screen"
        return f"{title}:\n{body}"

    def close(self):
        self.env.run(f"{self.tmux} kill-server 2>/dev/null; exit 0", 30)


def session_name(task, ctx):
    """The tmux socket and session: one per episode (its task and seed), the same in a replay."""
    return "rk-" + hashlib.sha256(f"{task.id}\0{ctx.seed}".encode()).hexdigest()[:10]


def open_terminal(task, env, ctx):
    """The started session; None (the episode an infrastructure failure, one line) when it cannot start."""
    term = Terminal(env, session_name(task, ctx), ctx.params)
    why = term.start()
    if why and "tmux: command not found" in why and ctx.params.get("install_tmux"):
        env.run(
            "DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq tmux >/dev/null", 600
        )
        why = term.start()
    if why is None:
        return term
    message = (
        NO_TMUX.format(task=task.id)
        if "tmux: command not found" in why
        else f"task {task.id!r}: tmux did not start: {why}"
    )
    unusable = getattr(env, "unusable", None)  # replaykit's env: the episode becomes infra, not graded
    if unusable is None:
        raise RuntimeError(message)
    unusable(message)
    return None


# -- the loop ------------------------------------------------------------------------------------


def observe(term, answer, pending, limit):
    """The next user message after an answer's commands ran, and whether completion is pending."""
    screen = term.output()
    if screen is None:
        return None, pending
    output = limit_output(screen, limit)
    if answer["complete"]:
        return (output if pending else CONFIRM.format(terminal_output=output)), True
    if answer["warnings"]:
        return WARNINGS.format(feedback=feedback_of(answer), terminal_output=output), False
    return output, False


def solve(task, env, llm, ctx):
    params = ctx.params
    limit = int(params.get("output_limit", 10000))
    term = open_terminal(task, env, ctx)
    if term is None:
        return None
    state = term.output() or ""
    messages = [
        {
            "role": "user",
            "content": PROMPT.format(instruction=task.instruction, terminal_state=limit_output(state, limit)),
        }
    ]
    pending = False  # the model said task_complete once: the next one is accepted
    confirmed = False
    for _ in range(int(params.get("max_turns", 50))):
        reply = llm.chat.completions.create(messages=messages, **ctx.llm_kwargs())
        text = reply.choices[0].message.content or ""
        messages.append({"role": "assistant", "content": text})
        answer = parse_answer(text)
        if answer["error"]:
            messages.append({"role": "user", "content": PARSE_ERROR.format(feedback=feedback_of(answer))})
            continue
        for keys, duration in answer["commands"]:
            term.send(keys, max(0.0, min(duration, float(params.get("max_duration", 60)))))
        confirmed = answer["complete"] and pending
        observation, pending = observe(term, answer, pending, limit)
        if confirmed or observation is None:  # confirmed twice, or the shell exited
            break
        messages.append({"role": "user", "content": observation})
    term.close()
    return "task complete" if confirmed else None
