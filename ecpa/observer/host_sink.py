"""The vLLM-HUST host's evidence sink: ``VLLM_ECPA_EVIDENCE_SINK=ecpa.observer.host_sink:deliver``
(``ecpa run`` sets it for the command's tree, with ``VLLM_ECPA_EVIDENCE_STRICT=1``,
``VLLM_ECPA_PLAN_ID`` and ``VLLM_ECPA_LAUNCH_ID``; docs/host-evidence.md).

The host imports this module in each scheduler process and calls :func:`deliver` with one
event (a dict) per policy resolution and per ``select_victim`` dispatch, on its scheduler's
thread. :func:`deliver` keeps a bounded copy and returns: every check, the journal and the
signing happen off that thread (:mod:`ecpa.observer._host`).
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime import SINK_TARGET

__all__ = ["SINK_TARGET", "deliver"]


_recorder: Any = None
_refusal: EcpaError | None = None
_lock = threading.Lock()


def deliver(event: dict[str, Any]) -> None:
    """Take one host event; return at once (its checks and journal come later, off the
    caller's thread). An event that is not one, or not this launch's and this process's,
    is refused later, recorded with its code, and never counted; it never raises here.

    Raises:
        EcpaError: ``ECPA_HOST_SINK`` only when the event cannot be recorded: this process
            has no launch binding, the queue is full, the journal cannot be written, or the
            process is shutting down. A strict host then fails closed.
    """
    recorder = _recorder
    if recorder is None:
        recorder = _start(event)
    recorder.put(event)


def _start(event: Any) -> Any:
    """The process's recorder, made on the first delivery (with the slot the host bound this
    process to, read from the event as a hint for the observer: the event itself is
    checked later, like any other)."""
    global _recorder, _refusal
    with _lock:
        if _recorder is not None:
            return _recorder
        if _refusal is not None:
            raise _refusal
        from ecpa.observer._host import HostRecorder
        from ecpa.observer._process import hint_host_slot, observer_for_host
        from ecpa.runtime import launch_from_env, read_identity

        try:
            launch = launch_from_env(os.environ)
            if launch is None:
                raise EcpaError(
                    ErrorCode.HOST_SINK,
                    "expected the launch binding ecpa run sets (ECPA_*), found none: "
                    "no evidence can be recorded here",
                )
            identity = read_identity()
        except EcpaError as exc:
            _refusal = EcpaError(ErrorCode.HOST_SINK, exc.detail)
            raise _refusal from None
        hint_host_slot(event)
        recorder = HostRecorder(launch, identity, observer_for_host)
        recorder.start()
        _recorder = recorder
        return recorder


def _close_at_exit() -> None:
    """Journal what is still queued (the observer's own exit, which runs first, has closed
    the recorder it signs for; a recorder with no observer, refusals only, is closed here)."""
    recorder = _recorder
    if recorder is not None:
        recorder.close()


def _after_fork_in_child() -> None:
    global _recorder, _refusal, _lock
    _lock = threading.Lock()
    _recorder = None  # the child is another process: its own recorder, on its first event
    _refusal = None


atexit.register(_close_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
