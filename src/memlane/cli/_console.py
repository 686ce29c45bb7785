"""The rich consoles the commands print to: styled on a terminal, plain lines when piped."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, TextIO, cast

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["PIPED_WIDTH", "TrimmedLines", "make_console"]

#: Width of the human views when not on a terminal (and COLUMNS is not set): wide enough
#: for ids and tables not to wrap in a pipe or a file.
PIPED_WIDTH = 160


class TrimmedLines(io.TextIOBase):
    """A text stream that passes text on without the spaces at the end of each line.

    rich pads every line of a table or grid to the table's width. On a terminal that is
    invisible; in a pipe or a file it leaves lines padded to 160 columns.
    Spaces at the end of what was written so far are held back until the next write shows
    whether text follows them on the same line.
    """

    def __init__(self, target: Callable[[], TextIO]) -> None:
        # A callable, not a stream: click's test runner swaps sys.stdout per invocation.
        self._target = target
        self._held = ""

    def write(self, text: str) -> int:
        *lines, last = (self._held + text).split("\n")
        kept = last.rstrip(" ")
        self._held = last[len(kept) :]
        done = "".join(line.rstrip(" ") + "\n" for line in lines)
        self._target().write(done + kept)
        return len(text)

    def flush(self) -> None:
        self._target().flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False


def make_console(*, stderr: bool) -> Console:
    """The console for stdout (or stderr): rich's own on a terminal, else one that writes
    plain lines without trailing padding, :data:`PIPED_WIDTH` wide unless COLUMNS says."""
    console = _plain_console(stderr=stderr)
    if console.is_terminal:
        return console
    stream = TrimmedLines(lambda: sys.stderr if stderr else sys.stdout)
    width = None if "COLUMNS" in os.environ else PIPED_WIDTH
    # A text stream in all but name: io's classes are not typing.IO subclasses for mypy.
    return _plain_console(file=cast(IO[str], stream), width=width)


class _Console(Console):
    """rich's console, but a reader that went away (`memlane show ID | head`) ends the
    command with success, as it does `git log | head`: rich's own handler exits with 1."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0)


def _plain_console(
    *, stderr: bool = False, file: IO[str] | None = None, width: int | None = None
) -> Console:
    # markup and highlighting off: event contents are data, "[open]" is not a style tag.
    return _Console(
        stderr=stderr, file=file, width=width, highlight=False, markup=False, emoji=False
    )


@contextmanager
def progress_bar(console: Console, description: str, total: int | None) -> Iterator[Progress]:
    """A progress bar with an ETA on ``console`` (stderr); silent when it is not a terminal
    (then the command says what it did in one line when done)."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=False,
    )
    with progress:
        progress.add_task(description, total=total)
        yield progress
