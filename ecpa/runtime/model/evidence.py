"""Evidence as it travels: bundles, evidence records and the lines of the JSONL evidence log
(RUNTIME.md).

A *bundle* is ``{"payload_b64": ..., "detached_jws": ...}``; an *evidence record* adds
``"schema": "ecpa-evidence-record/0.1"`` and, optionally, ``host_evidence_b64``: the exact
bytes of the raw counters record whose ``sha256:`` digest the statement carries as
``evidence_digest``. A log holds one record per line; a last line without its newline is a
write torn by a crash and is reported, never verified and never counted. The writer of a log
is :class:`ecpa.runtime.host.evidence_log.EvidenceLog` (files are the host's).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.b64 import b64u_decode, b64u_decode_ascii, b64u_encode
from ecpa.profile.fence import ReplayFence
from ecpa.profile.json.strict_json import parse_object
from ecpa.profile.jws import MAX_JWS_LENGTH, MAX_PAYLOAD_LENGTH
from ecpa.profile.trust import TrustStore
from ecpa.profile.verify import DEFAULT_POLICY, Binding, Policy, Verified, verify_encoded
from ecpa.shapes.shape import frozen_instance

__all__ = [
    "RECORD_SCHEMA",
    "Evidence",
    "LogLine",
    "issued_at_of",
    "parse_record",
    "read_log",
    "record_line",
    "verify_evidence",
]

RECORD_SCHEMA = "ecpa-evidence-record/0.1"
#: A record line longer than this is refused before parsing: base64 of the largest payload,
#: the largest JWS, and as much again for the host evidence, with room for the framing.
MAX_RECORD_LENGTH = 2 * (MAX_PAYLOAD_LENGTH * 4 // 3 + 8) + MAX_JWS_LENGTH + 1024
_MEMBERS = {"schema", "payload_b64", "detached_jws", "host_evidence_b64"}
_SCHEMA_BYTES = RECORD_SCHEMA.encode()
#: Where parse_record keeps (payload, its base64url as read, its one strict encoding): verify
#: uses it while the payload is that very object. Evidence built any other way lacks it.
_ENCODED = "_payload_b64"


# -- The compact form of an evidence record, read without the strict JSON reader ----------
# A line as record_line writes it, or a bundle: the members in that order, no whitespace,
# values in the base64url alphabet (detached_jws also "."). Such bytes are strict JSON
# (PROFILE §4) of an object of known, unique members with string values, so the strict
# reader would return exactly these values. Split on '"' (no value in these alphabets holds
# one), the line is its pieces: "{", then per member its name, ":", its value and ","
# ("}" after the last). Anything else returns None and takes the strict reader, which
# decides and names the error; the tests prove both agree on any bytes.

_B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_JWS = _B64 + b"."
_PAYLOAD, _JWS_NAME, _HOST, _SCHEMA = (
    b"payload_b64",
    b"detached_jws",
    b"host_evidence_b64",
    b"schema",
)
#: The member names of each layout, by the number of pieces the line splits into.
_LAYOUTS = {
    9: ((_PAYLOAD, _JWS_NAME),),
    13: ((_SCHEMA, _PAYLOAD, _JWS_NAME), (_HOST, _PAYLOAD, _JWS_NAME)),
    17: ((_SCHEMA, _HOST, _PAYLOAD, _JWS_NAME),),
}
_COLONS = {n: [b":"] * ((n - 1) // 4) for n in _LAYOUTS}
_COMMAS = {n: [b","] * ((n - 1) // 4 - 1) for n in _LAYOUTS}


def compact_members(data: bytes, schema: bytes) -> tuple[bytes | None, bytes, bytes] | None:
    """(host_evidence_b64 or None, payload_b64, detached_jws) of a compact record whose
    ``schema``, when present, is ``schema``, each value checked in its alphabet; None for
    any other bytes."""
    parts = data.split(b'"')
    count = len(parts)
    layouts = _LAYOUTS.get(count)
    if layouts is None or parts[0] != b"{" or parts[-1] != b"}":
        return None
    if parts[2::4] != _COLONS[count] or parts[4:-1:4] != _COMMAS[count]:
        return None
    names = tuple(parts[1::4])
    if names not in layouts:
        return None
    values = parts[3::4]
    if names[0] == _SCHEMA:
        if values[0] != schema:
            return None
        values = values[1:]
    payload_b64, detached_jws = values[-2], values[-1]
    host_b64 = values[0] if len(values) == 3 else None
    if payload_b64.translate(None, _B64) or detached_jws.translate(None, _JWS):
        return None
    if host_b64 is not None and host_b64.translate(None, _B64):
        return None
    return host_b64, payload_b64, detached_jws


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
    #: In a mark inside a line longer than a record may be: the bytes of it passed so far
    #: (a reader may stop there and go on later, :func:`read_log`'s ``skipping``).
    skipped: int = 0
    #: The exact bytes ``evidence`` was parsed from (``parse_record(raw)`` is ``evidence``),
    #: when its reader keeps them (a stored log's walk): a record a walk accepts is then
    #: remembered by them too (``check_line``'s ``parsed``), so bytes other than those
    #: parsed here would be taken for that record later: only a reader that parsed
    #: ``evidence`` from exactly them sets it.
    raw: bytes | None = None


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
    compact = compact_members(data, _SCHEMA_BYTES)
    if compact is None:
        return _parse_record_strictly(data)
    host_b64, payload_b64, detached_jws = compact
    # The same decoding, in the same order, as below: the same evidence or the same error.
    code = ErrorCode.INVALID_RECORD
    payload = b64u_decode_ascii(payload_b64, what="payload_b64", code=code)
    host = host_b64 and b64u_decode_ascii(host_b64, what="host_evidence_b64", code=code)
    evidence = Evidence(payload=payload, detached_jws=detached_jws.decode(), host_evidence=host)
    object.__setattr__(evidence, _ENCODED, (payload, bytes(payload_b64)))  # its one encoding
    return evidence


def _parse_record_strictly(data: bytes) -> Evidence:
    """:func:`parse_record` through the strict reader, for any bytes."""
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


#: Inside an over-long line, a reader with marks gets one every this many bytes passed.
SKIP_MARK_BYTES = 4 << 20


def _too_long(stream: BinaryIO, number: int, skipped: int, marks: int) -> Iterator[LogLine]:
    """Pass the rest of an over-long line (``skipped`` bytes of it passed already) without
    holding it, then its refusal; with ``marks``, a mark every :data:`SKIP_MARK_BYTES`, so
    that a reader with a deadline looks at its clock inside it too (a line of 10 GiB of NULs
    is read a piece at a time, across as many calls as it takes)."""
    mark = skipped + SKIP_MARK_BYTES
    while True:
        chunk = stream.readline(1 << 20)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            break
        if marks and skipped >= mark:
            mark = skipped + SKIP_MARK_BYTES
            yield LogLine(number, None, None, skipped=skipped)
    yield LogLine(
        number,
        None,
        EcpaError(
            ErrorCode.TOO_LARGE,
            f"expected a record line of at most {MAX_RECORD_LENGTH} bytes, found {skipped} or more",
        ),
    )


def read_log(
    stream: BinaryIO, *, first: int = 1, marks: int = 0, skipping: int = 0
) -> Iterator[LogLine]:
    """Yield each line of a JSONL evidence log, streaming (memory bounded by the longest
    allowed record), numbered from ``first``. Blank lines are skipped, but with ``marks``
    every ``marks`` blank lines in a row yield ``LogLine(number, None, None)``, and a line
    longer than a record may be yields a mark every :data:`SKIP_MARK_BYTES` (``skipped``
    says how far into it): a reader with a deadline looks at its clock inside them too
    (RUNTIME.md "Bounded work"). ``skipping``: the stream starts that many bytes into such a
    line, numbered ``first`` (a reader that stopped at one of its marks). A final line
    without ``\\n`` that is not even JSON is yielded with ``torn=True`` (a crash)."""
    number, blank = first - 1, 0
    if skipping:
        number += 1
        yield from _too_long(stream, number, skipping, marks)
    while True:
        raw = stream.readline(MAX_RECORD_LENGTH + 2)  # the record, and room for "\r\n"
        if not raw:
            return
        number += 1
        if len(raw) == MAX_RECORD_LENGTH + 2 and not raw.endswith(b"\n"):
            yield from _too_long(stream, number, len(raw), marks)
            continue
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        blank = blank + 1 if not line.strip() else 0
        if blank:
            if blank == marks:
                blank = 0
                yield LogLine(number, None, None)
            continue
        try:
            evidence = parse_record(line)
        except EcpaError as exc:
            # Torn: cut short by a crash, so unterminated and not JSON at all. A complete
            # but wrong record without its newline is still a record, and still fails.
            torn = (
                not raw.endswith(b"\n")
                and exc.code is ErrorCode.MALFORMED_JSON
                and not is_json(line)
            )
            yield LogLine(number, None, exc, torn=torn)
        else:  # frozen_instance: LogLine(number, evidence, None), at a fraction of the cost
            yield frozen_instance(
                LogLine,
                {
                    "number": number,
                    "evidence": evidence,
                    "error": None,
                    "torn": False,
                    "skipped": 0,
                    "raw": None,  # (not kept: an audit holds a whole log's lines)
                },
            )


def is_json(line: bytes) -> bool:
    """Whether ``line`` is JSON at all (a torn line is not)."""
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
    payload, jws = evidence.payload, evidence.detached_jws
    kept = getattr(evidence, _ENCODED, None)  # (payload, its base64url): parse_record's
    encoded = kept[1] if kept is not None and kept[0] is payload else None
    verified = verify_encoded(payload, encoded, jws, trust_store, now, policy, binding, None)
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


def record_line(evidence: Evidence) -> bytes:
    """The log line of ``evidence``: compact JSON with the members in RUNTIME.md's order
    (``schema``, ``host_evidence_b64`` if any, ``payload_b64``, ``detached_jws``) and a
    final ``\\n``. :func:`parse_record` reads it back to an equal :class:`Evidence`.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when a member has the wrong type or the line would
            be longer than a reader accepts.
    """
    if not isinstance(evidence.payload, bytes) or not isinstance(evidence.detached_jws, str):
        raise EcpaError(
            ErrorCode.INVALID_INPUT,
            "expected evidence with bytes payload and str detached_jws, found "
            f"{type(evidence.payload).__name__} and {type(evidence.detached_jws).__name__}",
        )
    obj: dict[str, str] = {"schema": RECORD_SCHEMA}
    if evidence.host_evidence is not None:
        if not isinstance(evidence.host_evidence, bytes):
            raise EcpaError(
                ErrorCode.INVALID_INPUT,
                f"expected bytes host_evidence, found {type(evidence.host_evidence).__name__}",
            )
        obj["host_evidence_b64"] = b64u_encode(evidence.host_evidence)
    obj["payload_b64"] = b64u_encode(evidence.payload)
    obj["detached_jws"] = evidence.detached_jws
    line = json.dumps(obj, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    if len(line) > MAX_RECORD_LENGTH:
        raise EcpaError(
            ErrorCode.INVALID_INPUT,
            f"expected a record line of at most {MAX_RECORD_LENGTH} bytes, found {len(line)}",
        )
    return line + b"\n"


def issued_at_of(payload: bytes) -> int | None:
    """The ``issued_at`` a payload claims (None: not a JSON object with an integer there);
    the signature over it is checked after, at that time."""
    try:
        value = parse_object(payload, what="payload").get("issued_at")
    except EcpaError:
        return None
    return value if type(value) is int else None
