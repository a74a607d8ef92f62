"""The evidence store on PostgreSQL: launches' evidence lines, copied by ``ecpa ship`` from
the host that runs them, read by ``ecpa status --db`` on any host.

Tables (schema component ``evidence_store``, version 1, made on first use):

- ``ecpa_launch``: one row per launch, its ``launch.json``, ``trust.json`` and ``exit.json``
  byte for byte (a launch id already stored with another ``launch.json`` is refused);
- ``ecpa_evidence``: one row per complete line of a process log, byte for byte (without its
  newline), at its byte offset in that log (the primary key); a line's ``challenge_nonce``
  is a unique key: each nonce is stored once, and a line repeating a stored nonce (a replay)
  is kept with ``nonce`` NULL and the nonce it claims, so that the store holds what the
  logs hold and a status from it judges the same lines;
- ``ecpa_ship_position``: per log, how far it is copied (and which file, by device and
  inode), updated in the transaction that stores the lines: a shipper killed at any moment
  resumes where its last commit stopped, and no line is stored twice;
- ``ecpa_status_checkpoint``: where ``ecpa status --db`` stopped walking each log's history.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile._json import parse_object
from ecpa.runtime.evidence import MAX_RECORD_LENGTH, parse_record
from ecpa.runtime.postgres import connect, describe_dsn, driver, ensure_schema, store_error

if TYPE_CHECKING:
    import psycopg

__all__ = ["STORE_VERSION", "EvidenceStore", "LaunchRow", "Position", "line_nonce"]

STORE_COMPONENT, STORE_VERSION = "evidence_store", 1
_CODE = ErrorCode.EVIDENCE_STORE


def _create(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ecpa_launch ("
        " launch_id text PRIMARY KEY, host text NOT NULL, launch_doc bytea NOT NULL,"
        " trust_doc bytea, exit_doc bytea, updated_at timestamptz NOT NULL DEFAULT now())"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ecpa_evidence ("
        " launch_id text NOT NULL, source text NOT NULL, file_offset bigint NOT NULL,"
        " line bytea NOT NULL, nonce text UNIQUE, claimed_nonce text,"
        " stored_at timestamptz NOT NULL DEFAULT now(),"
        " PRIMARY KEY (launch_id, source, file_offset))"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ecpa_ship_position ("
        " launch_id text NOT NULL, source text NOT NULL, dev bigint NOT NULL,"
        " ino bigint NOT NULL, end_offset bigint NOT NULL, PRIMARY KEY (launch_id, source))"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ecpa_status_checkpoint ("
        " launch_id text NOT NULL, source text NOT NULL, doc text NOT NULL,"
        " PRIMARY KEY (launch_id, source))"
    )


def line_nonce(line: bytes) -> str | None:
    """The ``challenge_nonce`` a record line claims, unverified (None: it claims none, or is
    not a record): the key it is stored under, not a judgement of it."""
    try:
        payload = parse_object(parse_record(line).payload, what="statement")
    except EcpaError:
        return None
    nonce = payload.get("challenge_nonce")
    return nonce if isinstance(nonce, str) else None


@dataclass(frozen=True)
class LaunchRow:
    """A stored launch: its files, byte for byte (``None``: not there)."""

    launch_id: str
    host: str
    launch_doc: bytes
    trust_doc: bytes | None
    exit_doc: bytes | None


@dataclass(frozen=True)
class Position:
    """How far a log is shipped: the file (device, inode) and the offset after its last
    stored line."""

    dev: int
    ino: int
    end: int


class EvidenceStore:
    """A connection to the evidence store at ``dsn`` (tables made on first use).

    Every method raises ``EcpaError`` (``ECPA_EVIDENCE_STORE``) when the server cannot be
    used, naming where (never the password); nothing else escapes.
    """

    def __init__(self, dsn: str) -> None:
        """Connect and make the tables on first use.

        Raises:
            EcpaError: ``ECPA_EVIDENCE_STORE`` when the server cannot be reached, the driver
                is missing, or the store is of another schema version.
        """
        self.dsn = dsn
        self.driver = driver(_CODE)
        self._conn = connect(dsn, _CODE)
        try:
            ensure_schema(self._conn, STORE_COMPONENT, STORE_VERSION, _create, _CODE)
        except EcpaError:
            self._conn.close()
            raise
        except self.driver.Error as exc:
            self._conn.close()
            raise store_error(_CODE, dsn, exc) from None

    @property
    def where(self) -> str:
        """Where the store is, for messages."""
        return describe_dsn(self.dsn)

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            cur = self._conn.execute(sql, params)
            return cur.fetchall() if cur.description is not None else []
        except self.driver.Error as exc:
            raise store_error(_CODE, self.dsn, exc) from None

    # --- launches ------------------------------------------------------------------------

    def put_launch(
        self,
        launch_id: str,
        host: str,
        launch_doc: bytes,
        trust_doc: bytes | None,
        exit_doc: bytes | None,
    ) -> None:
        """Store a launch's files (the trust store and the end replace what was stored).

        Raises:
            EcpaError: ``ECPA_EVIDENCE_STORE`` when ``launch_id`` is stored with another
                ``launch.json`` (another launch, or another host, under the same id).
        """
        rows = self._run(
            "INSERT INTO ecpa_launch (launch_id, host, launch_doc, trust_doc, exit_doc)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (launch_id) DO UPDATE SET"
            " trust_doc = EXCLUDED.trust_doc, exit_doc = EXCLUDED.exit_doc, updated_at = now()"
            " WHERE ecpa_launch.launch_doc = EXCLUDED.launch_doc"
            " AND ecpa_launch.host = EXCLUDED.host RETURNING 1",
            (launch_id, host, launch_doc, trust_doc, exit_doc),
        )
        if not rows:
            raise EcpaError(
                _CODE,
                f"expected launch {launch_id!r} in {self.where} to be this launch (the same "
                "launch.json, the same host), found another stored under that id",
            )

    def launch(self, launch_id: str) -> LaunchRow | None:
        """The stored launch, or None."""
        rows = self._run(
            "SELECT host, launch_doc, trust_doc, exit_doc FROM ecpa_launch WHERE launch_id = %s",
            (launch_id,),
        )
        if not rows:
            return None
        host, doc, trust, end = rows[0]
        return LaunchRow(
            launch_id,
            host,
            bytes(doc),
            None if trust is None else bytes(trust),
            None if end is None else bytes(end),
        )

    # --- shipping ------------------------------------------------------------------------

    def position(self, launch_id: str, source: str) -> Position | None:
        """How far ``source`` is shipped, or None (not yet)."""
        rows = self._run(
            "SELECT dev, ino, end_offset FROM ecpa_ship_position"
            " WHERE launch_id = %s AND source = %s",
            (launch_id, source),
        )
        return Position(*rows[0]) if rows else None

    def ship(
        self,
        launch_id: str,
        source: str,
        at: Position,
        lines: list[tuple[int, bytes]],
        end: int,
    ) -> int | None:
        """Store ``lines`` (offset, bytes) of ``source`` shipped from ``at`` to ``end``, and
        the new position, in one transaction; how many lines were stored, or None when the
        position is no longer ``at`` (another shipper moved it: read it again).

        Raises:
            EcpaError: ``ECPA_EVIDENCE_STORE`` when the server cannot be used.
        """
        pg = self.driver
        keyed = [(offset, line, line_nonce(line)) for offset, line in lines]
        try:
            with self._conn.transaction():
                row = self._conn.execute(
                    "SELECT dev, ino, end_offset FROM ecpa_ship_position"
                    " WHERE launch_id = %s AND source = %s FOR UPDATE",
                    (launch_id, source),
                ).fetchone()
                now = Position(*row) if row else Position(at.dev, at.ino, 0)
                if now != at:
                    return None
                claimed = [n for _, _, n in keyed if n is not None]
                taken = {
                    r[0]
                    for r in self._conn.execute(
                        "SELECT nonce FROM ecpa_evidence WHERE nonce = ANY(%s)", (claimed,)
                    ).fetchall()
                }
                params = []
                for offset, line, nonce in keyed:
                    unique = nonce if nonce is not None and nonce not in taken else None
                    if unique is not None:
                        taken.add(unique)
                    params.append((launch_id, source, offset, line, unique, nonce))
                with self._conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO ecpa_evidence"
                        " (launch_id, source, file_offset, line, nonce, claimed_nonce)"
                        " VALUES (%s, %s, %s, %s, %s, %s)"
                        " ON CONFLICT (launch_id, source, file_offset) DO NOTHING",
                        params,
                    )
                self._conn.execute(
                    "INSERT INTO ecpa_ship_position (launch_id, source, dev, ino, end_offset)"
                    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (launch_id, source)"
                    " DO UPDATE SET end_offset = EXCLUDED.end_offset",
                    (launch_id, source, at.dev, at.ino, end),
                )
        except pg.errors.UniqueViolation:  # a shipper racing us stored first: read again
            return None
        except pg.Error as exc:
            raise store_error(_CODE, self.dsn, exc) from None
        return len(params)

    # --- reading -------------------------------------------------------------------------

    def sources(self, launch_id: str) -> list[str]:
        """The logs of a launch that have shipped lines, by name."""
        rows = self._run(
            "SELECT source FROM ecpa_ship_position WHERE launch_id = %s ORDER BY source",
            (launch_id,),
        )
        return [str(r[0]) for r in rows]

    def newest_lines(
        self, launch_id: str, source: str, end: int, limit: int
    ) -> list[tuple[int, bytes]]:
        """Up to ``limit`` lines of ``source`` before ``end``, newest first, with offsets."""
        rows = self._run(
            "SELECT file_offset, line FROM ecpa_evidence WHERE launch_id = %s AND source = %s"
            " AND file_offset < %s ORDER BY file_offset DESC LIMIT %s",
            (launch_id, source, end, limit),
        )
        return [(int(o), bytes(line)) for o, line in rows]

    def lines_from(
        self, launch_id: str, source: str, start: int, end: int, limit: int
    ) -> list[tuple[int, bytes]]:
        """Up to ``limit`` lines of ``source`` in [``start``, ``end``), oldest first."""
        rows = self._run(
            "SELECT file_offset, line FROM ecpa_evidence WHERE launch_id = %s AND source = %s"
            " AND file_offset >= %s AND file_offset < %s ORDER BY file_offset LIMIT %s",
            (launch_id, source, start, end, limit),
        )
        return [(int(o), bytes(line)) for o, line in rows]

    def line_at(self, launch_id: str, source: str, offset: int) -> bytes | None:
        """The line of ``source`` at ``offset``, or None."""
        rows = self._run(
            "SELECT line FROM ecpa_evidence WHERE launch_id = %s AND source = %s"
            " AND file_offset = %s",
            (launch_id, source, offset),
        )
        return bytes(rows[0][0]) if rows else None

    def count(self, launch_id: str) -> int:
        """How many lines of the launch are stored."""
        return int(
            self._run("SELECT count(*) FROM ecpa_evidence WHERE launch_id = %s", (launch_id,))[0][0]
        )

    def checkpoint(self, launch_id: str, source: str) -> dict[str, Any] | None:
        """The saved history checkpoint of ``source`` (as saved; checked by the caller)."""
        rows = self._run(
            "SELECT doc FROM ecpa_status_checkpoint WHERE launch_id = %s AND source = %s",
            (launch_id, source),
        )
        if not rows:
            return None
        try:
            doc = json.loads(rows[0][0])
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def save_checkpoint(self, launch_id: str, source: str, doc: dict[str, Any]) -> None:
        """Replace the history checkpoint of ``source``."""
        self._run(
            "INSERT INTO ecpa_status_checkpoint (launch_id, source, doc) VALUES (%s, %s, %s)"
            " ON CONFLICT (launch_id, source) DO UPDATE SET doc = EXCLUDED.doc",
            (launch_id, source, json.dumps(doc, separators=(",", ":"))),
        )

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def __enter__(self) -> EvidenceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: The longest line stored as it is; a longer one (never a record) is stored cut to one byte
#: more than a record may have, which a status refuses as too large, as it refuses the line.
MAX_STORED_LINE = MAX_RECORD_LENGTH + 1
