"""Changing a trust store file safely while others change it too (PROFILE §5 documents).

Every writer (``ecpa trust add|disable``, ``ecpa keygen --trust``, ``ecpa run``'s enrollment
and its closing of key windows) goes through :func:`update_trust_file`: an exclusive lock on
the store's directory (``flock``: every writer of every store in that directory waits its
turn, so no update is lost), the current file read, the change applied and checked by every
rule, a temporary file written with the store's own mode and ``fsync``ed, renamed into place
atomically, and the directory synced. A reader therefore sees the old store or the new one,
never a half-written file, and a crash loses at most the change being made.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ecpa._files import write_file
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.trust import TRUST_STORE_SCHEMA, TrustStore, read_document

__all__ = ["store_bytes", "update_trust_file"]

_POLL_S = 0.01


def _config(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.TRUST_STORE_CONFIG, detail)


def store_bytes(doc: dict[str, Any]) -> bytes:
    """A trust store document as its file holds it: indented JSON and a final newline."""
    return (json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()


def _lock_directory(directory: Path, timeout: float, dir_fd: int | None) -> int:
    """A new descriptor of the store's directory (``dir_fd``'s directory when given,
    wherever it is now; else ``directory``), locked."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    try:
        fd = os.open(".", flags, dir_fd=dir_fd) if dir_fd is not None else os.open(directory, flags)
    except OSError as exc:
        raise _config(
            f"expected a directory for the trust store at {directory}, found: {exc.strerror}"
        ) from None
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() >= deadline:
                os.close(fd)
                found = "still locked by another writer" if exc.errno != 0 else str(exc)
                raise _config(
                    f"expected to lock {directory} for a trust store update within "
                    f"{timeout:g} s, found it {found}"
                ) from None
            time.sleep(_POLL_S)


def _write_replacing(path: Path, data: bytes, mode: int, dir_fd: int) -> None:
    """``data`` as the file ``path.name`` in the directory open as ``dir_fd`` (``path`` only
    for messages), atomically, keeping ``mode``."""
    try:
        write_file(path, data, mode=mode, dir_fd=dir_fd)
    except OSError as exc:
        raise _config(f"expected to write the trust store {path}, found: {exc.strerror}") from None


def update_trust_file(
    path: str | os.PathLike[str],
    change: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    create: bool = False,
    new_mode: int = 0o644,
    timeout: float = 10.0,
    dir_fd: int | None = None,
) -> dict[str, Any]:
    """Apply ``change`` to the trust store at ``path`` under an exclusive lock and replace
    the file atomically; return the new document. With ``dir_fd``, the store is the file
    named ``path``'s last part in the directory open as ``dir_fd``, wherever that directory
    has been moved (``path`` then only names it in messages): ``ecpa run`` keeps writing its
    own launch's store even when someone renames the launch directory.

    ``change`` gets the current document (an empty store when the file is missing and
    ``create``) and returns the new one, which must load by every rule of PROFILE §5 before
    anything is written. The file keeps its mode (a new file gets ``new_mode``); a symlink,
    FIFO or other non-regular file at ``path`` is refused, never followed.

    Raises:
        EcpaError: ``ATTESTATION_TRUST_STORE_CONFIG`` for a store that cannot be read,
            locked within ``timeout`` seconds, checked or written; whatever ``change`` raises.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    lock = _lock_directory(directory, timeout, dir_fd)
    try:
        try:
            st: os.stat_result | None = os.lstat(target.name, dir_fd=lock)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise _config(f"expected a trust store at {target}, found: {exc.strerror}") from None
        if st is None:
            if not create:
                raise _config(f"expected a trust store at {target}, found no file")
            doc: dict[str, Any] = {"schema": TRUST_STORE_SCHEMA, "keys": []}
            mode = new_mode
        else:
            if not stat.S_ISREG(st.st_mode):
                raise _config(
                    f"expected a regular trust store file at {target}, found another kind"
                )
            doc = read_document(target, dir_fd=lock)
            mode = stat.S_IMODE(st.st_mode)
        new = change(doc)
        TrustStore.from_dict(new)  # every rule of PROFILE §5 before anything is written
        _write_replacing(target, store_bytes(new), mode, lock)
        return new
    finally:
        os.close(lock)
