"""Where the CLI's text goes and how it is laid out: stdout (``out``) and stderr
consoles, one logical line, and a table that fits the width or becomes records.

Everything printed to stdout goes through ``out`` looked up at call time, so a test
can swap it (``monkeypatch.setattr(render.console, "out", …)``).

Piped, ``out`` writes plain lines itself and loads rich only for what rich lays out (a
table rich must measure, a styled line): a listing into a pipe never imports rich's console,
nor its ``Text`` (a table of plain cells is laid out here from the strings).

Tables and legends fit ``layout_width()``: the terminal's width, or piped, ``$COLUMNS``
(80 when unset); ``--wide`` (``set_wide``) lifts the bound. Other lines are never wrapped
into a pipe (one record per line).
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any, cast

from rich.cells import cell_len

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

PIPE_WIDTH = 1 << 20  # piped lines are never wrapped: one record per line, whatever its length
PIPE_COLUMNS = 80  # what piped tables and legends fit when $COLUMNS is not set
_wide = False


def make_console(**kwargs: Any) -> Console:
    """A terminal gets rich layout at its width; a pipe or file gets plain, unwrapped text."""
    from rich.console import Console

    console = Console(**kwargs)
    if console.is_terminal:
        return console
    return Console(**{**kwargs, "width": PIPE_WIDTH, "no_color": True, "highlight": False})


class PipedOut:
    """Piped stdout, as ``make_console()`` prints into a pipe: a printable line without markup or
    style is written as is; anything else (a table, a styled line) goes to that rich console,
    made on first use. The file is ``sys.stdout`` looked up at each write, as rich's is."""

    is_terminal = False
    color_system = None
    width = PIPE_WIDTH

    def __init__(self) -> None:
        self._rich: Console | None = None

    @property
    def file(self) -> IO[str]:
        return sys.stdout

    @property
    def encoding(self) -> str:
        return (getattr(self.file, "encoding", "utf-8") or "utf-8").lower()

    def rich(self) -> Console:
        if self._rich is None:
            self._rich = make_console()
        return self._rich

    def print(
        self, obj: object = "", *, markup: bool | None = None, highlight: bool | None = None, **kw: Any
    ) -> None:
        text = _unstyled(obj)
        if text is not None and markup is False and highlight is False and set(kw) <= {"soft_wrap"}:
            self.file.write(text + "\n")
            return
        self.rich().print(obj, markup=markup, highlight=highlight, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rich(), name)


def _unstyled(obj: object) -> str | None:
    """What rich would print of ``obj`` into a pipe when that is its text as is (a printable
    ``str``, emoji codes replaced as rich does; a ``Text`` with no style, left-justified)."""
    if isinstance(obj, str):
        if not obj.isprintable():
            return None
    else:
        from rich.text import Text  # a Text was made with it: loaded already

        if not isinstance(obj, Text):
            return None
        plain = (
            not obj.spans and not obj.style and obj.justify in (None, "default", "left") and obj.end == "\n"
        )
        return obj.plain if plain and obj.plain.isprintable() else None
    if re.search(r":\S*:", obj):  # what rich's emoji pattern can match (its codes: loaded for one)
        from rich._emoji_replace import _emoji_replace

        return _emoji_replace(obj)
    return obj


def _stdout() -> Console:
    """``make_console()``, without loading rich's console where stdout is surely a pipe or file
    (no tty, no ``TTY_COMPATIBLE``/``FORCE_COLOR``, no notebook or IDLE)."""
    forced = {"TTY_COMPATIBLE", "FORCE_COLOR"} & set(os.environ)
    hosted = {"IPython", "idlelib"} & set(sys.modules)
    isatty = getattr(sys.stdout, "isatty", None)
    if forced or hosted or isatty is None or isatty():
        return make_console()
    return cast("Console", PipedOut())  # a duck of the piped console: what rich lays out goes to one


def _rich(console: Console) -> Console:
    """The rich console behind ``console`` (rich measures against a real one)."""
    return console.rich() if isinstance(console, PipedOut) else console


out = _stdout()
_err: Console | None = None


def err_console_() -> Console:
    global _err
    if _err is None:
        from rich.console import Console

        _err = Console(stderr=True)
    return _err


def __getattr__(name: str) -> Any:
    if name == "err_console":  # the stderr console, made on first use
        return err_console_()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def err(message: str) -> None:
    err_console_().print(message, markup=False, highlight=False, soft_wrap=True)


def set_wide(wide: bool) -> None:
    """``--wide``: tables keep every column and legends one line, whatever the width."""
    global _wide
    _wide = wide


def layout_width() -> int:
    """The width tables and legends fit: the terminal's; piped, ``$COLUMNS`` (else 80);
    unbounded under ``--wide``."""
    if _wide:
        return PIPE_WIDTH
    if out.is_terminal:
        return int(out.width)
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_COLUMNS


def wrapped(text: str, indent: str = "  ") -> None:
    """A prose line (a legend, a footnote) wrapped at words to ``layout_width()``, its
    continuation lines indented; no word is ever split."""
    if out.is_terminal and not _wide:
        line(text)
        return
    width = layout_width()
    for part in textwrap.wrap(
        text,
        width=width,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [""]:
        plain_line(part)


def plain_line(text: str) -> None:
    """One line as is, never wrapped (no markup, no highlighting)."""
    out.print(text, markup=False, highlight=False, soft_wrap=True)


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


def _fits(table: Table, width: int) -> bool:
    from rich.measure import Measurement

    console = _rich(out)
    return int(Measurement.get(console, console.options.update_width(PIPE_WIDTH), table).maximum) <= width


def _text(cell: str | Text) -> str:
    return cell if isinstance(cell, str) else cell.plain


def _left(cell: str | Text) -> bool:
    """Is ``cell`` left-justified (a string always is)?"""
    return isinstance(cell, str) or cell.justify in (None, "default", "left")


def _rich_cells(rows: list[list[str | Text]]) -> list[list[Text]]:
    """The cells as rich's ``Text`` (a string as is: no markup read)."""
    from rich.text import Text

    return [[Text(c) if isinstance(c, str) else c for c in r] for r in rows]


def _plain_widths(headers: Sequence[str], rows: list[list[str | Text]]) -> list[int] | None:
    """Piped, a table of one-line, left-justified, printable cells is laid out here as rich lays
    it out (each column as wide as its widest cell, two spaces between columns, a rule under the
    headers, no colour): rich measures and renders each cell at ~1 ms a row, a listing's cost.
    The columns' widths, or None where rich must do it (a terminal, colour, any other cell)."""
    if out.is_terminal or out.color_system is not None or not out.encoding.lower().startswith("utf"):
        return None
    if not headers or any("[" in h or ":" in h or not h.isprintable() for h in headers):
        return None  # rich reads markup and emoji codes in a header
    widths = [cell_len(h) for h in headers]
    for r in rows:
        for i, cell in enumerate(r):
            text = _text(cell)
            if not _left(cell) or not text.isprintable():
                return None
            widths[i] = max(widths[i], cell_len(text))
    return widths


def _plain_table(headers: Sequence[str], rows: list[list[str | Text]], widths: list[int]) -> None:
    def row(cells: Sequence[str]) -> str:
        return "  ".join(c + " " * (w - cell_len(c)) for c, w in zip(cells, widths, strict=True))

    lines = [row(headers), "─" * (sum(widths) + 2 * (len(widths) - 1))]
    lines += [row([_text(c) for c in r]) for r in rows]
    out.file.write("\n".join(lines) + "\n")


def _table(headers: Sequence[str], rows: list[list[Text]], styles: dict[str, str] | None) -> Table:
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, show_edge=False)
    for h in headers:
        table.add_column(h, no_wrap=True, style=(styles or {}).get(h))
    for r in rows:
        table.add_row(*r)
    return table


def _print_if_fits(
    headers: list[str],
    rows: list[list[str | Text]],
    plain: list[int] | None,
    styles: dict[str, str] | None,
    width: int,
) -> bool:
    """Print the table when it fits ``width`` (laid out here when ``plain`` holds its columns'
    widths, else by rich); whether it did."""
    if plain:  # piped: laid out here, as rich would (no column left: rich says so)
        if sum(plain) + 2 * (len(plain) - 1) > width:
            return False
        _plain_table(headers, rows, plain)
        return True
    table = _table(headers, _rich_cells(rows), styles)
    if not _fits(table, width):
        return False
    out.print(table)
    return True


def show_table(
    title: str,
    headers: list[str],
    rows: list[list[str | Text]],
    styles: dict[str, str] | None = None,
    optional: Sequence[str] = (),
) -> list[str]:
    """A table of short cells that fits ``layout_width()`` (returns the headers shown, for the
    legend to explain only those): a column empty in every row is
    left out; if it is still too wide, the ``optional`` columns are left out in that order
    (a note names them: ``--wide`` shows them); if it is still too wide, each row is one
    wrapped record (``first · header value · …``, empty cells left out), so no cell is ever
    cut or split mid-word."""
    keep = [i for i, _ in enumerate(headers) if not rows or any(_text(r[i]).strip() for r in rows)]
    width = layout_width()
    line(title)
    dropped: list[str] = []
    plain = _plain_widths(headers, rows)
    for name in ["", *optional]:
        if name:
            if name not in headers or headers.index(name) not in keep:
                continue
            keep.remove(headers.index(name))
            dropped.append(name)
        fits = _print_if_fits(
            [headers[i] for i in keep],
            [[r[i] for i in keep] for r in rows],
            None if plain is None else [plain[i] for i in keep],
            styles,
            width,
        )
        if fits:
            if dropped:
                wrapped(f"(to fit {width} columns, left out: {', '.join(dropped)}; --wide shows them)")
            return [headers[i] for i in keep]
    from rich.text import Text

    for r in _rich_cells(rows):
        record = Text()
        for i, (h, cell) in enumerate(zip(headers, r, strict=True)):
            if i and not cell.plain.strip():
                continue  # an empty field is left out, never printed as "header "
            record.append("" if i == 0 else f" · {h} ")
            record.append(cell)
        if out.is_terminal:
            line(record)
        else:
            wrapped(record.plain)
    return [headers[i] for i in keep]
