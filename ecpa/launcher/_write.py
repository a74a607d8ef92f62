"""How ``ecpa run`` writes its launch directory: new files mode 0600 from the first byte,
replacements renamed into place whole, directories 0700 made fresh, everything synced."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from ecpa.errors import EcpaError, ErrorCode

__all__ = ["identity", "json_bytes", "open_directory", "private_dir", "write_atomic", "write_new"]

_PRIVATE_DIR = 0o700
_PRIVATE_FILE = 0o600
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _io_error(what: str, path: Path, exc: OSError) -> EcpaError:
    return EcpaError(
        ErrorCode.INVALID_INPUT, f"expected to {what} {path}, found: {exc.strerror or exc}"
    )


def write_new(path: Path, data: bytes, *, dir_fd: int | None = None) -> None:
    """Create ``path`` with mode 0600 from the first byte on (never over a file, never
    through a symlink), write ``data`` whole and sync it. With ``dir_fd``, the file named
    ``path``'s last part in the directory open as ``dir_fd``, wherever it is now."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path.name if dir_fd is not None else path, flags, _PRIVATE_FILE, dir_fd=dir_fd)
    try:
        os.fchmod(fd, _PRIVATE_FILE)  # whatever the umask left
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, dir_fd: int | None = None) -> None:
    """Replace ``path`` whole or not at all: a new file renamed into place, then the
    directory synced, so a crash leaves the old file or the new one. With ``dir_fd``, the
    file named ``path``'s last part in the directory open as ``dir_fd`` (``path`` then only
    names it in messages): a rename of the directory cannot send the write elsewhere."""
    tmp = f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        directory = os.open(path.parent, _DIR_FLAGS) if dir_fd is None else dir_fd
    except OSError as exc:
        raise _io_error("write", path, exc) from None
    try:
        write_new(path.with_name(tmp), data, dir_fd=directory)
        os.replace(tmp, path.name, src_dir_fd=directory, dst_dir_fd=directory)
        os.fsync(directory)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=directory)
        raise _io_error("write", path, exc) from None
    finally:
        if dir_fd is None:
            os.close(directory)


def json_bytes(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()


def private_dir(path: Path, *, dir_fd: int | None = None) -> None:
    """Make ``path`` a new directory of mode 0700 (with ``dir_fd``: ``path``'s last part in
    the directory open as ``dir_fd``)."""
    name = path.name if dir_fd is not None else path
    os.mkdir(name, _PRIVATE_DIR, dir_fd=dir_fd)  # a new directory: never one someone prepared
    fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    try:
        os.fchmod(fd, _PRIVATE_DIR)  # whatever the umask left
    finally:
        os.close(fd)


def open_directory(path: Path) -> int:
    """``path`` opened as a directory (never through a symlink at its last part)."""
    return os.open(path, _DIR_FLAGS | os.O_NOFOLLOW)


def identity(fd: int) -> tuple[int, int]:
    """The device and inode of the file open as ``fd``: what it is, whatever its name."""
    st = os.fstat(fd)
    return st.st_dev, st.st_ino
