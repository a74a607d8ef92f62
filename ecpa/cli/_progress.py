"""A progress bar on standard error, only when it is a terminal."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator

__all__ = ["progress"]


def _on_terminal() -> bool:
    """Standard error is a terminal and standard output is not (results going to a file or
    a pipe): with both on the terminal the results scroll by themselves, and a bar would
    have to take their lines over."""
    return sys.stderr.isatty() and not sys.stdout.isatty() and os.environ.get("TERM") != "dumb"


@contextlib.contextmanager
def progress(total: int | None, what: str) -> Iterator[Callable[[int], object] | None]:
    """A function to call with how many more ``what`` are done: it advances a bar (to
    ``total``, or a pulsing one with the count when unknown) drawn on standard error while
    it is a terminal and standard output is not, and erased after; otherwise None (no
    call per item at all), and rich is not even imported."""
    if not _on_terminal():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn(f"{what}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    console = Console(stderr=True)
    with Progress(
        *columns, console=console, transient=True, redirect_stdout=False, redirect_stderr=False
    ) as bar:
        task = bar.add_task(what, total=total)
        yield lambda count: bar.advance(task, count)
