"""PostgreSQL for state several managers share (optional extra ``postgres``: psycopg 3).

A replay fence on SQLite serves one host. :class:`PostgresReplayFence` keeps the same
contract on a PostgreSQL server that manager replicas on several hosts share: a nonce is
accepted once, recorded in the same committed statement that accepts it (the nonce is the
primary key, the insert commits before the call returns). The evidence store that
``ecpa ship`` fills and ``ecpa status --db`` reads is :mod:`ecpa.runtime.stores.store`.

Every table is created on first use, under a transaction-scoped advisory lock (several
processes starting together create it once), and each component has its version row in
``ecpa_schema``; a table of another version, or a fence table whose ``nonce`` is not its
primary key, is refused when opened. psycopg is imported only here and only when a store
is opened: ``import ecpa`` does not need it. Errors never carry the password of a DSN.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from typing import TYPE_CHECKING, Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.fence import replayed
from ecpa.runtime.stores.pgconn import (
    CALL_TIMEOUT_S,
    SCHEMES,
    Watchdog,
    connect,
    describe_dsn,
    driver,
    ensure_schema,
    is_postgres_dsn,
    looks_like_dsn,
    primary_key,
    store_error,
)

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "SCHEMES",
    "PostgresReplayFence",
    "describe_dsn",
    "is_postgres_dsn",
    "looks_like_dsn",
    "nonce_key",
]

FENCE_COMPONENT, FENCE_VERSION = "replay_fence", 1


def nonce_key(nonce: str) -> bytes:
    """What a nonce is stored under: SHA-256 of its UTF-8 bytes. A nonce is any non-empty
    string of a signed statement (NUL characters, any length): as a key it must fit a
    B-tree entry and a text column, so its digest is the key."""
    return hashlib.sha256(nonce.encode("utf-8", "surrogatepass")).digest()


def _create_fence(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ecpa_accepted_nonce ("
        " nonce_sha256 bytea PRIMARY KEY, expires_at bigint NOT NULL, fingerprint text)"
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

    def __init__(self, dsn: str, *, timeout: float = CALL_TIMEOUT_S) -> None:
        """Connect to ``dsn`` and create the fence's table on first use; no call blocks
        longer than ``timeout`` seconds, even when the server stops answering.

        Raises:
            EcpaError: ``ECPA_REPLAY_STORE`` when the server cannot be reached, the driver
                is not installed, the schema is of another version, or the table's primary
                key is not ``nonce``.
        """
        self.dsn = dsn
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._watchdog = Watchdog(timeout)
        with self._lock:
            self._connection()

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        code = ErrorCode.REPLAY_STORE
        conn = connect(self.dsn, code)
        psycopg = driver(code)
        try:
            with self._watchdog.guard(conn):
                ensure_schema(conn, FENCE_COMPONENT, FENCE_VERSION, _create_fence, code)
                keys = primary_key(conn, "ecpa_accepted_nonce")
        except EcpaError:
            conn.close()
            raise
        except psycopg.Error as exc:
            conn.close()
            raise store_error(code, self.dsn, exc) from None
        if keys != ["nonce_sha256"]:
            conn.close()
            raise EcpaError(
                code,
                f"expected table ecpa_accepted_nonce in {describe_dsn(self.dsn)} with "
                "nonce_sha256 as its PRIMARY KEY (so each nonce is accepted once), "
                f"found primary key {keys}",
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
        key = nonce_key(nonce)
        with self._lock:
            conn = self._connection()
            try:
                with self._watchdog.guard(conn):
                    cur = conn.execute(
                        "INSERT INTO ecpa_accepted_nonce (nonce_sha256, expires_at, fingerprint)"
                        " VALUES (%s, %s, %s) ON CONFLICT (nonce_sha256) DO NOTHING",
                        (key, expires_at, fingerprint),
                    )
                    if cur.rowcount == 1:
                        return
                    row = conn.execute(
                        "SELECT fingerprint FROM ecpa_accepted_nonce WHERE nonce_sha256 = %s",
                        (key,),
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
                with self._watchdog.guard(conn):
                    row = conn.execute(sql, params).fetchone()
            except psycopg.Error as exc:
                raise self._failed(exc) from None
        assert row is not None
        return row[0]

    def __contains__(self, nonce: object) -> bool:
        if not isinstance(nonce, str):
            return False
        sql = "SELECT EXISTS (SELECT 1 FROM ecpa_accepted_nonce WHERE nonce_sha256 = %s)"
        return bool(self._one(sql, (nonce_key(nonce),)))

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
