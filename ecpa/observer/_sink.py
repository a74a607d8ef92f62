"""The observer's sink: a bounded queue of signed records and the thread that appends them
to the evidence log (RUNTIME.md "Writing", "Hot-path budget").

Nothing here ever blocks a producer: :meth:`Sink.put` only takes a short lock around a
``deque`` append, and a full queue drops the record and counts it. The writer takes all that
is queued as one batch, writes each record with one ``write`` and ``fsync``s once. When the
log fails (gone, replaced, unwritable, disk full, refused by :class:`EvidenceLog`), the batch
is dropped and counted, the log is closed and reopened on a later batch, skipping more
batches the longer the failure lasts (up to ``_MAX_SKIP``). No lock a producer needs is ever
held across I/O: ``_io_lock`` serializes the writers only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import deque
from pathlib import Path

from ecpa.runtime import Evidence, EvidenceLog

_LOG = logging.getLogger("ecpa.observer")
#: After k consecutive failed attempts, the next ``min(2**(k-1) - 1, _MAX_SKIP)`` batches are
#: dropped without touching the file system.
_MAX_SKIP = 7


class Waiter:
    """Set once its record is settled; ``written`` says whether it reached the log."""

    __slots__ = ("done", "written")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.written = False


_Item = tuple[Evidence, Waiter | None]


class Sink:
    """A bounded queue drained into the evidence log at ``path`` by a daemon thread.

    The log's directory is opened once (``O_NOFOLLOW``: a symlinked directory is refused),
    on the first write, and the log is opened and checked relative to it ever after: a
    directory swapped for a symlink later is never written through.
    """

    def __init__(self, path: Path, capacity: int) -> None:
        self.path = path
        self._dir_fd: int | None = None
        self._capacity = capacity
        self._cond = threading.Condition(threading.Lock())
        self._items: deque[_Item] = deque()
        self._closed = False
        self._thread: threading.Thread | None = None
        # Writer state, only touched with _io_lock held.
        self._io_lock = threading.Lock()
        self._log: EvidenceLog | None = None
        self._log_id: tuple[int, int] | None = None
        self._failures = 0
        self._skip = 0
        # Statistics, under _cond.
        self.written = 0
        self.dropped = 0
        self.errors = 0

    def start(self) -> None:
        """Start the writer thread (once)."""
        with self._cond:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(
                target=self._run, name="ecpa-observer-writer", daemon=True
            )
            self._thread.start()

    def _writer_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def put(self, evidence: Evidence, waiter: Waiter | None = None) -> bool:
        """Queue a record; drop and count it when the queue is full or the sink closed."""
        with self._cond:
            if self._closed or len(self._items) >= self._capacity:
                self.dropped += 1
                accepted = False
            else:
                self._items.append((evidence, waiter))
                self._cond.notify()
                accepted = True
        if not accepted and waiter is not None:
            waiter.done.set()
        return accepted

    def drop(self) -> None:
        """Count a record that could not even be built."""
        with self._cond:
            self.dropped += 1
            self.errors += 1

    def stats(self) -> dict[str, int]:
        """``written``, ``dropped``, ``errors`` and ``queued``, read together."""
        with self._cond:
            return {
                "written": self.written,
                "dropped": self.dropped,
                "errors": self.errors,
                "queued": len(self._items),
            }

    def dropped_now(self) -> int:
        """Records dropped so far (what the next counters record reports)."""
        with self._cond:
            return self.dropped

    def _take(self, wait: bool) -> list[_Item] | None:
        with self._cond:
            while wait and not self._items and not self._closed:
                self._cond.wait()
            if not self._items:
                return None
            batch = list(self._items)
            self._items.clear()
            return batch

    def _run(self) -> None:
        while True:
            try:
                batch = self._take(wait=True)
                if batch is None:
                    return  # closed and drained
                self._write(batch)
            except Exception:  # never let the writer die; _write settles its own batch
                _LOG.exception("ecpa observer: writer error, going on")

    def drain(self) -> None:
        """Write what is queued from the calling thread (when no writer thread runs)."""
        while (batch := self._take(wait=False)) is not None:
            self._write(batch)

    def _write(self, batch: list[_Item]) -> None:
        written = 0
        failed = False
        try:
            with self._io_lock:
                if self._skip:  # backing off: the log failed on recent batches
                    self._skip -= 1
                else:
                    try:
                        log = self._usable_log()
                        for evidence, _ in batch:
                            log.append(evidence)  # one write per record
                            written += 1
                        log.flush()  # one fsync per batch
                    except Exception as exc:  # EcpaError, OSError: any failure of the sink
                        failed = True
                        self._failed(exc)
                    else:
                        self._recovered()
        finally:
            self._settle(batch, written, failed)

    def _directory(self) -> int:
        if self._dir_fd is None:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            self._dir_fd = os.open(self.path.parent, flags)
        return self._dir_fd

    def _usable_log(self) -> EvidenceLog:
        """The open log, reopened when its name no longer names the file we hold open
        (removed, renamed, replaced): records written there would reach no reader."""
        dir_fd = self._directory()
        name = self.path.name
        if self._log is not None:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                same = (st.st_dev, st.st_ino) == self._log_id
            except FileNotFoundError:
                same = False
            if not same:
                self._close_log()
        if self._log is None:
            log = EvidenceLog(name, dir_fd=dir_fd)
            log.path = str(self.path)  # messages name the whole path
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                log.close()
                raise
            self._log, self._log_id = log, (st.st_dev, st.st_ino)
        return self._log

    def _close_log(self) -> None:
        log, self._log, self._log_id = self._log, None, None
        if log is not None:
            # A log that fails to close (its fsync) is being abandoned anyway.
            with contextlib.suppress(Exception):
                log.close()

    def _failed(self, exc: Exception) -> None:
        self._close_log()
        self._failures += 1
        self._skip = min(2 ** min(self._failures - 1, 8) - 1, _MAX_SKIP)
        if self._failures == 1:  # once per failure streak: loud, not flooding
            _LOG.warning(
                "ecpa observer: evidence log %s unusable, dropping records until it is back: %s",
                self.path,
                exc,
            )

    def _recovered(self) -> None:
        if self._failures:
            _LOG.warning(
                "ecpa observer: evidence log %s writable again after %d failed attempt(s)",
                self.path,
                self._failures,
            )
        self._failures = 0

    def _settle(self, batch: list[_Item], written: int, failed: bool) -> None:
        with self._cond:
            self.written += written
            self.dropped += len(batch) - written
            self.errors += failed
        for index, (_, waiter) in enumerate(batch):
            if waiter is not None:
                waiter.written = index < written
                waiter.done.set()

    def wait(self, waiter: Waiter, deadline: float) -> bool:
        """Wait until ``waiter``'s record is settled (writing it here when no writer runs);
        True when it was written before ``deadline`` (``time.monotonic``)."""
        if not self._writer_alive():
            self.drain()
        waiter.done.wait(max(0.0, deadline - time.monotonic()))
        return waiter.done.is_set() and waiter.written

    def close(self, deadline: float) -> bool:
        """Refuse new records, let the writer drain the queue until ``deadline``, then close
        the log; True when everything queued was settled in time. Idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(max(0.0, deadline - time.monotonic()))
        if not self._writer_alive():
            self.drain()
            if self._io_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                try:
                    self._close_log()
                    fd, self._dir_fd = self._dir_fd, None
                    if fd is not None:
                        os.close(fd)
                finally:
                    self._io_lock.release()
        with self._cond:
            return not self._items and not self._writer_alive()

    def after_fork_in_child(self) -> None:
        """A forked child inherits this sink, but not its thread: fresh locks, closed."""
        self._cond = threading.Condition(threading.Lock())
        self._io_lock = threading.Lock()
        self._items.clear()
        self._closed = True
        self._thread = None
        self._log = None  # the parent's file descriptor: not ours to close or write
        self._dir_fd = None
