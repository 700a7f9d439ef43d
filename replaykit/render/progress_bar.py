"""The progress callback the CLI hands to library calls: a rich bar on a terminal (stderr)."""

from __future__ import annotations

import contextlib
from typing import Iterator, TypedDict

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Column

from replaykit.core.progress import Progress as ProgressCallback
from replaykit.core.progress import ProgressData, ProgressEvent
from replaykit.render.console import err, err_console

#: Characters of a bar's label (``baseline 6cc9be88e2 · csv-active-emails#1``), padded or cut to it.
LABEL_WIDTH = 44


class _Bars(TypedDict, total=False):
    """The bars drawn so far: the outer one (and what it counts), the inner one."""

    outer_label: str
    outer: TaskID
    inner: TaskID


def episode_label(data: ProgressData) -> str:
    """``LABEL · task#seed · N call(s), M served``: the episode just finished, as the rest of
    replaykit names a task instance, and (recorded) what it paid."""
    unit = (
        f"{data['task_id']}#{data['seed']}"
        if "task_id" in data and "seed" in data
        else str(data.get("task_id", ""))
    )
    prefix = str(data.get("label") or "")
    paid = ""
    if "model_calls" in data:  # a recorded episode: what it sent, what a donor answered instead
        served = data.get("reused_events") or 0
        paid = f"{data['model_calls']} call(s)" + (f", {served} served" if served else "")
    return " · ".join(p for p in (prefix, unit, paid) if p)


@contextlib.contextmanager
def progress(enabled: bool = True) -> Iterator[ProgressCallback]:
    """A progress callback for library calls, drawn with rich on a terminal (stderr).

    Events: ``outer`` {total, label} starts an outer bar (epochs of a training, cells
    of a compare) that ``outer_step``/``epoch`` advance; ``plan`` {total|missing,
    label?} (re)starts the inner bar that ``episode``/``task`` advance; ``note``
    {message} prints a line. Off a terminal only notes are printed.
    """
    if not enabled or not err_console.is_terminal:
        yield lambda event, data: err(str(data.get("message", ""))) if event == "note" else None
        return
    bar = Progress(  # a fixed-width label: the bar does not jump sideways with the task name
        TextColumn(
            "{task.description}", table_column=Column(width=LABEL_WIDTH, no_wrap=True, overflow="ellipsis")
        ),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
    state: _Bars = {}

    def callback(event: ProgressEvent, data: ProgressData) -> None:
        if event == "note":
            bar.console.print(str(data.get("message", "")), markup=False, highlight=False, soft_wrap=True)
        elif event == "outer":
            state["outer_label"] = data.get("label", "step")
            state["outer"] = bar.add_task(f"{state['outer_label']}s", total=data.get("total"))
        elif event in ("outer_step", "epoch") and "outer" in state:
            bar.advance(state["outer"])
        elif event == "plan":
            total = data.get("missing", data.get("total"))
            label = str(data.get("label") or "episodes")
            if "inner" in state:
                bar.reset(state["inner"], total=total, description=label)
            else:
                state["inner"] = bar.add_task(label, total=total)
        elif event in ("episode", "task"):
            if "inner" not in state:
                state["inner"] = bar.add_task(event, total=None)
            bar.update(state["inner"], advance=1, description=episode_label(data) or event)

    with bar:
        yield callback
