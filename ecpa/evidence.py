"""Evidence as it travels: bundles, evidence records and the JSONL evidence log (RUNTIME.md).

A *bundle* is ``{"payload_b64": ..., "detached_jws": ...}``; an *evidence record* adds
``"schema": "ecpa-evidence-record/0.1"`` and, optionally, ``host_evidence_b64``: the exact
bytes of the raw counters record whose ``sha256:`` digest the statement carries as
``evidence_digest``. A log holds one record per line; a last line without its newline is a
write torn by a crash and is reported, never verified and never counted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from ecpa._b64 import b64u_decode
from ecpa._json import parse_object
from ecpa.errors import EcpaError, ErrorCode
from ecpa.jws import MAX_JWS_LENGTH, MAX_PAYLOAD_LENGTH
from ecpa.replay import ReplayFence
from ecpa.trust import TrustStore
from ecpa.verify import DEFAULT_POLICY, Binding, Policy, Verified, verify

__all__ = [
    "RECORD_SCHEMA",
    "Evidence",
    "LogLine",
    "parse_record",
    "read_log",
    "verify_evidence",
]

RECORD_SCHEMA = "ecpa-evidence-record/0.1"
#: A record line longer than this is refused before parsing: base64 of the largest payload,
#: the largest JWS, and as much again for the host evidence, with room for the framing.
MAX_RECORD_LENGTH = 2 * (MAX_PAYLOAD_LENGTH * 4 // 3 + 8) + MAX_JWS_LENGTH + 1024
_MEMBERS = {"schema", "payload_b64", "detached_jws", "host_evidence_b64"}


def _invalid(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.INVALID_RECORD, detail)


@dataclass(frozen=True)
class Evidence:
    """One piece of evidence: payload bytes, detached JWS and, optionally, host evidence."""

    payload: bytes
    detached_jws: str
    host_evidence: bytes | None = None


@dataclass(frozen=True)
class LogLine:
    """One line of a log: its 1-based number and either its evidence or why it has none."""

    number: int
    evidence: Evidence | None
    error: EcpaError | None
    torn: bool = False


def _string(obj: dict[str, Any], name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        found = "it missing" if name not in obj else type(value).__name__
        raise _invalid(f"expected member {name!r} as a string, found {found}")
    return value


def parse_record(data: bytes) -> Evidence:
    """Parse a bundle or an evidence record (strict JSON, known members only).

    Raises:
        EcpaError: ``ECPA_INVALID_RECORD`` for a wrong shape, an unknown ``schema`` or bad
            base64url; the strict-JSON codes when it is not strict JSON.
    """
    if len(data) > MAX_RECORD_LENGTH:
        raise EcpaError(
            ErrorCode.TOO_LARGE,
            f"expected a record of at most {MAX_RECORD_LENGTH} bytes, found {len(data)}",
        )
    obj = parse_object(data, what="record")
    extra = sorted(set(obj) - _MEMBERS)
    if extra:
        raise _invalid(f"expected only the members {sorted(_MEMBERS)}, found {extra}")
    if "schema" in obj and obj["schema"] != RECORD_SCHEMA:
        raise _invalid(f"expected schema {RECORD_SCHEMA!r}, found {obj['schema']!r}")
    payload_b64 = _string(obj, "payload_b64")
    detached_jws = _string(obj, "detached_jws")
    payload = b64u_decode(payload_b64, what="payload_b64", code=ErrorCode.INVALID_RECORD)
    host = None
    if "host_evidence_b64" in obj:
        host = b64u_decode(
            _string(obj, "host_evidence_b64"),
            what="host_evidence_b64",
            code=ErrorCode.INVALID_RECORD,
        )
    return Evidence(payload=payload, detached_jws=detached_jws, host_evidence=host)


def _too_long(stream: BinaryIO) -> EcpaError:
    """Skip the rest of an over-long line without holding it in memory."""
    skipped = MAX_RECORD_LENGTH + 2
    while True:
        chunk = stream.readline(1 << 20)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            break
    return EcpaError(
        ErrorCode.TOO_LARGE,
        f"expected a record line of at most {MAX_RECORD_LENGTH} bytes, found {skipped} or more",
    )


def read_log(stream: BinaryIO) -> Iterator[LogLine]:
    """Yield each line of a JSONL evidence log, streaming: memory stays bounded by the
    longest allowed record whatever the log's size or its longest line.

    Blank lines are skipped. A final line without ``\\n`` that is not even JSON is yielded
    with ``torn=True``: a crash cut it short; it is reported, not verified.
    """
    number = 0
    while True:
        raw = stream.readline(MAX_RECORD_LENGTH + 2)  # the record, and room for "\r\n"
        if not raw:
            return
        number += 1
        if len(raw) == MAX_RECORD_LENGTH + 2 and not raw.endswith(b"\n"):
            yield LogLine(number, None, _too_long(stream))
            continue
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            continue
        try:
            yield LogLine(number, parse_record(line), None)
        except EcpaError as exc:
            # Torn: cut short by a crash, so unterminated and not JSON at all. A complete
            # but wrong record without its newline is still a record, and still fails.
            torn = (
                not raw.endswith(b"\n")
                and exc.code is ErrorCode.MALFORMED_JSON
                and not _is_json(line)
            )
            yield LogLine(number, None, exc, torn=torn)


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True


def evidence_digest(host_evidence: bytes) -> str:
    """``sha256:`` + lowercase hex of the exact host-evidence bytes."""
    return "sha256:" + hashlib.sha256(host_evidence).hexdigest()


def verify_evidence(
    evidence: Evidence,
    trust_store: TrustStore,
    *,
    now: int,
    policy: Policy = DEFAULT_POLICY,
    binding: Binding | None = None,
    replay: ReplayFence | None = None,
) -> Verified:
    """Verify a piece of evidence: PROFILE §3, then the host-evidence digest (RUNTIME.md),
    then the replay fence, so a record refused for any reason never consumes its nonce.

    Raises:
        EcpaError: the code of the first failed check; ``ATTESTATION_EVIDENCE_DIGEST_MISMATCH``
            when ``host_evidence`` does not hash to the statement's ``evidence_digest``.
    """
    verified = verify(
        evidence.payload,
        evidence.detached_jws,
        trust_store,
        now=now,
        policy=policy,
        binding=binding,
    )
    if evidence.host_evidence is not None:
        found = evidence_digest(evidence.host_evidence)
        if found != verified.statement.evidence_digest:
            raise EcpaError(
                ErrorCode.EVIDENCE_DIGEST_MISMATCH,
                f"expected host evidence hashing to {verified.statement.evidence_digest}, "
                f"found {found}",
            )
    if replay is not None:  # PROFILE §3 step 25, last
        st = verified.statement
        replay.check_and_record(st.challenge_nonce, expires_at=st.expires_at)
    return verified
