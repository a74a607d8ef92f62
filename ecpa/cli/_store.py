"""``ecpa store init`` and ``ecpa store prune``: the evidence store's tables, its
least-privilege roles, and the days it drops."""

from __future__ import annotations

import datetime
from typing import Annotated

import typer

from ecpa.cli._app import command_group
from ecpa.cli._common import echo_json, fail_usage
from ecpa.cli._options import AsJson, JsonLines
from ecpa.runtime import init_store, is_postgres_dsn, prune_store

__all__ = ["store_app"]

store_app = command_group(
    "Look after the PostgreSQL evidence store: its tables and least-privilege roles.",
    "\b\nExample:\n  ecpa store init --db postgresql://postgres@db.example/ecpa\n"
    "  psql ... -c 'CREATE ROLE host1 LOGIN IN ROLE ecpa_shipper'\n"
    "  ecpa store prune --db postgresql://boss@db.example/ecpa --before 2026-11-01",
)
DbOption = Annotated[
    str,
    typer.Option(
        metavar="DSN",
        envvar="ECPA_DB",
        show_envvar=True,
        help="The store, as a superuser (or a role with CREATEROLE owning its tables).",
    ),
]


@store_app.command("init")
def init(
    db: DbOption,
    prefix: Annotated[str, typer.Option(help="The roles are PREFIX_shipper, ...")] = "ecpa",
    as_json: AsJson = False,
) -> None:
    """Make the store's tables and three roles: PREFIX_shipper, PREFIX_reader, PREFIX_manager.

    A shipper (ecpa ship) inserts the rows of its own launches only; a reader (status, serve,
    audit, launches --db) reads, and writes its own checkpoints; the manager owns the tables.
    The roles cannot log in: grant them to login roles. Run again, it repairs the grants.
    """
    if not is_postgres_dsn(db):
        raise fail_usage("expected --db postgresql://..., found a value that is not such a URI")
    roles = init_store(db, prefix)
    for note in roles.notes:
        typer.echo(f"ecpa store init: note: {note}", err=True)
    if as_json:
        echo_json(
            {"schema": roles.schema, "shipper": roles.shipper, "reader": roles.reader}
            | {"manager": roles.manager, "created": list(roles.created)}
            | {"notes": list(roles.notes)}
        )
        return
    made = ", ".join(roles.created) or "none (all there)"
    typer.echo(
        f"store ready in schema {roles.schema}: roles {roles.shipper}, {roles.reader}, "
        f"{roles.manager} (created now: {made})"
    )


def _moment(text: str) -> int:
    """Unix seconds, or an ISO 8601 date or time (UTC unless it says otherwise)."""
    if text.isdigit():
        return int(text)
    try:
        at = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise fail_usage(
            f"expected --before as Unix seconds or an ISO 8601 date or time, found {text!r}"
        ) from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=datetime.timezone.utc)
    return int(at.timestamp())


@store_app.command("prune")
def prune(
    db: DbOption,
    before: Annotated[
        str, typer.Option(metavar="T", help="Unix seconds or ISO 8601 (UTC by default).")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be dropped; drop nothing.")
    ] = False,
    as_json: JsonLines = False,
) -> None:
    """Drop the store's days before T whose launches were all over before T.

    A day holds every line of the launches first stored that day. It is dropped whole, with
    its launches, only if each ended (exit.json) or lost its supervisor before T; otherwise
    it is kept, and the line says which launch keeps it. Run as the tables' owner (the
    manager role of `ecpa store init`). One line per day before T; exit 0 either way.
    """
    if not is_postgres_dsn(db):
        raise fail_usage("expected --db postgresql://..., found a value that is not such a URI")
    days = prune_store(db, _moment(before), dry_run=dry_run)
    if as_json:
        for d in days:
            echo_json(
                {"day": d.day, "partition": d.partition, "dropped": d.dropped}
                | {"launches": list(d.launches), "lines": d.lines, "reason": d.reason}
            )
        return
    for d in days:
        typer.echo(f"{d.day} ({len(d.launches)} launch(es), {d.lines} line(s)): {d.reason}")
    if not days:
        typer.echo(f"no day of the store ends before {before}")
