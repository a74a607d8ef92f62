"""The ``ecpa`` command tree, built lazily: ``ecpa --help`` lists the commands from
:data:`COMMANDS` alone, and ``ecpa verify ...`` imports and builds the verify command only
(each command's module imports the library it needs, not the others')."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Annotated, Any, NamedTuple

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
from ecpa.errors import EcpaError
from ecpa.profile.ids import PROFILE_ID

__all__ = ["COMMANDS", "Command", "app", "command_group", "one_command", "run_main", "version_line"]


class Command(NamedTuple):
    """One command of the root: where it lives, and the line ``ecpa --help`` shows for it
    without importing it, the first sentence of the command's own help (checked by
    tests/cli/test_startup.py)."""

    module: str  #: its module in ``ecpa.cli``
    attribute: str  #: the name there of its ``typer.Typer`` app
    summary: str


#: Every command, in the order ``ecpa --help`` lists them.
COMMANDS: dict[str, Command] = {
    "verify": Command(
        "_verify",
        "verify_app",
        "Verify evidence by the ECPA 0.1 profile, one result line per item.",
    ),
    "inspect": Command(
        "_verify",
        "inspect_app",
        "Show the decoded header and payload of evidence WITHOUT verifying anything.",
    ),
    "sign": Command(
        "_sign",
        "sign_app",
        "Sign a statement into PREFIX.json (its JCS payload) and PREFIX.jws (detached JWS).",
    ),
    "keygen": Command("_sign", "keygen_app", "Make an Ed25519 key and its trust entry."),
    "trust": Command("_trust", "trust_app", "Look after a trust store: list, add, disable, check."),
    "corpus": Command("_corpus", "corpus_app", "Run conformance corpora."),
    "demo": Command(
        "_demo",
        "demo_app",
        "Run the main job end to end, showing each step's command and what it printed.",
    ),
    "status": Command(
        "_status",
        "status_app",
        "Derive runtime_effective: signed, fresh, bound evidence from a live process.",
    ),
    "run": Command(
        "_run", "run_app", "Run COMMAND under a fresh launch, its process tree supervised."
    ),
    "ship": Command(
        "_ship",
        "ship_app",
        "Copy each complete evidence line of a launch into the evidence store, once.",
    ),
    "store": Command(
        "_store",
        "store_app",
        "Look after the PostgreSQL evidence store: its tables and least-privilege roles.",
    ),
    "launches": Command(
        "_launches",
        "launches_app",
        "List the launches an evidence directory or store holds, with runtime_effective.",
    ),
    "serve": Command(
        "_serve",
        "serve_app",
        "Serve runtime_effective over HTTP: API, Prometheus metrics and a status page.",
    ),
    "audit": Command(
        "_audit",
        "audit_app",
        "When was a launch effective: intervals, gaps and causes, and `exercised`.",
    ),
    "dev": Command("_dev", "dev_app", "Tools for trying ecpa out: a throw-away PostgreSQL server."),
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
        command = COMMANDS[cmd_name]
        sub = getattr(importlib.import_module(f"ecpa.cli.{command.module}"), command.attribute)
        return typer.main.get_command(sub)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, command.summary) for name, command in COMMANDS.items()])


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
