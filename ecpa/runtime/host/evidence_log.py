"""The JSONL evidence log as a process writes it (RUNTIME.md "Evidence record"): a file of
mode 0600 owned by the writer, opened without following a symlink (relative to a directory
descriptor when given), appended one whole record line at a time under a lock and synced.
The records themselves are :mod:`ecpa.runtime.model.evidence`'s; a host journal
(docs/host-evidence.md) is written the same way, its lines given as bytes
(:meth:`EvidenceLog.append_line`).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterable

from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime.model.evidence import Evidence, record_line

__all__ = ["EvidenceLog"]


def _io_error(what: str, path: str, exc: OSError) -> EcpaError:
    return EcpaError(ErrorCode.INVALID_INPUT, f"expected {what} {path}, found: {exc}")


class EvidenceLog:
    """An append-only evidence log file (RUNTIME.md "Writing").

    Opening refuses a symlink as the last path component (``O_NOFOLLOW``), anything but a
    regular file, a file of another user and a file whose mode grants group or other any
    access: a log someone else could read or write is refused, not silently repaired, since
    its earlier lines cannot be trusted either. A new file is created with mode 0600. If the
    file ends in a line torn by a crash, a ``\\n`` closes that line first, so the next record
    is not glued onto it (readers then report the fragment as one invalid line).

    Each record is one ``os.write`` of a whole line (``O_APPEND``, so concurrent appenders
    never interleave within a line); :meth:`append_batch` and :meth:`flush` ``fsync``.
    Thread-safe. Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str], *, dir_fd: int | None = None) -> None:
        """Open or create the log at ``path`` (relative to the directory ``dir_fd`` when
        given: a writer that opened its directory once never follows a swapped path).

        Raises:
            EcpaError: ``ECPA_INVALID_INPUT`` for a symlink, a directory, a FIFO or other
                non-regular file, a foreign owner, a mode other than owner-only, or an
                ``OSError``.
        """
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._torn = False  # a failed append left part of a line behind
        # O_RDWR (not O_WRONLY) to read the last byte; O_NONBLOCK so a FIFO without a
        # reader fails at once instead of blocking, and one with a reader reaches fstat.
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            self._fd: int | None = os.open(self.path, flags | os.O_NONBLOCK, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            raise _io_error("a regular file (not a symlink) at", self.path, exc) from None
        try:
            self._check_and_prepare()
        except BaseException:
            os.close(self._fd)
            self._fd = None
            raise

    def _check_and_prepare(self) -> None:
        assert self._fd is not None
        try:
            st = os.fstat(self._fd)
            if not stat.S_ISREG(st.st_mode):
                raise EcpaError(
                    ErrorCode.INVALID_INPUT,
                    f"expected a regular file at {self.path}, found mode "
                    f"{stat.filemode(st.st_mode)}",
                )
            if st.st_uid != os.geteuid() or st.st_mode & 0o077:
                raise EcpaError(
                    ErrorCode.INVALID_INPUT,
                    f"expected a file of uid {os.geteuid()} with mode 0600 at {self.path}, "
                    f"found uid {st.st_uid} and mode {stat.S_IMODE(st.st_mode):04o}",
                )
            os.set_blocking(self._fd, True)
            if st.st_size and os.pread(self._fd, 1, st.st_size - 1) != b"\n":
                self._torn = True  # the next write starts with "\n"
        except OSError as exc:
            raise _io_error("a usable log file at", self.path, exc) from None

    def _write_line(self, fd: int, line: bytes) -> None:
        if self._torn:
            line = b"\n" + line
        view = memoryview(line)
        try:
            written = os.write(fd, view)
            while written < len(view):  # only after a short write (full disk, signal)
                self._torn = True
                written += os.write(fd, view[written:])
        except OSError as exc:
            raise _io_error("a writable log at", self.path, exc) from None
        self._torn = False

    def _require_open(self) -> int:
        if self._fd is None:
            raise EcpaError(
                ErrorCode.INVALID_INPUT, f"expected an open log at {self.path}, found it closed"
            )
        return self._fd

    def append(self, evidence: Evidence) -> None:
        """Append one record line with a single ``write``; not synced (see :meth:`flush`).

        Raises:
            EcpaError: ``ECPA_INVALID_INPUT`` for evidence :func:`record_line` refuses, a
                closed log or a failed write.
        """
        line = record_line(evidence)
        with self._lock:
            self._write_line(self._require_open(), line)

    def append_batch(self, items: Iterable[Evidence]) -> int:
        """Append each record with one ``write``, then ``fsync`` once; return how many.

        Every item is encoded before anything is written, so a bad item writes nothing.

        Raises:
            EcpaError: ``ECPA_INVALID_INPUT``, as :meth:`append`, or a failed ``fsync``.
        """
        lines = [record_line(item) for item in items]
        with self._lock:
            fd = self._require_open()
            for line in lines:
                self._write_line(fd, line)
            self._sync(fd)
        return len(lines)

    def append_line(self, line: bytes) -> None:
        """Append one line given as bytes (ending with its only ``\\n``) with a single
        ``write``; not synced (see :meth:`flush`). For a file with one writer (a host
        journal): a write that fails part way is taken back, the file cut to its size
        before it.

        Raises:
            EcpaError: ``ECPA_INVALID_INPUT`` for bytes that are not one line, a closed log
                or a failed write.
        """
        if not line.endswith(b"\n") or b"\n" in line[:-1]:
            raise EcpaError(ErrorCode.INVALID_INPUT, "expected one line ending with a newline")
        with self._lock:
            fd = self._require_open()
            before = os.fstat(fd).st_size
            try:
                self._write_line(fd, line)
            except EcpaError:
                # Its one writer takes a part-written line back: the file ends where it did.
                try:
                    os.ftruncate(fd, before)
                except OSError:
                    pass  # the fragment stays, closed by the next line's newline
                else:
                    self._torn = False
                raise

    def _sync(self, fd: int) -> None:
        try:
            os.fsync(fd)
        except OSError as exc:
            raise _io_error("a log that syncs at", self.path, exc) from None

    def flush(self) -> None:
        """``fsync`` the log. Raises ``EcpaError`` (``ECPA_INVALID_INPUT``) on failure."""
        with self._lock:
            self._sync(self._require_open())

    def close(self) -> None:
        """``fsync`` and close; closing twice is harmless. Raises as :meth:`flush`; the file
        descriptor is closed even then."""
        with self._lock:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            try:
                self._sync(fd)
            finally:
                os.close(fd)

    def __enter__(self) -> EvidenceLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
