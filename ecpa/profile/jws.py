"""Detached compact JWS of the profile (PROFILE §2, §3 steps 1-11 and 19).

The protected header is fixed but for ``kid``; the algorithm comes from the profile and is
never chosen by the header. Detached means RFC 7515 Appendix F (``header..signature``),
never RFC 7797 (``b64``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.b64 import b64u_decode, b64u_encode, b64u_encode_ascii
from ecpa.profile.json.jcs import canonicalize, matches_canonical
from ecpa.profile.json.strict_json import parse_object
from ecpa.profile.statement import PROFILE_ID

__all__ = [
    "ALG",
    "CRIT",
    "MAX_JWS_LENGTH",
    "MAX_PAYLOAD_LENGTH",
    "TYP",
    "check_sizes",
    "encode_header",
    "parse_header",
    "signature_bytes",
    "signing_input",
    "split_detached",
]

ALG = "EdDSA"
TYP = "application/ecpa-attestation+jws"
CRIT = ("ecpa_profile",)
HEADER_MEMBERS = frozenset({"alg", "crit", "ecpa_profile", "kid", "typ"})
MAX_JWS_LENGTH = 16 * 1024
MAX_PAYLOAD_LENGTH = 64 * 1024
#: Checked headers are remembered by their exact segment: one issuer uses a few kids.
_HEADER_CACHE_SIZE = 64
#: Longer segments (a kid of hundreds of characters) are checked every time, uncached, so
#: the cache holds at most 64 small entries whatever the input.
_HEADER_CACHE_MAX_SEGMENT = 1024


def protected_header(kid: str) -> dict[str, Any]:
    """The profile's protected header for ``kid``."""
    return {"alg": ALG, "crit": list(CRIT), "ecpa_profile": PROFILE_ID, "kid": kid, "typ": TYP}


@lru_cache(maxsize=256)
def encode_header(kid: str) -> str:
    """``B64U(JCS(header))`` for ``kid`` (cached: one issuer signs with few kids)."""
    return b64u_encode(canonicalize(protected_header(kid)))


def signing_input(header_b64: str, payload: bytes) -> bytes:
    """ASCII ``B64U(header) + "." + B64U(payload)``.

    Raises:
        UnicodeEncodeError: ``header_b64`` is not ASCII (it is, once strict base64url).
    """
    return b".".join((header_b64.encode("ascii"), b64u_encode_ascii(payload)))


def check_sizes(detached_jws: str | bytes, payload: bytes) -> None:
    """PROFILE §3 step 1: bounds before any parsing (the JWS in characters or bytes)."""
    if len(detached_jws) > MAX_JWS_LENGTH:
        raise EcpaError(
            ErrorCode.TOO_LARGE,
            f"expected a JWS of at most {MAX_JWS_LENGTH} characters, found {len(detached_jws)}",
        )
    if len(payload) > MAX_PAYLOAD_LENGTH:
        raise EcpaError(
            ErrorCode.TOO_LARGE,
            f"expected a payload of at most {MAX_PAYLOAD_LENGTH} bytes, found {len(payload)}",
        )


def split_detached(detached_jws: str) -> tuple[str, str]:
    """PROFILE §3 step 2: ``header..signature`` -> (header segment, signature segment)."""
    parts = detached_jws.split(".")
    if len(parts) != 3:
        raise EcpaError(
            ErrorCode.MALFORMED_JWS,
            f"expected a detached compact JWS 'header..signature' (3 parts), "
            f"found {len(parts)} part{'s' if len(parts) != 1 else ''}",
        )
    if parts[1]:
        raise EcpaError(
            ErrorCode.MALFORMED_JWS,
            "expected an empty payload part (detached JWS), found an attached payload "
            f"of {len(parts[1])} characters",
        )
    return parts[0], parts[2]


def _require(condition: bool, code: ErrorCode, detail: str) -> None:
    if not condition:
        raise EcpaError(code, detail)


def parse_header(header_b64: str) -> tuple[bytes, dict[str, Any]]:
    """PROFILE §3 steps 3-11: decode, parse and check the protected header.

    Returns the header bytes and the parsed header (a new dict on each call); ``kid`` is a
    string. A segment that passed is remembered (a bounded cache keyed by the exact segment
    text), so the same segment is decoded, parsed and checked only once: the checks depend
    on nothing but that text, and a segment that fails is never remembered.

    Raises:
        EcpaError: the code of the first failed check of steps 3-11.
    """
    if len(header_b64) <= _HEADER_CACHE_MAX_SEGMENT:
        raw, header = _checked_header_cached(header_b64)
    else:
        raw, header = _checked_header(header_b64)
    # The cached dict is never handed out: a caller may change its copy and its crit list.
    return raw, {**header, "crit": list(header["crit"])}


def _checked_header(header_b64: str) -> tuple[bytes, dict[str, Any]]:
    raw = b64u_decode(header_b64, what="header")  # step 3
    header = parse_object(raw, what="header")  # step 4
    members = set(header)
    if members != HEADER_MEMBERS:  # step 5
        raise EcpaError(
            ErrorCode.UNKNOWN_CRITICAL_HEADER,
            f"expected exactly the header members {sorted(HEADER_MEMBERS)}, found extra "
            f"{sorted(members - HEADER_MEMBERS)} and missing {sorted(HEADER_MEMBERS - members)}",
        )
    _require(  # step 6
        matches_canonical(raw, header),
        ErrorCode.MALFORMED_JWS,
        "expected the header bytes to be their own RFC 8785 canonical form, found other bytes",
    )
    alg, typ, crit = header["alg"], header["typ"], header["crit"]
    _require(  # step 7: the algorithm is the profile's, never the header's choice
        alg == ALG, ErrorCode.WRONG_ALGORITHM, f"expected alg {ALG!r}, found {alg!r}"
    )
    _require(typ == TYP, ErrorCode.WRONG_TYPE, f"expected typ {TYP!r}, found {typ!r}")  # step 8
    _require(  # step 9
        crit == list(CRIT),
        ErrorCode.UNKNOWN_CRITICAL_HEADER,
        f"expected crit {list(CRIT)!r}, found {crit!r}",
    )
    profile = header["ecpa_profile"]
    _require(  # step 10
        profile == PROFILE_ID,
        ErrorCode.WRONG_PROFILE,
        f"expected ecpa_profile {PROFILE_ID!r}, found {profile!r}",
    )
    kid = header["kid"]
    _require(  # step 11
        isinstance(kid, str),
        ErrorCode.UNKNOWN_KEY,
        f"expected kid as a string, found {type(kid).__name__}",
    )
    return raw, header


# lru_cache remembers returns only: a segment whose check raised is checked in full again.
_checked_header_cached = lru_cache(maxsize=_HEADER_CACHE_SIZE)(_checked_header)


def signature_bytes(signature_b64: str) -> bytes:
    """PROFILE §3 step 19: the signature segment as strict base64url."""
    return b64u_decode(signature_b64, what="signature")
