"""``ecpa demo``: the command's arguments and its help; the demo itself is
:mod:`ecpa.demo`, handed how to run ``ecpa`` in this process and where to print."""

from __future__ import annotations

import contextlib
import inspect
import io
import textwrap
from pathlib import Path
from typing import Annotated

import typer

from ecpa.cli._app import one_command, run_main
from ecpa.cli._common import EXIT_INVALID, EXIT_OK
from ecpa.demo.acts import ACTS

__all__ = ["demo_app"]


def _demo_command(
    keep: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Work in DIR (created, must be empty) and leave everything there, so each "
            "command shown can be run again by hand; default: a temporary directory, removed.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run the main job end to end, showing each step's command and what it printed.

    Exits 1 if anything behaves other than the profile says. The acts it shows, in order
    (each step within them shows its command, what it printed, and is checked):
    """
    from ecpa.demo import run_demo

    passed, steps = run_demo(_in_process, typer.echo, keep=keep)
    typer.echo(f"\n{passed} of {steps} steps behaved as the profile says")
    raise typer.Exit(EXIT_OK if passed == steps else EXIT_INVALID)


def _in_process(argv: list[str]) -> tuple[int, str]:
    """``ecpa ARGV...`` run by :func:`run_main` in this process, for the demo: the exit
    status and what it printed (standard output, then standard error)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = run_main(argv)
    return status, out.getvalue() + err.getvalue()


def _demo_help() -> str:
    """The demo's docstring, then its acts (:data:`ecpa.demo.acts.ACTS`), numbered."""
    acts = [
        textwrap.fill(title, 76, initial_indent=f"{i}. ", subsequent_indent="   ")
        for i, title in enumerate(ACTS.values(), 1)
    ]
    examples = "\b\nExamples:\n  ecpa demo\n  ecpa demo --keep ./ecpa-demo"
    return (
        f"{inspect.cleandoc(_demo_command.__doc__ or '')}\n\n\b\n"
        + "\n".join(acts)
        + (f"\n\n{examples}")
    )


demo_app = one_command(_demo_command, "demo", help=_demo_help())
