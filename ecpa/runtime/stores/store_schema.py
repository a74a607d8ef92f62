"""The evidence store's tables (:mod:`ecpa.runtime.stores.store`): made on first use, and brought
up to date from an older version by a writer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

__all__ = ["create_tables", "upgrade_tables"]


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
    ``ecpa store init`` has made the roles (launches of an older store: the upgrader's)."""
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
