"""What a host event must also be to count in a process's journal (docs/host-evidence.md):
bound to the launch, its identity assigned by the host, of the very process the sink runs
in, and of the engine-core scheduler role.

Pure: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from ecpa.runtime.model.host_event import SCHEDULER_ROLE, HostEvent
from ecpa.runtime.model.host_ids import HostEventCode, HostEventRefused, epoch_of

__all__ = ["ProcessClaim", "check_binding"]


def _refuse(code: HostEventCode, detail: str) -> NoReturn:
    raise HostEventRefused(code, detail)


@dataclass(frozen=True)
class ProcessClaim:
    """What a host event must name to count: this launch and this process."""

    plan_id: str
    launch_id: str
    host: str
    pid: int
    start_ticks: int


def check_binding(event: HostEvent, claim: ProcessClaim) -> None:
    """That ``event`` counts for the launch and process of ``claim``: bound to its plan and
    launch, its identity assigned by the host (not the environment, which any process may
    set), naming this very process (host, pid, start ticks, and the epoch the host derives
    from them), and bound to the engine-core scheduler role.

    Raises:
        HostEventRefused: ``UNBOUND``, ``OTHER_LAUNCH``, ``ENVIRONMENT_ASSIGNED``,
            ``OTHER_PROCESS`` or ``NOT_SCHEDULER``.
    """
    if event.plan_id is None or event.launch_id is None:
        _refuse(HostEventCode.UNBOUND, "expected an event bound to a plan and a launch")
    if (event.plan_id, event.launch_id) != (claim.plan_id, claim.launch_id):
        _refuse(
            HostEventCode.OTHER_LAUNCH,
            f"expected plan {claim.plan_id}, launch {claim.launch_id}; found "
            f"{event.plan_id}, {event.launch_id}"[:300],
        )
    if event.assignment_source != "host":
        _refuse(
            HostEventCode.ENVIRONMENT_ASSIGNED,
            f"expected a process identity the host assigned, found "
            f"{event.assignment_source or 'no assignment source'}",
        )
    start_identity = f"pid:{event.pid}:start_ticks:{event.start_ticks}"
    if (event.host, event.pid, event.start_ticks) != (claim.host, claim.pid, claim.start_ticks):
        _refuse(
            HostEventCode.OTHER_PROCESS,
            f"expected host {claim.host}, pid {claim.pid}, start ticks {claim.start_ticks}; "
            f"found {event.host}, {event.pid}, {event.start_ticks}"[:300],
        )
    if event.process_epoch != epoch_of(start_identity):
        _refuse(
            HostEventCode.OTHER_PROCESS,
            f"expected the epoch the host derives, {epoch_of(start_identity)}, found "
            f"{event.process_epoch}",
        )
    if event.role != SCHEDULER_ROLE:
        _refuse(
            HostEventCode.NOT_SCHEDULER,
            f"expected role {SCHEDULER_ROLE!r}, found {event.role!r}"[:200],
        )
