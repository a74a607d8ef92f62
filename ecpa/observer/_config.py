"""What an observer runs with (:class:`Resolved`), resolved once from its constructor's
arguments, the launch binding and this process: the slot, the identity, who signs and into
which log, the cadence. :class:`ecpa.observer.Observer` is the running object that counts
and emits with it; :func:`resolve` is everything that happens before the first count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ecpa.errors import invalid_input
from ecpa.observer.record import Signer, Window, build_evidence, check_cadence, ttl_for
from ecpa.profile.keys import SigningKey
from ecpa.runtime import (
    LaunchEnvironment,
    ProcessIdentity,
    Slot,
    check_launch_id,
    kid_for,
    log_name,
    make_undumpable,
    read_identity,
)

__all__ = ["Resolved", "for_forked_child", "resolve"]

_ENROLL_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Resolved:
    """An observer's configuration, every default and the launch's binding applied."""

    launch: LaunchEnvironment
    identity: ProcessIdentity
    slot: Slot
    signer: Signer
    #: A 0.2 launch: a key of this process's own, enrolled by ``ecpa run``.
    process_keys: bool
    #: Whether this process was made non-dumpable to keep its key's memory from other
    #: processes of the same user (RUNTIME.md "Keys in memory"; 0.2 only).
    undumpable: bool
    log_path: Path
    #: ``log_path`` was given: a forked child has no log of its own to write.
    custom_log: bool
    emit_interval_s: float
    #: The statements' lifetime, ``expires_at - issued_at``.
    ttl: int
    #: Emit early every this many dispatches; 0: only every interval.
    emit_every: int
    queue_size: int
    enroll_timeout_s: float
    clock: Callable[[], float]
    #: The clock when resolved: the check's statement was issued then, the first window
    #: starts then.
    started_at: int


def _process_signer(
    launch: LaunchEnvironment, slot: Slot, identity: ProcessIdentity, key: SigningKey
) -> tuple[Signer, Path]:
    """A 0.2 process key's signer for ``slot`` (its kid names the process) and its log,
    ``<evidence_dir>/<launch_id>/<kid>.jsonl``."""
    signer = Signer(key, kid_for(slot, identity), slot, process_keys=True)
    return signer, launch.evidence_dir / launch.launch_id / log_name(signer.kid)


def for_forked_child(parent: Resolved) -> Resolved:
    """The configuration of a forked child's own observer, from its parent's (0.2, no log
    path given; RUNTIME.md "Process keys": a forked child re-enrolls with its own key
    before it signs): its identity, made non-dumpable again, a key of its own, its log.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when ``/proc/self`` cannot be read.
    """
    identity = read_identity()
    undumpable = make_undumpable()  # inherited across fork; set again all the same
    signer, log_path = _process_signer(parent.launch, parent.slot, identity, SigningKey.generate())
    return replace(
        parent,
        identity=identity,
        undumpable=undumpable,
        signer=signer,
        log_path=log_path,
        started_at=int(parent.clock()),
    )


def resolve(
    launch: LaunchEnvironment,
    key: SigningKey | None,
    *,
    identity: ProcessIdentity | None,
    role: str | None,
    ordinal: int | None,
    emit_interval_s: float,
    emit_every: int | None,
    queue_size: int,
    clock: Callable[[], float],
    log_path: Path | None,
    enroll_timeout_s: float | None,
) -> Resolved:
    """The configuration :class:`ecpa.observer.Observer` documents for these arguments (its
    defaults are the constructor's, given here each time). In
    a 0.2 launch this process is made non-dumpable, then its key made (unless ``key``);
    one statement is built and signed, not written, to check that the binding and the key
    give records a verifier accepts. Nothing is started and no file is opened.

    Raises:
        EcpaError: as :class:`ecpa.observer.Observer`.
    """
    check_cadence(emit_interval_s, emit_every, queue_size)
    if log_path is None:
        check_launch_id(launch.launch_id)
    identity = identity if identity is not None else read_identity()
    slot = Slot(
        role if role is not None else (launch.role or "scheduler"),
        ordinal if ordinal is not None else (launch.ordinal or 0),
    )
    process_keys = launch.version == "0.2"
    undumpable = False
    if process_keys:
        undumpable = make_undumpable()  # before the key exists in this process
        key = key if key is not None else SigningKey.generate()
        signer, default_log = _process_signer(launch, slot, identity, key)
    else:
        if key is None or launch.kid is None:
            raise invalid_input("expected a signing key and ECPA_KID for a 0.1 launch, found none")
        signer = Signer(key, launch.kid, slot, process_keys=False)
        default_log = launch.evidence_dir / f"{launch.launch_id}.jsonl"
    now = int(clock())
    build_evidence(launch, identity, signer, Window(0, 0, 0, 0, 0, 0, now, now), issued_at=now)
    return Resolved(
        launch=launch,
        identity=identity,
        slot=slot,
        signer=signer,
        process_keys=process_keys,
        undumpable=undumpable,
        log_path=log_path if log_path is not None else default_log,
        custom_log=log_path is not None,
        emit_interval_s=float(emit_interval_s),
        ttl=ttl_for(float(emit_interval_s)),
        emit_every=emit_every or 0,
        queue_size=queue_size,
        enroll_timeout_s=_ENROLL_TIMEOUT_S if enroll_timeout_s is None else enroll_timeout_s,
        clock=clock,
        started_at=now,
    )
