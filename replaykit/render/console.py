"""Where the CLI's text goes and how it is laid out: stdout (``out``) and stderr
consoles, one logical line, and a table that fits the width or becomes records.

Everything printed to stdout goes through ``out`` looked up at call time, so a test
can swap it (``monkeypatch.setattr(render.console, "out", …)``).
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

PIPE_WIDTH = 1 << 20  # piped output is never wrapped: one record per line, whatever its length


def make_console(**kwargs: Any) -> Console:
    """A terminal gets rich layout at its width; a pipe or file gets plain, unwrapped text."""
    console = Console(**kwargs)
    if console.is_terminal:
        return console
    return Console(**{**kwargs, "width": PIPE_WIDTH, "no_color": True, "highlight": False})


out = make_console()
err_console = Console(stderr=True)


def err(message: str) -> None:
    err_console.print(message, markup=False, highlight=False, soft_wrap=True)


def line(text: str | Text) -> None:
    """One logical line: wrapped at words by a terminal, never wrapped into a pipe."""
    out.print(text, markup=False, highlight=False, soft_wrap=not out.is_terminal)


def plain(text: str) -> None:
    """One line printed as is (rich's default wrapping, no markup, no highlighting)."""
    out.print(text, markup=False, highlight=False)


def short_ids(ids: list[str], minimum: int = 8) -> int:
    """The shortest length (at least ``minimum``) at which ``ids`` are still distinct, as git does."""
    distinct = set(ids)
    longest = max((len(i) for i in distinct), default=minimum)
    for length in range(minimum, longest):
        if len({i[:length] for i in distinct}) == len(distinct):
            return length
    return longest


def show_table(
    title: str, headers: list[str], rows: list[list[str | Text]], styles: dict[str, str] | None = None
) -> None:
    """A table of short cells when it fits the width; otherwise each row as one wrapped
    record (``header value · …``), so no cell is ever cut or split mid-word."""
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, show_edge=False)
    for h in headers:
        table.add_column(h, no_wrap=True, style=(styles or {}).get(h))
    for r in rows:
        table.add_row(*(Text(c) if isinstance(c, str) else c for c in r))
    line(title)
    if Measurement.get(out, out.options.update_width(PIPE_WIDTH), table).maximum <= out.width:
        out.print(table)
        return
    for r in rows:
        record = Text()
        for i, (h, cell) in enumerate(zip(headers, r, strict=True)):
            record.append(("" if i == 0 else " · ") + ("" if i == 0 else f"{h} "))
            record.append(cell if isinstance(cell, Text) else Text(cell))
        line(record)
