"""The signed receipt of an audit (docs/audit.md, "The receipt"): the report's canonical bytes
(``PREFIX.report.json``) and an ECPA 0.1 statement about them, signed by the manager's key
(``PREFIX.json`` and the detached ``PREFIX.jws``): obligation ``runtime-effective``, event
``audited``, subject ``launch-audit``, the launch's ``launch_id``, ``plan_id``,
``plugin_id`` and ``artifact_digest``, and ``evidence_digest`` the SHA-256 of the report's
bytes. Anyone with the manager's trust store checks it with ``ecpa verify PREFIX.jws`` or
:func:`check_receipt`, which also checks the digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecpa._files import read_bounded, write_file
from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.profile.keys import Ed25519Signer
from ecpa.profile.sign import Signed, sign
from ecpa.profile.statement import PROFILE_ID, STATEMENT_SCHEMA, Statement
from ecpa.profile.trust import TrustStore
from ecpa.profile.verify import verify
from ecpa.runtime.judge.audit import report_bytes
from ecpa.runtime.model.evidence import issued_at_of

__all__ = [
    "RECEIPT_EVENT",
    "RECEIPT_OBLIGATION",
    "RECEIPT_SUBJECT",
    "CheckedReceipt",
    "check_receipt",
    "check_receipt_files",
    "report_digest",
    "sign_receipt",
    "write_receipt",
]

#: The largest report read back (a report of a long launch of many slots).
MAX_REPORT_BYTES = 64 << 20

RECEIPT_SUBJECT = "launch-audit"
RECEIPT_OBLIGATION = "runtime-effective"
RECEIPT_EVENT = "audited"
#: The receipt's own lifetime (the profile's largest TTL): it is checked later as of its
#: ``issued_at`` (``ecpa verify --at-issue``, :func:`check_receipt`).
_TTL = 300


def report_digest(report: bytes) -> str:
    return "sha256:" + hashlib.sha256(report).hexdigest()


def sign_receipt(
    report: dict[str, Any],
    report_bytes: bytes,
    key: Ed25519Signer,
    *,
    issuer: str,
    kid: str,
    now: int,
) -> Signed:
    """The receipt statement of ``report`` (whose canonical bytes are ``report_bytes``),
    signed with ``key`` as ``issuer``/``kid`` at ``now``.

    Raises:
        EcpaError: as :func:`ecpa.sign` (an issuer or key id that makes no valid statement).
    """
    digest = report_digest(report_bytes)
    statement = {
        "schema": STATEMENT_SCHEMA,
        "profile": PROFILE_ID,
        "issuer": issuer,
        "kid": kid,
        "subject": RECEIPT_SUBJECT,
        "plan_id": report["plan_id"],
        "launch_id": report["launch_id"],
        "plugin_id": report["plugin_id"],
        "obligation": RECEIPT_OBLIGATION,
        "event": RECEIPT_EVENT,
        "challenge_nonce": f"audit:{digest.removeprefix('sha256:')}:{now}",
        "artifact_digest": report["artifact_digest"],
        "evidence_digest": digest,
        "process": {
            "host": socket.gethostname() or "unknown",
            "role": "auditor",
            "start_identity": f"pid:{os.getpid()}",
            "ordinal": 0,
            "epoch": 0,
        },
        "observed_at": now,
        "issued_at": now,
        "expires_at": now + _TTL,
        "critical_claims": [],
    }
    return sign(statement, key)


def _launch_of(report: bytes) -> str | None:
    """The report's ``launch_id`` (None: not a JSON object with one; a report holds
    fractions, which the profile's strict parser refuses, so the standard one reads it)."""
    try:
        doc = json.loads(report)
    except ValueError:
        return None
    value = doc.get("launch_id") if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class CheckedReceipt:
    statement: Statement
    #: The time it was verified as of: its own ``issued_at``.
    at: int


def check_receipt(
    report_bytes: bytes, payload: bytes, detached_jws: str, trust: TrustStore
) -> CheckedReceipt:
    """Verify the receipt (``payload`` and ``detached_jws``) as of its own ``issued_at``
    against ``trust``, that it is an audit receipt, and that its ``evidence_digest`` is the
    digest of ``report_bytes``.

    Raises:
        EcpaError: the verifier's code for a receipt that does not verify (another key:
            ``ATTESTATION_UNKNOWN_KEY`` or ``ATTESTATION_INVALID_SIGNATURE``);
            ``ATTESTATION_EVIDENCE_DIGEST_MISMATCH`` for a report that is not the one signed;
            ``ATTESTATION_INVALID_STATEMENT`` for a statement that is no audit receipt.
    """
    at = issued_at_of(payload)
    st = verify(payload, detached_jws, trust, now=at if at is not None else 0).statement
    if (st.obligation, st.event, st.subject) != (
        RECEIPT_OBLIGATION,
        RECEIPT_EVENT,
        RECEIPT_SUBJECT,
    ):
        raise EcpaError(
            ErrorCode.INVALID_STATEMENT,
            f"expected an audit receipt ({RECEIPT_OBLIGATION}/{RECEIPT_EVENT}, subject "
            f"{RECEIPT_SUBJECT}), found {st.obligation}/{st.event}, subject {st.subject}",
        )
    digest = report_digest(report_bytes)
    named = _launch_of(report_bytes)
    if named is not None and named != st.launch_id:
        raise EcpaError(
            ErrorCode.BINDING_MISMATCH,
            f"expected a receipt for the report's launch {named!r}, found one for {st.launch_id!r}",
        )
    if st.evidence_digest != digest:
        raise EcpaError(
            ErrorCode.EVIDENCE_DIGEST_MISMATCH,
            f"expected the report to hash to the receipt's {st.evidence_digest}, found {digest}",
        )
    return CheckedReceipt(st, st.issued_at)


def write_receipt(
    prefix: Path, report: dict[str, Any], key: Ed25519Signer, *, issuer: str, kid: str, now: int
) -> list[Path]:
    """Write ``PREFIX.report.json`` (the report's RFC 8785 bytes), ``PREFIX.json`` and
    ``PREFIX.jws`` (the signed receipt), each whole or not at all, none over a file that
    exists; return their paths.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming a file that exists (nothing is written).
    """
    data = report_bytes(report)
    signed = sign_receipt(report, data, key, issuer=issuer, kid=kid, now=now)
    files = {
        Path(f"{prefix}.report.json"): data,
        Path(f"{prefix}.json"): signed.payload,
        Path(f"{prefix}.jws"): signed.detached_jws.encode("ascii") + b"\n",
    }
    for path in files:
        if path.exists() or path.is_symlink():
            raise invalid_input(f"expected {path} not to exist, found it")
    for path, content in files.items():
        write_file(path, content, mode=0o644, replace=False)
    return list(files)


def check_receipt_files(
    report_file: Path, receipt: Path, trust: TrustStore
) -> tuple[CheckedReceipt, bytes, dict[str, Any]]:
    """:func:`check_receipt` of the files ``report_file`` and ``receipt`` (``PREFIX.jws``,
    its payload ``PREFIX.json`` beside it); the receipt, the report's bytes and the report's
    document (its ``window`` and ``judged_until`` checked to be there, for a new derivation).

    Raises:
        EcpaError: as :func:`check_receipt`; ``ECPA_INVALID_INPUT`` for an unreadable file
            or a report that is no audit report.
    """
    report = read_bounded(report_file, MAX_REPORT_BYTES, ErrorCode.INVALID_INPUT, follow=True)
    payload = read_bounded(
        receipt.with_suffix(".json"), 1 << 20, ErrorCode.INVALID_INPUT, follow=True
    )
    jws = read_bounded(receipt, 1 << 20, ErrorCode.INVALID_INPUT, follow=True)
    checked = check_receipt(report, payload, jws.decode("ascii", "replace").strip(), trust)
    try:
        doc = json.loads(report)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not _is_report(doc):
        raise invalid_input(f"expected an audit report in {report_file}, found another object")
    return checked, report, doc


def _is_report(doc: dict[str, Any]) -> bool:
    span = doc.get("window")
    return (
        isinstance(span, dict)
        and type(doc.get("judged_until")) is int
        and all(type(span.get(k)) is int for k in ("from", "to"))
    )
