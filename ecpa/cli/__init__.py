"""The ``ecpa`` command line: parses arguments, calls the library, prints.

One place, :func:`main`, maps failures to exit status: 0 success, 1 evidence refused,
2 usage errors and inputs that are not evidence (missing file, bad trust store, bad key),
3 an internal error (one line on stderr, never a traceback).
"""

from __future__ import annotations

import contextlib
import io
import signal
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperArgument

from ecpa import PROFILE_ID, __version__
from ecpa._text import safe
from ecpa.cli._audit import AUDIT_EXAMPLES, audit_command
from ecpa.cli._common import EXIT_INTERNAL, EXIT_INVALID, EXIT_OK, EXIT_USAGE, USAGE_CODES
from ecpa.cli._corpus import corpus_app
from ecpa.cli._keys import keygen_command, sign_command, trust_app
from ecpa.cli._launches import LAUNCHES_EXAMPLES, launches_command
from ecpa.cli._run import RUN_CONTEXT, RUN_EXAMPLES, Invocation, run_command
from ecpa.cli._serve import SERVE_EXAMPLES, serve_command
from ecpa.cli._ship import SHIP_EXAMPLES, ship_command
from ecpa.cli._status import STATUS_EXAMPLES, status_command
from ecpa.cli._verify import VERIFY_EXAMPLES, inspect_command, verify_command
from ecpa.demo import run_demo
from ecpa.errors import EcpaError

__all__ = ["app", "main", "script"]


def _argument_type(self: TyperArgument, ctx: Any) -> str | None:
    """An argument's help shows its metavar (``EVIDENCE...``, ``COMMAND``), not the Python
    type typer derives (``<list[str]>``)."""
    label = _typer_argument_type(self, ctx)
    return None if label is None or "[" in label else label


_typer_argument_type = TyperArgument.display_type_rich
TyperArgument.display_type_rich = _argument_type  # type: ignore[method-assign,assignment]

app = typer.Typer(
    name="ecpa",
    help="Produce and verify ECPA 0.1 signed evidence (RFC 8785 JCS + detached JWS, Ed25519).",
    epilog="Example: ecpa verify evidence.jws --trust trust.json",
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion (bash, zsh, fish)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ecpa {__version__} ({PROFILE_ID})")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """ecpa: signed evidence that a plugin really runs."""


def _demo_command() -> None:
    """Run the main job end to end in a temporary directory: make a key and a trust store,
    sign a statement, verify it, tamper with it, replay it; each refusal shows its code.

    Exits 1 if anything behaves other than the profile says.

    \b
    Example:
      ecpa demo
    """
    passed, steps = run_demo(_in_process, typer.echo)
    typer.echo(f"\n{passed} of {steps} steps behaved as the profile says")
    raise typer.Exit(EXIT_OK if passed == steps else EXIT_INVALID)


def _in_process(argv: list[str]) -> tuple[int, str]:
    """``ecpa ARGV...`` run by :func:`main` in this process, for the demo: the exit status
    and what it printed (standard output, then standard error)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue() + err.getvalue()


app.command("verify", epilog=VERIFY_EXAMPLES)(verify_command)
app.command("inspect", epilog="Example: ecpa inspect evidence.jws")(inspect_command)
app.command("sign")(sign_command)
app.command("keygen")(keygen_command)
app.add_typer(trust_app, name="trust")
app.add_typer(corpus_app, name="corpus")
app.command("demo")(_demo_command)
app.command("status", epilog=STATUS_EXAMPLES)(status_command)
app.command("run", epilog=RUN_EXAMPLES, context_settings=RUN_CONTEXT)(run_command)
app.command("ship", epilog=SHIP_EXAMPLES)(ship_command)
app.command("launches", epilog=LAUNCHES_EXAMPLES)(launches_command)
app.command("serve", epilog=SERVE_EXAMPLES)(serve_command)
app.command("audit", epilog=AUDIT_EXAMPLES)(audit_command)


def main(argv: list[str] | None = None, *, standalone: bool = False) -> int:
    """Run ``ecpa ARGV...`` (default: the process's arguments) and return the exit status.

    ``standalone`` is for :func:`script` only: this process ends when the command returns,
    so ``ecpa run`` leaves the termination signals ignored after supervision (see
    ``Invocation``); in-process callers (tests, the demo) keep the default.
    """
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


def script() -> None:
    """The installed ``ecpa`` script: like a Unix filter, a closed pipe ends it quietly
    (``ecpa verify log.jsonl | head`` must not report "invalid" because head stopped)."""
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main(standalone=True))


if __name__ == "__main__":
    script()
