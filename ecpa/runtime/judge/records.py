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

A record that passed them all is remembered (:data:`VERIFIED`) by its exact bytes, its log
and everything of the judgement these checks read but the clock; checked again, only the
checks that read the clock run (:func:`~ecpa.profile.verify.check_clock`): the answer is
the same, its signature and parsing are not paid twice. A line read whole
(:func:`check_line`, a log's newest lines) is remembered by its exact bytes as well, and
not even parsed again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.fence import fingerprint
from ecpa.profile.statement import Statement
from ecpa.profile.trust import TrustedKey
from ecpa.profile.verify import check_clock, verify
from ecpa.runtime.judge.context import Judgement
from ecpa.runtime.judge.memo import Memo, Same
from ecpa.runtime.model.counters import Counters, parse_counters
from ecpa.runtime.model.enroll import kid_for, log_name, nonce_for
from ecpa.runtime.model.evidence import Evidence, evidence_digest, parse_record
from ecpa.runtime.model.launch import ExpectedLaunch, Slot
from ecpa.runtime.model.process import ProcessIdentity

__all__ = [
    "RECORDS_REMEMBERED",
    "VERIFIED",
    "Accepted",
    "check_line",
    "check_record",
    "remember_records",
]


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


#: How many records :data:`VERIFIED` holds by default: a status checks each log's newest
#: record again right after its history walk checked it. A process that judges the same
#: launches again and again holds one a slot (``ecpa serve``'s judging processes:
#: :data:`RECORDS_REMEMBERED`); a record weighs about 4 kB there.
_RECORDS_BY_DEFAULT = 256
RECORDS_REMEMBERED = 24_000

#: Records that passed every check of their own, with the key that verified them.
VERIFIED: Memo[tuple[object, ...], tuple[Accepted, TrustedKey]] = Memo(
    "verified records", _RECORDS_BY_DEFAULT
)


def remember_records(count: int = RECORDS_REMEMBERED) -> None:
    """Hold up to ``count`` verified records from now on (:data:`VERIFIED`): for a process
    that judges the same launches again and again, one a slot and more."""
    VERIFIED.resize(count)


def _exact(evidence: Evidence) -> bytes:
    """A name for the record's exact bytes: the SHA-256 of its three parts, each marked
    present or absent and prefixed with its length (no two records share it)."""
    h = hashlib.sha256()
    jws = evidence.detached_jws.encode("utf-8", "surrogatepass")
    for part in (evidence.payload, jws, evidence.host_evidence):
        if part is None:
            h.update(b"\x00")
        else:
            h.update(b"\x01" + len(part).to_bytes(8, "big"))
            h.update(part)
    return h.digest()


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
    return _checked(_exact(evidence), lambda: evidence, judgement, file_kid)


def check_line(
    line: bytes,
    judgement: Judgement,
    *,
    file_kid: str | None = None,
    parsed: Evidence | None = None,
) -> Accepted:
    """:func:`check_record` of the record in ``line`` (:func:`parse_record`): the same answer,
    or the same error. A line that passed is remembered by its exact bytes as well (their
    parse is a pure function of them): seen again, it is neither parsed nor named by its
    parts, only the checks that read the clock run. A log's newest line, judged again every
    refresh of ``ecpa serve``, is read this way; a walk that parsed the line already gives
    its record as ``parsed`` (which must be ``parse_record(line)``: it is not parsed again),
    so that the newest line, checked right after by its bytes, is found remembered.

    Raises:
        EcpaError: as :func:`parse_record`, then as :func:`check_record`.
    """
    evidence_of = (lambda: parse_record(line)) if parsed is None else (lambda: parsed)
    return _checked(("line", hashlib.sha256(line).digest()), evidence_of, judgement, file_kid)


def _checked(
    name: object, evidence_of: Callable[[], Evidence], judgement: Judgement, file_kid: str | None
) -> Accepted:
    """The record named ``name`` (:func:`_exact` of its parts, or ``("line", SHA-256)`` of
    the line it was parsed from: never equal to each other), checked; ``evidence_of`` gives
    it when it is not remembered."""
    expected = judgement.expected
    key = (
        name,
        file_kid,
        Same(judgement.trust_store),  # never changed; its content is judged by launch_keys
        expected.plan_id,
        expected.launch_id,
        expected.plugin_id,
        expected.artifact_digest,
        expected.process_epoch,
        expected.challenge,
        expected.version,
        expected.slot_names,  # (a string compares at once; a set of slots, slot by slot)
        Same(expected.certified),  # the launch's keys' judgement, read-only
    )
    found = VERIFIED.get(key)
    if found is not None:
        rec, trusted = found
        check_clock(rec.statement, trusted, judgement.now, judgement.policy)
        return rec
    evidence = evidence_of()
    if isinstance(name, tuple):  # a line's: checked as its parts are (remembered by them too)
        rec = check_record(evidence, judgement, file_kid=file_kid)
        parts = VERIFIED.get((_exact(evidence), *key[1:]))
        if parts is not None:  # (just remembered by its parts: kept by its line too)
            VERIFIED.put(key, parts)
        return rec
    verified = verify(
        evidence.payload,
        evidence.detached_jws,
        judgement.trust_store,
        now=judgement.now,
        policy=judgement.policy,
    )
    rec = _own_checks(evidence, verified.statement, expected, file_kid)
    VERIFIED.put(key, (rec, verified.trusted_key))
    return rec


def _own_checks(
    evidence: Evidence, st: Statement, expected: ExpectedLaunch, file_kid: str | None
) -> Accepted:
    """Checks 2-5 of the module's text, of a statement PROFILE §3 accepted."""
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
