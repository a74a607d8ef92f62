"""The command line's own entry point, for a command that runs other commands in-process
(the demo). ``ecpa.cli`` registers :func:`ecpa.cli.main` here once it is defined, so that the
commands' modules never import the package that imports them."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["register", "run"]

_main: list[Callable[[list[str] | None], int]] = []


def register(main: Callable[[list[str] | None], int]) -> None:
    """Make ``main`` the entry point :func:`run` calls (done once, by ``ecpa.cli``)."""
    _main[:] = [main]


def run(argv: list[str]) -> int:
    """Run ``ecpa ARGV...`` in this process and return its exit status.

    Raises:
        RuntimeError: when ``ecpa.cli`` was not imported (nothing registered).
    """
    if not _main:
        raise RuntimeError("ecpa.cli is not loaded: no command line to run")
    return _main[0](argv)
