"""A model of the vLLM-HUST host's evidence delivery (``vllm/plugins/evidence.py`` of
vLLM-HUST/vllm-hust, commit fbfd817a): what the host hands the sink named by
``VLLM_ECPA_EVIDENCE_SINK``, when, and what it does when the sink fails. The facts, none of
the code.

- **Identity.** ``host``, ``pid``, ``start_identity`` (``pid:<pid>:start_ticks:<field 22 of
  /proc/self/stat>``), ``role``, ``ordinal``, ``process_epoch``. Bound by the host
  (:func:`bind_process_identity`, once; the engine core binds ``engine-core-scheduler`` and
  its data-parallel rank): the epoch is the first 12 hex digits of the SHA-256 of the start
  identity, ``assignment_source`` ``"host"``. Otherwise from ``VLLM_ECPA_PROCESS_ROLE``
  (``"unknown"``), ``_ORDINAL`` (0), ``_EPOCH``, and the source is ``"environment"``.
- **Scope.** Captured once per component (:func:`capture_scope`): ``VLLM_ECPA_PLAN_ID`` and
  ``VLLM_ECPA_LAUNCH_ID`` (empty: none), bound when both are set. Controller ids and
  dispatch numbers are allocated process-wide under a lock.
- **Events.** The 19 members of ``vllm-hust-plugin-evidence/0.1``; ``event_id`` and
  ``dispatch_id`` are SHA-256 digests of JSON arrays of its members (:func:`host_event`). An
  event already delivered is not delivered again; ``delivery_attempt`` counts attempts.
- **The sink.** ``module:callable``, imported on first use. ``VLLM_ECPA_EVIDENCE_STRICT`` is
  ``0`` or ``1``. Strict: a sink that fails to load or raises leaves delivery failed for
  good, and every later event raises; not strict: a load is tried again at the next event,
  a raising sink stays failed and later events are dropped. A forked child starts afresh.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SCHEMA",
    "EvidenceConfigurationError",
    "Occurrence",
    "allocate_controller_instance",
    "allocate_invocation_sequence",
    "bind_process_identity",
    "capture_scope",
    "emit_host_event",
    "host_event",
    "observer_configured",
    "reset_for_tests",
    "scope_is_current",
    "state",
]

SCHEMA = "vllm-hust-plugin-evidence/0.1"
Sink = Callable[[dict[str, Any]], None]


class EvidenceConfigurationError(RuntimeError):
    """The host's evidence configuration or identity is invalid, or its sink failed."""


def _sha256(items: list[Any]) -> str:
    return hashlib.sha256(json.dumps(items, separators=(",", ":")).encode()).hexdigest()


def _start_identity() -> str:
    try:
        with open("/proc/self/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
        ticks = text[text.rindex(")") + 1 :].split()[19]  # field 22, after the command name
        int(ticks)
    except (OSError, ValueError, IndexError) as exc:
        raise EvidenceConfigurationError("process start identity is unavailable") from exc
    return f"pid:{os.getpid()}:start_ticks:{ticks}"


class _State:
    """The host's process-wide delivery state (one per process; a child makes its own)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.RLock()
        self.sink: Sink | None = None
        self.status = "unconfigured"  # "ready", "failed"
        self.error: BaseException | None = None
        self.failures = 0
        self.attempts = 0
        self.deliveries = 0
        self.delivered: set[tuple[Any, ...]] = set()
        self.controllers = 0
        self.invocations = 0
        self.binding: tuple[str, int] | None = None


_state = _State()


def state() -> _State:
    """This process's delivery state (a forked child's is made anew on first use)."""
    global _state
    if _state.pid != os.getpid():
        _state = _State()
    return _state


def reset_for_tests() -> None:
    """Forget everything: sink, counters, binding, deliveries."""
    global _state
    _state = _State()


def _strict() -> bool:
    value = os.environ.get("VLLM_ECPA_EVIDENCE_STRICT", "0")
    if value not in ("0", "1"):
        raise EvidenceConfigurationError("VLLM_ECPA_EVIDENCE_STRICT must be 0 or 1")
    return value == "1"


def _identity() -> dict[str, Any]:
    st = state()
    try:
        start = _start_identity()
        host = socket.gethostname()
        if not host:
            raise ValueError("empty host name")
        derived = int(hashlib.sha256(start.encode()).hexdigest()[:12], 16)
        if st.binding is None:
            role = os.environ.get("VLLM_ECPA_PROCESS_ROLE", "unknown")
            ordinal = int(os.environ.get("VLLM_ECPA_PROCESS_ORDINAL", "0"))
            epoch = int(os.environ.get("VLLM_ECPA_PROCESS_EPOCH", str(derived)))
            source = "environment"
        else:
            (role, ordinal), epoch, source = st.binding, derived, "host"
        if not role or ordinal < 0 or epoch < 0:
            raise ValueError("empty role, or a negative ordinal or epoch")
    except ValueError as exc:
        raise EvidenceConfigurationError("invalid process identity") from exc
    return {
        "host": host,
        "role": role,
        "ordinal": ordinal,
        "pid": os.getpid(),
        "start_identity": start,
        "process_epoch": epoch,
        "assignment_source": source,
    }


def bind_process_identity(role: str, ordinal: int) -> None:
    """The host assigns this process its role and ordinal, once (the same again is fine).

    Raises:
        EvidenceConfigurationError: a bad role or ordinal, or another binding already.
    """
    if (
        type(role) is not str
        or not role
        or role.strip() != role
        or type(ordinal) is not int
        or ordinal < 0
    ):
        raise EvidenceConfigurationError("invalid host process identity")
    st = state()
    with st.lock:
        if st.binding not in (None, (role, ordinal)):
            raise EvidenceConfigurationError("host process identity is already bound")
        st.binding = (role, ordinal)


def capture_scope(*, expected_role: str | None = None) -> dict[str, Any]:
    """Identity and launch binding, frozen once for a long-lived component.

    Raises:
        EvidenceConfigurationError: no identity, or another role than ``expected_role``.
    """
    identity = _identity()
    if expected_role is not None and identity["role"] != expected_role:
        raise EvidenceConfigurationError(
            f"evidence role must be {expected_role!r}, got {identity['role']!r}"
        )
    plan_id = os.environ.get("VLLM_ECPA_PLAN_ID") or None
    launch_id = os.environ.get("VLLM_ECPA_LAUNCH_ID") or None
    bound = plan_id is not None and launch_id is not None
    return {
        "process": identity,
        "plan_id": plan_id,
        "launch_id": launch_id,
        "binding_status": "bound" if bound else "unbound",
    }


def scope_is_current(scope: dict[str, Any]) -> bool:
    """Whether ``scope`` was captured by this very process (not inherited across a fork)."""
    process = scope["process"]
    return bool(process["pid"] == os.getpid() and process["start_identity"] == _start_identity())


def observer_configured() -> bool:
    """Whether evidence has somewhere to go in this process."""
    st = state()
    with st.lock:
        return st.status == "ready" or bool(os.environ.get("VLLM_ECPA_EVIDENCE_SINK"))


def _require_current(scope: dict[str, Any]) -> None:
    if not scope_is_current(scope):
        raise EvidenceConfigurationError("evidence scope belongs to another process")


def allocate_controller_instance(scope: dict[str, Any]) -> str:
    """A controller id, unique in the process under its launch."""
    _require_current(scope)
    st = state()
    with st.lock:
        st.controllers += 1
        process = scope["process"]
        return _sha256(
            [
                process["host"],
                process["start_identity"],
                scope["plan_id"],
                scope["launch_id"],
                st.controllers,
            ]
        )


def allocate_invocation_sequence(scope: dict[str, Any]) -> int:
    """The next dispatch number, shared by every controller of the process."""
    _require_current(scope)
    st = state()
    with st.lock:
        st.invocations += 1
        return st.invocations


@dataclass(frozen=True)
class Occurrence:
    """What one event is about, beside the process: its entry point, event, detail,
    occurrence, kind, controller, and the launch binding."""

    event: str
    group: str
    name: str
    value: str
    detail: str | None
    occurrence_id: int | str | None
    observation_kind: str
    controller_instance_id: str | None
    plan_id: str | None
    launch_id: str | None
    binding_status: str

    def key(self, identity: dict[str, Any]) -> list[Any]:
        """The identity of the event as the host dedupes it and hashes it."""
        return [
            *(identity[k] for k in ("host", "pid", "start_identity", "process_epoch")),
            *(identity["role"], identity["ordinal"], self.group, self.name, self.value),
            *(self.event, self.detail, self.occurrence_id, self.plan_id, self.launch_id),
            *(self.observation_kind, self.controller_instance_id),
        ]


def host_event(
    identity: dict[str, Any], occurrence: Occurrence, *, delivery_attempt: int, observed_at_ns: int
) -> dict[str, Any]:
    """The event the host delivers (``event_id`` and ``dispatch_id`` computed as the host
    computes them)."""
    o = occurrence
    material = [*o.key(identity), delivery_attempt, observed_at_ns]
    if "assignment_source" in identity:
        material.append(identity["assignment_source"])
    number = o.occurrence_id if type(o.occurrence_id) is int else None
    dispatch_id = None
    if number is not None:
        process = [identity[k] for k in ("host", "start_identity", "process_epoch")]
        dispatch_id = _sha256([*process, o.plan_id, o.launch_id, o.controller_instance_id, number])
    bound = o.binding_status == "bound"
    return {
        "schema": SCHEMA,
        "event_id": _sha256(material),
        "event": o.event,
        "observation_kind": o.observation_kind,
        "entry_point": {"group": o.group, "name": o.name, "value": o.value},
        "process": identity,
        "observed_at_ns": observed_at_ns,
        "delivery_attempt": delivery_attempt,
        "plan_id": o.plan_id,
        "launch_id": o.launch_id,
        "binding_status": o.binding_status,
        "occurrence_id": o.occurrence_id,
        "controller_instance_id": o.controller_instance_id,
        "invocation_seq": number,
        "dispatch_id": dispatch_id,
        "plugin_id": None,
        "artifact_digest": None,
        "identity_status": (
            "launch-bound" if bound else "unbound; not eligible for translated ECPA evidence"
        ),
        "detail": o.detail,
    }


def _load_sink(st: _State, strict: bool) -> Sink | None:
    if st.status == "ready":
        return st.sink
    if st.status == "failed":
        raise EvidenceConfigurationError("evidence sink is failed") from st.error
    target = os.environ.get("VLLM_ECPA_EVIDENCE_SINK")
    if not target:
        return None
    try:
        module, _, attribute = target.partition(":")
        if not module or not attribute:
            raise ValueError("expected module:callable")
        sink: Sink = getattr(importlib.import_module(module), attribute)
        if not callable(sink):
            raise TypeError("sink is not callable")
    except Exception as exc:
        st.failures += 1
        if strict:
            st.status, st.error = "failed", exc
            raise EvidenceConfigurationError("evidence sink load failed") from exc
        return None  # not strict: tried again at the next event
    st.sink, st.status, st.error = sink, "ready", None
    return sink


def emit_host_event(
    event: str,
    group: str,
    name: str,
    value: str,
    *,
    detail: str | None = None,
    scope: dict[str, Any] | None = None,
    occurrence_id: int | str | None = None,
    observation_kind: str = "loader_lifecycle",
    controller_instance_id: str | None = None,
) -> bool:
    """Deliver one event to the configured sink; True once the sink took it (or had taken
    the same event before), False when there is no sink or (not strict) it failed.

    Raises:
        EvidenceConfigurationError: strict mode and the sink cannot be loaded, has failed,
            or raised; or ``VLLM_ECPA_EVIDENCE_STRICT`` is neither 0 nor 1.
    """
    st = state()
    with st.lock:
        try:
            strict = _strict()
        except EvidenceConfigurationError as exc:
            st.failures += 1
            st.status, st.error = "failed", exc
            raise
        try:
            sink = _load_sink(st, strict)
            if sink is None:
                return False
            if scope is not None:
                _require_current(scope)
            identity = _identity() if scope is None else scope["process"]
        except EvidenceConfigurationError as exc:
            if st.status != "failed":
                st.failures += 1
            if strict:
                st.status, st.error = "failed", exc
                raise EvidenceConfigurationError("evidence emission failed") from exc
            return False
        if scope is None:
            plan_id = os.environ.get("VLLM_ECPA_PLAN_ID")
            launch_id = os.environ.get("VLLM_ECPA_LAUNCH_ID")
            bound = "bound" if plan_id is not None and launch_id is not None else "unbound"
        else:
            plan_id, launch_id, bound = (
                scope["plan_id"],
                scope["launch_id"],
                scope["binding_status"],
            )
        occurrence = Occurrence(
            event,
            group,
            name,
            value,
            detail,
            occurrence_id,
            observation_kind,
            controller_instance_id,
            plan_id,
            launch_id,
            bound,
        )
        key = (*occurrence.key(identity), identity["assignment_source"])
        if key in st.delivered:
            return True
        st.attempts += 1
        payload = host_event(
            identity, occurrence, delivery_attempt=st.attempts, observed_at_ns=time.time_ns()
        )
        try:
            sink(payload)
        except Exception as exc:
            st.failures += 1
            st.status, st.error = "failed", exc  # a broken sink stays failed
            if strict:
                raise EvidenceConfigurationError("evidence sink write failed") from exc
            return False
        st.delivered.add(key)
        st.deliveries += 1
        return True
