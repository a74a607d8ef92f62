"""The ``ecpa`` command line: parses arguments, calls the library, prints.

One place, :func:`main`, maps failures to exit status: 0 success, 1 evidence refused,
2 usage errors and inputs that are not evidence (missing file, bad trust store, bad key),
3 an internal error (one line on stderr, never a traceback).

Start-up is paid for by what runs: this module imports no command, ``ecpa --version``
imports neither typer nor the library, and a command imports what it uses
(:mod:`ecpa.cli._app`).
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

__all__ = ["app", "main", "script"]


def main(argv: list[str] | None = None, *, standalone: bool = False) -> int:
    """Run ``ecpa ARGV...`` (default: the process's arguments) and return the exit status.

    ``standalone`` is for :func:`script` only: this process ends when the command returns,
    so ``ecpa run`` leaves the termination signals ignored after supervision (see
    ``Invocation``); in-process callers (tests, the demo) keep the default.
    """
    from ecpa.cli._app import run_main

    return run_main(argv, standalone=standalone)


def script() -> None:
    """The installed ``ecpa`` script: like a Unix filter, a closed pipe ends it quietly
    (``ecpa verify log.jsonl | head`` must not report "invalid" because head stopped).
    ``ecpa --version`` alone is answered before typer is even imported."""
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if sys.argv[1:] == ["--version"]:
        from ecpa import __version__
        from ecpa.profile.ids import PROFILE_ID

        sys.stdout.write(f"ecpa {__version__} ({PROFILE_ID})\n")
        sys.exit(0)
    sys.exit(main(standalone=True))


def __getattr__(name: str) -> Any:
    """``app``, the typer application, built on first use."""
    if name == "app":
        from ecpa.cli._app import app

        return app
    raise AttributeError(f"module 'ecpa.cli' has no attribute {name!r}")


if TYPE_CHECKING:
    app: typer.Typer
