"""How ``ecpa run`` writes its launch directory: new files mode 0600 from the first byte,
replacements renamed into place whole, directories 0700 made fresh, everything synced."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ecpa._files import write_file
from ecpa.errors import EcpaError, ErrorCode

__all__ = ["identity", "json_bytes", "open_directory", "private_dir", "write_atomic"]

_PRIVATE_DIR = 0o700
_PRIVATE_FILE = 0o600
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _io_error(what: str, path: Path, exc: OSError) -> EcpaError:
    return EcpaError(
        ErrorCode.INVALID_INPUT, f"expected to {what} {path}, found: {exc.strerror or exc}"
    )


def write_atomic(path: Path, data: bytes, *, dir_fd: int | None = None) -> None:
    """:func:`ecpa._files.write_file` of a launch directory's file (mode 0600, synced), its
    failure said as ``ECPA_INVALID_INPUT`` naming ``path``."""
    try:
        write_file(path, data, mode=_PRIVATE_FILE, dir_fd=dir_fd)
    except OSError as exc:
        raise _io_error("write", path, exc) from None


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


def open_directory(path: Path, *, dir_fd: int | None = None) -> int:
    """``path`` opened as a directory (never through a symlink at its last part)."""
    return os.open(
        path.name if dir_fd is not None else path, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd
    )


def identity(fd: int) -> tuple[int, int]:
    """The device and inode of the file open as ``fd``: what it is, whatever its name."""
    st = os.fstat(fd)
    return st.st_dev, st.st_ino
