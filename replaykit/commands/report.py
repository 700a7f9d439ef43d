"""CLI commands of the report layer: ``report``, ``probe``, ``cassettes diff``,
``cassettes show --transcript``, ``cassettes export --format inspect``.

Each parses its options, calls one library function, prints JSON or renders.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from replaykit.commands.options import ConfigStoreOpt, JsonOpt, OutputCapOpt, StoreOpt, emit_json, open_store

if TYPE_CHECKING:
    from replaykit.cassette.backend import BrowseStore, RunStore, StoreBackend


def existing_store(
    store: Optional[str], existing: bool = True, config: Optional[Path] = None
) -> StoreBackend:
    """The store (see ``options.open_store``); a reading command never creates one and
    stops at once when it is missing."""
    from replaykit.core.errors import StoreError

    st = open_store(store, readonly=existing, config=config)  # reading never writes
    if existing and not st.exists():
        raise StoreError(f"no store at {st.location}; pass --store or set REPLAYKIT_STORE")
    return st


def show_transcript(store: RunStore, cassette_id: str, as_json: bool, cap: int | None = None) -> None:
    """``cassettes show ID --transcript`` (each output cut to ``cap`` bytes; None: in full)."""
    from replaykit.report import terminal
    from replaykit.report.transcript import show_transcript as build

    doc = build(store, cassette_id, cap)
    emit_json(doc) if as_json else terminal.transcript(doc)


def cassettes_diff(
    a: str = typer.Argument(
        ...,
        help="First cassette id (e.g. the baseline's episode), or a verdict id. A unique prefix is enough.",
    ),
    b: Optional[str] = typer.Argument(
        None,
        help="Second cassette id (e.g. the candidate's episode on the same task and seed); none with a verdict.",
    ),
    unit: Optional[str] = typer.Option(
        None, "--unit", help="With a verdict: only this TASK#SEED (default: every new solve and regression)."
    ),
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Align two episodes call by call and step by step; show the first point where they part.

    Given a verdict instead, diff the baseline and candidate episodes of each task that moved."""
    from replaykit.report import terminal
    from replaykit.report.diff import diff_cassettes, diff_verdict

    st = existing_store(store, config=config)
    if b is None:
        report = diff_verdict(st, a, unit)
        emit_json(report) if as_json else terminal.verdict_diff(report)
        return
    if unit is not None:
        raise typer.BadParameter(
            "--unit goes with a verdict id, not with two cassette ids", param_hint="--unit"
        )
    doc = diff_cassettes(st, a, b)
    emit_json(doc) if as_json else terminal.episode_diff(doc)


def report(
    report_id: str = typer.Argument(
        ..., help="A training, run, verdict, compare or probe id (a unique prefix is enough)."
    ),
    output: Path = typer.Option(Path("report.html"), "-o", "--output", help="The HTML file to write."),
    png: Optional[Path] = typer.Option(None, "--png", help="Also write each chart as PNG into this folder."),
    output_cap: int = OutputCapOpt,
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Write one self-contained offline HTML report (curve, verdicts, diffs, grids, transcripts)."""
    from replaykit.report.html import write_report

    summary = write_report(existing_store(store, config=config), report_id, output, png, cap=output_cap)
    if as_json:
        emit_json(summary)
        return
    from replaykit.report import terminal

    terminal._print(
        f"wrote {summary['kind']} report {summary['id']} to {summary['path']} ({summary['bytes']} bytes): "
        f"{summary['runs']} run(s), {summary['transcripts']} transcript(s), {summary['diffs']} diff(s)"
        + (f"; charts as PNG in {png}" if png else "")
    )


def probe(
    base_url: Optional[str] = typer.Option(
        None, "--base-url", help="OpenAI-compatible base URL (…/v1), or builtin (the reference server)."
    ),
    model: Optional[str] = typer.Option(None, "--model", help="Model name to probe."),
    config: Optional[Path] = typer.Option(
        None,
        "--config",
        help="Take base URL, model, temperature, key variable and model.params from this run config.",
    ),
    n: int = typer.Option(8, "-n", min=1, max=10_000, help="Requests per phase (serial, then concurrent)."),
    concurrency: Optional[int] = typer.Option(
        None,
        "--concurrency",
        min=1,
        max=1024,
        help="Concurrent clients in the second phase (default: 4, or -n when smaller).",
    ),
    temperature: Optional[float] = typer.Option(
        None,
        "--temperature",
        min=0.0,
        max=2.0,
        help="Temperature sent with every request (default: the config's, else 0).",
    ),
    seed: int = typer.Option(0, "--seed", min=0, max=2**63 - 1, help="Seed sent with every request."),
    max_tokens: Optional[int] = typer.Option(
        None,
        "--max-tokens",
        min=1,
        help="Cap on each reply's tokens (default: the config's model.params.max_tokens).",
    ),
    prompt: Optional[str] = typer.Option(
        None, "--prompt", help="The user message (default: a short fixed question)."
    ),
    api_key_env: Optional[str] = typer.Option(
        None, "--api-key-env", help="Env var holding the key (sent, never stored; default OPENAI_API_KEY)."
    ),
    save: bool = typer.Option(False, "--save", help="Keep the result in the store (reports show it)."),
    store: Optional[str] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Send the same request N times serially and concurrently: is the endpoint deterministic?"""
    from replaykit.core.progress import ProgressData, ProgressEvent
    from replaykit.models.probe import DEFAULT_PROMPT, save_probe
    from replaykit.models.probe import probe as run_probe
    from replaykit.render.console import err

    if config is not None:
        from replaykit.episodes.config import load_config

        cfg = load_config(config).model
        base_url, model = base_url or cfg.base_url, model or cfg.name
        temperature = cfg.temperature if temperature is None else temperature
        api_key_env = cfg.api_key_env if api_key_env is None else api_key_env
        params = cfg.params.sent()
    else:
        params = {}
    if not base_url or not model:
        raise typer.BadParameter("give --base-url and --model, or --config", param_hint="--base-url/--model")

    def note(event: ProgressEvent, data: ProgressData) -> None:
        if not as_json and event == "note":
            err(str(data.get("message", "")))

    result = run_probe(
        base_url,
        model,
        n,
        min(4, n) if concurrency is None else concurrency,
        0.0 if temperature is None else temperature,
        seed,
        prompt or DEFAULT_PROMPT,
        "OPENAI_API_KEY" if api_key_env is None else api_key_env,
        progress=note,
        max_tokens=max_tokens,
        params=params,
    )
    if save:
        save_probe(existing_store(store, existing=False, config=config), result)
    result["saved"] = save
    if as_json:
        emit_json(result)
    else:
        from replaykit.report import terminal

        terminal.probe(result)
    if result["verdict"] != "deterministic":
        raise typer.Exit(1)


def export_inspect(store: BrowseStore, root_id: str, folder: Path, as_json: bool) -> None:
    """``cassettes export ID --format inspect -o DIR``."""
    from replaykit.report import terminal
    from replaykit.report.inspect_log import export_inspect as write_logs

    report = write_logs(store, root_id, folder)
    if as_json:
        emit_json(report)
        return
    for f in report["files"]:
        terminal._print(f"{f['path']}: {f['samples']} sample(s)")
    terminal._print(
        f"wrote {len(report['files'])} Inspect eval log(s); browse them with `inspect view --log-dir {folder}`"
    )
