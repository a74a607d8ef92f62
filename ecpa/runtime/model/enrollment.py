"""Enrollment certificates (docs/keys.md): the manager's signed word on a launch, and on
each process key that belongs to one process of it, so that nothing written in the launch
directory or the evidence store can make a launch or a key trusted. This module is their
format; :mod:`ecpa.runtime.model.certificates` reads and checks them.

``ecpa run`` appends its certificates to the launch's ``enrollments.jsonl``, each an evidence
record (RUNTIME.md's line format) whose raw record, the *body*, is a JCS object, and whose
statement, signed by the manager's key, is bound to the launch (plan, launch, plugin,
artifact digest, epoch; nonce ``<challenge>:enrollment:<seq>``), names a process and carries
the body's digest. ``seq`` grows by line, from 1:

- the first, before the command starts, seals the launch: ``{"schema":
  "ecpa-launch-certificate/0.1", "seq": 1, "event": "launched", "launch_id",
  "launch_sha256"}``, the SHA-256 of ``launch.json``'s exact bytes (its slots, windows,
  supervisor, host evidence: everything a verdict reads from it), its statement naming the
  supervisor (role ``supervisor``);
- one per process key enrolled: ``{"schema": "ecpa-enrollment/0.1", "seq", "event",
  "launch_id", "issuer", "kid", "public_key_b64", "subjects", "role", "ordinal", "process":
  {"host", "pid", "start_ticks", "boot_id"}, "not_before", "not_after"}``, its statement
  naming that process (its slot and start identity). ``event`` ``"enrolled"`` opens the
  key's window; ``"closed"`` (written when the launch ends) ends it early.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ecpa.profile.json.jcs import canonicalize
from ecpa.profile.json.strict_json import parse_object
from ecpa.profile.keys import Ed25519Signer, VerifyKey
from ecpa.profile.sign import sign
from ecpa.profile.statement import PROFILE_ID, STATEMENT_SCHEMA
from ecpa.runtime.model.enroll import kid_for
from ecpa.runtime.model.evidence import Evidence, evidence_digest, record_line
from ecpa.runtime.model.launch import ExpectedLaunch, Slot
from ecpa.runtime.model.process import ProcessIdentity

__all__ = [
    "CERTIFY_OBLIGATION",
    "CERTIFY_SUBJECT",
    "ENROLLMENTS_FILE",
    "ENROLLMENT_SCHEMA",
    "LAUNCH_CERTIFICATE_SCHEMA",
    "MANAGER_ISSUER",
    "MAX_ENROLLMENTS_BYTES",
    "SUPERVISOR_ROLE",
    "Enrollment",
    "Sealed",
    "certificate_line",
    "launch_certificate_line",
    "launch_sha256",
    "manager_kid",
    "nonce",
    "parse_body",
]

ENROLLMENT_SCHEMA = "ecpa-enrollment/0.1"
LAUNCH_CERTIFICATE_SCHEMA = "ecpa-launch-certificate/0.1"
#: The launch directory's file of certificates, and its source name in the evidence store.
ENROLLMENTS_FILE = "enrollments.jsonl"
#: The issuer of every manager key in an operator's trust store.
MANAGER_ISSUER = "urn:ecpa:manager"
#: The subject a manager key must be trusted for, and its certificates' statements carry.
CERTIFY_SUBJECT = "process-key"
CERTIFY_OBLIGATION = "process-key-enrollment"
#: The role the launch certificate's statement gives the supervisor.
SUPERVISOR_ROLE = "supervisor"
_EVENTS = ("enrolled", "closed")
#: A launch's certificates, at most: about 2 KB each, two per process (enrolled, closed).
MAX_ENROLLMENTS_BYTES = 16 << 20
_MEMBERS = frozenset({
    "schema", "seq", "event", "launch_id", "issuer", "kid", "public_key_b64", "subjects",
    "role", "ordinal", "process", "not_before", "not_after",
})  # fmt: skip
_SEALED = frozenset({"schema", "seq", "event", "launch_id", "launch_sha256"})


def manager_kid(public: VerifyKey) -> str:
    """The key id of a manager key: ``manager-`` and the first 16 hex digits of the SHA-256
    of its 32 raw bytes (the same key, the same id, on every host)."""
    return "manager-" + hashlib.sha256(public.raw).hexdigest()[:16]


def launch_sha256(launch_doc: bytes) -> str:
    """What the launch certificate says of ``launch.json``: the SHA-256 of its bytes."""
    return hashlib.sha256(launch_doc).hexdigest()


@dataclass(frozen=True)
class Enrollment:
    """What one key certificate says: a key, the process it belongs to, and its window."""

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


@dataclass(frozen=True)
class Sealed:
    """What the launch certificate says: the digest of ``launch.json``'s bytes."""

    seq: int
    launch_sha256: str


def nonce(launch: ExpectedLaunch, seq: int) -> str:
    """The ``challenge_nonce`` of certificate ``seq`` of ``launch``."""
    return f"{launch.challenge}:enrollment:{seq}"


def _line(
    raw: bytes,
    launch: ExpectedLaunch,
    key: Ed25519Signer,
    *,
    seq: int,
    event: str,
    process: dict[str, Any],
    issued_at: int,
    ttl: int,
) -> bytes:
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
        "event": event,
        "challenge_nonce": nonce(launch, seq),
        "artifact_digest": launch.artifact_digest,
        "evidence_digest": evidence_digest(raw),
        "process": {**process, "epoch": launch.process_epoch},
        "observed_at": issued_at,
        "issued_at": issued_at,
        "expires_at": issued_at + ttl,
        "critical_claims": [],
    }
    signed = sign(statement, key)
    return record_line(Evidence(signed.payload, signed.detached_jws, raw))


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
    who, slot = enrollment.identity, enrollment.slot
    process = {
        "host": who.host,
        "role": slot.role,
        "start_identity": who.start_identity,
        "ordinal": slot.ordinal,
    }
    raw = canonicalize(enrollment.body(launch.launch_id))
    return _line(
        raw,
        launch,
        key,
        seq=enrollment.seq,
        event=enrollment.event,
        process=process,
        issued_at=issued_at,
        ttl=ttl,
    )


def launch_certificate_line(
    launch: ExpectedLaunch,
    launch_doc: bytes,
    supervisor: ProcessIdentity,
    key: Ed25519Signer,
    *,
    issued_at: int,
    ttl: int = 300,
) -> bytes:
    """The first line of ``enrollments.jsonl``: the manager's seal on ``launch_doc`` (the
    exact bytes of ``launch.json``), naming the ``supervisor``.

    Raises:
        EcpaError: as :func:`certificate_line`.
    """
    body = {
        "schema": LAUNCH_CERTIFICATE_SCHEMA,
        "seq": 1,
        "event": "launched",
        "launch_id": launch.launch_id,
        "launch_sha256": launch_sha256(launch_doc),
    }
    process = {
        "host": supervisor.host,
        "role": SUPERVISOR_ROLE,
        "start_identity": supervisor.start_identity,
        "ordinal": 0,
    }
    return _line(
        canonicalize(body),
        launch,
        key,
        seq=1,
        event="launched",
        process=process,
        issued_at=issued_at,
        ttl=ttl,
    )


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


def _sealed(doc: dict[str, Any]) -> Sealed:
    if set(doc) != _SEALED or doc.get("event") != "launched":
        raise ValueError(
            f"expected a launch certificate with members {sorted(_SEALED)} and event "
            f"'launched', found {sorted(doc)}"[:300]
        )
    digest = _text(doc, "launch_sha256")
    if len(digest) != 64 or digest.strip("0123456789abcdef"):
        raise ValueError(f"expected launch_sha256 as 64 lowercase hex, found {digest!r}"[:200])
    return Sealed(_count(doc, "seq"), digest)


def parse_body(body: bytes) -> tuple[Enrollment | Sealed, str]:
    """A certificate's body, each field checked, and the launch it names.

    Raises:
        ValueError: naming what is wrong; EcpaError: strict JSON's codes, or
            ``ECPA_INVALID_KEY`` for a public key no verifier accepts.
    """
    doc = parse_object(body, what="certificate body")
    if doc.get("schema") == LAUNCH_CERTIFICATE_SCHEMA:
        return _sealed(doc), _text(doc, "launch_id")
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
