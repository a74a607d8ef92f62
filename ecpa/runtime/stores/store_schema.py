"""The evidence store's tables (:mod:`ecpa.runtime.stores.store`): made on first use, and brought
up to date from an older version by a writer."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "DEFAULT_PARTITION",
    "PARTITION_PREFIX",
    "create_tables",
    "make_partition",
    "make_partitions_ahead",
    "upgrade_tables",
]

#: The evidence table's partitions: one per UTC day, ``ecpa_evidence_YYYYMMDD``, holding the
#: lines of the launches first stored that day (a launch's lines are all in one partition).
PARTITION_PREFIX = "ecpa_evidence_"
#: The partition of the lines of a day that has none of its own (made ahead by the tables'
#: owner at ``ecpa store init`` and ``ecpa store prune``, and by an owner storing a launch).
DEFAULT_PARTITION = "ecpa_evidence_default"
#: Days made ahead, today included.
DAYS_AHEAD = 8


def create_tables(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ecpa_launch ("
        " launch_id text PRIMARY KEY, host text NOT NULL, launch_doc bytea NOT NULL,"
        " trust_doc bytea, exit_doc bytea, supervisor_alive boolean,"
        " supervisor_reason text, supervisor_checked_at bigint,"
        " updated_at timestamptz NOT NULL DEFAULT now())"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ecpa_evidence ("
        " launch_id text NOT NULL, source text NOT NULL, file_offset bigint NOT NULL,"
        " line bytea NOT NULL, nonce_sha256 bytea UNIQUE, claimed_sha256 bytea,"
        " stored_at timestamptz NOT NULL DEFAULT now(),"
        " PRIMARY KEY (launch_id, source, file_offset))"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ecpa_ship_position ("
        " launch_id text NOT NULL, source text NOT NULL, dev bigint NOT NULL,"
        " ino bigint NOT NULL, end_offset bigint NOT NULL, anchor bytea NOT NULL,"
        " PRIMARY KEY (launch_id, source))"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ecpa_status_checkpoint ("
        " launch_id text NOT NULL, source text NOT NULL, doc text NOT NULL,"
        " PRIMARY KEY (launch_id, source))"
    )
    upgrade_tables(conn, 1)


def upgrade_tables(conn: psycopg.Connection[Any], found: int) -> None:
    """Version 2 (RUNTIME.md "Round 3", "The store"): each reader's history checkpoints are
    its own (``ecpa_reader_checkpoint``, keyed by the database role that wrote them, row
    level security forced): a role that may write checkpoints can no longer store one that
    makes a slot undecided for another replica. The 1.x table stays, unread.

    Version 3 (docs/scale.md, "Roles"): each launch names the database role that stored it
    first (``ecpa_launch.shipper``), the one shipper role that may write its rows once
    ``ecpa store init`` has made the roles (launches of an older store: the upgrader's).

    Version 4 (docs/scale.md, "Partitions"): the evidence table is partitioned by day, the
    UTC day its launch was first stored (``ecpa_launch.day``, the evidence's
    ``launch_day``): ``ecpa store prune`` drops whole days of ended launches. A nonce is
    unique within its day's partition (a record copied into another launch is refused by
    its binding in any case). The lines of an older store are copied into the new table;
    the new table has none of the old one's grants (``ecpa store init`` again gives them)."""
    if found < 4:
        _partition(conn)
    if found < 3:
        conn.execute(
            "ALTER TABLE ecpa_launch ADD COLUMN IF NOT EXISTS"
            " shipper name NOT NULL DEFAULT current_user"
        )
    if found < 2:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS ecpa_reader_checkpoint ("
            " reader name NOT NULL DEFAULT current_user, launch_id text NOT NULL,"
            " source text NOT NULL, doc text NOT NULL,"
            " PRIMARY KEY (reader, launch_id, source))"
        )
        conn.execute("ALTER TABLE ecpa_reader_checkpoint ENABLE ROW LEVEL SECURITY")
        conn.execute("ALTER TABLE ecpa_reader_checkpoint FORCE ROW LEVEL SECURITY")
        conn.execute("DROP POLICY IF EXISTS ecpa_own_checkpoints ON ecpa_reader_checkpoint")
        conn.execute(
            "CREATE POLICY ecpa_own_checkpoints ON ecpa_reader_checkpoint"
            " USING (reader = current_user) WITH CHECK (reader = current_user)"
        )
        # The readers of version 1 keep their rights: whoever could read (and write) the
        # old checkpoints may read (and write) their own in the new table.
        grants = conn.execute(
            "SELECT grantee, privilege_type FROM information_schema.role_table_grants"
            " WHERE table_name = 'ecpa_status_checkpoint' AND table_schema = current_schema()"
            " AND privilege_type IN ('SELECT', 'INSERT', 'UPDATE')"
            " AND grantee <> current_user"
        ).fetchall()
        from psycopg import sql  # the postgres extra, present whenever a store is used

        for grantee, privilege in grants:
            who = sql.SQL("PUBLIC") if grantee == "PUBLIC" else sql.Identifier(grantee)
            conn.execute(
                sql.SQL("GRANT {} ON ecpa_reader_checkpoint TO {}").format(sql.SQL(privilege), who)
            )


def _partition(conn: psycopg.Connection[Any]) -> None:

    conn.execute("ALTER TABLE ecpa_launch ADD COLUMN IF NOT EXISTS day date")
    kind = conn.execute(
        "SELECT c.relkind FROM pg_class c WHERE c.oid = 'ecpa_evidence'::regclass"
    ).fetchone()
    if kind is not None and kind[0] == "p":
        return  # already partitioned (a store marked older than it is)
    conn.execute(
        "UPDATE ecpa_launch l SET day = (coalesce((SELECT min(e.stored_at) FROM ecpa_evidence e"
        " WHERE e.launch_id = l.launch_id), l.updated_at) AT TIME ZONE 'UTC')::date"
        " WHERE day IS NULL"
    )
    conn.execute(
        "ALTER TABLE ecpa_launch ALTER COLUMN day SET DEFAULT (now() AT TIME ZONE 'UTC')::date,"
        " ALTER COLUMN day SET NOT NULL"
    )
    conn.execute("ALTER TABLE ecpa_evidence RENAME TO ecpa_evidence_v3")
    conn.execute("ALTER INDEX IF EXISTS ecpa_evidence_pkey RENAME TO ecpa_evidence_v3_pkey")
    conn.execute(
        "ALTER INDEX IF EXISTS ecpa_evidence_nonce_sha256_key RENAME TO ecpa_evidence_v3_nonce"
    )
    conn.execute(
        "CREATE TABLE ecpa_evidence ("
        " launch_id text NOT NULL, source text NOT NULL, file_offset bigint NOT NULL,"
        " line bytea NOT NULL, nonce_sha256 bytea, claimed_sha256 bytea,"
        " stored_at timestamptz NOT NULL DEFAULT now(), launch_day date NOT NULL,"
        " PRIMARY KEY (launch_id, source, file_offset, launch_day),"
        " UNIQUE (nonce_sha256, launch_day)) PARTITION BY RANGE (launch_day)"
    )
    # Lines of a day without its partition (made ahead by the tables' owner: a shipper may
    # not make one) land here, and are pruned from here.
    conn.execute(f"CREATE TABLE {DEFAULT_PARTITION} PARTITION OF ecpa_evidence DEFAULT")
    # A line's day: its launch's, or (a line of no stored launch) the day it was stored.
    conn.execute("ALTER TABLE ecpa_evidence_v3 ADD COLUMN launch_day date")
    conn.execute(
        "UPDATE ecpa_evidence_v3 e SET launch_day = coalesce((SELECT l.day FROM ecpa_launch l"
        " WHERE l.launch_id = e.launch_id), (e.stored_at AT TIME ZONE 'UTC')::date)"
    )
    days = conn.execute("SELECT DISTINCT launch_day FROM ecpa_evidence_v3").fetchall()
    for (day,) in days:
        make_partition(conn, day)
    conn.execute(
        "INSERT INTO ecpa_evidence (launch_id, source, file_offset, line, nonce_sha256,"
        " claimed_sha256, stored_at, launch_day)"
        " SELECT launch_id, source, file_offset, line, nonce_sha256, claimed_sha256,"
        " stored_at, launch_day FROM ecpa_evidence_v3"
    )
    conn.execute("DROP TABLE ecpa_evidence_v3")


def make_partition(conn: psycopg.Connection[Any], day: datetime.date) -> str | None:
    """Make ``day``'s partition of the evidence table, as its owner, unless it is there;
    None, or why it was not made (a relation of that name that is no partition of it; lines
    of that day already in the default partition): that day's lines then stay in the
    default partition, nothing is lost."""
    from psycopg import sql

    name = f"{PARTITION_PREFIX}{day:%Y%m%d}"
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(current_schema() || %s))", (name,))
    found = conn.execute(
        "SELECT c.oid, EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid"
        " AND i.inhparent = 'ecpa_evidence'::regclass) FROM pg_class c"
        " WHERE c.relname = %s AND c.relnamespace = current_schema()::regnamespace",
        (name,),
    ).fetchone()
    if found is not None:
        return (
            None if found[1] else f"{name} is a relation that is not a partition of ecpa_evidence"
        )
    waiting = conn.execute(
        sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE launch_day = %s)").format(
            sql.Identifier(DEFAULT_PARTITION)
        ),
        (day,),
    ).fetchone()
    if waiting is not None and waiting[0]:
        return f"lines of {day} are in {DEFAULT_PARTITION} already"
    conn.execute(
        sql.SQL("CREATE TABLE {} PARTITION OF ecpa_evidence FOR VALUES FROM ({}) TO ({})").format(
            sql.Identifier(name), sql.Literal(day), sql.Literal(day + datetime.timedelta(days=1))
        )
    )
    return None


def make_partitions_ahead(conn: psycopg.Connection[Any]) -> list[str]:
    """The days from today (UTC, the server's clock) to :data:`DAYS_AHEAD` days on, each
    made if missing; why any was not (see :func:`make_partition`)."""
    row = conn.execute("SELECT (now() AT TIME ZONE 'UTC')::date").fetchone()
    assert row is not None
    notes = []
    for ahead in range(DAYS_AHEAD):
        note = make_partition(conn, row[0] + datetime.timedelta(days=ahead))
        if note is not None:
            notes.append(note)
    return notes
