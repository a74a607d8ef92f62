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
from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.profile.keys import VerifyKey
from ecpa.profile.trust import TRUST_STORE_SCHEMA, TrustStore, read_document

__all__ = [
    "YEAR_S",
    "add_trust_entry",
    "check_trust_addition",
    "disable_trust_entry",
    "store_bytes",
    "trust_entry",
    "update_trust_file",
    "validity_window",
]

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


#: The default length of a new key's validity window: a year.
YEAR_S = 365 * 24 * 3600


def validity_window(
    not_before: int | None, not_after: int | None, now: int | None = None
) -> tuple[int, int]:
    """A key's ``[not_before, not_after]``: from ``now`` (default: the clock) for a year,
    unless either end is given."""
    start = (int(time.time()) if now is None else now) if not_before is None else not_before
    return start, (min(start + YEAR_S, 2**53 - 1) if not_after is None else not_after)


def trust_entry(
    issuer: str,
    kid: str,
    public: VerifyKey,
    subjects: list[str],
    window: tuple[int, int],
) -> dict[str, Any]:
    """A trust store entry (PROFILE §5), enabled, for ``public``."""
    return {
        "issuer": issuer,
        "kid": kid,
        "public_key_b64": public.to_b64(),
        "subjects": subjects,
        "enabled": True,
        "not_before": window[0],
        "not_after": window[1],
    }


def _adding(path: Path, entry: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def change(doc: dict[str, Any]) -> dict[str, Any]:
        keys = doc.get("keys")
        if not isinstance(keys, list):
            raise _config(f"{path}: expected 'keys' as an array, found {type(keys).__name__}")
        keys.append(entry)
        return doc

    return change


def check_trust_addition(path: str | os.PathLike[str], entry: dict[str, Any]) -> None:
    """Check, without writing, that the store at ``path`` (an empty one when there is no
    file) still loads by every rule with ``entry`` added.

    Raises:
        EcpaError: ``ATTESTATION_TRUST_STORE_CONFIG`` naming the rule the result breaks.
    """
    target = Path(path)
    if target.exists() or target.is_symlink():
        doc = read_document(target)
    else:
        doc = {"schema": TRUST_STORE_SCHEMA, "keys": []}
    TrustStore.from_dict(_adding(target, entry)(doc))


def add_trust_entry(path: str | os.PathLike[str], entry: dict[str, Any]) -> dict[str, Any]:
    """Add ``entry`` to the store at ``path`` (created if missing) by
    :func:`update_trust_file`; return the new document."""
    return update_trust_file(path, _adding(Path(path), entry), create=True)


def disable_trust_entry(path: str | os.PathLike[str], issuer: str, kid: str) -> int:
    """Set ``enabled: false`` on the entries ``(issuer, kid)`` of the store at ``path`` by
    :func:`update_trust_file`; return how many there were.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when the store holds no such entry.
    """
    found: list[dict[str, Any]] = []

    def disable(doc: dict[str, Any]) -> dict[str, Any]:
        keys = doc.get("keys")
        entries: list[Any] = keys if isinstance(keys, list) else []
        found[:] = [
            e
            for e in entries
            if isinstance(e, dict) and (e.get("issuer"), e.get("kid")) == (issuer, kid)
        ]
        if not found:
            raise invalid_input(f"expected an entry ({issuer!r}, {kid!r}) in {path}, found none")
        for entry in found:
            entry["enabled"] = False
        return doc

    update_trust_file(path, disable)
    return len(found)
