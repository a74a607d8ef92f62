"""Enrollment certificates (docs/keys.md): the manager's signed word that a process key
belongs to one process of one launch, so that nothing written in the launch directory or the
evidence store can make a key trusted.

When ``ecpa run`` enrolls a process key it appends a certificate to the launch's
``enrollments.jsonl``: an evidence record (RUNTIME.md's line format) whose raw record, the
*body*, is the JCS object ``{"schema": "ecpa-enrollment/0.1", "seq", "event", "launch_id",
"issuer", "kid", "public_key_b64", "subjects", "role", "ordinal", "process": {"host", "pid",
"start_ticks", "boot_id"}, "not_before", "not_after"}``, and whose statement, signed by the
manager's key, is bound to the launch (plan, launch, plugin, artifact digest, epoch; nonce
``<challenge>:enrollment:<seq>``), names the process (``process``: its slot and start
identity) and carries the body's digest. ``event`` ``"enrolled"`` opens a key's window;
``"closed"`` (written when the launch ends) ends it early. ``seq`` grows by line.

A reader trusts a process key only through such a certificate, verified by PROFILE §3 as of
its own ``issued_at`` against the **operator's** trust store (outside the launch directory,
holding the manager's public key under subject ``process-key``), and only as far as the
launch's ``trust.json`` agrees: a key that ``trust.json`` lists and no certificate vouches
for (added, or its public key changed) is reported (``uncertified_key``), and the launch is
not effective. The checks here are pure: bytes and stores in, findings out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ecpa.errors import EcpaError
from ecpa.profile.jcs import canonicalize
from ecpa.profile.keys import Ed25519Signer, VerifyKey
from ecpa.profile.sign import sign
from ecpa.profile.statement import PROFILE_ID, STATEMENT_SCHEMA
from ecpa.profile.strict_json import parse_object
from ecpa.profile.trust import TRUST_STORE_SCHEMA, TrustedKey, TrustStore
from ecpa.profile.verify import DEFAULT_POLICY, Binding
from ecpa.runtime.model.enroll import kid_for
from ecpa.runtime.model.evidence import (
    Evidence,
    evidence_digest,
    issued_at_of,
    parse_record,
    record_line,
    verify_evidence,
)
from ecpa.runtime.model.launch import ExpectedLaunch, Slot
from ecpa.runtime.model.process import ProcessIdentity

__all__ = [
    "CERTIFY_OBLIGATION",
    "CERTIFY_SUBJECT",
    "ENROLLMENTS_FILE",
    "ENROLLMENT_SCHEMA",
    "MANAGER_ISSUER",
    "MAX_ENROLLMENTS_BYTES",
    "Certified",
    "Enrollment",
    "certificate_line",
    "manager_kid",
    "read_certificates",
    "trusted_keys",
    "vouchers_of",
]

ENROLLMENT_SCHEMA = "ecpa-enrollment/0.1"
#: The launch directory's file of certificates, and its source name in the evidence store.
ENROLLMENTS_FILE = "enrollments.jsonl"
#: The issuer of every manager key in an operator's trust store.
MANAGER_ISSUER = "urn:ecpa:manager"
#: The subject a manager key must be trusted for, and its certificates' statements carry.
CERTIFY_SUBJECT = "process-key"
CERTIFY_OBLIGATION = "process-key-enrollment"
_EVENTS = ("enrolled", "closed")
#: A launch's certificates, at most: about 1.5 KB each, two per process (enrolled, closed).
MAX_ENROLLMENTS_BYTES = 64 << 20
_MEMBERS = frozenset({
    "schema", "seq", "event", "launch_id", "issuer", "kid", "public_key_b64", "subjects",
    "role", "ordinal", "process", "not_before", "not_after",
})  # fmt: skip


def manager_kid(public: VerifyKey) -> str:
    """The key id of a manager key: ``manager-`` and the first 16 hex digits of the SHA-256
    of its 32 raw bytes (the same key, the same id, on every host)."""
    return "manager-" + hashlib.sha256(public.raw).hexdigest()[:16]


@dataclass(frozen=True)
class Enrollment:
    """What one certificate says: a key, the process it belongs to, and its window."""

    seq: int
    event: str
    issuer: str
    kid: str
    public_key_b64: str
    subjects: tuple[str, ...]
    slot: Slot
    identity: ProcessIdentity
    not_before: int
    not_after: int

    def body(self, launch_id: str) -> dict[str, Any]:
        """The certificate's raw record (before JCS)."""
        who = self.identity
        return {
            "schema": ENROLLMENT_SCHEMA,
            "seq": self.seq,
            "event": self.event,
            "launch_id": launch_id,
            "issuer": self.issuer,
            "kid": self.kid,
            "public_key_b64": self.public_key_b64,
            "subjects": list(self.subjects),
            "role": self.slot.role,
            "ordinal": self.slot.ordinal,
            "process": {
                "host": who.host,
                "pid": who.pid,
                "start_ticks": who.start_ticks,
                "boot_id": who.boot_id,
            },
            "not_before": self.not_before,
            "not_after": self.not_after,
        }

    def entry(self) -> dict[str, Any]:
        """The trust store entry (PROFILE §5) the certificate vouches for."""
        return {
            "issuer": self.issuer,
            "kid": self.kid,
            "public_key_b64": self.public_key_b64,
            "subjects": list(self.subjects),
            "enabled": True,
            "not_before": self.not_before,
            "not_after": self.not_after,
        }


def _nonce(launch: ExpectedLaunch, seq: int) -> str:
    return f"{launch.challenge}:enrollment:{seq}"


def certificate_line(
    enrollment: Enrollment,
    launch: ExpectedLaunch,
    key: Ed25519Signer,
    *,
    issued_at: int,
    ttl: int = 300,
) -> bytes:
    """The ``enrollments.jsonl`` line of ``enrollment``, signed by the manager's ``key``.

    Raises:
        EcpaError: the codes of :func:`ecpa.profile.sign.sign` for a launch whose values a
            verifier would refuse.
    """
    raw = canonicalize(enrollment.body(launch.launch_id))
    who, slot = enrollment.identity, enrollment.slot
    statement = {
        "schema": STATEMENT_SCHEMA,
        "profile": PROFILE_ID,
        "issuer": MANAGER_ISSUER,
        "kid": manager_kid(key.public_key),
        "subject": CERTIFY_SUBJECT,
        "plan_id": launch.plan_id,
        "launch_id": launch.launch_id,
        "plugin_id": launch.plugin_id,
        "obligation": CERTIFY_OBLIGATION,
        "event": enrollment.event,
        "challenge_nonce": _nonce(launch, enrollment.seq),
        "artifact_digest": launch.artifact_digest,
        "evidence_digest": evidence_digest(raw),
        "process": {
            "host": who.host,
            "role": slot.role,
            "start_identity": who.start_identity,
            "ordinal": slot.ordinal,
            "epoch": launch.process_epoch,
        },
        "observed_at": issued_at,
        "issued_at": issued_at,
        "expires_at": issued_at + ttl,
        "critical_claims": [],
    }
    signed = sign(statement, key)
    return record_line(Evidence(signed.payload, signed.detached_jws, raw))


@dataclass
class Certified:
    """What a launch's certificates establish: the newest word on each key, and every line
    refused (each a reason the launch is not effective: only the manager writes there)."""

    keys: dict[str, Enrollment] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    #: A last line without its newline (a write cut by a crash): reported, never read.
    torn: bool = False
    lines: int = 0


def _text(doc: dict[str, Any], name: str) -> str:
    value = doc.get(name)
    if type(value) is not str or not value:
        raise ValueError(f"expected {name!r} as non-empty text, found {value!r}"[:200])
    return value


def _count(doc: dict[str, Any], name: str) -> int:
    value = doc.get(name)
    if type(value) is not int or not 0 <= value <= 2**53 - 1:
        raise ValueError(f"expected {name!r} as an integer in [0, 2**53-1], found {value!r}"[:200])
    return value


def _enrollment(body: bytes) -> tuple[Enrollment, str]:
    """The body's fields, each checked (``ValueError`` naming what is wrong), and the
    launch it names."""
    doc = parse_object(body, what="certificate body")
    if set(doc) != _MEMBERS or doc.get("schema") != ENROLLMENT_SCHEMA:
        raise ValueError(
            f"expected an {ENROLLMENT_SCHEMA} body with members {sorted(_MEMBERS)}, found "
            f"schema {doc.get('schema')!r} and {sorted(doc)}"[:300]
        )
    process = doc["process"]
    if type(process) is not dict or set(process) != {"host", "pid", "start_ticks", "boot_id"}:
        raise ValueError("expected 'process' with exactly host, pid, start_ticks, boot_id")
    subjects = doc["subjects"]
    if type(subjects) is not list or not subjects or any(type(s) is not str for s in subjects):
        raise ValueError(f"expected 'subjects' as a list of text, found {subjects!r}"[:200])
    event = _text(doc, "event")
    if event not in _EVENTS:
        raise ValueError(f"expected event 'enrolled' or 'closed', found {event!r}"[:200])
    identity = ProcessIdentity(
        _text(process, "host"),
        _count(process, "pid"),
        _count(process, "start_ticks"),
        _text(process, "boot_id"),
    )
    slot = Slot(_text(doc, "role"), _count(doc, "ordinal"))
    found = Enrollment(
        _count(doc, "seq"),
        event,
        _text(doc, "issuer"),
        _text(doc, "kid"),
        _text(doc, "public_key_b64"),
        tuple(subjects),
        slot,
        identity,
        _count(doc, "not_before"),
        _count(doc, "not_after"),
    )
    if found.kid != kid_for(slot, identity):
        raise ValueError(
            f"expected kid {kid_for(slot, identity)!r} for the process it names, "
            f"found {found.kid!r}"[:300]
        )
    if found.not_before > found.not_after:
        raise ValueError(
            f"expected not_before <= not_after, found {found.not_before} > {found.not_after}"
        )
    VerifyKey.from_b64(found.public_key_b64)  # every rule of PROFILE §5 (no small order)
    return found, _text(doc, "launch_id")


def _check(line: bytes, operator: TrustStore, launch: ExpectedLaunch) -> Enrollment:
    """The enrollment one certificate line vouches for (``ValueError`` or ``EcpaError``)."""
    evidence = parse_record(line)
    if evidence.host_evidence is None:
        raise ValueError("expected a certificate with its body (host_evidence_b64), found none")
    enrollment, launch_id = _enrollment(evidence.host_evidence)
    if launch_id != launch.launch_id:
        raise ValueError(
            f"expected a certificate of launch {launch.launch_id!r}, found {launch_id!r}"[:300]
        )
    at = issued_at_of(evidence.payload)
    if at is None:
        raise ValueError("expected a statement with an integer issued_at")
    binding = Binding(
        plan_id=launch.plan_id,
        launch_id=launch.launch_id,
        plugin_id=launch.plugin_id,
        artifact_digest=launch.artifact_digest,
        process_epoch=launch.process_epoch,
        challenge_nonce=_nonce(launch, enrollment.seq),
    )
    # As of its own issue: the manager's key must have been trusted then (and still be
    # listed, enabled, for this subject); its signature covers the body's digest.
    st = verify_evidence(evidence, operator, now=at, policy=DEFAULT_POLICY, binding=binding)
    statement = st.statement
    said = (statement.subject, statement.obligation, statement.event)
    if said != (CERTIFY_SUBJECT, CERTIFY_OBLIGATION, enrollment.event):
        raise ValueError(
            f"expected subject {CERTIFY_SUBJECT!r}, obligation {CERTIFY_OBLIGATION!r} and the "
            f"body's event {enrollment.event!r}, found {said!r}"[:300]
        )
    p, who = statement.process, enrollment.identity
    if (p.host, p.start_identity, p.role, p.ordinal) != (
        who.host,
        who.start_identity,
        enrollment.slot.role,
        enrollment.slot.ordinal,
    ):
        raise ValueError("expected the statement's process to be the body's, found another")
    return enrollment


def read_certificates(data: bytes, operator: TrustStore, launch: ExpectedLaunch) -> Certified:
    """What the certificate lines in ``data`` (an ``enrollments.jsonl``'s bytes, or the
    store's lines each ending in a newline) establish for ``launch`` under the operator's
    trust store ``operator`` (see the module's text). Each is verified as of its own
    ``issued_at``, whatever the reader's time: the windows it vouches for say when a key is
    valid. Never raises: each line refused is said in :attr:`Certified.refused` with its
    line number and why."""
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
        try:
            enrollment = _check(line, operator, launch)
            if enrollment.seq <= last_seq:
                raise ValueError(f"expected seq above {last_seq}, found {enrollment.seq}")
            _merge(found.keys, enrollment)
        except (ValueError, EcpaError) as exc:
            why = f"{exc.code.value}: {exc.detail}" if isinstance(exc, EcpaError) else str(exc)
            found.refused.append(f"{ENROLLMENTS_FILE} line {number}: {why}"[:400])
            continue
        last_seq = enrollment.seq
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
