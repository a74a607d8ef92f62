"""Who a host event says it is, and why one is refused (docs/host-evidence.md): the digests
the vLLM-HUST host gives an event (``event_id``, ``dispatch_id``) and a host-assigned process
(its epoch), computed as the host computes them, and the codes of :class:`HostEventRefused`.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import hashlib
import json
from enum import Enum
from typing import Any

from ecpa.errors import EcpaError, ErrorCode

__all__ = [
    "HostEventCode",
    "HostEventRefused",
    "dispatch_id_of",
    "epoch_of",
    "event_id_of",
]


class HostEventCode(str, Enum):
    """Why the sink refused a host event; the value is what the refusal log and the audit
    write. Refused events are recorded with their code and never counted."""

    #: Not a dict of at most 32 members with strings of at most 8 KiB (checked on delivery).
    NOT_OBJECT = "host_event_not_object"
    #: Its line is longer than :data:`MAX_HOST_LINE`, or a string in it is.
    TOO_LARGE = "host_event_too_large"
    #: It cannot be written as JSON (NaN or infinity, a value JSON has no form for).
    NOT_JSON = "host_event_not_json"
    #: Not the 0.1 schema's shape: members, types, identities that must agree.
    MALFORMED = "host_event_malformed"
    #: Well formed, but an event or observation kind the 0.1 schema does not have.
    UNKNOWN_KIND = "host_event_unknown_kind"
    #: ``event_id`` is not the SHA-256 of the event's own members.
    EVENT_ID = "host_event_id_mismatch"
    #: ``dispatch_id`` is not the SHA-256 of the dispatch's identity.
    DISPATCH_ID = "host_dispatch_id_mismatch"
    #: Not bound to a plan and launch (``binding_status`` unbound).
    UNBOUND = "host_event_unbound"
    #: Bound to another plan or launch than this process's.
    OTHER_LAUNCH = "host_event_other_launch"
    #: Its process identity was assigned from the environment, not by the host.
    ENVIRONMENT_ASSIGNED = "host_event_environment_assigned"
    #: It names another process than the one the sink runs in (host, pid, start, epoch).
    OTHER_PROCESS = "host_event_other_process"
    #: The host bound this process to another role than the engine-core scheduler.
    NOT_SCHEDULER = "host_event_not_scheduler"
    #: Its rank is not the slot this process's evidence is signed for.
    SLOT_MISMATCH = "host_event_slot_mismatch"
    #: A dispatch whose ``detail`` is not one of :data:`DISPATCH_OUTCOMES`, or a resolution
    #: that is not the protocol's validation.
    UNKNOWN_OUTCOME = "host_event_unknown_outcome"
    #: A dispatch of a controller whose policy was never resolved in this process.
    UNRESOLVED = "host_event_unresolved_controller"
    #: A policy resolved (or dispatched) that is not the one this process resolved first.
    POLICY_CHANGED = "host_event_policy_changed"
    #: A delivery not after the previous one, a dispatch sequence already seen, or a
    #: controller resolved twice.
    REPLAYED = "host_event_replayed"


class HostEventRefused(EcpaError):
    """A host event the sink does not count: ``ECPA_INVALID_RECORD`` with ``reason``, the
    precise :class:`HostEventCode` (its detail begins with the code)."""

    def __init__(self, reason: HostEventCode, detail: str) -> None:
        super().__init__(ErrorCode.INVALID_RECORD, f"{reason.value}: {detail}")
        self.reason = reason
        self._said = detail

    def __reduce__(self) -> Any:
        return (type(self), (self.reason, self._said))


def _sha256_of(items: list[Any]) -> str:
    return hashlib.sha256(json.dumps(items, separators=(",", ":")).encode()).hexdigest()


def event_id_of(doc: dict[str, Any]) -> str:
    """The ``event_id`` the host gives event ``doc``: SHA-256 of the JSON array of its
    process identity, entry point, event, detail, occurrence, binding, kind, controller,
    delivery attempt, time, and (when the event has it) the assignment source."""
    process, entry = doc["process"], doc["entry_point"]
    items = [
        process["host"],
        process["pid"],
        process["start_identity"],
        process["process_epoch"],
        process["role"],
        process["ordinal"],
        entry["group"],
        entry["name"],
        entry["value"],
        doc["event"],
        doc["detail"],
        doc["occurrence_id"],
        doc["plan_id"],
        doc["launch_id"],
        doc["observation_kind"],
        doc["controller_instance_id"],
        doc["delivery_attempt"],
        doc["observed_at_ns"],
    ]
    if "assignment_source" in process:
        items.append(process["assignment_source"])
    return _sha256_of(items)


def dispatch_id_of(doc: dict[str, Any]) -> str:
    """The ``dispatch_id`` of dispatch ``doc``: SHA-256 of the JSON array of its host, start
    identity, epoch, plan, launch, controller and sequence number."""
    process = doc["process"]
    return _sha256_of(
        [
            process["host"],
            process["start_identity"],
            process["process_epoch"],
            doc["plan_id"],
            doc["launch_id"],
            doc["controller_instance_id"],
            doc["occurrence_id"],
        ]
    )


def epoch_of(start_identity: str) -> int:
    """The epoch the host gives a process whose identity it assigned: the first 12 hex
    digits of the SHA-256 of its ``pid:<pid>:start_ticks:<ticks>``."""
    return int(hashlib.sha256(start_identity.encode()).hexdigest()[:12], 16)
