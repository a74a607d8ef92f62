"""Replay fences (PROFILE §3 step 25): each ``challenge_nonce`` is accepted once.

A fence is consulted last, after every other check has passed, and records the nonce in the
same step that accepts it, so a statement refused for any other reason never consumes its
nonce. :class:`SqliteReplayFence` is durable and shared by several verifier processes; any
object with ``check_and_record`` can serve as a fence.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.fence import MemoryReplayFence, ReplayFence, record_nonce, replayed
from ecpa.runtime.stores.postgres import PostgresReplayFence, is_postgres_dsn, looks_like_dsn

__all__ = [
    "MemoryReplayFence",
    "PostgresReplayFence",
    "ReplayDb",
    "ReplayFence",
    "SqliteReplayFence",
    "open_fence",
    "open_replay_fence",
    "record_nonce",
    "replayed",
]

#: A durable replay fence: an SQLite file, a ``postgresql://`` DSN, or None (in memory).
ReplayDb = str | Path | None


class SqliteReplayFence:
    """A durable fence in an SQLite file, shared safely by several verifier processes.

    The nonce is the table's primary key and is inserted in its own committed transaction,
    so of two processes racing with one nonce exactly one insert succeeds: check and record
    are one atomic step. WAL journaling and ``synchronous=FULL`` keep an accepted nonce
    across a crash. A table that cannot enforce that uniqueness (``nonce`` not its primary
    key) is refused when opened, never used: it would turn the fence off silently. A store
    that stays locked longer than ``timeout`` seconds fails (``ECPA_REPLAY_STORE``), it is
    not waited for item after item.
    """

    #: :func:`ecpa.profile.fence.record_nonce` may pass ``fingerprint``.
    keeps_fingerprints = True

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 2.0) -> None:
        """Open or create the fence at ``path``.

        Raises:
            EcpaError: ``ECPA_REPLAY_STORE`` when the file cannot be opened as a fence, is
                locked for more than ``timeout`` seconds, or holds an ``accepted_nonce``
                table whose ``nonce`` is not its primary key.
        """
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._db = sqlite3.connect(
                    self.path, timeout=timeout, isolation_level=None, check_same_thread=False
                )
            except sqlite3.Error as exc:
                raise self._unusable(exc) from None
            try:
                self._setup()
                return
            except sqlite3.OperationalError as exc:
                # Switching to WAL takes a lock SQLite does not wait for (no busy handler):
                # several verifiers opening one new file together must retry, not fail.
                self._db.close()
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise self._unusable(exc) from None
                time.sleep(0.01)
            except sqlite3.Error as exc:
                self._db.close()
                raise self._unusable(exc) from None
            except EcpaError:
                self._db.close()
                raise

    def _setup(self) -> None:
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS accepted_nonce ("
            " nonce TEXT PRIMARY KEY NOT NULL, expires_at INTEGER NOT NULL,"
            " fingerprint TEXT) WITHOUT ROWID"
        )
        columns = {row[1]: row for row in self._db.execute("PRAGMA table_info(accepted_nonce)")}
        keys = sorted(name for name, row in columns.items() if row[5])  # row[5]: pk position
        if keys != ["nonce"]:
            raise EcpaError(
                ErrorCode.REPLAY_STORE,
                f"expected table accepted_nonce in {self.path} with nonce as its PRIMARY KEY "
                f"(so each nonce is accepted once), found primary key columns {keys}",
            )
        if "expires_at" not in columns:
            raise EcpaError(
                ErrorCode.REPLAY_STORE,
                f"expected table accepted_nonce in {self.path} with column expires_at, "
                f"found columns {sorted(columns)}",
            )
        if "fingerprint" not in columns:  # a fence made before fingerprints: add the column
            self._db.execute("ALTER TABLE accepted_nonce ADD COLUMN fingerprint TEXT")

    def _unusable(self, exc: sqlite3.Error) -> EcpaError:
        return EcpaError(
            ErrorCode.REPLAY_STORE,
            f"expected a usable SQLite replay database at {self.path}, found: {exc}",
        )

    def check_and_record(
        self, nonce: str, *, expires_at: int, fingerprint: str | None = None
    ) -> None:
        """Accept ``nonce`` once across every process using this file. With a
        ``fingerprint``, the same nonce with the same fingerprint (the very same record read
        again) is accepted again, silently; a nonce first recorded without one never is.

        Raises:
            EcpaError: ``REPLAYED_NONCE`` on a repeat; ``ECPA_REPLAY_STORE`` when the
                database cannot be written (nothing is accepted then).
        """
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO accepted_nonce (nonce, expires_at, fingerprint) VALUES (?, ?, ?)",
                    (nonce, expires_at, fingerprint),
                )
            except sqlite3.IntegrityError:
                if fingerprint is not None and self._fingerprint(nonce) == fingerprint:
                    return
                raise replayed(nonce) from None
            except sqlite3.Error as exc:
                raise self._unusable(exc) from None

    def _fingerprint(self, nonce: str) -> str | None:
        try:
            row = self._db.execute(
                "SELECT fingerprint FROM accepted_nonce WHERE nonce = ?", (nonce,)
            ).fetchone()
        except sqlite3.Error as exc:
            raise self._unusable(exc) from None
        return None if row is None else row[0]

    def purge(self, *, now: int, clock_skew: int = 0) -> int:
        """Forget nonces of statements expired before ``now - clock_skew``; return how many.

        One ``DELETE`` statement, hence one transaction: a crash leaves all of them or none.
        ``verify`` refuses such statements as expired at that ``now``, so they cannot be
        replayed into acceptance; keep ``now`` monotonic when you purge.

        Raises:
            EcpaError: ``ECPA_REPLAY_STORE`` when the database cannot be written.
        """
        with self._lock:
            try:
                cursor = self._db.execute(
                    "DELETE FROM accepted_nonce WHERE expires_at < ?", (now - clock_skew,)
                )
            except sqlite3.Error as exc:
                raise self._unusable(exc) from None
            return cursor.rowcount

    def __contains__(self, nonce: object) -> bool:
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM accepted_nonce WHERE nonce = ?", (nonce,)
            ).fetchone()
        return row is not None

    def __len__(self) -> int:
        with self._lock:
            (count,) = self._db.execute("SELECT count(*) FROM accepted_nonce").fetchone()
        return int(count)

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> SqliteReplayFence:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_replay_fence(spec: str | os.PathLike[str]) -> SqliteReplayFence | PostgresReplayFence:
    """The durable fence ``spec`` names: a ``postgresql://`` (or ``postgres://``) DSN opens a
    :class:`~ecpa.runtime.stores.postgres.PostgresReplayFence`, anything else an SQLite file.

    Raises:
        EcpaError: ``ECPA_REPLAY_STORE`` when that fence cannot be used.
    """
    if is_postgres_dsn(spec):
        return PostgresReplayFence(str(spec))
    if looks_like_dsn(spec):  # never a file named after a connection string (and its password)
        raise EcpaError(
            ErrorCode.REPLAY_STORE,
            "expected an SQLite file path or a postgresql:// URI, found a value that looks "
            "like another kind of connection string (write a PostgreSQL DSN as a URI)",
        )
    return SqliteReplayFence(spec)


def open_fence(replay_db: ReplayDb, stack: ExitStack) -> ReplayFence | None:
    """The durable fence ``replay_db`` names (an SQLite path or a ``postgresql://`` DSN),
    closed with ``stack``, or None.

    Raises:
        EcpaError: ``ECPA_REPLAY_STORE`` when it cannot be used.
    """
    if replay_db is None:
        return None
    fence = open_replay_fence(replay_db)
    stack.callback(fence.close)
    return fence
