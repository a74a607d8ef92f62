"""``ecpa dev pg-up`` and ``ecpa dev pg-down``: a throw-away PostgreSQL for trials."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ecpa.cli._app import command_group
from ecpa.cli._common import echo_json, fail_usage
from ecpa.cli._options import AsJson
from ecpa.dev import pgcluster

__all__ = ["dev_app"]

dev_app = command_group(
    "Tools for trying ecpa out: a throw-away PostgreSQL server.",
    '\b\nExample:\n  DSN=$(ecpa dev pg-up /tmp/ecpa-pg) && ecpa ship --db "$DSN" ...',
)
DirArg = Annotated[Path, typer.Argument(metavar="DIR", help="The cluster's directory.")]


@dev_app.command("pg-up")
def pg_up(
    directory: DirArg,
    no_fsync: Annotated[
        bool, typer.Option("--no-fsync", help="Commits not flushed (test suites only).")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Start a throw-away PostgreSQL cluster in DIR; print its DSN (the only stdout line).

    For trials and tests only: it trusts every local connection, listening on nothing but
    a Unix socket in DIR (mode 0700). As root, it runs as the postgres user. Run again, it
    prints the same DSN; `ecpa dev pg-down DIR` stops it.
    """
    try:
        dsn = pgcluster.up(directory, no_fsync=no_fsync, say=lambda s: typer.echo(s, err=True))
    except (pgcluster.ClusterError, OSError) as exc:
        raise fail_usage(str(exc)) from None
    if as_json:
        echo_json({"dsn": dsn, "directory": str(directory.absolute())})
    else:
        typer.echo(dsn)


@dev_app.command("pg-down")
def pg_down(directory: DirArg) -> None:
    """Stop the cluster `ecpa dev pg-up DIR` started (DIR stays: remove it yourself)."""
    try:
        typer.echo(pgcluster.down(directory), err=True)
    except (pgcluster.ClusterError, OSError) as exc:
        raise fail_usage(str(exc)) from None
