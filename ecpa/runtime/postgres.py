"""PostgreSQL for state several managers share (optional extra ``postgres``: psycopg 3).

A replay fence on SQLite serves one host. :class:`PostgresReplayFence` keeps the same
contract on a PostgreSQL server that manager replicas on several hosts share: a nonce is
accepted once, recorded in the same committed statement that accepts it (the nonce is the
primary key, the insert commits before the call returns). The evidence store that
``ecpa ship`` fills and ``ecpa status --db`` reads is :mod:`ecpa.runtime.store`.

Every table is created on first use, under a transaction-scoped advisory lock (several
processes starting together create it once), and each component has its version row in
``ecpa_schema``; a table of another version, or a fence table whose ``nonce`` is not its
primary key, is refused when opened. psycopg is imported only here and only when a store
is opened: ``import ecpa`` does not need it. Errors never carry the password of a DSN.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.fence import replayed

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "CONNECT_TIMEOUT_S",
    "SCHEMES",
    "PostgresReplayFence",
    "connect",
    "describe_dsn",
    "ensure_schema",
    "is_postgres_dsn",
]

#: A DSN in URI form names PostgreSQL; anything else given as ``--replay-db`` is a path.
SCHEMES = ("postgresql://", "postgres://")
#: Seconds to wait for a server before saying it is unreachable.
CONNECT_TIMEOUT_S = 5
#: No statement may hold a connection longer than this (a lock held elsewhere, a server
#: that stopped answering): the call fails with the store's code instead.
STATEMENT_TIMEOUT_MS = 10_000
# pg_advisory_xact_lock key under which tables are created ("ecpa" in ASCII).
_SCHEMA_LOCK = 0x65637061
FENCE_COMPONENT, FENCE_VERSION = "replay_fence", 1


def is_postgres_dsn(spec: object) -> bool:
    """Whether ``spec`` is a PostgreSQL URI (``postgresql://`` or ``postgres://``)."""
    return isinstance(spec, str) and spec.startswith(SCHEMES)


def describe_dsn(dsn: str) -> str:
    """Where a DSN points, for messages: host, port and database, never the password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:  # an unparsable DSN (or no psycopg): say only that it is one
        return "a PostgreSQL DSN that cannot be parsed"
    host = str(parts.get("host") or "localhost")
    port = str(parts.get("port") or "5432")
    return f"PostgreSQL at {host}:{port}, database {parts.get('dbname') or parts.get('user')}"


def driver(code: ErrorCode) -> Any:
    try:
        import psycopg
    except ImportError:
        raise EcpaError(
            code,
            "expected the PostgreSQL driver psycopg 3 (pip install 'ecpa[postgres]'), "
            "found it not installed",
        ) from None
    return psycopg


def connect(dsn: str, code: ErrorCode, *, autocommit: bool = True) -> psycopg.Connection[Any]:
    """A connection to ``dsn`` that fails fast: ``CONNECT_TIMEOUT_S`` to connect, every
    statement bounded by ``STATEMENT_TIMEOUT_MS``.

    Raises:
        EcpaError: ``code`` when psycopg is missing, the DSN is malformed or the server
            cannot be reached, naming where it looked (never the password).
    """
    psycopg = driver(code)
    try:
        conn = psycopg.connect(
            dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name="ecpa"
        )
    except psycopg.ProgrammingError as exc:  # a malformed DSN
        raise EcpaError(code, f"expected a PostgreSQL DSN, found one that is not: {exc}") from None
    except psycopg.Error as exc:
        raise store_error(code, dsn, exc) from None
    try:
        # A SET, not the DSN's "options": a DSN's own options (a search_path) stay in force.
        conn.execute(f"SET statement_timeout = {int(STATEMENT_TIMEOUT_MS)}")
        # A commit is acknowledged only once it is on disk, whatever the server's default:
        # an accepted nonce (a stored line) must survive the server's crash.
        conn.execute("SET synchronous_commit = on")
        conn.autocommit = autocommit
    except psycopg.Error as exc:
        conn.close()
        raise store_error(code, dsn, exc) from None
    return conn  # type: ignore[no-any-return]


def store_error(code: ErrorCode, dsn: str, exc: BaseException) -> EcpaError:
    """The error for a failed database call: where, and the server's first line."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return EcpaError(code, f"expected a usable {describe_dsn(dsn)}, found: {first}")


def ensure_schema(
    conn: psycopg.Connection[Any],
    component: str,
    version: int,
    create: Callable[[psycopg.Connection[Any]], None],
    code: ErrorCode,
) -> None:
    """Create ``component``'s tables once (``create``) and record its ``version``; refuse a
    database holding another version of it.

    Raises:
        EcpaError: ``code`` for another version; psycopg errors pass through.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS ecpa_schema ("
            " component text PRIMARY KEY, version integer NOT NULL)"
        )
        row = conn.execute(
            "SELECT version FROM ecpa_schema WHERE component = %s", (component,)
        ).fetchone()
        if row is None:
            create(conn)
            conn.execute(
                "INSERT INTO ecpa_schema (component, version) VALUES (%s, %s)", (component, version)
            )
        elif row[0] != version:
            raise EcpaError(
                code,
                f"expected schema version {version} of {component} (table ecpa_schema), "
                f"found version {row[0]}",
            )


def primary_key(conn: psycopg.Connection[Any], table: str) -> list[str]:
    """The primary key columns of ``table`` (as the search path finds it), sorted."""
    rows = conn.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a"
        " ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
        " WHERE i.indrelid = to_regclass(%s) AND i.indisprimary",
        (table,),
    ).fetchall()
    return sorted(str(r[0]) for r in rows)


def _create_fence(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ecpa_accepted_nonce ("
        " nonce text PRIMARY KEY, expires_at bigint NOT NULL, fingerprint text)"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS ecpa_accepted_nonce_expires ON ecpa_accepted_nonce (expires_at)"
    )


class PostgresReplayFence:
    """A durable fence on a PostgreSQL server, shared by verifiers on several hosts.

    ``check_and_record`` is one ``INSERT ... ON CONFLICT DO NOTHING`` on the table whose
    primary key is the nonce, committed before it returns: of two verifiers racing with one
    nonce, on any hosts, exactly one insert succeeds. A call that fails (the server went
    away) raises ``ECPA_REPLAY_STORE`` for that nonce, and the next call connects again;
    whether the failed insert committed is unknown, so that nonce may stay consumed (never
    accepted twice). Thread-safe (one connection, one lock).
    """

    #: :func:`ecpa.profile.fence.record_nonce` may pass ``fingerprint``.
    keeps_fingerprints = True

    def __init__(self, dsn: str) -> None:
        """Connect to ``dsn`` and create the fence's table on first use.

        Raises:
            EcpaError: ``ECPA_REPLAY_STORE`` when the server cannot be reached, the driver
                is not installed, the schema is of another version, or the table's primary
                key is not ``nonce``.
        """
        self.dsn = dsn
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        with self._lock:
            self._connection()

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        code = ErrorCode.REPLAY_STORE
        conn = connect(self.dsn, code)
        psycopg = driver(code)
        try:
            ensure_schema(conn, FENCE_COMPONENT, FENCE_VERSION, _create_fence, code)
            keys = primary_key(conn, "ecpa_accepted_nonce")
        except EcpaError:
            conn.close()
            raise
        except psycopg.Error as exc:
            conn.close()
            raise store_error(code, self.dsn, exc) from None
        if keys != ["nonce"]:
            conn.close()
            raise EcpaError(
                code,
                f"expected table ecpa_accepted_nonce in {describe_dsn(self.dsn)} with nonce as "
                f"its PRIMARY KEY (so each nonce is accepted once), found primary key {keys}",
            )
        self._conn = conn
        return conn

    def _failed(self, exc: BaseException) -> EcpaError:
        """Drop the connection (the next call makes a new one) and say what failed."""
        if self._conn is not None:
            with contextlib.suppress(Exception):  # already broken: closing is best effort
                self._conn.close()
            self._conn = None
        return store_error(ErrorCode.REPLAY_STORE, self.dsn, exc)

    def check_and_record(
        self, nonce: str, *, expires_at: int, fingerprint: str | None = None
    ) -> None:
        """Accept ``nonce`` once across every verifier using this database. With a
        ``fingerprint``, the very same record read again (same nonce, same fingerprint) is
        accepted again, silently; a nonce first recorded without one never is.

        Raises:
            EcpaError: ``REPLAYED_NONCE`` on a repeat; ``ECPA_REPLAY_STORE`` when the server
                cannot be used (whether that nonce was recorded is then unknown).
        """
        psycopg = driver(ErrorCode.REPLAY_STORE)
        with self._lock:
            conn = self._connection()
            try:
                cur = conn.execute(
                    "INSERT INTO ecpa_accepted_nonce (nonce, expires_at, fingerprint)"
                    " VALUES (%s, %s, %s) ON CONFLICT (nonce) DO NOTHING",
                    (nonce, expires_at, fingerprint),
                )
                if cur.rowcount == 1:
                    return
                row = conn.execute(
                    "SELECT fingerprint FROM ecpa_accepted_nonce WHERE nonce = %s", (nonce,)
                ).fetchone()
            except psycopg.Error as exc:
                raise self._failed(exc) from None
        if fingerprint is not None and row is not None and row[0] == fingerprint:
            return
        raise replayed(nonce)

    def purge(self, *, now: int, clock_skew: int = 0) -> int:
        """Forget nonces of statements expired before ``now - clock_skew``; return how many
        (one ``DELETE``: all of them or none). Keep ``now`` monotonic when you purge.

        Raises:
            EcpaError: ``ECPA_REPLAY_STORE`` when the server cannot be used.
        """
        return int(
            self._one(
                "WITH gone AS (DELETE FROM ecpa_accepted_nonce WHERE expires_at < %s"
                " RETURNING 1) SELECT count(*) FROM gone",
                (now - clock_skew,),
            )
        )

    def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        psycopg = driver(ErrorCode.REPLAY_STORE)
        with self._lock:
            conn = self._connection()
            try:
                row = conn.execute(sql, params).fetchone()
            except psycopg.Error as exc:
                raise self._failed(exc) from None
        assert row is not None
        return row[0]

    def __contains__(self, nonce: object) -> bool:
        return bool(
            self._one(
                "SELECT EXISTS (SELECT 1 FROM ecpa_accepted_nonce WHERE nonce = %s)", (nonce,)
            )
        )

    def __len__(self) -> int:
        return int(self._one("SELECT count(*) FROM ecpa_accepted_nonce", ()))

    def close(self) -> None:
        """Close the connection (a later call connects again)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> PostgresReplayFence:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
