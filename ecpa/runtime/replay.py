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

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.fence import MemoryReplayFence, ReplayFence, replayed

__all__ = ["MemoryReplayFence", "ReplayFence", "SqliteReplayFence", "replayed"]


class SqliteReplayFence:
    """A durable fence in an SQLite file, shared safely by several verifier processes.

    The nonce is the table's primary key and is inserted in its own committed transaction,
    so of two processes racing with one nonce exactly one insert succeeds: check and record
    are one atomic step. WAL journaling and ``synchronous=FULL`` keep an accepted nonce
    across a crash.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        """Open or create the fence at ``path``.

        Raises:
            EcpaError: ``ECPA_INVALID_INPUT`` when the file cannot be opened as a fence.
        """
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._db = sqlite3.connect(
                    self.path, timeout=timeout, isolation_level=None, check_same_thread=False
                )
                self._setup()
                return
            except sqlite3.OperationalError as exc:
                # Switching to WAL takes a lock SQLite does not wait for (no busy handler):
                # several verifiers opening one new file together must retry, not fail.
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise self._unusable(exc) from None
                self._db.close()
                time.sleep(0.01)
            except sqlite3.Error as exc:
                raise self._unusable(exc) from None

    def _setup(self) -> None:
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS accepted_nonce ("
            " nonce TEXT PRIMARY KEY NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID"
        )

    def _unusable(self, exc: sqlite3.Error) -> EcpaError:
        return EcpaError(
            ErrorCode.INVALID_INPUT,
            f"expected an SQLite replay database at {self.path}, found: {exc}",
        )

    def check_and_record(self, nonce: str, *, expires_at: int) -> None:
        """Accept ``nonce`` once across every process using this file.

        Raises:
            EcpaError: ``REPLAYED_NONCE`` on a repeat; ``ECPA_INVALID_INPUT`` when the
                database cannot be written (nothing is accepted then).
        """
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO accepted_nonce (nonce, expires_at) VALUES (?, ?)",
                    (nonce, expires_at),
                )
            except sqlite3.IntegrityError:
                raise replayed(nonce) from None
            except sqlite3.Error as exc:
                raise EcpaError(
                    ErrorCode.INVALID_INPUT,
                    f"expected a writable replay database at {self.path}, found: {exc}",
                ) from None

    def purge(self, *, now: int, clock_skew: int = 0) -> int:
        """Forget nonces of statements expired before ``now - clock_skew``; return how many.

        One ``DELETE`` statement, hence one transaction: a crash leaves all of them or none.
        ``verify`` refuses such statements as expired at that ``now``, so they cannot be
        replayed into acceptance; keep ``now`` monotonic when you purge.

        Raises:
            EcpaError: ``ECPA_INVALID_INPUT`` when the database cannot be written.
        """
        with self._lock:
            try:
                cursor = self._db.execute(
                    "DELETE FROM accepted_nonce WHERE expires_at < ?", (now - clock_skew,)
                )
            except sqlite3.Error as exc:
                raise EcpaError(
                    ErrorCode.INVALID_INPUT,
                    f"expected a writable replay database at {self.path}, found: {exc}",
                ) from None
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
