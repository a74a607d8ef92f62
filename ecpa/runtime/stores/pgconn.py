"""Connecting to PostgreSQL for state several hosts share (optional extra ``postgres``:
psycopg 3): DSNs and what may be said of them (never a password), connections that fail fast
and calls bounded on both sides, and versioned schemas made once under an advisory lock.
psycopg is imported only when a connection is made: ``import ecpa`` does not need it. The
replay fence is :mod:`ecpa.runtime.stores.postgres`, the evidence store
:mod:`ecpa.runtime.stores.store`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ecpa.errors import EcpaError, ErrorCode

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "CALL_TIMEOUT_S",
    "CONNECT_TIMEOUT_S",
    "SCHEMES",
    "STATEMENT_TIMEOUT_MS",
    "Watchdog",
    "connect",
    "describe_dsn",
    "driver",
    "ensure_schema",
    "is_postgres_dsn",
    "looks_like_dsn",
    "primary_key",
    "scrub_dsn",
    "store_error",
]

#: A DSN in URI form names PostgreSQL; anything else given as ``--replay-db`` is a path.
SCHEMES = ("postgresql://", "postgres://")
#: Seconds to wait for a server before saying it is unreachable.
CONNECT_TIMEOUT_S = 5
#: No statement may hold a connection longer than this (a lock held elsewhere, a server
#: that stopped answering): the call fails with the store's code instead.
STATEMENT_TIMEOUT_MS = 10_000
#: No call may block this side longer than this (a server that stopped answering at all).
CALL_TIMEOUT_S = 15.0
# pg_advisory_xact_lock key under which tables are created ("ecpa" in ASCII).
_SCHEMA_LOCK = 0x65637061


def is_postgres_dsn(spec: object) -> bool:
    """Whether ``spec`` is a PostgreSQL URI (``postgresql://`` or ``postgres://``)."""
    return isinstance(spec, str) and spec.startswith(SCHEMES)


def looks_like_dsn(spec: object) -> bool:
    """Whether ``spec`` looks like a connection string of some kind (a URI with another
    scheme, or libpq's ``key=value`` form): such a value given where an SQLite path or a
    ``postgresql://`` URI is expected is refused, never taken for a file name."""
    text = str(spec)
    return "://" in text or "=" in text


def _secrets(dsn: str) -> list[str]:
    """The password of ``dsn`` (and its percent-encoded form), to be kept out of messages."""
    found = []
    if "@" in dsn and "://" in dsn:
        userinfo = dsn.split("://", 1)[1].split("@", 1)[0]
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
    for key in ("password=",):
        if key in dsn:
            found.append(dsn.split(key, 1)[1].split("&", 1)[0].split(" ", 1)[0])
    with contextlib.suppress(Exception):
        from psycopg.conninfo import conninfo_to_dict

        password = conninfo_to_dict(dsn).get("password")
        if password:
            found.append(str(password))
    return [x for x in found if x]


def scrub_dsn(text: str, dsn: str) -> str:
    """``text`` with the password of ``dsn`` replaced by ``***``."""
    for secret in sorted(_secrets(dsn), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def describe_dsn(dsn: str) -> str:
    """Where a DSN points, for messages: host, port and database, never the password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:  # an unparsable DSN (or no psycopg): say only that it is one
        return "a PostgreSQL DSN that cannot be parsed"
    host = str(parts.get("host") or "localhost")
    port = str(parts.get("port") or "5432")
    where = f"PostgreSQL at {host}:{port}, database {parts.get('dbname') or parts.get('user')}"
    return scrub_dsn(where, dsn)


def driver(code: ErrorCode) -> Any:
    """The psycopg module, or ``EcpaError(code)`` saying how to install it."""
    try:
        import psycopg
    except ImportError:
        raise EcpaError(
            code,
            "expected the PostgreSQL driver psycopg 3 (pip install 'ecpa[postgres]'), "
            "found it not installed",
        ) from None
    return psycopg


#: libpq settings that notice a peer gone silent on TCP (no effect on a Unix socket, where
#: the watchdog below is what bounds a call).
_KEEPALIVE = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 15_000,
}


def connect(dsn: str, code: ErrorCode, *, autocommit: bool = True) -> psycopg.Connection[Any]:
    """A connection to ``dsn`` that fails fast: ``CONNECT_TIMEOUT_S`` to connect, every
    statement bounded by ``STATEMENT_TIMEOUT_MS`` on the server and by :class:`Watchdog`
    on this side (a server that stops answering).

    Raises:
        EcpaError: ``code`` when psycopg is missing, the DSN is malformed or the server
            cannot be reached, naming where it looked (never the password).
    """
    psycopg = driver(code)
    if not is_postgres_dsn(dsn):
        raise EcpaError(code, "expected a postgresql:// or postgres:// URI, found another value")
    try:
        conn = psycopg.connect(
            dsn,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_S,
            application_name="ecpa",
            **_KEEPALIVE,
        )
    except psycopg.ProgrammingError:  # libpq could not parse it: its text may quote it
        raise EcpaError(
            code,
            "expected a PostgreSQL URI (postgresql://user@host:port/dbname?param=value), "
            "found one libpq cannot parse",
        ) from None
    except psycopg.Error as exc:
        raise store_error(code, dsn, exc) from None
    except Exception as exc:  # anything else a hostile DSN provokes (encodings, ...)
        raise EcpaError(
            code, f"expected a usable PostgreSQL URI, found one that fails: {type(exc).__name__}"
        ) from None
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
    """The error for a failed database call: where, and the server's first line (with any
    password of ``dsn`` scrubbed from it)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return EcpaError(code, f"expected a usable {describe_dsn(dsn)}, found: {scrub_dsn(first, dsn)}")


class Watchdog:
    """Bounds every database call on this side: a server that stops answering (frozen, or
    a network that drops packets) would otherwise block a call forever, since the server's
    own ``statement_timeout`` never fires then. One daemon thread per watchdog; a call past
    its deadline has its connection's socket shut down, so the call fails at once (the
    caller reports the store's error and connects again next time)."""

    def __init__(self, seconds: float = CALL_TIMEOUT_S) -> None:
        self.seconds = seconds
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._fd: int | None = None
        self.fired = 0
        thread = threading.Thread(target=self._watch, name="ecpa-pg-watchdog", daemon=True)
        thread.start()

    def _watch(self) -> None:
        with self._cond:
            while True:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                if self._fd is not None:
                    with contextlib.suppress(OSError):
                        sock = socket.socket(fileno=os.dup(self._fd))
                        try:
                            sock.shutdown(socket.SHUT_RDWR)
                        finally:
                            sock.close()
                    self.fired += 1
                self._deadline = None

    @contextlib.contextmanager
    def guard(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """Run the block with ``conn``'s calls bounded by ``seconds``."""
        with self._cond:
            self._fd = conn.pgconn.socket
            self._deadline = time.monotonic() + self.seconds
            self._cond.notify()
        try:
            yield
        finally:
            with self._cond:
                self._deadline = None
                self._fd = None


def ensure_schema(
    conn: psycopg.Connection[Any],
    component: str,
    version: int,
    create: Callable[[psycopg.Connection[Any]], None] | None,
    code: ErrorCode,
    upgrade: Callable[[psycopg.Connection[Any], int], None] | None = None,
) -> None:
    """Create ``component``'s tables once (``create``) and record its ``version``; bring an
    older version up to date with ``upgrade(conn, found)`` when given; refuse a database
    holding another version of it. ``create=None`` (a reader, which may lack the
    right to create tables): only check that the component is there, of that version.

    Raises:
        EcpaError: ``code`` for another version, or (a reader) none; psycopg errors pass
            through.
    """
    there = conn.execute("SELECT to_regclass('ecpa_schema') IS NOT NULL").fetchone()
    row = None
    if there is not None and there[0]:
        row = conn.execute(
            "SELECT version FROM ecpa_schema WHERE component = %s", (component,)
        ).fetchone()
    if row is not None and row[0] == version:
        return  # read only: a role without the right to create tables writes all the same
    if create is None:
        if row is None:
            raise EcpaError(
                code, f"expected {component} version {version} (table ecpa_schema), found none"
            )
        raise EcpaError(
            code,
            f"expected schema version {version} of {component} (table ecpa_schema), "
            f"found version {row[0]}",
        )
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
        elif row[0] != version and upgrade is not None and 0 < row[0] < version:
            upgrade(conn, row[0])  # a writer brings an older store up to date, once
            conn.execute(
                "UPDATE ecpa_schema SET version = %s WHERE component = %s", (version, component)
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
