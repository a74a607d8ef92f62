"""``ecpa store init``: the evidence store's tables and least-privilege roles."""

from __future__ import annotations

from typing import Annotated

import typer

from ecpa.cli._app import command_group
from ecpa.cli._common import AsJson, echo_json, fail_usage
from ecpa.runtime import init_store, is_postgres_dsn

__all__ = ["store_app"]

store_app = command_group(
    "Look after the PostgreSQL evidence store: its tables and least-privilege roles.",
    "\b\nExample:\n  ecpa store init --db postgresql://postgres@db.example/ecpa\n"
    "  psql ... -c 'CREATE ROLE host1 LOGIN IN ROLE ecpa_shipper'",
)


@store_app.callback()
def _group() -> None:
    """A group even with one command: ``ecpa store init``, not ``ecpa store``."""


@store_app.command("init")
def init(
    db: Annotated[
        str,
        typer.Option(
            metavar="DSN",
            envvar="ECPA_DB",
            show_envvar=True,
            help="The store, as a superuser (or a role with CREATEROLE owning its tables).",
        ),
    ],
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
    if as_json:
        echo_json(
            {"schema": roles.schema, "shipper": roles.shipper, "reader": roles.reader}
            | {"manager": roles.manager, "created": list(roles.created)}
        )
        return
    made = ", ".join(roles.created) or "none (all there)"
    typer.echo(
        f"store ready in schema {roles.schema}: roles {roles.shipper}, {roles.reader}, "
        f"{roles.manager} (created now: {made})"
    )
