"""Progress and tables for the commands (demo, verify, build, calibrate), drawn by rich.

On a terminal: a live progress bar and a table fitted to the terminal's width, in colour. Anywhere
else (a pipe, a log file, CI): plain lines, so a log stays readable and diffable: a progress line
every tenth of the work and at its end, tables in ASCII without trailing spaces or colour.
The commands' one-line errors and their final verdict lines are plain prints, never drawn here.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Collection, Sequence
from typing import TextIO

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as _RichProgress
from rich.table import Table

PLAIN_WIDTH = 1000
"""Columns of a stream that is no terminal: wide enough that no table line is ever wrapped."""
PLAIN_STEPS = 10
"""Progress lines a plain stream gets per task (besides the first and the last)."""
_ASCII_HEAD = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n")
"""rich's SIMPLE_HEAD in ASCII: a dashed line under the header, nothing else."""


def console(file: TextIO | None = None) -> Console:
    """A rich Console on `file` (stderr by default): the terminal's width and colour when it is one,
    else PLAIN_WIDTH columns and no colour or cursor control."""
    stream = sys.stderr if file is None else file
    terminal = stream.isatty()
    return Console(file=stream, width=None if terminal else PLAIN_WIDTH, force_terminal=terminal,
                   no_color=not terminal, highlight=False, markup=False)  # "[reference]" is text


class Progress:
    """Progress of one task of `total` steps, as a context manager: a live bar on a terminal,
    plain `description: done/total (N s)` lines elsewhere. `advance` and `update` may be called
    from any thread."""

    def __init__(self, description: str, total: int, *, file: TextIO | None = None) -> None:
        self._console = console(file)
        self._description, self._total, self._completed = description, total, 0
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._shown: tuple[str, int] | None = None  # the last plain line's (description, completed)
        self._bar: _RichProgress | None = None
        if self._console.is_terminal:
            self._bar = _RichProgress(TextColumn("{task.description}", markup=False), BarColumn(),
                                      MofNCompleteColumn(), TimeElapsedColumn(), console=self._console)
            self._task = self._bar.add_task(description, total=total)

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        else:
            self._plain(force=True)
        return self

    def __exit__(self, error: type[BaseException] | None, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif error is None:  # a failure's own one-line message comes next: no progress line before it
            self._plain(force=True)

    def advance(self, steps: int = 1) -> None:
        """`steps` more steps are done."""
        with self._lock:
            self._set(self._completed + steps, None)

    def update(self, completed: int | None = None, *, description: str | None = None) -> None:
        """Set how many steps are done and/or what is being done."""
        with self._lock:
            self._set(self._completed if completed is None else completed, description)

    @property
    def completed(self) -> int:
        return self._completed

    def _set(self, completed: int, description: str | None) -> None:
        self._completed = completed
        if description is not None:
            self._description = description
        if self._bar is not None:
            self._bar.update(self._task, completed=completed, description=self._description)
        else:
            self._plain(force=False)

    def _plain(self, force: bool) -> None:
        """A plain line unless it would repeat the last one: when forced (start, end), when the
        description changed, at the end of the work, or a PLAIN_STEPS-th of it after the last."""
        shown, now = self._shown, (self._description, self._completed)
        if shown == now:
            return
        if not force and shown is not None and shown[0] == now[0] and now[1] != self._total \
                and now[1] - shown[1] < max(1, self._total // PLAIN_STEPS):
            return
        self._shown = now
        seconds = time.monotonic() - self._started
        self._console.file.write(f"{now[0]}: {now[1]}/{self._total} ({seconds:.0f} s)\n")
        self._console.file.flush()


def table(header: Sequence[str], *, numeric: Collection[str] = (), title: str | None = None,
          file: TextIO | None = None) -> Table:
    """An empty rich Table with these column names (those in `numeric` right-aligned), boxed for
    where it will be printed (`file`, stdout by default): fill it with add_row and add_section,
    then print_table it."""
    plain = not (sys.stdout if file is None else file).isatty()
    grid = Table(title=title, box=_ASCII_HEAD if plain else box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                 title_justify="left")
    for name in header:
        grid.add_column(name, justify="right" if name in numeric else "left", no_wrap=plain)
    return grid


def print_table(grid: Table, file: TextIO | None = None) -> None:
    """Print a table on `file` (stdout by default): fitted to a terminal, plain lines elsewhere."""
    out = console(sys.stdout if file is None else file)
    if out.is_terminal:
        out.print(grid)
        return
    with out.capture() as captured:
        out.print(grid)
    out.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    out.file.flush()
