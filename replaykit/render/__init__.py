"""Rich rendering for the CLI: tables to stdout, progress and errors to stderr.

Import the package (``from replaykit import render``) and call ``render.run_table(doc)``
and friends; each module holds one concern:

- ``console``: the stdout/stderr consoles, ``line``, ``show_table``, ``short_ids``
- ``progress_bar``: the progress callback drawn on a terminal
- ``runs``: runs, replays, divergences, compares, the document list
- ``cassettes``: cassettes, bundles, store checks, vcr and Harbor job exports, proxy sessions, removals
- ``training``: trainings, their replay, verdict audits
- ``environments``: task oracle checks, certification, base images, doctor, plugins
"""

from __future__ import annotations

from replaykit.render import console
from replaykit.render.cassettes import (
    bundle_report,
    cassette_doc,
    cassette_rows,
    fork_report,
    harbor_jobs,
    net_rows,
    proxy_report,
    removal_report,
    store_check,
    vcr_export,
)
from replaykit.render.console import err, line, make_console, short_ids, show_table
from replaykit.render.environments import (
    base_image,
    certify_report,
    doctor_report,
    plugins_report,
    tasks_check,
)
from replaykit.render.progress_bar import progress
from replaykit.render.runs import compare_table, divergence, paid_line, replay_report, run_rows, run_table
from replaykit.render.training import audit_report, noise_table, training_replay, training_table

__all__ = [
    "audit_report",
    "base_image",
    "bundle_report",
    "cassette_doc",
    "cassette_rows",
    "certify_report",
    "compare_table",
    "console",
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
    "plugins_report",
    "progress",
    "proxy_report",
    "removal_report",
    "replay_report",
    "run_rows",
    "run_table",
    "short_ids",
    "show_table",
    "store_check",
    "tasks_check",
    "training_replay",
    "training_table",
    "vcr_export",
]
