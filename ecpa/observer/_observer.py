"""In-process observer (RUNTIME.md "Observer", "Evidence record", "Hot-path budget").

The scheduler's thread calls :meth:`Observer.count` once per dispatch: a few integer
increments under a tiny lock, nothing else (no I/O, no crypto, no lock ever held across
either). Off the hot path, an *emitter* thread wakes every emit interval (and early every
``emit_every`` dispatches), snapshots the cumulative counters, builds the raw counters
record and signs a statement about it, and hands the record to a bounded queue; a *writer*
thread appends what is queued to the evidence log (see :mod:`ecpa.observer._sink`). A full
queue or a failing log drops the record and counts it in ``dropped``, which later records
report. At interpreter exit one last record carries the final counters.

What an observer runs with (its slot, identity, signer, log and cadence) is resolved before
it runs, by :func:`ecpa.observer._config.resolve`; the :class:`Observer` here is the running
object. The process-wide observer, made from the launch binding in ``os.environ``, is
:func:`ecpa.observer.process_observer` (:mod:`ecpa.observer._process`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

from ecpa.errors import EcpaError
from ecpa.observer._config import Resolved, for_forked_child, resolve
from ecpa.observer._host import HostRecorder
from ecpa.observer._sink import Sink, Waiter
from ecpa.observer.record import DEFAULT_EMIT_INTERVAL_S as _DEFAULT_INTERVAL
from ecpa.observer.record import Window, build_evidence
from ecpa.profile.keys import SigningKey
from ecpa.runtime import (
    LaunchEnvironment,
    ProcessIdentity,
    Request,
    enroll,
)

__all__ = [
    "ABSTENTION",
    "CHANGED",
    "FAILURE",
    "LIVE",
    "SELECTION",
    "Observer",
]

#: Outcomes of one dispatch (:meth:`Observer.count`): the plugin chose the victim the host's
#: builtin rule would have chosen too (SELECTION), chose another one (CHANGED: a selection
#: that changed the decision), deferred to the builtin victim (ABSTENTION), or failed.
SELECTION = 0
ABSTENTION = 1
FAILURE = 2
CHANGED = 3

_now = time.time

_LOG = logging.getLogger("ecpa.observer")
LIVE: weakref.WeakSet[Observer] = weakref.WeakSet()


class Observer:
    """Counts dispatches and emits signed evidence records about them (RUNTIME.md)."""

    def __init__(
        self,
        launch: LaunchEnvironment,
        key: SigningKey | None = None,
        *,
        identity: ProcessIdentity | None = None,
        role: str | None = None,
        ordinal: int | None = None,
        emit_interval_s: float = _DEFAULT_INTERVAL,
        emit_every: int | None = None,
        queue_size: int = 64,
        clock: Callable[[], float] = time.time,
        log_path: Path | None = None,
        start: bool = True,
        enroll_timeout_s: float | None = None,
    ) -> None:
        """Prepare the observer of ``launch``; start its threads unless ``start`` is False
        (then :meth:`emit`, :meth:`flush` and :meth:`close` work from the calling thread).

        The slot is ``role``/``ordinal`` (the host knows its rank), else the launch's
        ``ECPA_PROCESS_ROLE``/``ECPA_PROCESS_ORDINAL``, else ``scheduler.0``. In a 0.2 launch
        (an enrollment socket) the observer makes its own key in memory (``key`` overrides
        it, for tests), has it enrolled by ``ecpa run`` from its emitter thread before its
        first record, and writes ``<evidence_dir>/<launch_id>/<kid>.jsonl``; in a 0.1
        launch it signs with ``key`` (required) as ``launch.kid`` into
        ``<evidence_dir>/<launch_id>.jsonl``. ``log_path`` overrides the file. The log's
        directory is opened by the writer thread on first use, never here.
        ``identity`` defaults to this process's (``/proc/self``). Statements live 60 s, or
        twice the interval when longer (at most 300 s). One statement is built and signed,
        not written, to check that the binding and the key give records a verifier accepts.

        Raises:
            EcpaError: ``ECPA_INVALID_INPUT`` for an interval not in (0, 100] s, an
                ``emit_every`` or ``queue_size`` below 1, a launch id unusable as a file
                name, a bad slot, a 0.1 launch without a key, or an unreadable ``/proc``;
                the codes of :func:`ecpa.sign` when the binding gives statements a verifier
                would refuse.
        """
        self._begin(
            resolve(
                launch,
                key,
                identity=identity,
                role=role,
                ordinal=ordinal,
                emit_interval_s=emit_interval_s,
                emit_every=emit_every,
                queue_size=queue_size,
                clock=clock,
                log_path=log_path,
                enroll_timeout_s=enroll_timeout_s,
            ),
            autostart=start,
        )
        LIVE.add(self)
        if start:
            self.start()

    def _begin(self, config: Resolved, *, autostart: bool) -> None:
        """The running state of an observer resolved as ``config``: counters from zero,
        emission state, the sink (no thread started)."""
        self._config = config
        self.launch = config.launch
        self.identity = config.identity
        self.slot = config.slot
        self.process_keys = config.process_keys
        self.undumpable = config.undumpable
        self.signer = config.signer
        self.kid = config.signer.kid
        self.emit_interval_s = config.emit_interval_s
        self.log_path = config.log_path
        self._ttl = config.ttl
        self._clock = config.clock
        self._every = config.emit_every
        self._enroll_timeout_s = config.enroll_timeout_s
        self._enrolled = not self.process_keys
        self._enroll_warned = False
        # Hot path state: the counters, under a lock held only around increments/snapshots.
        self._lock = threading.Lock()
        self._calls = self._selections = self._abstentions = self._failures = 0
        self._changed = 0
        self._last_at = self._last_selection_at = 0.0
        # Emission state, under _emit_lock (the emitter thread, flush and close).
        self._emit_lock = threading.Lock()
        self._seq = 0
        self._window_start = config.started_at
        self._wake = threading.Event()
        self._stop = False
        self._closed = False
        self._owner_pid = os.getpid()
        self._emitter: threading.Thread | None = None
        self._sink = Sink(self.log_path, config.queue_size)
        self._queue_size = config.queue_size
        self._autostart = autostart
        self._custom_log = config.custom_log
        self._reborn = False
        #: The host's evidence (docs/host-evidence.md): each record then carries its account.
        self._host: HostRecorder | None = None

    def count(self, outcome: int) -> None:
        """Count one dispatch: ``SELECTION``, ``CHANGED`` (a selection other than the host's
        builtin victim), ``ABSTENTION`` or ``FAILURE`` (any other value counts as a failure).
        The hot path: increments only; never raises, never blocks on I/O, and works after
        :meth:`close` too (nothing is emitted then)."""
        if self._reborn:  # the first count in a forked child (0.2): its threads, once
            self._reborn = False
            self.start()
        with self._lock:
            # Read under the lock and never backwards (a clock stepped back keeps the last
            # time): the newest selection is then never after the newest dispatch.
            now = _now()
            if now > self._last_at:
                self._last_at = now
            self._calls += 1
            if outcome == SELECTION:
                self._selections += 1
                self._last_selection_at = self._last_at
            elif outcome == ABSTENTION:
                self._abstentions += 1
            elif outcome == CHANGED:
                self._selections += 1
                self._changed += 1
                self._last_selection_at = self._last_at
            else:
                self._failures += 1
            calls = self._calls
        if calls == 1 or (self._every and calls % self._every == 0):
            self._wake.set()  # the first record as soon as the first dispatch happened

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

    def _enroll(self) -> bool:
        """Have this process's key enrolled by ``ecpa run`` (0.2), once; False when it could
        not be (warned once; records are dropped and counted until it can)."""
        if self._enrolled:
            return True
        socket_path = self.launch.enroll_socket
        assert socket_path is not None
        request = Request(self.signer.key.public_key.to_b64(), self.slot, self.identity)
        try:
            enroll(socket_path, request, timeout=self._enroll_timeout_s)
        except EcpaError as exc:
            if not self._enroll_warned:
                self._enroll_warned = True
                _LOG.warning("ecpa observer: key not enrolled, records dropped: %s", exc.detail)
            return False
        self._enrolled = True
        return True

    def attach_host(self, recorder: HostRecorder) -> None:
        """Carry ``recorder``'s account of the host's evidence in every later record."""
        with self._emit_lock:
            self._host = recorder

    def _emit(self, waiter: Waiter | None, *, final: bool = False) -> bool:
        """Build, sign and queue one record with the counters now (``final``: the last, after
        the host's recorder closed); False when dropped."""
        with self._emit_lock:
            if not self._enroll():
                self._sink.drop()
                if waiter is not None:
                    waiter.done.set()
                return False
            now = int(self._clock())
            with self._lock:
                calls, selections = self._calls, self._selections
                abstentions, failures = self._abstentions, self._failures
                changed = self._changed
                last = int(self._last_at) if calls else None
                last_selection = int(self._last_selection_at) if selections else None
            self._seq += 1
            start = min(self._window_start, now)  # a clock stepped back: an empty window
            self._window_start = now
            try:
                # The host's journal is written before the record that accounts for it.
                host = None if self._host is None else self._host.account(final=final)
                window = Window(
                    self._seq,
                    calls,
                    selections,
                    abstentions,
                    failures,
                    self._sink.dropped_now(),
                    start,
                    now,
                    last,
                    changed,
                    last_selection,
                    host,
                )
                evidence = build_evidence(
                    self.launch, self.identity, self.signer, window, issued_at=now, ttl=self._ttl
                )
            except Exception:
                self._sink.drop()
                _LOG.exception("ecpa observer: could not sign record %d, dropped", self._seq)
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
            recorder = self._host
            if recorder is not None:
                recorder.close()  # nothing journaled after the final account
            # the final counters (RUNTIME.md: the newest record tells all)
            self._emit(None, final=recorder is not None)
        return self._sink.close(deadline)

    def snapshot(self) -> dict[str, int]:
        """Read-only statistics: the counters (``calls``, ``selections``, ``changed``,
        ``abstentions``, ``failures``), ``seq`` (the last statement built), and from the sink
        ``written``, ``dropped``, ``queued`` and ``errors`` (failed sign or write attempts)."""
        with self._lock:
            counters = {
                "calls": self._calls,
                "selections": self._selections,
                "changed": self._changed,
                "abstentions": self._abstentions,
                "failures": self._failures,
            }
        return {**counters, "seq": self._seq, **self._sink.stats()}

    def _foreign(self) -> bool:
        return os.getpid() != self._owner_pid

    def _after_fork_in_child(self) -> None:
        # The child is another process: the parent's identity, key, seq and log are not its
        # own. Fresh locks (a parent thread may have held one at fork). With a shared 0.1
        # launch key nothing more is emitted; with process keys the child starts its own
        # stream (its identity, a key of its own, enrolled, seq from 1) at its first count.
        self._lock = threading.Lock()
        self._emit_lock = threading.Lock()
        self._emitter = None
        self._host = None  # the child's own recorder attaches at its first host event
        self._sink.after_fork_in_child()
        if not self.process_keys or self._closed or self._custom_log:
            self._closed = self._stop = True
            return
        self._rebirth()

    def _rebirth(self) -> None:
        """The forked child's own observer, made once, at the fork (RUNTIME.md "Process
        keys": a forked child re-enrolls with its own key before it signs): its identity and
        key here; its threads at its first count, its enrollment on its emitter thread."""
        try:
            config = for_forked_child(self._config)
        except EcpaError:
            self._closed = self._stop = True
            return
        self._begin(config, autostart=self._autostart)
        self._reborn = self._autostart  # threads cannot be started in a fork hook: later

    def __repr__(self) -> str:
        return f"Observer(launch_id={self.launch.launch_id!r}, log={str(self.log_path)!r})"
