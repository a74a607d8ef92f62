"""The host's evidence, taken in a scheduler process (docs/host-evidence.md): the vLLM-HUST
host calls its evidence sink (:mod:`ecpa.observer.host_sink`) on its scheduler's thread with
one event per policy resolution and per ``select_victim`` dispatch; a
:class:`HostRecorder` takes each with a bounded copy and nothing else, and journals it off
that thread.

Off the hot path (a daemon thread every :data:`DRAIN_S`, and the observer's emitter before
each record), each event is written as the host's consumer writes it
(:func:`~ecpa.runtime.host_line`), checked (:func:`~ecpa.runtime.parse_host_line`, bound to
this launch and process, :class:`~ecpa.runtime.HostBook`'s order), then either appended to
the process's journal ``<evidence dir>/<launch id>/host/<kid>.jsonl`` and counted, or
refused: its code and digest go to ``host/refused-<pid>-<ticks>.jsonl`` (the first
:data:`MAX_REFUSAL_LINES`) and into the refused count, never into the counts. The process's
observer signs :meth:`HostRecorder.account` in each of its records.

The recorder raises (:class:`~ecpa.errors.EcpaError` ``ECPA_HOST_SINK``) only when it cannot
record: no launch binding, its queue full, its journal unwritable, or closed. A strict host
then fails closed: it delivers nothing more, and the records say how many were ``lost``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime import (
    JOURNAL_DIR,
    EvidenceLog,
    HostBook,
    HostCounts,
    HostEventCode,
    HostEventRefused,
    LaunchEnvironment,
    ProcessClaim,
    ProcessIdentity,
    Slot,
    check_binding,
    check_host_event,
    host_line,
)


class Observer(Protocol):
    """What the recorder needs of the process's observer (:class:`ecpa.observer.Observer`):
    the slot and key id it signs for, and to be told to carry the host's account."""

    @property
    def slot(self) -> Slot: ...

    @property
    def kid(self) -> str: ...

    def attach_host(self, recorder: HostRecorder) -> None: ...


#: How the recorder gets the process's observer for the slot the host bound: the observer,
#: made for that slot if there is none yet, or None when the binding is unusable; for None,
#: the observer only if the process has one already (a refusal alone makes none).
ObserverFor = Callable[[Slot | None], "Observer | None"]

__all__ = ["DRAIN_S", "JOURNAL_DIR", "MAX_REFUSAL_LINES", "HostRecorder", "bounded_copy"]

_LOG = logging.getLogger("ecpa.observer")
#: How often the journal is written when nothing asks sooner.
DRAIN_S = 0.25
#: The queue between the hot path and the journal: at most this many events (each a copy of
#: three small dicts); full, the sink raises rather than grow.
CAPACITY = 16384
#: Past this many queued events the writer is woken at once.
_WAKE_AT = 1024
#: Refusals written to the refusal log per process; the rest only counted.
MAX_REFUSAL_LINES = 1000
_MAX_MEMBERS = 32
_SCHEDULER_KINDS = ("scheduler_resolution", "scheduler_dispatch")
_MAX_TEXT = 8192


class _Unfit:
    """What the hot path keeps of a delivery it will not copy: why, and what it was."""

    __slots__ = ("code", "what")

    def __init__(self, code: HostEventCode, what: str) -> None:
        self.code, self.what = code, what


def bounded_copy(event: Any) -> dict[str, Any] | _Unfit:
    """What the hot path keeps of a delivered event: a copy of the dict and of the dicts it
    holds (the host reuses its process identity dict), or, for anything else, more than 32
    members, or a member string over 8 KiB, a marker saying so. Strings are immutable and
    kept by reference; those inside the nested dicts are bounded off the hot path (the line
    of an event is at most 8 KiB). No serialization, no validation here."""
    if type(event) is not dict:
        return _Unfit(HostEventCode.NOT_OBJECT, f"a {type(event).__name__}")
    if len(event) > _MAX_MEMBERS:
        return _Unfit(HostEventCode.TOO_LARGE, f"{len(event)} members")
    out = event.copy()
    for key, item in out.items():
        kind = type(item)
        if kind is str:
            if len(item) > _MAX_TEXT:
                return _Unfit(HostEventCode.TOO_LARGE, f"a string of {len(item)} characters")
        elif kind is dict:
            if len(item) > _MAX_MEMBERS:
                return _Unfit(HostEventCode.TOO_LARGE, f"a member of {len(item)} members")
            out[key] = item.copy()
    return out


def _private_subdir(name: str, dir_fd: int, code: ErrorCode) -> int:
    """The directory ``name`` in the directory open as ``dir_fd``, made (mode 0700) when
    missing, opened without following a symlink and refused unless it is this user's and
    neither group nor others may write it; the caller closes the descriptor returned.

    Raises:
        EcpaError: ``code`` saying what was found.
    """
    try:
        os.mkdir(name, 0o700, dir_fd=dir_fd)
    except FileExistsError:
        pass
    except OSError as exc:
        raise EcpaError(
            code, f"expected to make directory {name!r}, found: {exc.strerror}"
        ) from None
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError as exc:
        raise EcpaError(code, f"expected directory {name!r}, found: {exc.strerror}") from None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o022:
        os.close(fd)
        raise EcpaError(
            code,
            f"expected directory {name!r} owned by uid {os.geteuid()} and not writable by "
            f"group or others, found uid {st.st_uid} and mode {stat.S_IMODE(st.st_mode):04o}",
        )
    return fd


def _sink_error(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.HOST_SINK, detail)


class HostRecorder:
    """One process's host evidence: the hot-path queue, the journal and its account."""

    def __init__(
        self,
        launch: LaunchEnvironment,
        identity: ProcessIdentity,
        observer_for: ObserverFor,
        *,
        capacity: int = CAPACITY,
        drain_s: float = DRAIN_S,
    ) -> None:
        self.launch = launch
        self.identity = identity
        self.claim = ProcessClaim(
            launch.plan_id, launch.launch_id, identity.host, identity.pid, identity.start_ticks
        )
        self._capacity = capacity
        self._drain_s = drain_s
        self._queue: deque[dict[str, Any] | _Unfit] = deque()
        self._wake = threading.Event()
        #: Why recording stopped (then every delivery raises), or None.
        self.failed: str | None = None
        #: Deliveries the sink raised for, and events it took but could not journal.
        self.lost = 0
        self.refused = 0
        #: Refused events that said they were a resolution or a dispatch.
        self.refused_scheduler = 0
        self.refusals: dict[str, int] = {}
        self._sealed = False
        self.book = HostBook()
        self._io_lock = threading.Lock()
        self._observer_source = observer_for
        self._observer: Observer | None = None
        self._journal: EvidenceLog | None = None
        self._refusal_log: EvidenceLog | None = None
        self._refusal_lines = 0
        self._dir_fd: int | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self._owner_pid = os.getpid()

    # The hot path: the host's scheduler thread, under the host's own lock.
    def put(self, event: Any) -> None:
        """Take one delivered event (see :func:`bounded_copy`).

        Raises:
            EcpaError: ``ECPA_HOST_SINK`` when the event cannot be recorded: recording has
                stopped (:attr:`failed`) or the queue is full (recording then stops).
        """
        if self.failed is not None:
            self.lost += 1
            raise _sink_error(self.failed)
        queue = self._queue
        if len(queue) >= self._capacity:
            self.lost += 1
            self.failed = f"the host evidence queue is full ({self._capacity} events)"
            raise _sink_error(self.failed)
        queue.append(bounded_copy(event))
        if len(queue) == _WAKE_AT:
            self._wake.set()

    def start(self) -> None:
        """Start the journal's thread (once)."""
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name="ecpa-host-journal", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self._drain_s)
            self._wake.clear()
            try:
                self.drain()
            except Exception:  # never let the journal's thread die
                _LOG.exception("ecpa observer: host journal error, going on")

    def drain(self) -> None:
        """Journal or refuse everything queued, from the calling thread, then sync. After
        the final account nothing more is journaled: what is still queued is lost."""
        with self._io_lock:
            queue, wrote = self._queue, False
            while queue:
                item = queue.popleft()
                if self._sealed:
                    self.lost += 1  # delivered as the process ended: after its last word
                    continue
                wrote = self._take(item) or wrote
            if wrote and self._journal is not None:
                try:
                    self._journal.flush()
                except EcpaError as exc:
                    self._stop(f"the host journal cannot be synced: {exc.detail}")

    def account(self, *, final: bool = False) -> HostCounts:
        """Drain, then what a signed record says of the journal (``final``: the process's
        last record, after :meth:`close`)."""
        self.drain()
        with self._io_lock:
            self._sealed = self._sealed or final  # no line may follow a final account
            return self.book.counts(
                refused=self.refused,
                refused_scheduler=self.refused_scheduler,
                lost=self.lost,
                final=final,
            )

    def close(self) -> None:
        """Stop taking events (a delivery after this raises), journal what is queued, and
        close the files. Idempotent."""
        if self.failed is None:
            self.failed = "the process is shutting down"
        self._closed = True
        self._wake.set()
        if os.getpid() != self._owner_pid:
            return  # a forked child: the parent's files are not its own
        self.drain()
        with self._io_lock:
            for log in (self._journal, self._refusal_log):
                if log is not None:
                    with contextlib.suppress(EcpaError):  # closing anyway
                        log.close()
            self._journal = self._refusal_log = None
            if self._dir_fd is not None:
                os.close(self._dir_fd)
                self._dir_fd = None

    # Off the hot path, with _io_lock held.
    def _take(self, item: dict[str, Any] | _Unfit) -> bool:
        """Journal or refuse one event; True when a line was written."""
        raw = None
        try:
            if isinstance(item, _Unfit):
                raise HostEventRefused(item.code, f"expected a host event, found {item.what}")
            raw = host_line(item)
            event = check_host_event(item, raw)  # as parse_host_line(raw), parsing nothing
            check_binding(event, self.claim)
            try:
                slot = Slot("scheduler", event.ordinal)
            except EcpaError as exc:
                raise HostEventRefused(HostEventCode.SLOT_MISMATCH, exc.detail) from None
            observer = self._observer_for(slot)
            if observer is None:
                return False  # recording stopped: counted as lost
            if observer.slot != slot:
                raise HostEventRefused(
                    HostEventCode.SLOT_MISMATCH,
                    f"expected rank {observer.slot.ordinal} (slot {observer.slot.name}, which "
                    f"this process signs for), found rank {event.ordinal}",
                )
            self.book.check(event)
        except HostEventRefused as exc:
            self._refuse(exc, raw, item)
            return False
        except Exception as exc:  # a defect here must never stop the journal or a record
            _LOG.exception("ecpa observer: host event check failed, refused")
            detail = f"the check failed: {type(exc).__name__}"
            self._refuse(HostEventRefused(HostEventCode.MALFORMED, detail), raw, item)
            return False
        journal = self._journal_for(observer)
        if journal is None:
            self.lost += 1
            return False
        try:
            journal.append_line(raw + b"\n")
        except EcpaError as exc:
            self.lost += 1
            self._stop(f"the host journal cannot be written: {exc.detail}")
            return False
        self.book.add(event)
        return True

    def _observer_for(self, slot: Slot) -> Observer | None:
        if self._observer is None:
            observer = self._observer_source(slot)
            if observer is None:
                self.lost += 1
                self._stop("no observer: the launch binding is unusable (see the warning)")
                return None
            observer.attach_host(self)
            self._observer = observer
        return self._observer

    def _directory(self) -> int | None:
        if self._dir_fd is None:
            logs = self.launch.evidence_dir / self.launch.launch_id
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                parent = os.open(logs, flags)
            except OSError as exc:
                self._stop(f"expected the process logs' directory {logs}, found: {exc.strerror}")
                return None
            try:
                self._dir_fd = _private_subdir(JOURNAL_DIR, parent, ErrorCode.HOST_SINK)
            except EcpaError as exc:
                self._stop(exc.detail)
                return None
            finally:
                os.close(parent)
        return self._dir_fd

    def _journal_for(self, observer: Observer) -> EvidenceLog | None:
        if self._journal is None:
            directory = self._directory()
            if directory is None:
                return None
            try:
                self._journal = EvidenceLog(f"{observer.kid}.jsonl", dir_fd=directory)
            except EcpaError as exc:
                self._stop(f"the host journal cannot be opened: {exc.detail}")
                return None
        return self._journal

    def _refuse(self, exc: HostEventRefused, raw: bytes | None, item: object) -> None:
        if self._observer is None:  # its records carry the count, if it exists
            self._observer = self._observer_source(None)
            if self._observer is not None:
                self._observer.attach_host(self)
        self.refused += 1
        kind = item.get("observation_kind") if type(item) is dict else None
        if kind in _SCHEDULER_KINDS:
            self.refused_scheduler += 1
        code = exc.reason.value
        self.refusals[code] = self.refusals.get(code, 0) + 1
        if self._refusal_lines >= MAX_REFUSAL_LINES:
            return
        self._refusal_lines += 1
        digest = None if raw is None else "sha256:" + hashlib.sha256(raw).hexdigest()
        line = host_line(
            {
                "code": code,
                "detail": exc.detail[:300],
                "event_digest": digest,
                "bytes": None if raw is None else len(raw),
                "at": int(time.time()),
            }
        )
        try:
            if self._refusal_log is None:
                directory = self._directory()
                if directory is None:
                    return
                name = f"refused-{self.identity.pid}-{self.identity.start_ticks}.jsonl"
                self._refusal_log = EvidenceLog(name, dir_fd=directory)
            self._refusal_log.append_line(line + b"\n")
        except EcpaError as exc2:  # the count stands; the log is only for people
            _LOG.warning("ecpa observer: host refusal log unusable: %s", exc2.detail)

    def _stop(self, why: str) -> None:
        if self.failed is None:
            self.failed = why
            _LOG.warning("ecpa observer: host evidence no longer recorded: %s", why)
