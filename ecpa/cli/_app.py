"""The ``ecpa`` command tree, built lazily: ``ecpa --help`` lists the commands from
:data:`COMMANDS` alone, and ``ecpa verify ...`` imports and builds the verify command only
(each command's module imports the library it needs, not the others')."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from ecpa import __version__
from ecpa._text import safe
from ecpa.cli._common import (
    EXIT_INTERNAL,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    USAGE_CODES,
    Invocation,
)
from ecpa.demo.acts import ACTS
from ecpa.errors import EcpaError
from ecpa.profile.ids import PROFILE_ID

__all__ = [
    "COMMANDS",
    "SUMMARIES",
    "app",
    "command_group",
    "demo_app",
    "one_command",
    "run_main",
    "version_line",
]

#: Each command: its module and the name there of its ``typer.Typer`` app.
COMMANDS: dict[str, tuple[str, str]] = {
    "verify": ("_verify", "verify_app"),
    "inspect": ("_verify", "inspect_app"),
    "sign": ("_keys", "sign_app"),
    "keygen": ("_keys", "keygen_app"),
    "trust": ("_keys", "trust_app"),
    "corpus": ("_corpus", "corpus_app"),
    "demo": ("_app", "demo_app"),
    "status": ("_status", "status_app"),
    "run": ("_run", "run_app"),
    "ship": ("_ship", "ship_app"),
    "store": ("_store", "store_app"),
    "launches": ("_launches", "launches_app"),
    "serve": ("_serve", "serve_app"),
    "audit": ("_audit", "audit_app"),
    "dev": ("_dev", "dev_app"),
}
#: The line ``ecpa --help`` shows for each command, without importing it: the first
#: sentence of the command's own help (tests/cli/test_startup.py checks they agree).
SUMMARIES = {
    "verify": "Verify evidence by the ECPA 0.1 profile, one result line per item.",
    "inspect": "Show the decoded header and payload of evidence WITHOUT verifying anything.",
    "sign": "Sign a statement into PREFIX.json (its JCS payload) and PREFIX.jws (detached JWS).",
    "keygen": "Make an Ed25519 key and its trust entry.",
    "trust": "Look after a trust store: list, add, disable, check.",
    "corpus": "Run conformance corpora.",
    "demo": "Run the main job end to end, showing each step's command and what it printed.",
    "status": "Derive runtime_effective: signed, fresh, bound evidence from a live process.",
    "run": "Run COMMAND under a fresh launch, its process tree supervised.",
    "ship": "Copy each complete evidence line of a launch into the evidence store, once.",
    "store": "Look after the PostgreSQL evidence store: its tables and least-privilege roles.",
    "launches": "List the launches an evidence directory or store holds, with runtime_effective.",
    "serve": "Serve runtime_effective over HTTP: API, Prometheus metrics and a status page.",
    "audit": "When was a launch effective: intervals, gaps and causes, and `exercised`.",
    "dev": "Tools for trying ecpa out: a throw-away PostgreSQL server.",
}


#: Plain help, no pretty tracebacks (``run_main`` reports failures); completion on the root.
_PLAIN: dict[str, Any] = {"rich_markup_mode": None, "pretty_exceptions_enable": False}
_SUB_APP: dict[str, Any] = {**_PLAIN, "add_completion": False}


def one_command(function: Callable[..., Any], name: str, **settings: Any) -> typer.Typer:
    """A ``typer.Typer`` holding the one command ``function`` (``settings``: its epilog,
    context settings), for :data:`COMMANDS`."""
    one = typer.Typer(**_SUB_APP)
    one.command(name, **settings)(function)
    return one


def command_group(summary: str, epilog: str) -> typer.Typer:
    """A ``typer.Typer`` for several commands under one name (``ecpa trust ...``), set as
    :func:`one_command` sets one; with no command, it shows its help."""
    return typer.Typer(help=summary, epilog=epilog, no_args_is_help=True, **_SUB_APP)


class _Commands(TyperGroup):
    """The root group: commands from :data:`COMMANDS`, each imported when it is used."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name]
        sub = getattr(importlib.import_module(f"ecpa.cli.{module}"), attribute)
        return typer.main.get_command(sub)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with formatter.section("Commands"):
            formatter.write_dl(list(SUMMARIES.items()))


def version_line() -> str:
    """What ``ecpa --version`` prints."""
    return f"ecpa {__version__} ({PROFILE_ID})"


app = typer.Typer(
    name="ecpa",
    cls=_Commands,
    help="Produce and verify ECPA 0.1 signed evidence (RFC 8785 JCS + detached JWS, Ed25519).",
    epilog="Example: ecpa verify evidence.jws --trust trust.json",
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion (bash, zsh, fish)
    **_PLAIN,
)


def run_main(argv: list[str] | None = None, *, standalone: bool = False) -> int:
    """:func:`ecpa.cli.main`: the one place failures become exit statuses and one line."""
    try:
        app(args=argv, prog_name="ecpa", obj=Invocation(standalone=standalone))
    except SystemExit as exc:  # click's standalone mode; usage errors are exit 2
        code = exc.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_USAGE)
    except EcpaError as exc:
        typer.echo(f"ecpa: {exc.code.value}: {safe(exc.detail)}", err=True)
        return EXIT_USAGE if exc.code in USAGE_CODES else EXIT_INVALID
    except KeyboardInterrupt:
        typer.echo("ecpa: interrupted", err=True)
        return 130
    except Exception as exc:  # the one place a foreign exception is turned into a line
        typer.echo(f"ecpa: internal error: {type(exc).__name__}: {safe(str(exc))}", err=True)
        return EXIT_INTERNAL
    return EXIT_OK


def _version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """ecpa: signed evidence that a plugin really runs."""


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
