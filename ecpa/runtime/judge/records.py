"""One evidence record of a launch, checked (RUNTIME.md "Evidence record", "Deriving
runtime_effective" condition 1-2, "Slots", "Process keys").

:func:`check_record` runs every check that one record can fail on its own, in this order, and
raises the first failure; sequence order and replay are the stream's business
(:mod:`ecpa.runtime.judge.derive`):

1. PROFILE.md §3 with the judgement's trust store at its ``now`` (without the exact-nonce
   binding: each statement answers its own nonce);
2. the launch binding: plan, launch, plugin, artifact digest, epoch, and the challenge prefix;
3. the host evidence (the raw counters record) is present and hashes to ``evidence_digest``;
4. the counters record parses strictly (0.3; 0.2 without ``changed`` and
   ``last_selection_at``; 0.1 without ``last_dispatch_at`` either) and names the same plugin
   and process as the statement;
5. the nonce: ``<challenge>:<seq>`` for a 0.1 launch; for a 0.2 launch
   ``<challenge>:<role>.<ordinal>:<pid>.<start_ticks>:<seq>``, with the key id enrolled for
   exactly the process the statement names (``<role>.<ordinal>-<pid>-<start_ticks>``), the
   file it was read from named after that key, and a slot the plan names.
"""

from __future__ import annotations

from dataclasses import dataclass

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.fence import fingerprint
from ecpa.profile.statement import Statement
from ecpa.profile.verify import verify
from ecpa.runtime.judge.context import Judgement
from ecpa.runtime.model.counters import Counters, parse_counters
from ecpa.runtime.model.enroll import kid_for, log_name, nonce_for
from ecpa.runtime.model.evidence import Evidence, evidence_digest
from ecpa.runtime.model.launch import ExpectedLaunch, Slot
from ecpa.runtime.model.process import ProcessIdentity

__all__ = ["Accepted", "check_record"]


def _invalid(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.INVALID_RECORD, detail)


def _mismatch(field: str, expected: object, found: object) -> EcpaError:
    return EcpaError(
        ErrorCode.BINDING_MISMATCH,
        f"record for another launch: {field} (expected {expected!r}, found {found!r})",
    )


def _check_launch(st: Statement, expected: ExpectedLaunch) -> None:
    for field, want, found in (
        ("plan_id", expected.plan_id, st.plan_id),
        ("launch_id", expected.launch_id, st.launch_id),
        ("plugin_id", expected.plugin_id, st.plugin_id),
        ("artifact_digest", expected.artifact_digest, st.artifact_digest),
        ("process.epoch", expected.process_epoch, st.process.epoch),
    ):
        if want != found:
            raise _mismatch(field, want, found)
    prefix = expected.challenge + ":"
    if not st.challenge_nonce.startswith(prefix):
        raise _mismatch("challenge_nonce", prefix + "...", st.challenge_nonce)


@dataclass(frozen=True)
class Accepted:
    """A record that passed every check of its own."""

    statement: Statement
    counters: Counters
    seq: int
    identity: ProcessIdentity
    slot: Slot
    #: The fingerprint of its verified bytes (re-reading it is not a replay).
    fingerprint: str


def _identity(st: Statement) -> ProcessIdentity:
    try:
        identity = ProcessIdentity.parse(st.process.host, st.process.start_identity)
    except EcpaError as exc:
        raise _invalid(f"statement process: {exc.detail}") from None
    if identity.start_identity != st.process.start_identity:  # leading zeros
        raise _invalid(
            f"expected start_identity {identity.start_identity!r}, "
            f"found {st.process.start_identity!r}"
        )
    return identity


def _slot(st: Statement) -> Slot:
    try:
        return Slot(st.process.role, st.process.ordinal)
    except EcpaError as exc:
        raise _invalid(f"statement process: {exc.detail}") from None


def _check_process_key(
    st: Statement,
    expected: ExpectedLaunch,
    identity: ProcessIdentity,
    slot: Slot,
    seq: int,
    file_kid: str | None,
) -> None:
    """The 0.2 rules: the nonce names the process; its key was enrolled for exactly that
    process; the log it came from is that process's; its slot is one the plan names."""
    nonce = nonce_for(expected.challenge, slot, identity, seq)
    if st.challenge_nonce != nonce:
        raise _mismatch("challenge_nonce", nonce, st.challenge_nonce)
    kid = kid_for(slot, identity)
    if st.kid != kid:
        raise EcpaError(
            ErrorCode.BINDING_MISMATCH,
            f"statement signed with key {st.kid!r}, which was not enrolled for the process it "
            f"names (expected key {kid!r})",
        )
    if file_kid is not None and file_kid != kid:
        raise EcpaError(
            ErrorCode.BINDING_MISMATCH,
            f"record of process key {kid!r} in another process's file {log_name(file_kid)!r}",
        )
    certified = None if expected.certified is None else expected.certified.get(kid)
    if certified is not None and certified != identity:
        raise EcpaError(
            ErrorCode.BINDING_MISMATCH,
            f"record naming {identity.start_identity} on {identity.host!r}, signed with key "
            f"{kid!r}, which the manager certified for {certified.start_identity} on "
            f"{certified.host!r}",
        )
    if slot not in expected.slot_set:
        named = ", ".join(s.name for s in expected.slots)
        raise EcpaError(
            ErrorCode.BINDING_MISMATCH,
            f"record for slot {slot.name}, which the plan does not name (slots: {named})",
        )


def check_record(
    evidence: Evidence, judgement: Judgement, *, file_kid: str | None = None
) -> Accepted:
    """Every check of one record but sequence order and replay (see the module's text), with
    the ``judgement``'s trust store, expected launch, ``now`` and policy (its fence is the
    stream's business).

    ``file_kid`` is the key id the record's log file is named after (0.2), or None.

    Raises:
        EcpaError: the code of the first check that failed.
    """
    expected = judgement.expected
    st = verify(
        evidence.payload,
        evidence.detached_jws,
        judgement.trust_store,
        now=judgement.now,
        policy=judgement.policy,
    ).statement
    _check_launch(st, expected)  # RUNTIME condition 1: this plan, launch, plugin, epoch
    if evidence.host_evidence is None:  # condition 2: without it, its selections are unknown
        raise _invalid("expected host_evidence_b64 (the counters record), found none")
    digest = evidence_digest(evidence.host_evidence)
    if digest != st.evidence_digest:
        raise EcpaError(
            ErrorCode.EVIDENCE_DIGEST_MISMATCH,
            f"expected host evidence hashing to {st.evidence_digest}, found {digest}",
        )
    counters = parse_counters(evidence.host_evidence)
    if counters.plugin_id != expected.plugin_id:
        raise _mismatch("counters.plugin_id", expected.plugin_id, counters.plugin_id)
    identity = _identity(st)
    cp = counters.process
    named = ProcessIdentity(cp.host, cp.pid, cp.start_ticks, cp.boot_id)
    if named != identity:
        raise _mismatch("counters.process", identity.start_identity, named.start_identity)
    slot = _slot(st)
    if expected.version == "0.1":
        nonce = f"{expected.challenge}:{counters.seq}"
        if st.challenge_nonce != nonce:
            raise _mismatch("challenge_nonce", nonce, st.challenge_nonce)
    else:
        _check_process_key(st, expected, identity, slot, counters.seq, file_kid)
    mark = fingerprint(evidence.payload, evidence.detached_jws)
    return Accepted(st, counters, counters.seq, identity, slot, mark)
