"""In-process observer (RUNTIME.md "Observer", "Evidence record", "Hot-path budget").

The scheduler's thread calls :meth:`Observer.count` once per dispatch: a few integer
increments under a tiny lock, nothing else (no I/O, no crypto, no lock ever held across
either). Off the hot path, an *emitter* thread wakes every emit interval (and early every
``emit_every`` dispatches), snapshots the cumulative counters, builds the raw counters
record and signs a statement about it, and hands the record to a bounded queue; a *writer*
thread appends what is queued to the evidence log (see :mod:`ecpa.observer._sink`). A full
queue or a failing log drops the record and counts it in ``dropped``, which later records
report. At interpreter exit one last record carries the final counters.

:func:`process_observer` is the process-wide observer, created on first use from the launch
binding in ``os.environ``; it returns None (the plugin then costs nothing) when there is no
binding, and None with one warning when the binding or the key is unusable.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import stat
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path

from ecpa.errors import EcpaError, ErrorCode
from ecpa.observer._record import Window, build_evidence, ttl_for
from ecpa.observer._sink import Sink, Waiter
from ecpa.profile.keys import SigningKey
from ecpa.runtime.process import LaunchEnvironment, ProcessIdentity, launch_from_env, read_identity

__all__ = [
    "ABSTENTION",
    "DEFAULT_EMIT_INTERVAL_S",
    "EMIT_INTERVAL_ENV",
    "FAILURE",
    "SELECTION",
    "Observer",
    "process_observer",
]

SELECTION = 0
ABSTENTION = 1
FAILURE = 2

DEFAULT_EMIT_INTERVAL_S = 1.0
#: Optional: the emit interval in seconds, set by the manager (``ecpa run``).
EMIT_INTERVAL_ENV = "ECPA_EMIT_INTERVAL_S"
# The bound a plan accepts (ecpa.runtime.launch): positive, at most a day.
_MAX_INTERVAL_S = 86400.0
_EXIT_TIMEOUT_S = 2.0

_LOG = logging.getLogger("ecpa.observer")
_LIVE: weakref.WeakSet[Observer] = weakref.WeakSet()


def _bad(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.INVALID_INPUT, detail)


class Observer:
    """Counts dispatches and emits signed evidence records about them (RUNTIME.md)."""

    def __init__(
        self,
        launch: LaunchEnvironment,
        key: SigningKey,
        *,
        identity: ProcessIdentity | None = None,
        emit_interval_s: float = DEFAULT_EMIT_INTERVAL_S,
        emit_every: int | None = None,
        queue_size: int = 64,
        clock: Callable[[], float] = time.time,
        log_path: Path | None = None,
        start: bool = True,
    ) -> None:
        """Prepare the observer of ``launch``, signing with ``key``; start its threads
        unless ``start`` is False (then :meth:`emit`, :meth:`flush` and :meth:`close` work
        from the calling thread).

        ``identity`` defaults to this process's (``/proc/self``); ``log_path`` to
        ``<evidence_dir>/<launch_id>.jsonl``, opened by the writer thread on first use.
        Statements live 60 s, or twice the interval when longer (at most 300 s).
        One statement is built and signed, not written, to check that the binding and the
        key give records a verifier accepts.

        Raises:
            EcpaError: ``ECPA_INVALID_INPUT`` for an interval not in (0, 86400] s, an
                ``emit_every`` or ``queue_size`` below 1, a launch id unusable as a file
                name, or an unreadable ``/proc``; the codes of :func:`ecpa.sign` when the
                binding gives statements a verifier would refuse.
        """
        if not (isinstance(emit_interval_s, (int, float)) and math.isfinite(emit_interval_s)):
            raise _bad(f"expected a finite emit interval, found {emit_interval_s!r}")
        if not 0 < emit_interval_s <= _MAX_INTERVAL_S:
            raise _bad(
                f"expected an emit interval in (0, {_MAX_INTERVAL_S:g}] s, "
                f"found {emit_interval_s!r}"
            )
        if emit_every is not None and emit_every < 1:
            raise _bad(f"expected emit_every >= 1 dispatches, found {emit_every!r}")
        if queue_size < 1:
            raise _bad(f"expected queue_size >= 1, found {queue_size!r}")
        name = launch.launch_id
        if log_path is None and ("/" in name or "\0" in name or name in (".", "..")):
            raise _bad(f"expected a launch_id usable as a file name, found {name!r}")
        self.launch = launch
        self.identity = identity if identity is not None else read_identity()
        self.emit_interval_s = float(emit_interval_s)
        self._ttl = ttl_for(self.emit_interval_s)
        self.log_path = log_path if log_path is not None else launch.evidence_dir / f"{name}.jsonl"
        self._key = key
        self._clock = clock
        self._every = emit_every or 0
        # Hot path state: the counters, under a lock held only around increments/snapshots.
        self._lock = threading.Lock()
        self._calls = self._selections = self._abstentions = self._failures = 0
        # Emission state, under _emit_lock (the emitter thread, flush and close).
        self._emit_lock = threading.Lock()
        self._seq = 0
        self._window_start = int(clock())
        self._wake = threading.Event()
        self._stop = False
        self._closed = False
        self._owner_pid = os.getpid()
        self._emitter: threading.Thread | None = None
        self._sink = Sink(self.log_path, queue_size)
        probe = Window(0, 0, 0, 0, 0, 0, self._window_start, self._window_start)
        build_evidence(launch, self.identity, key, probe, issued_at=self._window_start)
        _LIVE.add(self)
        if start:
            self.start()

    def count(self, outcome: int) -> None:
        """Count one dispatch: ``SELECTION``, ``ABSTENTION`` or ``FAILURE`` (any other value
        counts as a failure). The hot path: increments only; never raises, never blocks on
        I/O, and works after :meth:`close` too (nothing is emitted then)."""
        with self._lock:
            self._calls += 1
            if outcome == SELECTION:
                self._selections += 1
            elif outcome == ABSTENTION:
                self._abstentions += 1
            else:
                self._failures += 1
            calls = self._calls
        if self._every and calls % self._every == 0:
            self._wake.set()

    def start(self) -> None:
        """Start the writer and emitter daemon threads; starting twice is harmless."""
        with self._emit_lock:
            if self._closed or self._emitter is not None:
                return
            self._sink.start()
            self._emitter = threading.Thread(
                target=self._run, name="ecpa-observer-emitter", daemon=True
            )
            self._emitter.start()

    def _run(self) -> None:
        interval = self.emit_interval_s
        while True:
            self._wake.wait(interval)
            if self._stop:
                return
            self._wake.clear()  # before the snapshot: a dispatch after it wakes us again
            try:
                self._emit(None)
            except Exception:  # never let the emitter die; _emit counts its own failures
                _LOG.exception("ecpa observer: emitter error, going on")

    def _emit(self, waiter: Waiter | None) -> bool:
        """Build, sign and queue one record with the counters now; False when dropped."""
        with self._emit_lock:
            now = int(self._clock())
            with self._lock:
                calls, selections = self._calls, self._selections
                abstentions, failures = self._abstentions, self._failures
            self._seq += 1
            start = min(self._window_start, now)  # a clock stepped back: an empty window
            self._window_start = now
            window = Window(
                self._seq,
                calls,
                selections,
                abstentions,
                failures,
                self._sink.dropped_now(),
                start,
                now,
            )
            try:
                evidence = build_evidence(
                    self.launch, self.identity, self._key, window, issued_at=now, ttl=self._ttl
                )
            except Exception:
                self._sink.drop()
                _LOG.exception("ecpa observer: could not sign record %d, dropped", window.seq)
                if waiter is not None:
                    waiter.done.set()
                return False
            return self._sink.put(evidence, waiter)

    def emit(self) -> bool:
        """Emit a record now (from the calling thread), as the emitter does every interval.

        Returns True when it was queued, False when it was dropped (queue full, observer
        closed, or signing failed; the drop is counted). Raises nothing.
        """
        if self._closed or self._foreign():
            return False
        return self._emit(None)

    def flush(self, timeout: float = 2.0) -> bool:
        """Emit a record with the counters now and wait until it and everything queued
        before it is written or dropped (written from this thread when no writer runs).

        Returns True when that record reached the log within ``timeout`` seconds, False when
        it was dropped, the observer is closed, or time ran out. Raises nothing.
        """
        if self._closed or self._foreign():
            return False
        deadline = time.monotonic() + timeout
        waiter = Waiter()
        self._emit(waiter)
        return self._sink.wait(waiter, deadline)

    def close(self, timeout: float = 2.0) -> bool:
        """Stop emitting, emit one last record with the final counters and drain the queue
        for at most ``timeout`` seconds, then close the log. Runs at interpreter exit for
        every open observer. Idempotent; :meth:`count` keeps working (counting nothing more
        into the log). Returns True when everything queued was settled in time. Raises
        nothing."""
        deadline = time.monotonic() + timeout
        with self._emit_lock:
            first = not self._closed
            self._closed = True
            self._stop = True
        if self._foreign():
            return False
        self._wake.set()
        emitter = self._emitter
        if emitter is not None and emitter is not threading.current_thread():
            emitter.join(max(0.0, deadline - time.monotonic()))
        if first:
            self._emit(None)  # the final counters (RUNTIME.md: the newest record tells all)
        return self._sink.close(deadline)

    def snapshot(self) -> dict[str, int]:
        """Read-only statistics: the counters (``calls``, ``selections``, ``abstentions``,
        ``failures``), ``seq`` (the last statement built), and from the sink ``written``,
        ``dropped``, ``queued`` and ``errors`` (failed sign or write attempts)."""
        with self._lock:
            counters = {
                "calls": self._calls,
                "selections": self._selections,
                "abstentions": self._abstentions,
                "failures": self._failures,
            }
        return {**counters, "seq": self._seq, **self._sink.stats()}

    def _foreign(self) -> bool:
        return os.getpid() != self._owner_pid

    def _after_fork_in_child(self) -> None:
        # The child is another process: the parent's identity, seq and log are not its own.
        # Fresh locks (a parent thread may have held one at fork), nothing more emitted.
        self._lock = threading.Lock()
        self._emit_lock = threading.Lock()
        self._closed = self._stop = True
        self._emitter = None
        self._sink.after_fork_in_child()

    def __repr__(self) -> str:
        return f"Observer(launch_id={self.launch.launch_id!r}, log={str(self.log_path)!r})"


def _interval_from_env(env: Mapping[str, str]) -> float:
    text = env.get(EMIT_INTERVAL_ENV)
    if text is None or text == "":
        return DEFAULT_EMIT_INTERVAL_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= _MAX_INTERVAL_S):
        raise _bad(
            f"expected {EMIT_INTERVAL_ENV} as seconds in (0, {_MAX_INTERVAL_S:g}], "
            f"found {text[:40]!r}"
        )
    return value


def _load_key(path: Path) -> SigningKey:
    """The per-launch key, refused when anyone but its owner may read it (RUNTIME.md: 0600)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise EcpaError(
            ErrorCode.INVALID_KEY, f"expected a key file at {path}, found: {exc.strerror}"
        ) from None
    if stat.S_IMODE(mode) & 0o077:
        raise EcpaError(
            ErrorCode.INVALID_KEY,
            f"expected key file {path} with mode 0600, found {stat.S_IMODE(mode):04o}",
        )
    return SigningKey.load(path)


def _from_env(env: Mapping[str, str]) -> Observer | None:
    try:
        launch = launch_from_env(env)
        if launch is None:
            return None
        interval = _interval_from_env(env)
        return Observer(launch, _load_key(launch.signing_key_file), emit_interval_s=interval)
    except EcpaError as exc:
        reason = f"{exc.code.value}: {exc.detail}"
    except Exception as exc:  # never raise into the scheduler
        reason = f"{type(exc).__name__}: {exc}"
    _LOG.warning("ecpa observer inactive, no runtime evidence will be emitted: %s", reason)
    return None


_CACHE_LOCK = threading.Lock()
_resolved = False
_observer: Observer | None = None


def process_observer() -> Observer | None:
    """The process-wide observer, created on the first call from ``os.environ``.

    None when no launch binding is set. None, with one warning logged (logger
    ``ecpa.observer``), when the binding is partial or malformed, ``ECPA_EMIT_INTERVAL_S``
    is not a number of seconds in (0, 86400], or the key is unreadable or not mode 0600:
    the observer then stays inactive rather than sign for the wrong launch. Later calls
    return the same answer without a lock; a child forked after creation gets None (its
    records would claim the parent's identity). Raises nothing.
    """
    global _resolved, _observer
    if _resolved:
        return _observer
    with _CACHE_LOCK:
        if not _resolved:
            _observer = _from_env(os.environ)
            _resolved = True
        return _observer


def _reset_for_tests() -> None:
    """Close and forget the process-wide observer, so the next call reads the environment."""
    global _resolved, _observer
    with _CACHE_LOCK:
        observer, _observer, _resolved = _observer, None, False
    if observer is not None:
        observer.close(timeout=1.0)


def _after_fork_in_child() -> None:
    global _CACHE_LOCK, _resolved, _observer
    _CACHE_LOCK = threading.Lock()
    _observer, _resolved = None, True
    for observer in list(_LIVE):
        observer._after_fork_in_child()


def _close_at_exit() -> None:
    for observer in list(_LIVE):
        observer.close(timeout=_EXIT_TIMEOUT_S)


atexit.register(_close_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
