"""The process-wide observer (RUNTIME.md "Observer"): made on first use from the launch
binding in ``os.environ``, closed at interpreter exit, and made anew in a forked child.

:func:`process_observer` returns None (the plugin then costs nothing) when there is no
binding, and None with one warning when the binding or the key is unusable. It never
blocks: a 0.1 key file is opened without blocking and must be a regular file; a 0.2 key is
made in memory and enrolled from the observer's own thread, never the caller's.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import threading
from collections.abc import Mapping

from ecpa.errors import EcpaError, invalid_input
from ecpa.observer._observer import LIVE, Observer
from ecpa.observer.record import DEFAULT_EMIT_INTERVAL_S, EMIT_INTERVAL_ENV, MAX_INTERVAL_S
from ecpa.profile.keys import SigningKey
from ecpa.runtime import SCHEDULER_ROLE, Slot, launch_from_env

__all__ = ["hint_host_slot", "observer_for_host", "process_observer"]

_EXIT_TIMEOUT_S = 2.0
_LOG = logging.getLogger("ecpa.observer")


def _interval_from_env(env: Mapping[str, str]) -> float:
    text = env.get(EMIT_INTERVAL_ENV)
    if text is None or text == "":
        return DEFAULT_EMIT_INTERVAL_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_INTERVAL_S):
        raise invalid_input(
            f"expected {EMIT_INTERVAL_ENV} as seconds in (0, {MAX_INTERVAL_S:g}], "
            f"found {text[:40]!r}"
        )
    return value


def _from_env(env: Mapping[str, str]) -> Observer | None:
    # Only what this code raises is caught: an exception of the host (a signal handler's
    # stop, KeyboardInterrupt) passes through untouched.
    try:
        launch = launch_from_env(env)
        if launch is None:
            return None
        interval = _interval_from_env(env)
        if launch.version == "0.2":
            slot = _host_slot
            if slot is not None:  # the host bound this process to its rank: that slot
                return Observer(
                    launch, role=slot.role, ordinal=slot.ordinal, emit_interval_s=interval
                )
            return Observer(launch, emit_interval_s=interval)
        assert launch.signing_key_file is not None
        return Observer(launch, SigningKey.load(launch.signing_key_file), emit_interval_s=interval)
    except EcpaError as exc:
        reason = f"{exc.code.value}: {exc.detail}"
    _LOG.warning("ecpa observer inactive, no runtime evidence will be emitted: %s", reason)
    return None


_CACHE_LOCK = threading.Lock()
_resolved = False
_observer: Observer | None = None
#: The slot the host bound this process to (its first event says), for the observer made
#: after it: the host knows its rank; the environment of a data-parallel launch does not.
_host_slot: Slot | None = None


def hint_host_slot(event: object) -> None:
    """Remember the slot the host's first event names, when it bound an engine-core
    scheduler (role ``engine-core-scheduler``, its rank ``k``: slot ``scheduler.k``), for
    the observer not made yet. Only a hint: each event is checked against the observer's
    slot later. Never raises."""
    global _host_slot
    if _host_slot is not None or type(event) is not dict:
        return
    process = event.get("process")
    if type(process) is not dict or process.get("assignment_source") != "host":
        return
    ordinal = process.get("ordinal")
    if process.get("role") == SCHEDULER_ROLE and type(ordinal) is int:
        try:
            _host_slot = Slot("scheduler", ordinal)
        except EcpaError:
            return


def observer_for_host(slot: Slot | None) -> Observer | None:
    """The process observer, made for ``slot`` if it does not exist yet (see
    :func:`hint_host_slot`); None as :func:`process_observer`. For ``slot`` None: only an
    observer the process already has (a process the host bound to no scheduler slot, a
    worker say, never gets one for its refusals alone)."""
    global _host_slot
    if slot is None:
        return _observer if _resolved else None
    if _host_slot is None:
        _host_slot = slot
    return process_observer()


def process_observer() -> Observer | None:
    """The process-wide observer, created on the first call from ``os.environ``.

    None when no launch binding is set. None, with one warning logged (logger
    ``ecpa.observer``), when the binding is partial or malformed, ``ECPA_EMIT_INTERVAL_S``
    is not a number of seconds in (0, 86400], or the key is unreadable or not mode 0600:
    the observer then stays inactive rather than sign for the wrong launch. Later calls
    return the same answer without a lock. A child forked after creation gets the same
    observer made anew for itself (its identity, its own key enrolled, its own stream) with
    process keys (0.2), and None with a shared 0.1 key (its records would claim the parent's
    identity). Raises nothing of its own: an exception of the host passes through.
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
    global _resolved, _observer, _host_slot
    with _CACHE_LOCK:
        observer, _observer, _resolved, _host_slot = _observer, None, False, None
    if observer is not None:
        observer.close(timeout=1.0)


def _after_fork_in_child() -> None:
    global _CACHE_LOCK, _resolved, _observer
    _CACHE_LOCK = threading.Lock()  # the slot hint stays: a forked scheduler keeps its rank
    if _observer is not None and not _observer.process_keys:
        _observer = None  # a shared 0.1 key: the child must not sign in the parent's name
    _resolved = True
    for observer in list(LIVE):
        observer._after_fork_in_child()


def _close_at_exit() -> None:
    for observer in list(LIVE):
        observer.close(timeout=_EXIT_TIMEOUT_S)


atexit.register(_close_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
