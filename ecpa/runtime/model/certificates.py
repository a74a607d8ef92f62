"""Reading a launch's certificates (docs/keys.md; their format:
:mod:`ecpa.runtime.model.enrollment`): what the manager vouched for, checked line by line
against the operator's trust store. Pure: bytes and stores in, findings out.

A reader trusts ``launch.json`` only when the first certificate seals its exact bytes, and a
process key only through a certificate, each verified by PROFILE §3 as of its own
``issued_at`` against the **operator's** trust store (outside the launch directory, holding
the manager's public key under subject ``process-key``), and only as far as the launch's
``trust.json`` agrees (:func:`trusted_keys`). Only the manager writes certificates, so the
first line refused ends the reading: the launch is not effective whatever the rest says,
and no one can make a status read more than the manager wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ecpa.errors import EcpaError
from ecpa.profile.trust import TRUST_STORE_SCHEMA, TrustedKey, TrustStore
from ecpa.profile.verify import DEFAULT_POLICY, Binding
from ecpa.runtime.model.enrollment import (
    CERTIFY_OBLIGATION,
    CERTIFY_SUBJECT,
    ENROLLMENTS_FILE,
    MANAGER_ISSUER,
    SUPERVISOR_ROLE,
    Enrollment,
    Sealed,
    launch_sha256,
    nonce,
    parse_body,
)
from ecpa.runtime.model.evidence import Evidence, issued_at_of, parse_record, verify_evidence
from ecpa.runtime.model.launch import ExpectedLaunch
from ecpa.runtime.model.process import ProcessIdentity

__all__ = ["Certified", "identities_of", "read_certificates", "trusted_keys", "vouchers_of"]


@dataclass
class Certified:
    """What a launch's certificates establish: whether ``launch.json`` is the one the
    manager sealed, the newest word on each key, and the line refused (a reason the launch
    is not effective: only the manager writes there), after which nothing was read."""

    keys: dict[str, Enrollment] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    #: Whether the first certificate seals ``launch.json``'s bytes as read.
    sealed: bool = False
    #: A last line without its newline (a write cut by a crash): reported, never read.
    torn: bool = False
    lines: int = 0
    #: Lines after the one refused, not read.
    unread: int = 0


def _parse(line: bytes, launch: ExpectedLaunch) -> tuple[Evidence, Enrollment | Sealed]:
    evidence = parse_record(line)
    if evidence.host_evidence is None:
        raise ValueError("expected a certificate with its body (host_evidence_b64), found none")
    said, launch_id = parse_body(evidence.host_evidence)
    if launch_id != launch.launch_id:
        raise ValueError(
            f"expected a certificate of launch {launch.launch_id!r}, found {launch_id!r}"[:300]
        )
    return evidence, said


def _verify(
    evidence: Evidence, said: Enrollment | Sealed, operator: TrustStore, launch: ExpectedLaunch
) -> None:
    """The statement: signed by a manager key the operator trusts (as of its own issue),
    bound to the launch, saying what the body says."""
    at = issued_at_of(evidence.payload)
    if at is None:
        raise ValueError("expected a statement with an integer issued_at")
    binding = Binding(
        plan_id=launch.plan_id,
        launch_id=launch.launch_id,
        plugin_id=launch.plugin_id,
        artifact_digest=launch.artifact_digest,
        process_epoch=launch.process_epoch,
        challenge_nonce=nonce(launch, said.seq),
    )
    st = verify_evidence(evidence, operator, now=at, policy=DEFAULT_POLICY, binding=binding)
    statement = st.statement
    event = "launched" if isinstance(said, Sealed) else said.event
    found = (statement.issuer, statement.subject, statement.obligation, statement.event)
    if found != (MANAGER_ISSUER, CERTIFY_SUBJECT, CERTIFY_OBLIGATION, event):
        raise ValueError(
            f"expected issuer {MANAGER_ISSUER!r}, subject {CERTIFY_SUBJECT!r}, obligation "
            f"{CERTIFY_OBLIGATION!r} and the body's event {event!r}, found {found!r}"[:300]
        )
    p = statement.process
    if isinstance(said, Sealed):
        boss = launch.supervisor
        want = (SUPERVISOR_ROLE, 0) + ((boss.host, boss.start_identity) if boss else ())
        got = (p.role, p.ordinal) + ((p.host, p.start_identity) if boss else ())
    else:
        who, slot = said.identity, said.slot
        want = (slot.role, slot.ordinal, who.host, who.start_identity)
        got = (p.role, p.ordinal, p.host, p.start_identity)
    if got != want:
        raise ValueError("expected the statement's process to be the one the body names")


def read_certificates(
    data: bytes, operator: TrustStore, launch: ExpectedLaunch, launch_doc: bytes
) -> Certified:
    """What the certificate lines in ``data`` (an ``enrollments.jsonl``'s bytes, or the
    store's lines each ending in a newline) establish for ``launch``, whose ``launch.json``
    was read as ``launch_doc``, under the operator's trust store ``operator`` (see the
    module's text). The order and sequence of each line are checked before its signature,
    so lines repeated cost nothing. Never raises: the line refused is said in
    :attr:`Certified.refused` with its number and why."""
    found = Certified()
    lines = data.split(b"\n")
    if lines[-1]:
        found.torn = True
    last_seq = 0
    for number, raw in enumerate(lines[:-1], start=1):
        line = raw.removesuffix(b"\r")
        if not line.strip():
            continue
        found.lines += 1
        if found.refused:
            found.unread += 1
            continue
        try:
            evidence, said = _parse(line, launch)
            if said.seq <= last_seq:
                raise ValueError(f"expected seq above {last_seq}, found {said.seq}")
            if isinstance(said, Sealed) != (last_seq == 0):
                raise ValueError("expected the launch certificate first, and only first")
            _verify(evidence, said, operator, launch)
            if isinstance(said, Sealed):
                digest = launch_sha256(launch_doc)
                if said.launch_sha256 != digest:
                    raise ValueError(
                        f"expected launch.json as the manager sealed it (SHA-256 "
                        f"{said.launch_sha256}), found another (SHA-256 {digest})"
                    )
                found.sealed = True
            else:
                _merge(found.keys, said)
        except (ValueError, EcpaError) as exc:
            why = f"{exc.code.value}: {exc.detail}" if isinstance(exc, EcpaError) else str(exc)
            found.refused.append(f"{ENROLLMENTS_FILE} line {number}: {why}"[:400])
            continue
        last_seq = said.seq
    return found


def _merge(keys: dict[str, Enrollment], new: Enrollment) -> None:
    """``new`` into ``keys``: a first ``enrolled`` opens a key; a later word on the same key
    must name the same key, issuer and process, and may only close its window."""
    old = keys.get(new.kid)
    if old is None:
        if new.event != "enrolled":
            raise ValueError(f"expected key {new.kid!r} enrolled before it is closed")
        keys[new.kid] = new
        return
    same = (old.issuer, old.public_key_b64, old.identity, old.slot, old.subjects) == (
        new.issuer,
        new.public_key_b64,
        new.identity,
        new.slot,
        new.subjects,
    )
    if new.event != "closed" or not same:
        raise ValueError(f"expected key {new.kid!r} once (one key per process), found it again")
    keys[new.kid] = replace(
        old, not_after=max(old.not_before, min(old.not_after, new.not_after)), seq=new.seq
    )


def vouchers_of(certified: Certified) -> dict[tuple[str, str], TrustedKey]:
    """The entries ``certified``'s certificates vouch for, by (issuer, kid)."""
    store = TrustStore.from_dict(
        {"schema": TRUST_STORE_SCHEMA, "keys": [e.entry() for e in certified.keys.values()]}
    )
    return {(t.entry.issuer, t.entry.kid): t for t in store}


def identities_of(certified: Certified) -> dict[str, ProcessIdentity]:
    """The process each certified key was enrolled for, by kid: host, pid, start ticks and
    boot id, which every record signed with it must name."""
    return {kid: e.identity for kid, e in certified.keys.items()}


def trusted_keys(
    vouched: Mapping[tuple[str, str], TrustedKey], launch_trust: TrustStore, *, by: str
) -> tuple[TrustStore, list[str]]:
    """The trust store a launch's evidence is verified with: each entry of the launch's own
    ``trust.json`` (``launch_trust``) that a voucher (the entry a certificate vouches for,
    or for a 0.1 launch the operator's own) backs with the same issuer, kid and public key,
    its window the overlap of both, its subjects those both list, enabled only if both say
    so; and a line for each entry nothing backs (``uncertified_key``). ``by`` names the
    vouchers in those lines."""
    entries: list[dict[str, Any]] = []
    unbacked: list[str] = []
    for trusted in launch_trust:
        mine = trusted.entry
        voucher = vouched.get((mine.issuer, mine.kid))
        if voucher is None or voucher.key != trusted.key:
            how = "no" if voucher is None else "another public key in the"
            unbacked.append(
                f"trust.json lists key {mine.kid!r} of {mine.issuer!r}: {how} {by} for it"[:300]
            )
            continue
        theirs = voucher.entry
        subjects = [s for s in theirs.subjects if s in mine.subjects]
        start = max(theirs.not_before, mine.not_before)
        end = min(theirs.not_after, mine.not_after)
        entries.append(
            {
                "issuer": mine.issuer,
                "kid": mine.kid,
                "public_key_b64": trusted.key.to_b64(),
                "subjects": subjects or list(theirs.subjects),
                "enabled": mine.enabled and theirs.enabled and bool(subjects) and start <= end,
                "not_before": start,
                "not_after": max(start, end),
            }
        )
    return TrustStore.from_dict({"schema": TRUST_STORE_SCHEMA, "keys": entries}), unbacked
