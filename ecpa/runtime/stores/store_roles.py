"""Least-privilege roles of the evidence store (``ecpa store init``, docs/scale.md "Roles").

Three group roles (``NOLOGIN``: an operator grants them to login roles), named
``PREFIX_shipper``, ``PREFIX_reader`` and ``PREFIX_manager``:

- the shipper (``ecpa ship``) inserts lines, moves positions and stores launches, of its
  own launches only (``ecpa_launch.shipper`` is the login role that stored the launch
  first; row level security holds every other row out of its reach); it reads no line,
  deletes nothing, and updates no line;
- the reader (``ecpa status --db``, ``ecpa serve --db``, ``ecpa audit --db``,
  ``ecpa launches --db``) reads everything and writes only its own history checkpoints;
- the manager owns the tables: everything else (pruning, upgrades, these grants).

Idempotent: run again, it makes what is missing and grants again what was revoked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime.stores.store import EvidenceStore
from ecpa.runtime.stores.store_schema import make_partitions_ahead

if TYPE_CHECKING:
    import psycopg

__all__ = ["StoreRoles", "init_store"]

_PREFIX = re.compile(r"[a-z][a-z0-9_]{0,40}")
_TABLES = ("ecpa_launch", "ecpa_evidence", "ecpa_ship_position", "ecpa_reader_checkpoint")
_OWNS = "launch_id IN (SELECT launch_id FROM ecpa_launch WHERE shipper = current_user)"
#: A line of its own launch, and in that launch's day (its partition), nowhere else.
_OWNS_LINE = (
    "(launch_id, launch_day) IN"
    " (SELECT launch_id, day FROM ecpa_launch WHERE shipper = current_user)"
)


@dataclass(frozen=True)
class StoreRoles:
    """What ``ecpa store init`` made: the schema and the three roles, and which roles it
    created now (the others were there)."""

    schema: str
    shipper: str
    reader: str
    manager: str
    created: tuple[str, ...]
    #: What the operator should know: days whose partition could not be made, a schema in
    #: which PUBLIC may create tables (one could take a partition's name).
    notes: tuple[str, ...] = ()


def init_store(dsn: str, prefix: str = "ecpa") -> StoreRoles:
    """Make the evidence store's tables (if missing) and its three roles with their rights
    (see the module's text), as the role ``dsn`` connects as: a superuser, or one with
    ``CREATEROLE`` that owns the tables.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a prefix that is not a lower-case SQL name;
            ``ECPA_EVIDENCE_STORE`` when the server refuses (naming what it said).
    """
    if not _PREFIX.fullmatch(prefix):
        raise EcpaError(
            ErrorCode.INVALID_INPUT,
            f"expected a role prefix of lower-case letters, digits and _ (a letter first, "
            f"41 at most), found {prefix!r}",
        )
    names = (f"{prefix}_shipper", f"{prefix}_reader", f"{prefix}_manager")
    with EvidenceStore(dsn) as store:
        try:
            with store.transaction() as conn:
                created = _roles(conn, names)
                schema = str(_one(conn, "SELECT current_schema()"))
                notes = make_partitions_ahead(conn)
                _grant(conn, schema, *names)
                if _one(conn, "SELECT has_schema_privilege('public', current_schema(), 'CREATE')"):
                    notes.append(
                        f"PUBLIC may create tables in schema {schema}: a role could take the "
                        f"name of a day's partition (its lines then go to the default one); "
                        f"REVOKE CREATE ON SCHEMA {schema} FROM PUBLIC"
                    )
        except EcpaError as exc:
            raise EcpaError(
                exc.code, f"expected to make the store's roles in {store.where}: {exc.detail}"
            ) from None
    return StoreRoles(schema, *names, created, tuple(notes))


def _one(conn: psycopg.Connection[Any], query: str) -> Any:
    row = conn.execute(query).fetchone()
    return None if row is None else row[0]


def _partitions(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'ecpa_evidence'::regclass"
        " AND c.relnamespace = current_schema()::regnamespace ORDER BY 1"
    ).fetchall()
    return [str(r[0]) for r in rows]


def _roles(conn: psycopg.Connection[Any], names: tuple[str, ...]) -> tuple[str, ...]:
    from psycopg import sql

    made = []
    for name in names:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
            continue
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(name)))
        made.append(name)
    return tuple(made)


def _grant(conn: psycopg.Connection[Any], schema: str, ship: str, read: str, boss: str) -> None:
    from psycopg import sql

    def run(text: str, *roles: str) -> None:
        conn.execute(sql.SQL(text).format(*(sql.Identifier(r) for r in roles)))

    sch = sql.Identifier(schema)
    if not _one(conn, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
        run("GRANT {} TO CURRENT_USER", boss)  # to hand it the tables
    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}, {}, {}").format(
        sch, sql.Identifier(ship), sql.Identifier(read), sql.Identifier(boss)))  # fmt: skip
    conn.execute(sql.SQL("GRANT CREATE ON SCHEMA {} TO {}").format(sch, sql.Identifier(boss)))
    for table in (*_TABLES, "ecpa_schema", "ecpa_status_checkpoint", *_partitions(conn)):
        name = sql.Identifier(schema, table)
        conn.execute(sql.SQL("ALTER TABLE {} OWNER TO {}").format(name, sql.Identifier(boss)))
        conn.execute(
            sql.SQL("REVOKE ALL ON {} FROM {}, {}").format(
                name, sql.Identifier(ship), sql.Identifier(read)
            )
        )
    run("GRANT SELECT ON ecpa_schema TO {}, {}", ship, read)
    run("GRANT SELECT ON ecpa_launch, ecpa_evidence, ecpa_ship_position TO {}", read)
    run("GRANT SELECT, INSERT, UPDATE, DELETE ON ecpa_reader_checkpoint TO {}", read)
    run(
        "GRANT SELECT, INSERT (launch_id, host,"
        " launch_doc, trust_doc, exit_doc), UPDATE (trust_doc, exit_doc, updated_at,"
        " supervisor_alive, supervisor_reason, supervisor_checked_at) ON ecpa_launch TO {}",
        ship,
    )
    run(
        "GRANT SELECT (launch_id, source, file_offset), INSERT (launch_id, source,"
        " file_offset, line, nonce_sha256, claimed_sha256, launch_day) ON ecpa_evidence TO {}",
        ship,
    )
    run("GRANT SELECT, INSERT, UPDATE ON ecpa_ship_position TO {}", ship)
    for table in ("ecpa_launch", "ecpa_evidence", "ecpa_ship_position"):
        conn.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        for policy in ("ecpa_read", "ecpa_ship"):
            conn.execute(f"DROP POLICY IF EXISTS {policy} ON {table}")
        run(f"CREATE POLICY ecpa_read ON {table} FOR SELECT TO {{}} USING (true)", read)
    run(
        "CREATE POLICY ecpa_ship ON ecpa_launch TO {} USING (shipper = current_user)"
        " WITH CHECK (shipper = current_user)",
        ship,
    )
    for table, owns in (("ecpa_evidence", _OWNS_LINE), ("ecpa_ship_position", _OWNS)):
        policy = f"CREATE POLICY ecpa_ship ON {table} TO {{}} USING ({owns}) WITH CHECK ({owns})"
        run(policy, ship)
