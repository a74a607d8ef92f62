"""The evidence store on PostgreSQL: launches' evidence lines, copied by ``ecpa ship`` from
the host that runs them, read by ``ecpa status --db`` on any host.

Tables (schema component ``evidence_store``, version 4, made on first use; a writer brings a
store of versions 1 to 3 up to date):

- ``ecpa_launch``: one row per launch, its ``launch.json``, ``trust.json`` and ``exit.json``
  byte for byte (a launch id already stored with another ``launch.json`` is refused), and
  (version 3) the database role that stored it first, its shipper;
- ``ecpa_evidence``: one row per complete line of a process log, byte for byte (without its
  newline), at its byte offset in that log (the primary key), partitioned by its launch's
  day (version 4: ``ecpa_evidence_YYYYMMDD``, :mod:`~ecpa.runtime.stores.store_schema`);
  a line's ``challenge_nonce`` is a unique key within its day: each nonce is stored once,
  and a line repeating a stored nonce (a replay)
  is kept with ``nonce`` NULL and the nonce it claims, so that the store holds what the
  logs hold and a status from it judges the same lines;
- ``ecpa_ship_position``: per log, how far it is copied (and which file, by device and
  inode), updated in the transaction that stores the lines: a shipper killed at any moment
  resumes where its last commit stopped, and no line is stored twice;
- ``ecpa_reader_checkpoint`` (version 2): where ``ecpa status --db`` stopped walking each
  log's history, one row per reader (database role): row level security lets each role
  see and write only its own (the version 1 ``ecpa_status_checkpoint`` is no longer read).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.json.strict_json import parse_object
from ecpa.runtime.model.evidence import MAX_RECORD_LENGTH, parse_record
from ecpa.runtime.stores.pgconn import (
    CALL_TIMEOUT_S,
    Watchdog,
    connect,
    describe_dsn,
    driver,
    ensure_schema,
    store_error,
)
from ecpa.runtime.stores.postgres import nonce_key
from ecpa.runtime.stores.store_schema import create_tables as _create
from ecpa.runtime.stores.store_schema import make_partition
from ecpa.runtime.stores.store_schema import upgrade_tables as _upgrade
from ecpa.runtime.stores.store_ship import Part, Position, ship_parts

if TYPE_CHECKING:
    import psycopg

__all__ = ["STORE_VERSION", "EvidenceStore", "LaunchRow", "Part", "Position", "line_nonce"]

STORE_COMPONENT, STORE_VERSION = "evidence_store", 4
_CODE = ErrorCode.EVIDENCE_STORE
#: A launch's row: stored, or (the same launch.json, the same host) brought up to date; no
#: row returned when another launch holds the id.
_UPSERT_LAUNCH = (
    "INSERT INTO ecpa_launch (launch_id, host, launch_doc, trust_doc, exit_doc)"
    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (launch_id) DO UPDATE SET {}"
    " WHERE ecpa_launch.launch_doc = EXCLUDED.launch_doc"
    " AND ecpa_launch.host = EXCLUDED.host RETURNING day"
)
_PUT_LAUNCH = _UPSERT_LAUNCH.format(
    "trust_doc = EXCLUDED.trust_doc, exit_doc = EXCLUDED.exit_doc, updated_at = now()"
)
_CLAIM_LAUNCH = _UPSERT_LAUNCH.format("updated_at = now()")
#: How many times a batch rolled back by a deadlock runs again before the store's error.
_DEADLOCK_TRIES = 3


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
    """A stored launch: its files, byte for byte (``None``: not there), and the supervisor
    (``ecpa run``) as ``ecpa ship`` last saw it on the launch's host."""

    launch_id: str
    host: str
    launch_doc: bytes
    trust_doc: bytes | None
    exit_doc: bytes | None
    supervisor_alive: bool | None = None
    supervisor_reason: str | None = None
    supervisor_checked_at: int | None = None


#: How many bytes before a log's shipped end are hashed into its position: a log rewritten
#: in place (the same inode, other bytes) is noticed, not mixed with what was stored.
ANCHOR_BYTES = 4096


class EvidenceStore:
    """A connection to the evidence store at ``dsn`` (tables made on first use unless
    ``create`` is False: a reader, such as ``ecpa status --db``, needs only the right to
    read, and to write checkpoints if it may).

    Every method raises ``EcpaError`` (``ECPA_EVIDENCE_STORE``) when the server cannot be
    used, naming where (never the password); nothing else escapes. After such a failure the
    next call connects again (:attr:`transient` says the last failure was the server's).
    Every call is bounded on this side too (:class:`~ecpa.runtime.stores.postgres.Watchdog`).
    """

    def __init__(self, dsn: str, *, create: bool = True, timeout: float = CALL_TIMEOUT_S) -> None:
        """Connect and make the tables on first use.

        Raises:
            EcpaError: ``ECPA_EVIDENCE_STORE`` when the server cannot be reached, the driver
                is missing, or the store is of another schema version (or, a reader, none).
        """
        self.dsn = dsn
        self._create = create
        self._psycopg = driver(_CODE)
        self._watchdog = Watchdog(timeout)
        self._conn: psycopg.Connection[Any] | None = None
        self.transient = False
        self._owns_evidence: bool | None = None
        self._connection()

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        conn = connect(self.dsn, _CODE)
        try:
            with self._watchdog.guard(conn):
                ensure_schema(
                    conn,
                    STORE_COMPONENT,
                    STORE_VERSION,
                    _create if self._create else None,
                    _CODE,
                    upgrade=_upgrade,
                )
        except EcpaError:
            conn.close()
            raise
        except self._psycopg.Error as exc:
            conn.close()
            raise store_error(_CODE, self.dsn, exc) from None
        self._conn = conn
        return conn

    def _failed(self, exc: BaseException) -> EcpaError:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
        self.transient = True
        return store_error(_CODE, self.dsn, exc)

    @contextlib.contextmanager
    def _session(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection, its calls bounded, any driver error turned into the store's."""
        conn = self._connection()
        try:
            with self._watchdog.guard(conn):
                yield conn
        except self._psycopg.Error as exc:
            raise self._failed(exc) from None
        self.transient = False

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection inside one transaction (committed when the block ends, rolled
        back when it raises); a driver error becomes the store's ``EcpaError``."""
        with self._session() as conn, conn.transaction():
            yield conn

    @property
    def where(self) -> str:
        """Where the store is, for messages."""
        return describe_dsn(self.dsn)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (one only: it is sent as a prepared statement); its rows (none
        for a statement that returns none), read in PostgreSQL's binary format: a stored
        line arrives as its bytes, not as the hex text the server would write and this
        client decode (most of a fleet verdict's bytes; docs/scale.md "The fleet verdict").
        The types the store's tables hold (text, name, bytea, bigint, integer, boolean,
        date, timestamptz) read as in text; others may not (a ``regclass``, ``xml``,
        ``money`` or a row comes back as bytes): cast them to ``text`` in the statement.

        Raises:
            EcpaError: ``ECPA_EVIDENCE_STORE`` when the server cannot be used.
        """
        with self._session() as conn:
            cur = conn.execute(sql, params, binary=True)
            return cur.fetchall() if cur.description is not None else []

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
                ``launch.json`` (another launch, or another host, under the same id), or
                (``ecpa store init``'s roles) by another shipper.
        """
        self._launch_row(_PUT_LAUNCH, (launch_id, host, launch_doc, trust_doc, exit_doc))

    def claim_launch(self, launch_id: str, host: str, launch_doc: bytes) -> None:
        """Store the launch (``launch.json`` only) if it is not stored yet: its shipper's
        before anything else of it (the certificates first among them), what was stored
        unchanged; and, when this role owns the evidence table, its day's partition made if
        missing, in a transaction of its own (making one locks the table until its commit:
        never inside a batch). Raises as :meth:`put_launch`."""
        day = self._launch_row(_CLAIM_LAUNCH, (launch_id, host, launch_doc, None, None))
        if self._owns_evidence is None:
            rows = self.query(
                "SELECT pg_has_role(current_user, relowner, 'USAGE') FROM pg_class"
                " WHERE oid = 'ecpa_evidence'::regclass"
            )
            self._owns_evidence = bool(rows and rows[0][0])
        if self._owns_evidence:  # else the owner makes days ahead (store init, prune)
            with self.transaction() as conn:
                make_partition(conn, day)

    def _launch_row(self, sql: str, params: tuple[Any, ...]) -> Any:
        rows = self.query(sql, params)
        if not rows:
            raise EcpaError(
                _CODE,
                f"expected launch {params[0]!r} in {self.where} to be this launch (the same "
                "launch.json, the same host), found another stored under that id",
            )
        return rows[0][0]

    def note_supervisor(
        self, launch_id: str, alive: bool, reason: str, checked_at: int | None = None
    ) -> None:
        """Record the supervisor's liveness as seen (by ``ecpa ship``) on the launch's host,
        timed by the database server's clock (``now()``) unless ``checked_at`` is given (a
        test's clock): the one clock every reader of the store judges by (RUNTIME.md
        "Round 3", "Clocks"), whatever the writer host's says."""
        if checked_at is None:
            self.query(
                "UPDATE ecpa_launch SET supervisor_alive = %s, supervisor_reason = %s,"
                " supervisor_checked_at = floor(extract(epoch from now()))::bigint"
                " WHERE launch_id = %s",
                (alive, reason, launch_id),
            )
            return
        self.query(
            "UPDATE ecpa_launch SET supervisor_alive = %s, supervisor_reason = %s,"
            " supervisor_checked_at = %s WHERE launch_id = %s",
            (alive, reason, checked_at, launch_id),
        )

    def server_now(self) -> int:
        """The database server's clock, whole Unix seconds (what ``status --db`` judges by).

        Raises:
            EcpaError: ``ECPA_EVIDENCE_STORE`` when the store cannot be asked.
        """
        rows = self.query("SELECT floor(extract(epoch from now()))::bigint")
        return int(rows[0][0])

    def launch(self, launch_id: str) -> LaunchRow | None:
        """The stored launch, or None."""
        rows = self.query(
            "SELECT host, launch_doc, trust_doc, exit_doc, supervisor_alive, supervisor_reason,"
            " supervisor_checked_at FROM ecpa_launch WHERE launch_id = %s",
            (launch_id,),
        )
        if not rows:
            return None
        host, doc, trust, end, alive, reason, checked = rows[0]
        return LaunchRow(
            launch_id,
            host,
            bytes(doc),
            None if trust is None else bytes(trust),
            None if end is None else bytes(end),
            alive,
            reason,
            checked,
        )

    def launch_ids(self, limit: int) -> list[str]:
        """At most ``limit`` stored launch ids, in order (read only: one ``SELECT``)."""
        rows = self.query(
            "SELECT launch_id FROM ecpa_launch ORDER BY launch_id LIMIT %s", (max(0, limit),)
        )
        return [str(row[0]) for row in rows]

    # --- shipping ------------------------------------------------------------------------

    def position(self, launch_id: str, source: str) -> Position | None:
        """How far ``source`` is shipped, or None (not yet)."""
        rows = self.query(
            "SELECT dev, ino, end_offset, anchor FROM ecpa_ship_position"
            " WHERE launch_id = %s AND source = %s",
            (launch_id, source),
        )
        if not rows:
            return None
        dev, ino, end, anchor = rows[0]
        return Position(dev, ino, end, bytes(anchor))

    def positions(self, launch_id: str, sources: list[str] | None = None) -> dict[str, Position]:
        """How far each of ``sources`` is shipped (absent: not yet), in one query; without
        ``sources``, every log of the launch that has shipped lines, by name (the listing
        of :meth:`sources` with each one's position)."""
        sql = (
            "SELECT source, dev, ino, end_offset, anchor FROM ecpa_ship_position"
            " WHERE launch_id = %s"
        )
        params: tuple[Any, ...] = (launch_id,)
        if sources is not None:
            sql, params = sql + " AND source = ANY(%s)", (launch_id, sources)
        rows = self.query(sql + " ORDER BY source", params)
        return {str(s): Position(int(d), int(i), int(e), bytes(a)) for s, d, i, e, a in rows}

    def ship(
        self,
        launch_id: str,
        source: str,
        at: Position,
        lines: list[tuple[int, bytes]],
        to: Position,
    ) -> int | None:
        """Store ``lines`` (offset, bytes) of ``source``, shipped from ``at`` to ``to``, and
        move its position to ``to``, in one transaction; how many lines were stored, or None
        when the position is no longer ``at`` (another shipper moved it: read it again).

        Raises:
            EcpaError: ``ECPA_EVIDENCE_STORE`` when the server cannot be used.
        """
        return self.ship_logs(launch_id, [(source, at, lines, to)])[0]

    def ship_logs(
        self,
        launch_id: str,
        parts: list[tuple[str, Position, list[tuple[int, bytes]], Position]],
    ) -> list[int | None]:
        """:meth:`ship` for several logs of a launch (``(source, at, lines, to)`` each, no
        source twice) in one transaction: per log, how many lines were stored, or None
        (its position moved: nothing of that log stored). A line claiming a nonce already
        stored (by any launch, even one committing meanwhile) is stored without it; a
        batch that PostgreSQL rolls back to break a deadlock with another runs again.

        Raises:
            EcpaError: ``ECPA_EVIDENCE_STORE`` when the server cannot be used.
        """
        keyed = []
        for source, at, lines, to in parts:
            claims = []
            for offset, line in lines:
                nonce = line_nonce(line)
                claims.append((offset, line, None if nonce is None else nonce_key(nonce)))
            keyed.append(Part(source, at, claims, to))
        with self._session() as conn:
            for attempt in range(_DEADLOCK_TRIES):
                try:
                    with conn.transaction():
                        return ship_parts(conn, launch_id, keyed)
                except self._psycopg.errors.DeadlockDetected:
                    # Two batches claiming two nonces in opposite orders: PostgreSQL
                    # rolled this one back; the other commits, and this one runs again.
                    if attempt + 1 == _DEADLOCK_TRIES:
                        raise
        raise AssertionError("unreachable")  # pragma: no cover

    # --- reading -------------------------------------------------------------------------

    def sources(self, launch_id: str) -> list[str]:
        """The logs of a launch that have shipped lines, by name."""
        return list(self.positions(launch_id))

    def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> EvidenceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: The longest line stored as it is; a longer one (never a record) is stored cut to this
#: length: two bytes more than a record may have, so that even with one ``\r`` taken off its
#: end (as a reader does) it is still refused as too large, as the line in the file is.
MAX_STORED_LINE = MAX_RECORD_LENGTH + 2
