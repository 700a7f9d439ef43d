"""Generated documentation: the config reference and JSON Schema from the pydantic
models, and stubs for CLI commands missing from ``docs/cli.md``.

    python -m replaykit.commands.docgen          # rewrite docs/config.md + docs/replaykit.schema.json,
                                                 # append a stub for every undocumented command or option

``tests/test_docs.py`` fails when these files are not current, or when a command or
option of the typer app is missing from ``docs/cli.md``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent.parent.parent / "docs"

#: What each config field means, where the model itself says nothing (``Field(description=…)``
#: wins). A new field without either fails tests/test_docs.py.
NOTES: dict[str, str] = {
    "name": "Name of the run or training (shown by `runs`; part of a training's identity).",
    "store": "The store: a folder (an SQLite index + content-addressed blobs; also `sqlite:PATH`) or a `postgresql://user@host/db` URL. Relative paths resolve against the config file's folder.",
    "harness": "The harness repository: a git repo whose committed `entry` file defines `solve(task, env, llm, ctx)`.",
    "harness.repo": "Path of the harness git repo. Must be committed and clean; replaykit refuses a dirty tree.",
    "harness.template": "If `repo` does not exist, create it from this template (`replaykit/templates/`); `null` for your own repo.",
    "harness.branch": "The baseline branch: training only ever fast-forwards it to accepted candidates.",
    "harness.entry": "The file that defines `solve()` (and what `train.patch_surface` usually names).",
    "harness.params": "Free-form values the harness reads from `ctx.params` (e.g. `max_steps`).",
    "harness.agent": "A named agent (`mini-swe-agent`, ...; `replaykit plugins` lists them) run as the harness: its shipped template becomes the repo `.replaykit/agents/NAME-DIGEST` beside the config (`repo`, `template` and `entry` are then its own); `run --agent NAME` sets it.",
    "model": "The task model: any OpenAI-compatible endpoint, or `builtin` (the reference simulator).",
    "model.name": "Model name sent in every request (`reference-weak`, `reference-strong`, or your endpoint's model).",
    "model.base_url": "`builtin`, or an OpenAI-compatible base URL ending in `/v1` (OpenAI, vLLM, SGLang, llama.cpp, Ollama).",
    "model.revision": "A declared model revision, part of the cassette key: bump it when the weights behind `name` change.",
    "model.api_key_env": "Environment variable holding the API key; the key is sent, never stored.",
    "model.temperature": "Sampling temperature sent with every call (keep 0 for reproducible recordings).",
    "model.timeout_s": "Total deadline of one model call in seconds, connect to last byte (a trickling answer "
    "ends there); a call past it is an infrastructure failure, never a result. It also bounds the "
    "measurement of a real engine's identity before a run (at most 10 s).",
    "model.max_retries": "Retries, by the client, of a call that was refused, cut, unparsable or past its "
    "deadline; a retry that gets a complete answer leaves no trace in the cassette.",
    "model.params": "Request parameters sent with every call (`ctx.llm_kwargs()`) and part of the cassette key; unset ones are not sent.",
    "model.params.max_tokens": "Cap on each reply's tokens (without it, some servers decode to the context size).",
    "model.params.tool_choice": "`auto`, `none`, `required` or `{type: function, function: {name: N}}`; llama-cpp-python's function-calling format uses tools only when this is sent.",
    "model.params.top_p": "Nucleus sampling (0 < p ≤ 1).",
    "model.params.seed": "One seed for every call, instead of the per-call seed derived from (run seed, task, call).",
    "model.params.stop": "Up to 4 stop sequences.",
    "model.params.presence_penalty": "Presence penalty (-2 to 2).",
    "model.params.frequency_penalty": "Frequency penalty (-2 to 2).",
    "model.params.parallel_tool_calls": "Allow several tool calls in one reply (where the endpoint supports it).",
    "model.accept_engine_change": "Reuse cassettes recorded under another engine identity (what the endpoint reports: context size, model file, chat template, version); `--accept-engine-change` sets it.",
    "model.require_deterministic": "Refuse to record when the last saved probe (`replaykit probe --save`) of this endpoint, model and engine identity at this temperature was not deterministic (default: warn).",
    "model.reuse": "`prefix`: an episode recorded under another harness SHA for the same task, seed, model, config and engine identity serves its answers while the new episode's requests are the same and its (really executed) environment reproduces the observations; at the first difference the episode goes live. `none`: every call reaches the endpoint. Unset: `prefix` on a deterministic engine (`builtin`, or a saved probe says so), else `none` (reuse there is a shared sample: common random numbers). `--reuse` sets it.",
    "model.pricing": "Prices by model identity (a model's `name`, or `name@revision`): `{input_per_mtok, output_per_mtok, cached_input_per_mtok}` in US dollars per million tokens. A Harbor job (`run --jobs-dir`, `cassettes export --format harbor --config CFG`) reports each trial's `cost_usd` from it; without a price for the run's model the cost is absent. Never part of a key.",
    "model.pricing.*.input_per_mtok": "US dollars per million input (prompt) tokens.",
    "model.pricing.*.output_per_mtok": "US dollars per million output (completion) tokens.",
    "model.pricing.*.cached_input_per_mtok": "US dollars per million cached input tokens (default: the input price).",
    "model.params.extra_body": "Merged into each request body as is, e.g. llama.cpp's `{cache_prompt: false}`.",
    "panel": "The tasks × seeds a harness is measured on (one episode each).",
    "panel.tasks": "Task folders (Harbor layout) or globs, relative to the config file.",
    "panel.seeds": "Seeds; each gives the harness a seeded `ctx.rng` and per-call seeds. A list, or "
    "`{adaptive: {min: 2, max: 8}}`: every run measures each task on seeds `start` .. `start+min-1` (`start` "
    "defaults to 0; `1 <= min <= max <= 64`), and a training's verdict measures one more seed at a time, on both sides, only for the tasks whose baseline "
    "and candidate disagree while the paired decision is open (docs/training.md, adaptive seeds).",
    "env": "Where actions run.",
    "env.kind": "`local` (temporary folders) or `docker` (one container per episode); other kinds register in `replaykit.envs`.",
    "env.timeout_sec": "Timeout of one action.",
    "env.max_output_bytes": "Output kept per action stream (the rest is cut, and the cut is recorded).",
    "env.snapshot": "`digest`: a state digest per environment action; `full`: also a snapshot of the workdir (needed to inspect states).",
    "record": "What is kept, and how requests are compared.",
    "record.secrets": "Names of environment variables whose values are scrubbed (`<secret:NAME>`) before anything is stored.",
    "record.rules": "Normalisation rules applied to requests before matching (`uuids`, `timestamps`, `codex-session`, …).",
    "executor": "How episodes run: in this process, a local fork pool, or Ray.",
    "executor.kind": "`local` (this machine), `ray` (a Ray cluster), or a kind registered in `replaykit.executors`.",
    "limits": "Limits the framework enforces on every episode, whatever the harness does (an action or model call past one is refused; the episode records it and gets its outcome); part of the config digest once set.",
    "limits.max_steps": "Environment actions per episode (past it: outcome `hit_step_cap`).",
    "limits.episode_timeout_s": "Seconds the harness may run per episode (default: the task's agent timeout, scaled by `env.timeout_multiplier` / `env.agent_timeout_multiplier`; past it: `hit_timeout`); no action runs past it.",
    "limits.max_tokens": "Tokens the endpoint reports, summed over the episode (past it the next call is refused: `hit_step_cap`).",
    "train": "Training (only `replaykit train` reads it).",
    "train.epochs": "Epochs when `--epochs` is not given.",
    "train.seed": "Seed of the proposer's calls.",
    "train.patch_surface": "Globs of the files a candidate may change; a proposal touching others is skipped.",
    "train.estimator": "Who proposes candidates: `{kind: agentic, backend: {kind: openai|codex, model, base_url}}` or "
    "`{kind: patch_queue, diffs: [file.diff, …], descriptions: […]}` (hand-written diffs, applied in order).",
    "train.criterion": "How a candidate is judged: `{name: strict_pareto|mean_reward|paired_test|…, …params}`.",
    "train.optimizer": "What a verdict does: `{name: greedy_monotonic|margin_greedy|pareto_frontier, …params}`.",
    "train.error_budget": "One α spent across the planned `train.epochs` by a criterion that tests at a level (`paired_test`): "
    "each epoch gets α / epochs, and an epoch that accepts (or is skipped) passes its level on; the chance that any accepted change "
    "does nothing stays at most α (docs/training.md).",
    "train.certify": "`every_epoch`: each epoch re-executes the baseline's episodes in a fresh environment (a certificate "
    "already stored for those very episodes is reused) and its verdict leaves out the tasks certified forked; "
    "`never`: a verdict excludes only the forked tasks already certified (`replaykit certify RUN`).",
}


def _models() -> list[tuple[str, Any]]:
    from replaykit.episodes.config import RunConfig
    from replaykit.train.config import TrainConfig

    return [("", RunConfig), ("train", TrainConfig)]


def _type_name(annotation: Any) -> str:
    """``list[int]``, ``str | None``, ``"local" | "ray"`` (constraints left to the schema)."""
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join("None" if a is type(None) else _type_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(a) for a in args)}]"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def _default(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.is_required():
        return "required"
    else:
        value = field.default
    return "`" + json.dumps(value, default=str) + "`"


def config_fields() -> list[tuple[str, str, str, str]]:
    """(dotted name, type, default, meaning) of every config field, sections first."""
    from pydantic import BaseModel

    rows: list[tuple[str, str, str, str]] = []

    def walk(prefix: str, model: type[BaseModel]) -> None:
        for name, field in model.model_fields.items():
            if field.exclude:
                continue
            dotted = f"{prefix}.{name}" if prefix else name
            annotation = field.annotation
            nested = (
                annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
            )
            if dotted == "train":
                nested = None  # documented from TrainConfig below
            meaning = field.description or NOTES.get(dotted, "")
            rows.append(
                (
                    dotted,
                    "section" if nested else _type_name(annotation),
                    "" if nested else _default(field),
                    meaning,
                )
            )
            if nested is not None:
                walk(dotted, nested)
            if dotted == "env":
                kind_rows(rows)
            if dotted == "executor":
                kind_rows(rows, "executor", _executor_settings())

    for prefix, model in _models():
        walk(prefix, model)
    return rows


def _kind_settings() -> list[tuple[str, Any]]:
    """(kind, settings model) of every built-in environment kind with keys of its own."""
    from replaykit.envs.registry import ENVIRONMENTS

    kinds = [(name, ENVIRONMENTS.get(name).settings) for name in ("local", "docker")]
    return [(name, model) for name, model in kinds if model.model_fields]


def _executor_settings() -> list[tuple[str, Any]]:
    """(kind, settings model) of every built-in executor kind with keys of its own."""
    from replaykit.execution.registry import EXECUTORS

    kinds = [(name, EXECUTORS.get(name).settings) for name in ("local", "ray")]
    return [(name, model) for name, model in kinds if model.model_fields]


def kind_rows(
    rows: list[tuple[str, str, str, str]], section: str = "env", kinds: list[tuple[str, Any]] | None = None
) -> None:
    """The keys a built-in kind adds to ``section`` (documented as ``SECTION.KEY``, naming the kind)."""
    for kind, model in _kind_settings() if kinds is None else kinds:
        for name, field in model.model_fields.items():
            meaning = field.description or NOTES.get(f"{section}.{name}", "")
            rows.append(
                (
                    f"{section}.{name}",
                    _type_name(field.annotation),
                    _default(field),
                    f"Kind `{kind}` only. {meaning}",
                )
            )


def config_markdown() -> str:
    lines = [
        "# Config reference",
        "",
        "Generated from the pydantic models (`replaykit/episodes/config.py`, `replaykit/envs/section.py`, `replaykit/models/config.py`, `replaykit/execution/config.py`, `replaykit/train/config.py`) by",
        "`python -m replaykit.commands.docgen`; do not edit by hand. Editors can validate a config",
        "against [`replaykit.schema.json`](replaykit.schema.json) (e.g. a `# yaml-language-server: $schema=…` line).",
        "Unknown keys are errors. Relative paths resolve against the config file's folder.",
        "The `env` section holds the keys every environment kind shares; any other `env` key belongs",
        "to the kind (`env.kind`), which validates it with its own model (`EnvKind.settings`); so do",
        "the `executor` section's keys beside `executor.kind` (`ExecutorKind.settings`). A key of",
        "another kind is refused, naming the kind that has it.",
        "",
        "| key | type | default | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for dotted, type_, default, meaning in config_fields():
        lines.append(
            f"| `{dotted}` | {type_.replace('|', '&#124;')} | {default.replace('|', '&#124;')} | {meaning.replace('|', '&#124;')} |"
        )
    return "\n".join(lines) + "\n"


def config_schema() -> dict[str, Any]:
    from replaykit.episodes.config import RunConfig
    from replaykit.train.config import TrainConfig

    schema = RunConfig.model_json_schema()
    env = schema["$defs"]["EnvConfig"]
    for _kind, model in _kind_settings():  # a plugin kind's keys stay allowed (additionalProperties)
        env["properties"].update(model.model_json_schema()["properties"])
    executor = schema["$defs"]["ExecutorConfig"]
    for _kind, model in _executor_settings():
        executor["properties"].update(model.model_json_schema()["properties"])
    schema["properties"]["train"] = {
        "anyOf": [TrainConfig.model_json_schema(), {"type": "null"}],
        "default": None,
    }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "replaykit run/training config"
    return schema


def schema_text() -> str:
    return json.dumps(config_schema(), indent=2, sort_keys=True) + "\n"


def command_paths() -> list[tuple[str, Any]]:
    """``("replaykit run", click command)`` for every leaf command of the typer app."""
    import typer

    from replaykit.cli import app
    from replaykit.commands.shell import polish

    found: list[tuple[str, Any]] = []

    def walk(path: str, command: Any) -> None:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in sorted(subs.items()):
                walk(f"{path} {name}", sub)
        else:
            found.append((path, command))

    walk("replaykit", polish(typer.main.get_command(app)))
    return found


def options_of(command: Any) -> list[str]:
    return [
        next((o for o in p.opts if o.startswith("--")), p.opts[0])
        for p in command.params
        if p.param_type_name == "option"
    ]


def cli_sections(text: str) -> dict[str, str]:
    """``docs/cli.md`` split at its ``## replaykit …`` headings."""
    sections: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("## replaykit"):
            current = line[3:].strip().strip("`")
            sections[current] = ""
        elif current is not None:
            sections[current] += line + "\n"
    return sections


def cli_stub(path: str, command: Any) -> str:
    lines = [f"## {path}", "", (command.help or "").strip().splitlines()[0] if command.help else "", ""]
    for p in command.params:
        if p.param_type_name == "argument":
            lines.append(f"- `{(p.metavar or p.name or '').upper()}`: {p.help or ''}")
    for p in command.params:
        if p.param_type_name == "option":
            names = ", ".join(f"`{o}`" for o in p.opts)
            lines.append(f"- {names}: {p.help or ''}")
    return "\n".join(lines) + "\n"


def add_missing_options(text: str, path: str, command: Any) -> str:
    """Append a line for each option of ``command`` its section does not name yet."""
    head = f"## {path}\n"
    start = text.index(head) + len(head)
    end = text.find("\n## ", start)
    end = len(text) if end < 0 else end + 1
    section = text[start:end]
    lines = [
        f"- {', '.join(f'`{o}`' for o in p.opts)}: {p.help or ''}\n"
        for p in command.params
        if p.param_type_name == "option"
        and not any(f"`{o}`" in section for o in ([o for o in p.opts if o.startswith("--")] or p.opts))
    ]
    if not lines:
        return text
    body = section.rstrip("\n") + "\n" + "".join(lines) + ("\n" if end < len(text) else "")
    return text[:start] + body + text[end:]


def main() -> None:
    DOCS.mkdir(exist_ok=True)
    (DOCS / "config.md").write_text(config_markdown())
    (DOCS / "replaykit.schema.json").write_text(schema_text())
    cli = DOCS / "cli.md"
    text = cli.read_text() if cli.exists() else "# Command reference\n"
    have = cli_sections(text)
    for path, cmd in command_paths():
        if path in have:
            text = add_missing_options(text, path, cmd)
    cli.write_text(text)
    missing = [cli_stub(path, cmd) for path, cmd in command_paths() if path not in have]
    if missing:
        cli.write_text(text.rstrip("\n") + "\n\n" + "\n".join(missing))
    sys.stdout.write(
        f"wrote docs/config.md, docs/replaykit.schema.json; {len(missing)} command stub(s) added to docs/cli.md\n"
    )


if __name__ == "__main__":
    main()
