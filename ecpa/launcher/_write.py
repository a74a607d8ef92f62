"""How ``ecpa run`` writes its launch directory: new files mode 0600 from the first byte,
replacements renamed into place whole, directories 0700 made fresh, everything synced."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from ecpa.errors import EcpaError, ErrorCode

__all__ = ["json_bytes", "private_dir", "write_atomic", "write_new"]

_PRIVATE_DIR = 0o700
_PRIVATE_FILE = 0o600


def _io_error(what: str, path: Path, exc: OSError) -> EcpaError:
    return EcpaError(
        ErrorCode.INVALID_INPUT, f"expected to {what} {path}, found: {exc.strerror or exc}"
    )


def write_new(path: Path, data: bytes) -> None:
    """Create ``path`` with mode 0600 from the first byte on (never over a file, never
    through a symlink), write ``data`` whole and sync it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, _PRIVATE_FILE)
    try:
        os.fchmod(fd, _PRIVATE_FILE)  # whatever the umask left
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` whole or not at all: a new file renamed into place, then the
    directory synced, so a crash leaves the old file or the new one."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        write_new(tmp, data)
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _io_error("write", path, exc) from None


def json_bytes(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()


def private_dir(path: Path) -> None:
    os.mkdir(path, _PRIVATE_DIR)  # a new directory: never one someone prepared
    os.chmod(path, _PRIVATE_DIR)  # whatever the umask left
