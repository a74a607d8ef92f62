"""PROFILE §6: ``sign`` refuses what ``verify`` would refuse as a statement, with the same
code, and is deterministic."""

from __future__ import annotations

from typing import Any

import pytest

import ecpa
from ecpa.profile.b64 import b64u_encode
from tests._checks_helpers import (
    GOOD,
    GOOD_JWS,
    HEX,
    OK,
    C,
    payload_of_length,
)
from tests.support import (
    DELETE,
    KEY_1,
    KEY_2,
    NOW,
    code_of,
    header_bytes,
    payload_of,
    sign_raw,
    statement,
)

# --- signing (PROFILE §6) ----------------------------------------------------------------


def _big_statement() -> dict[str, Any]:
    return statement(obligation="o" * 70_000)


SIGN_REFUSALS = [
    pytest.param(statement(issuer=DELETE), C.INVALID_STATEMENT, id="missing-issuer"),
    pytest.param(statement(issuer=""), C.INVALID_STATEMENT, id="empty-issuer"),
    pytest.param(statement(extra=1), C.INVALID_STATEMENT, id="extra-member"),
    pytest.param(
        statement(artifact_digest="sha256:" + HEX.upper()),
        C.INVALID_STATEMENT,
        id="uppercase-digest",
    ),
    pytest.param(statement(process__ordinal=-1), C.INVALID_STATEMENT, id="negative-int"),
    pytest.param(statement(issued_at=True), C.INVALID_STATEMENT, id="bool-int"),
    pytest.param(statement(critical_claims=["x", "x"]), C.INVALID_STATEMENT, id="dup-claims"),
    pytest.param(statement(schema="x"), C.WRONG_PROFILE, id="wrong-schema"),
    pytest.param(statement(profile="x"), C.WRONG_PROFILE, id="wrong-profile"),
    pytest.param(statement(critical_claims=["x"]), C.UNKNOWN_CRITICAL_CLAIM, id="critical-claim"),
    pytest.param(statement(process__ordinal=1.5), C.UNSUPPORTED_VALUE, id="float"),
    pytest.param(statement(process__ordinal=2**60), C.UNSUPPORTED_VALUE, id="2**60"),
    pytest.param(statement(process__ordinal=2**53), C.UNSUPPORTED_VALUE, id="2**53"),
    pytest.param(statement(observed_at=float("nan")), C.UNSUPPORTED_VALUE, id="nan"),
    pytest.param(statement(obligation="\ud800"), C.UNSUPPORTED_VALUE, id="lone-surrogate"),
    pytest.param(statement(obligation={1: "x"}), C.UNSUPPORTED_VALUE, id="non-string-key"),
    pytest.param(statement(obligation=object()), C.UNSUPPORTED_VALUE, id="non-json-type"),
    pytest.param(_big_statement(), C.TOO_LARGE, id="too-large"),
]


@pytest.mark.parametrize(("st", "expected"), SIGN_REFUSALS)
def test_sign_refuses_with_the_code_verify_gives(st: dict[str, Any], expected: str) -> None:
    with pytest.raises(ecpa.EcpaError) as info:
        ecpa.sign(st, KEY_1)
    assert info.value.code == expected
    try:
        payload = payload_of(st)
    except ecpa.EcpaError:
        return  # JSON cannot carry it: there are no bytes for verify to see
    assert code_of(payload, sign_raw(header_bytes(), payload)) == expected


@pytest.mark.parametrize("st", [[], "statement", None, 1], ids=["list", "str", "none", "int"])
def test_sign_refuses_a_non_object(st: Any) -> None:
    with pytest.raises(ecpa.EcpaError) as info:
        ecpa.sign(st, KEY_1)
    assert info.value.code == C.INVALID_STATEMENT


def test_sign_payload_size_boundary() -> None:
    assert len(ecpa.sign(payload_of_length(65536), KEY_1).payload) == 65536
    with pytest.raises(ecpa.EcpaError) as info:
        ecpa.sign(payload_of_length(65537), KEY_1)
    assert info.value.code == C.TOO_LARGE


def test_sign_is_deterministic_and_verifies() -> None:
    first = ecpa.sign(statement(), KEY_1)
    second = ecpa.sign(statement(), KEY_1)
    assert first.payload == second.payload == GOOD
    assert first.detached_jws == second.detached_jws == GOOD_JWS
    from_model = ecpa.sign(first.statement, KEY_1)
    assert from_model.detached_jws == GOOD_JWS
    reordered = dict(reversed(list(statement().items())))
    assert ecpa.sign(reordered, KEY_1).detached_jws == GOOD_JWS
    assert code_of(first.payload, first.detached_jws) == OK


def test_sign_takes_header_kid_from_statement() -> None:
    signed2 = ecpa.sign(statement(kid="test-key-2"), KEY_2)
    assert signed2.detached_jws.partition("..")[0] == b64u_encode(header_bytes(kid="test-key-2"))
    assert code_of(signed2.payload, signed2.detached_jws) == OK


@pytest.mark.parametrize(
    "st",
    [
        pytest.param(statement(issued_at=float(NOW - 1)), id="top-level"),
        pytest.param(statement(process__epoch=7.0), id="in-process"),
        pytest.param(statement(critical_claims=[1.0]), id="in-array"),
    ],
)
def test_sign_refuses_integral_floats(st: dict[str, Any]) -> None:
    """JCS would write 1.0 as 1, but the caller's statement did not hold an integer."""
    with pytest.raises(ecpa.EcpaError) as info:
        ecpa.sign(st, KEY_1)
    assert info.value.code == C.UNSUPPORTED_VALUE


def _kid_for_jws_length(length: int) -> str:
    return "k" * ((length - 88) * 3 // 4 - len(header_bytes(kid="")))


def test_sign_jws_size_boundary() -> None:
    """Step 1 for the JWS: exactly 16384 characters are signed, one more byte of kid is not."""
    kid = _kid_for_jws_length(16384)
    signed = ecpa.sign(statement(kid=kid), KEY_1)
    assert len(signed.detached_jws) == 16384
    with pytest.raises(ecpa.EcpaError) as info:
        ecpa.sign(statement(kid=kid + "k"), KEY_1)
    assert info.value.code == C.TOO_LARGE
