"""What the observer signs (RUNTIME.md "Evidence record"): the raw counters record, the
statement about it, and the evidence record carrying both. Pure: no clock, no I/O; the
observer passes the counters, the window and the time in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ecpa.errors import invalid_input
from ecpa.profile.keys import SigningKey
from ecpa.profile.sign import sign
from ecpa.profile.statement import PROFILE_ID, STATEMENT_SCHEMA
from ecpa.runtime import (
    COUNTERS_SCHEMA,
    MAX_TTL_S,
    Counters,
    CountersProcess,
    Evidence,
    HostCounts,
    LaunchEnvironment,
    ProcessIdentity,
    Slot,
    evidence_digest,
    nonce_for,
)

#: Statement lifetime, ``expires_at - issued_at``, at the default cadence; longer emit
#: intervals get up to ``MAX_TTL_S`` (RUNTIME.md: at most 300), so that the newest statement
#: does not expire before the next one is due.
STATEMENT_TTL_S = 60
SUBJECT = "host-runtime"
OBLIGATION = "victim-selector-dispatch"
EVENT = "invoked"


@dataclass(frozen=True)
class Window:
    """One emission: the cumulative counters at ``end`` and the interval they close."""

    seq: int
    calls: int
    selections: int
    abstentions: int
    failures: int
    dropped: int
    start: int
    end: int
    #: The Unix second of the newest dispatch counted, or None before the first.
    last_dispatch_at: int | None = None
    #: Selections that differ from the host's builtin victim (0.3).
    changed: int = 0
    #: The Unix second of the newest selection, or None before the first (0.3).
    last_selection_at: int | None = None
    #: What the host witnessed, as its journal accounts for it (0.4), or None.
    host: HostCounts | None = None


DEFAULT_EMIT_INTERVAL_S = 1.0
#: Optional: the emit interval in seconds, set by the manager (``ecpa run``).
EMIT_INTERVAL_ENV = "ECPA_EMIT_INTERVAL_S"
# The bound a plan accepts (ecpa.runtime.model.plan): positive, at most a third of the longest
# statement lifetime (300 s), so the newest statement outlives the wait for the next.
MAX_INTERVAL_S = 100.0


def check_cadence(emit_interval_s: float, emit_every: int | None, queue_size: int) -> None:
    """An observer's cadence: a finite interval in (0, :data:`MAX_INTERVAL_S`] seconds, at least
    one dispatch between early records, a queue of at least one record.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming what was found.
    """
    if not (isinstance(emit_interval_s, (int, float)) and math.isfinite(emit_interval_s)):
        raise invalid_input(f"expected a finite emit interval, found {emit_interval_s!r}")
    if not 0 < emit_interval_s <= MAX_INTERVAL_S:
        raise invalid_input(
            f"expected an emit interval in (0, {MAX_INTERVAL_S:g}] s, found {emit_interval_s!r}"
        )
    if emit_every is not None and emit_every < 1:
        raise invalid_input(f"expected emit_every >= 1 dispatches, found {emit_every!r}")
    if queue_size < 1:
        raise invalid_input(f"expected queue_size >= 1, found {queue_size!r}")


def ttl_for(emit_interval_s: float) -> int:
    """60 s, or twice the emit interval when that is longer, at most 300 s."""
    return min(MAX_TTL_S, max(STATEMENT_TTL_S, math.ceil(2 * emit_interval_s)))


def counters_record(plugin_id: str, identity: ProcessIdentity, window: Window) -> bytes:
    """The raw counters record (schema ``ecpa-dispatch-counters/0.4``) as JCS bytes: a
    :class:`~ecpa.runtime.model.counters.Counters`, the very model a reader parses."""
    return Counters(
        schema_=COUNTERS_SCHEMA,
        plugin_id=plugin_id,
        seq=window.seq,
        process=CountersProcess(
            host=identity.host,
            pid=identity.pid,
            start_ticks=identity.start_ticks,
            boot_id=identity.boot_id,
        ),
        calls=window.calls,
        selections=window.selections,
        changed=window.changed,
        abstentions=window.abstentions,
        failures=window.failures,
        dropped=window.dropped,
        window_start=window.start,
        window_end=window.end,
        last_dispatch_at=window.last_dispatch_at,
        last_selection_at=window.last_selection_at,
        host=window.host,
    ).to_bytes()


@dataclass(frozen=True)
class Signer:
    """Who signs, and for which slot: the key, its id, and how nonces are formed (a 0.1
    launch key: ``<challenge>:<seq>``; a 0.2 process key:
    ``<challenge>:<slot>:<pid>.<ticks>:<seq>``)."""

    key: SigningKey
    kid: str
    slot: Slot
    process_keys: bool

    def nonce(self, launch: LaunchEnvironment, identity: ProcessIdentity, seq: int) -> str:
        """The ``challenge_nonce`` of statement ``seq``."""
        if self.process_keys:
            return nonce_for(launch.challenge, self.slot, identity, seq)
        return f"{launch.challenge}:{seq}"


def statement(
    launch: LaunchEnvironment,
    identity: ProcessIdentity,
    signer: Signer,
    *,
    seq: int,
    digest: str,
    observed_at: int,
    issued_at: int,
    ttl: int = STATEMENT_TTL_S,
) -> dict[str, Any]:
    """The statement about one counters record, answering its own nonce."""
    return {
        "schema": STATEMENT_SCHEMA,
        "profile": PROFILE_ID,
        "issuer": launch.issuer,
        "kid": signer.kid,
        "subject": SUBJECT,
        "plan_id": launch.plan_id,
        "launch_id": launch.launch_id,
        "plugin_id": launch.plugin_id,
        "obligation": OBLIGATION,
        "event": EVENT,
        "challenge_nonce": signer.nonce(launch, identity, seq),
        "artifact_digest": launch.artifact_digest,
        "evidence_digest": digest,
        "process": {
            "host": identity.host,
            "role": signer.slot.role,
            "start_identity": identity.start_identity,
            "ordinal": signer.slot.ordinal,
            "epoch": launch.process_epoch,
        },
        "observed_at": observed_at,
        "issued_at": issued_at,
        "expires_at": issued_at + ttl,
        "critical_claims": [],
    }


def build_evidence(
    launch: LaunchEnvironment,
    identity: ProcessIdentity,
    signer: Signer,
    window: Window,
    *,
    issued_at: int,
    ttl: int = STATEMENT_TTL_S,
) -> Evidence:
    """Sign a statement about ``window``'s counters record; ``observed_at`` is its end.

    Raises:
        EcpaError: the codes of :func:`ecpa.profile.sign.sign` when the launch binding gives a
            statement a verifier would refuse (an artifact digest not ``sha256:<hex>``, ...).
    """
    raw = counters_record(launch.plugin_id, identity, window)
    st = statement(
        launch,
        identity,
        signer,
        seq=window.seq,
        digest=evidence_digest(raw),
        observed_at=min(window.end, issued_at),
        issued_at=issued_at,
        ttl=ttl,
    )
    signed = sign(st, signer.key)
    return Evidence(payload=signed.payload, detached_jws=signed.detached_jws, host_evidence=raw)
