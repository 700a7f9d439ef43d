"""Rich rendering for the CLI: tables to stdout, progress and errors to stderr.

Import the package (``from replaykit import render``) and call ``render.run_table(result)``
and friends; each module holds one concern:

- ``console``: the stdout/stderr consoles, ``line``, ``show_table``, ``short_ids``
- ``progress_bar``: the progress callback drawn on a terminal
- ``runs``: runs, replays, divergences, compares, the document list
- ``cassettes``: cassettes, bundles, store checks, vcr and Harbor job exports, proxy sessions, removals
- ``training``: trainings, their replay, verdict audits
- ``transfer``: a training's harness on other panels and models (trained vs untrained)
- ``environments``: task oracle checks, certification, base images, doctor, plugins
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replaykit.render import console
    from replaykit.render.cassettes import (
        bundle_report,
        cassette_doc,
        cassette_rows,
        damaged,
        fork_report,
        harbor_jobs,
        net_rows,
        proxy_report,
        pull_report,
        push_report,
        removal_report,
        store_check,
        vcr_export,
    )
    from replaykit.render.console import err, line, make_console, short_ids, show_table, wrapped
    from replaykit.render.environments import (
        base_image,
        certify_report,
        doctor_report,
        plugins_report,
        tasks_check,
    )
    from replaykit.render.progress_bar import progress
    from replaykit.render.runs import (
        compare_table,
        divergence,
        paid_line,
        regrade_report,
        replay_report,
        reproduction,
        run_rows,
        run_table,
    )
    from replaykit.render.training import (
        audit_report,
        noise_table,
        panels_table,
        training_replay,
        training_table,
    )
    from replaykit.render.transfer import transfer_table

#: name -> the module defining it, imported on first use (a listing command loads only its own renderers)
_EXPORTS: dict[str, str] = {
    "audit_report": "replaykit.render.training",
    "base_image": "replaykit.render.environments",
    "bundle_report": "replaykit.render.cassettes",
    "cassette_doc": "replaykit.render.cassettes",
    "cassette_rows": "replaykit.render.cassettes",
    "damaged": "replaykit.render.cassettes",
    "certify_report": "replaykit.render.environments",
    "compare_table": "replaykit.render.runs",
    "console": "replaykit.render.console",
    "divergence": "replaykit.render.runs",
    "doctor_report": "replaykit.render.environments",
    "err": "replaykit.render.console",
    "fork_report": "replaykit.render.cassettes",
    "harbor_jobs": "replaykit.render.cassettes",
    "line": "replaykit.render.console",
    "make_console": "replaykit.render.console",
    "net_rows": "replaykit.render.cassettes",
    "noise_table": "replaykit.render.training",
    "paid_line": "replaykit.render.runs",
    "panels_table": "replaykit.render.training",
    "plugins_report": "replaykit.render.environments",
    "progress": "replaykit.render.progress_bar",
    "proxy_report": "replaykit.render.cassettes",
    "pull_report": "replaykit.render.cassettes",
    "push_report": "replaykit.render.cassettes",
    "removal_report": "replaykit.render.cassettes",
    "regrade_report": "replaykit.render.runs",
    "replay_report": "replaykit.render.runs",
    "reproduction": "replaykit.render.runs",
    "run_rows": "replaykit.render.runs",
    "run_table": "replaykit.render.runs",
    "short_ids": "replaykit.render.console",
    "show_table": "replaykit.render.console",
    "store_check": "replaykit.render.cassettes",
    "tasks_check": "replaykit.render.environments",
    "training_replay": "replaykit.render.training",
    "training_table": "replaykit.render.training",
    "transfer_table": "replaykit.render.transfer",
    "vcr_export": "replaykit.render.cassettes",
    "wrapped": "replaykit.render.console",
}

__all__ = [
    "audit_report",
    "base_image",
    "bundle_report",
    "cassette_doc",
    "cassette_rows",
    "certify_report",
    "compare_table",
    "console",
    "damaged",
    "divergence",
    "doctor_report",
    "err",
    "fork_report",
    "harbor_jobs",
    "line",
    "make_console",
    "net_rows",
    "noise_table",
    "paid_line",
    "panels_table",
    "plugins_report",
    "progress",
    "proxy_report",
    "pull_report",
    "push_report",
    "regrade_report",
    "removal_report",
    "replay_report",
    "reproduction",
    "run_rows",
    "run_table",
    "short_ids",
    "show_table",
    "store_check",
    "tasks_check",
    "training_replay",
    "training_table",
    "transfer_table",
    "vcr_export",
    "wrapped",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'replaykit.render' has no attribute {name!r}")
    value = import_module(module) if module == f"{__name__}.{name}" else getattr(import_module(module), name)
    globals()[name] = value  # once: later uses are plain attribute reads
    return value
