"""Helpers shared by the PROFILE §3 check tests (test_checks*.py, test_sign_checks.py)."""

from __future__ import annotations

from typing import Any

import ecpa
from ecpa.errors import ErrorCode
from tests.support import (
    KEY_1,
    code_of,
    header_bytes,
    payload_of,
    sign_raw,
    statement,
    store,
    trust_entry,
)

OK = "OK"
C = ErrorCode
GOOD = payload_of(statement())
GOOD_JWS = sign_raw(header_bytes(), GOOD)
HSEG, _, SSEG = GOOD_JWS.partition("..")
HEX = "0123456789abcdef" * 4


def signed(
    st: dict[str, Any], *, header: bytes | str | None = None, key: ecpa.SigningKey = KEY_1
) -> tuple[bytes, str]:
    """Canonical payload of ``st`` and a valid detached JWS over it (no statement checks)."""
    payload = payload_of(st)
    return payload, sign_raw(header if header is not None else header_bytes(), payload, key)


def code(
    st: dict[str, Any],
    trust: ecpa.TrustStore | None = None,
    *,
    header: bytes | str | None = None,
    key: ecpa.SigningKey = KEY_1,
    **kwargs: Any,
) -> str:
    """Verify a validly signed ``st`` and return "OK" or the error code."""
    payload, jws = signed(st, header=header, key=key)
    return code_of(payload, jws, trust, **kwargs)


def jws_of_length(length: int) -> tuple[bytes, str, ecpa.TrustStore]:
    """A valid statement whose header ``kid`` is long enough for a JWS of ``length``
    characters (``length`` - 88 a multiple of 4), and a store trusting that kid."""
    base = len(header_bytes(kid=""))
    kid = "k" * ((length - 88) * 3 // 4 - base)
    payload, jws = signed(statement(kid=kid), header=header_bytes(kid=kid))
    assert len(jws) == length
    return payload, jws, store(trust_entry(kid=kid))


def payload_of_length(length: int) -> dict[str, Any]:
    """A valid statement whose canonical payload is ``length`` bytes."""
    base = len(payload_of(statement(obligation="")))
    st = statement(obligation="o" * (length - base))
    assert len(payload_of(st)) == length
    return st
