"""A throw-away PostgreSQL cluster for trials and tests: ``ecpa dev pg-up DIR`` (and the
demo, and ``scripts/pg-up`` of a checkout, which loads this very file) starts one and gives
its DSN; ``ecpa dev pg-down DIR`` stops it.

The cluster trusts every connection it accepts, so it listens on nothing but a Unix socket
in DIR (mode 0700: only DIR's owner, and root, can connect), named after a free port. As
root, initdb and the server run as the ``postgres`` user (PostgreSQL refuses to run as
root) and DIR is given to that user. Started again while running, it gives the same DSN.
``no_fsync`` (test suites): commits are not flushed, so a machine crash can lose the
cluster; without it every commit is durable, as in production.

Standard library only, and imports nothing of ecpa: ``scripts/pg-up`` runs it before any
virtual environment exists.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import urllib.parse
from collections.abc import Callable
from pathlib import Path

__all__ = ["ClusterError", "down", "up"]

SERVER_USER = "postgres"
SUPERUSER = "postgres"  # the database role the DSN names
ATTEMPTS = 5  # a free port can be taken between choosing it and the server binding it
MAX_DIR_CHARS = 80  # the socket path DIR/.s.PGSQL.<port> must fit in 107 bytes


class ClusterError(Exception):
    """The cluster could not be made, started or stopped; the message says what was
    expected and what was found."""


def _binary(name: str) -> str | None:
    """``name`` (initdb, pg_ctl) from PATH, else from the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which(name)
    if found:
        return found
    for bindir in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(os.path.join(bindir, name), os.X_OK):
            return os.path.join(bindir, name)
    return None


def available() -> bool:
    """Whether PostgreSQL's server programs are installed."""
    return _binary("initdb") is not None and _binary("pg_ctl") is not None


def _as_server(argv: list[str]) -> list[str]:
    """The command run as the server's user (runuser when we are root)."""
    return ["runuser", "-u", SERVER_USER, "--", *argv] if os.geteuid() == 0 else argv


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _dsn(directory: Path, port: int) -> str:
    host = urllib.parse.quote(str(directory), safe="/")
    return f"postgresql://{SUPERUSER}@/postgres?host={host}&port={port}"


def _run(argv: list[str], what: str, log: Path | None = None) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        tail = f"; server log {log}" if log is not None else ""
        raise ClusterError(f"{what} failed (exit {proc.returncode}): {' | '.join(detail)}{tail}")


def _running(pg_ctl: str, data: Path) -> bool:
    argv = _as_server([pg_ctl, "-D", str(data), "status"])
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0  # noqa: S603


#: What a cluster's directory holds; anything else there means it is someone else's.
_OURS = frozenset({"data", "server.log", "dsn"})


def _prepare(directory: Path) -> None:
    """``directory`` made, or checked to be a real directory that is empty or holds only a
    cluster of ours; mode 0700 either way (the socket in it trusts whoever reaches it)."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        st = None
    try:
        if st is None:
            directory.mkdir(mode=0o700, parents=True)
        elif not stat.S_ISDIR(st.st_mode):  # a symlink included: never followed
            raise ClusterError(f"expected {directory} to be a directory, found another kind")
        else:
            extra = sorted(p.name for p in directory.iterdir() if p.name not in _OURS)
            if extra:
                raise ClusterError(
                    f"expected {directory} new, empty or a cluster made by pg-up, "
                    f"found {extra[0]!r} in it"
                )
        os.chmod(directory, 0o700)
    except OSError as exc:
        raise ClusterError(
            f"expected to make {directory} (mode 0700), found: {exc.strerror}"
        ) from None
    if os.geteuid() != 0:
        return
    try:
        user = pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise ClusterError(
            f"expected a system user {SERVER_USER!r} to run the server as (we are root), found none"
        ) from None
    os.chown(directory, user.pw_uid, user.pw_gid)
    probe = ["runuser", "-u", SERVER_USER, "--", "test", "-w", str(directory)]
    if subprocess.run(probe, check=False).returncode != 0:  # noqa: S603
        raise ClusterError(
            f"expected {directory} to be reachable and writable by user {SERVER_USER!r} "
            "(every parent directory searchable), found it is not: choose a directory "
            "such as /tmp/ecpa-pg"
        )


def up(
    directory: str | os.PathLike[str],
    *,
    no_fsync: bool = False,
    say: Callable[[str], object] = lambda line: None,
) -> str:
    """Start (making it first if needed) the cluster in ``directory``; return its DSN.
    ``say`` is told where the server and its log are.

    Raises:
        ClusterError: no PostgreSQL, no ``postgres`` user (as root), or a server that did
            not start.
    """
    where = Path(directory).absolute()
    if len(str(where)) > MAX_DIR_CHARS:
        raise ClusterError(
            f"expected a directory path of at most {MAX_DIR_CHARS} characters, "
            f"found {len(str(where))}"
        )
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise ClusterError(
            "expected PostgreSQL's initdb and pg_ctl on PATH or in /usr/lib/postgresql/*/bin, "
            "found neither (Debian: apt install postgresql)"
        )
    data, log, dsn_file = where / "data", where / "server.log", where / "dsn"
    _prepare(where)
    if (data / "PG_VERSION").exists():
        if _running(pg_ctl, data) and dsn_file.exists():
            return dsn_file.read_text().strip()
    else:
        init = [initdb, "-D", str(data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8"]
        _run(_as_server([*init, "--locale=C.UTF-8", "--no-instructions"]), "initdb")
    ports: list[int | None] = [None] * ATTEMPTS
    if dsn_file.exists():  # restarting a stopped cluster: its old port first, the same DSN
        with contextlib.suppress(IndexError, ValueError):
            ports[0] = int(dsn_file.read_text().rsplit("port=", 1)[1].strip())
    for wanted in ports:
        port = wanted or _free_port()
        options = (
            f"-p {port} -k {shlex.quote(str(where))} -c listen_addresses='' "
            "-c dynamic_shared_memory_type=mmap -c max_connections=200"
            + (" -c fsync=off" if no_fsync else "")
        )
        start = [pg_ctl, "-D", str(data), "-l", str(log), "-w", "-t", "120", "-o", options]
        proc = subprocess.run(  # noqa: S603
            _as_server([*start, "start"]), capture_output=True, text=True, check=False
        )
        if proc.returncode == 0:
            dsn = _dsn(where, port)
            fd = os.open(dsn_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            with os.fdopen(fd, "w") as out:
                out.write(dsn + "\n")
            say(f"server started in {data}, port {port}, log {log}")
            return dsn
        if _running(pg_ctl, data):
            _run(_as_server([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"]), "pg_ctl stop")
    raise ClusterError(
        f"expected the server to start (tried {ATTEMPTS} ports), found it did not; see {log}"
    )


def down(directory: str | os.PathLike[str]) -> str:
    """Stop the cluster in ``directory`` (fast shutdown: open sessions end) and wait until
    it is gone; return what happened. One already stopped, or never made, is no error. The
    directory stays: remove it yourself.

    Raises:
        ClusterError: ``pg_ctl stop`` failed.
    """
    data = Path(directory).absolute() / "data"
    pg_ctl = _binary("pg_ctl")
    if pg_ctl is None or not (data / "PG_VERSION").exists():
        return f"no cluster in {data}: nothing to stop"
    if not _running(pg_ctl, data):
        return f"the server of {data} is not running"
    stop = [pg_ctl, "-D", str(data), "-m", "fast", "-w", "-t", "60", "stop"]
    _run(_as_server(stop), "pg_ctl stop")
    return f"stopped the server of {data}"


def script(name: str, argv: list[str]) -> None:
    """``scripts/pg-up`` and ``scripts/pg-down``: usage errors exit 2, failures 1, each
    with one line on stderr; pg-up's DSN is the only line on stdout."""
    no_fsync = name == "pg-up" and argv[:1] == ["--no-fsync"]
    args = argv[1:] if no_fsync else argv
    if len(args) != 1 or args[0].startswith("-"):
        usage = "[--no-fsync] DIR" if name == "pg-up" else "DIR"
        print(f"usage: scripts/{name} {usage}\n\n{__doc__}", file=sys.stderr)
        raise SystemExit(2)
    try:
        if name == "pg-up":
            print(
                up(args[0], no_fsync=no_fsync, say=lambda s: print(f"{name}: {s}", file=sys.stderr))
            )
        else:
            print(f"{name}: {down(args[0])}", file=sys.stderr)
    except ClusterError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
