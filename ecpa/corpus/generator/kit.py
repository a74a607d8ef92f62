"""How the project's own corpus cases are made (``attestation-vectors-extended.json``).

A :class:`XCase` is a recipe: a payload (a statement dict signed as JCS, or raw bytes), a
protected header (member changes, or raw bytes), the key that signs, and the alterations
made before or after signing. :func:`build` signs it *validly* over exactly the bytes sent,
so a negative fails only for the defect its recipe names (PROFILE §3, first failure wins).
The statement values, nonces and times come from the published corpus's ``BASE``; the
TEST keys are the published seeds. Nothing here reads the clock or a random source.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ecpa.corpus.generator.upstream import (
    BASE,
    DELETE,
    ISSUER,
    MAX_SAFE,
    NOW,
    SEEDS,
    _binding,
    _st,
    _trust_entry,
)
from ecpa.errors import ErrorCode as E
from ecpa.profile import jws
from ecpa.profile.b64 import b64u_decode, b64u_encode
from ecpa.profile.json.jcs import canonicalize
from ecpa.profile.keys import SigningKey
from ecpa.profile.trust import TRUST_STORE_SCHEMA

__all__ = [
    "BASE",
    "DELETE",
    "ISSUER",
    "KEYS",
    "MAX_SAFE",
    "NOW",
    "OK",
    "XCase",
    "bind",
    "build",
    "compact",
    "dumps",
    "entry",
    "hdr",
    "kid_for_header_length",
    "nested",
    "nonce_whose_signature_has",
    "on_signature",
    "on_signature_segment",
    "splice",
    "st",
    "store",
    "with_trailing_bit",
]

OK: Literal["OK"] = "OK"
KEYS = {number: SigningKey.from_seed(seed) for number, seed in SEEDS.items()}  # TEST ONLY
B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

st = _st  # BASE with members replaced: st(issuer="x", process__epoch=8, kid=DELETE)

# After signing: (payload bytes, header segment, signature segment) may be altered.
Parts = tuple[bytes, str, str]


@dataclass(frozen=True)
class XCase:
    """One case. ``why`` says in one line what is wrong, or which boundary a positive sits on;
    ``step`` is the PROFILE §3 step whose code (or boundary) the case is about."""

    id: str
    category: str
    step: int
    expected: E | Literal["OK"]
    why: str
    payload: dict[str, Any] | bytes = field(default_factory=_st)  # a dict is signed as JCS
    header: Mapping[str, Any] | bytes = field(default_factory=dict)  # member changes or bytes
    key: int = 1
    hseg: Callable[[str], str] | None = None  # the header segment as sent, and signed
    after: Callable[[Parts], Parts] | None = None  # after signing
    wire: Callable[[str, bytes], str] | None = None  # the whole JWS text, from (jws, payload)
    now: int = NOW
    binding: Mapping[str, Any] | None = None
    policy: Mapping[str, int] | None = None
    trust: Mapping[str, Any] | None = None  # a whole trust-store document for this case

    @property
    def kid(self) -> str:
        """The header ``kid``: the statement's when it is a string, else test-key-1."""
        kid = self.payload.get("kid") if isinstance(self.payload, dict) else None
        return kid if isinstance(kid, str) else "test-key-1"


# --- headers and payloads -------------------------------------------------------------------


def hdr(kid: Any = "test-key-1", **changes: Any) -> dict[str, Any]:
    """The profile's protected header for ``kid`` with members replaced, added or DELETEd
    (``kid`` may be any JSON value, or DELETE)."""
    header = jws.protected_header("")
    for name, value in {"kid": kid, **changes}.items():
        if value is DELETE:
            del header[name]
        else:
            header[name] = value
    return header


def splice(**raw: bytes) -> bytes:
    """JCS of BASE with the values of the named members replaced by raw JSON text
    (``process__ordinal=b"1.5"``): one defect in an otherwise canonical statement."""
    marks = {name: f"@@{name}@@" for name in raw}
    text = canonicalize(_st(**marks))
    for name, value in raw.items():
        mark = json.dumps(marks[name]).encode()
        assert text.count(mark) == 1, name
        text = text.replace(mark, value)
    return text


def nested(depth: int) -> bytes:
    """``depth`` nested empty arrays: as a top-level member's value, ``depth + 1`` deep."""
    return b"[" * depth + b"]" * depth


def dumps(value: Any, **options: Any) -> bytes:
    """Python's JSON text: for bytes JCS refuses to write or that must not be canonical."""
    return json.dumps(value, **options).encode("utf-8")


def compact(value: Any) -> bytes:
    """Sorted, compact JSON with non-ASCII characters escaped: JCS but for the escapes."""
    return dumps(value, sort_keys=True, separators=(",", ":"))


def kid_for_header_length(segment_length: int) -> str:
    """A kid whose header segment is ``segment_length`` characters (not of the form 4k+1)."""
    base = len(canonicalize(jws.protected_header("")))
    size = next(n for n in range(segment_length) if len(b64u_encode(b"x" * n)) == segment_length)
    return "k" * (size - base)


# --- trust stores and bindings ---------------------------------------------------------------


def entry(issuer: str = ISSUER, number: int = 1, **changes: Any) -> dict[str, Any]:
    """A trust entry for TEST key ``number`` (kid test-key-N unless changed)."""
    result = _trust_entry(issuer, number, KEYS[number])
    result.update(changes)
    return result


def store(*entries: dict[str, Any]) -> dict[str, Any]:
    """A whole trust-store document (a case's ``trust``)."""
    return {"schema": TRUST_STORE_SCHEMA, "keys": list(entries)}


def bind(nonce: str, **changes: Any) -> dict[str, Any]:
    """The six bound values of BASE with ``nonce``, some replaced (PROFILE §3 step 24)."""
    values = _binding(nonce)
    values.update(changes)
    return values


# --- alterations -----------------------------------------------------------------------------


def with_trailing_bit(segment: str) -> str:
    """The same bytes' segment with the lowest (unused) bit of its last character set."""
    assert len(segment) % 4 in (2, 3)
    return segment[:-1] + B64_ALPHABET[B64_ALPHABET.index(segment[-1]) + 1]


def on_signature(change: Callable[[bytes], bytes]) -> Callable[[Parts], Parts]:
    """Replace the signature bytes after signing (still strict base64url)."""

    def alter(parts: Parts) -> Parts:
        payload, header, signature = parts
        return payload, header, b64u_encode(change(b64u_decode(signature, what="signature")))

    return alter


def on_signature_segment(change: Callable[[str], str]) -> Callable[[Parts], Parts]:
    """Replace the signature segment text after signing."""
    return lambda parts: (parts[0], parts[1], change(parts[2]))


# --- building ---------------------------------------------------------------------------------


def _header_segment(case: XCase) -> str:
    if isinstance(case.header, bytes):
        segment = b64u_encode(case.header)
    else:
        changes = dict(case.header)
        segment = b64u_encode(canonicalize(hdr(changes.pop("kid", case.kid), **changes)))
    return case.hseg(segment) if case.hseg is not None else segment


def build(case: XCase) -> dict[str, Any]:
    """The case in the published format, with ``why``, ``step``, ``policy``, ``trust``."""
    payload = case.payload if isinstance(case.payload, bytes) else canonicalize(case.payload)
    header = _header_segment(case)
    # UTF-8, not ASCII: a header segment holding an 'é' (refused at step 3) is signed too,
    # so that the character stays its only defect.
    signing_input = f"{header}.{b64u_encode(payload)}".encode()
    signature = b64u_encode(KEYS[case.key].sign(signing_input))
    parts: Parts = (payload, header, signature)
    if case.after is not None:
        parts = case.after(parts)
    payload, header, signature = parts
    text = f"{header}..{signature}"
    if case.wire is not None:
        text = case.wire(text, payload)
    assert case.why.strip(), case.id
    assert "\n" not in case.why, case.id
    built: dict[str, Any] = {
        "id": case.id,
        "category": case.category,
        "why": case.why,
        "step": case.step,
        "payload_b64": b64u_encode(payload),
        "detached_jws": text,
        "now": case.now,
        "expected": str(case.expected),
        "binding": None if case.binding is None else dict(case.binding),
        # Binding and replay are the coordinator's checks (steps 24-25), as published.
        "layer": "coordinator-policy" if case.step in (24, 25) else "cryptographic-envelope",
    }
    if case.policy is not None:
        built["policy"] = {"clock_skew": 0, "max_ttl": 300, "max_observation_age": 300}
        built["policy"].update(case.policy)
    if case.trust is not None:
        built["trust"] = case.trust
    return built


def nonce_whose_signature_has(characters: str, prefix: str) -> str:
    """The first nonce ``prefix-N`` whose base statement's signature segment (test-key-1)
    holds every one of ``characters``: found by search, the same every time."""
    header = jws.encode_header("test-key-1")
    for n in range(10_000):  # pragma: no branch - a few dozen tries suffice
        nonce = f"{prefix}-{n}"
        payload = canonicalize(_st(challenge_nonce=nonce))
        segment = b64u_encode(KEYS[1].sign(jws.signing_input(header, payload)))
        if all(char in segment for char in characters):
            return nonce
    raise AssertionError("no such nonce")  # pragma: no cover
