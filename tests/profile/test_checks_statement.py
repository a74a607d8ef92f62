"""PROFILE §3 steps 14-20: the statement rules, schema and profile, kid agreement, critical
claims, the trust lookup and policy, and the signature. Each negative is validly signed
(but for step 20) so that only the intended step can refuse it.
"""

from __future__ import annotations

from typing import Any

import pytest

import ecpa
from ecpa.profile.b64 import b64u_encode
from ecpa.profile.statement import check_statement
from tests._checks_helpers import (
    GOOD,
    GOOD_JWS,
    HEX,
    HSEG,
    OK,
    C,
    code,
)
from tests.support import (
    DELETE,
    ISSUER,
    KEY_1,
    KEY_2,
    NOW,
    code_of,
    header_bytes,
    payload_of,
    sign_raw,
    statement,
    store,
    trust_entry,
)

# --- step 14: statement rules (PROFILE §1) -------------------------------------------------

MEMBERS = list(statement())
STRINGS = [
    "issuer",
    "kid",
    "subject",
    "plan_id",
    "launch_id",
    "plugin_id",
    "obligation",
    "event",
    "challenge_nonce",
]
INTS = ["observed_at", "issued_at", "expires_at"]
PROCESS_STRINGS = ["host", "role", "start_identity"]
PROCESS_INTS = ["ordinal", "epoch"]


def _without_process_member(name: str) -> dict[str, Any]:
    st = statement()
    del st["process"][name]
    return st


INVALID_STATEMENTS = [
    *[pytest.param(statement(**{m: DELETE}), id=f"missing-{m}") for m in MEMBERS],
    pytest.param(statement(extra="x"), id="extra-member"),
    pytest.param(statement(Schema="x"), id="extra-member-case"),
    *[pytest.param(statement(**{m: ""}), id=f"empty-{m}") for m in STRINGS],
    *[pytest.param(statement(**{m: 1}), id=f"number-{m}") for m in STRINGS],
    *[pytest.param(statement(**{m: None}), id=f"null-{m}") for m in STRINGS],
    *[pytest.param(statement(**{m: [ISSUER]}), id=f"array-{m}") for m in STRINGS],
    *[
        pytest.param(statement(**{d: v}), id=f"{d}-{ident}")
        for d in ("artifact_digest", "evidence_digest")
        for ident, v in [
            ("uppercase-hex", "sha256:" + HEX.upper()),
            ("one-uppercase", "sha256:A" + HEX[1:]),
            ("63-hex", "sha256:" + HEX[:63]),
            ("65-hex", "sha256:" + HEX + "0"),
            ("non-hex", "sha256:" + "g" + HEX[1:]),
            ("sha512-prefix", "sha512:" + HEX),
            ("uppercase-prefix", "SHA256:" + HEX),
            ("no-prefix", HEX),
            ("trailing-newline", "sha256:" + HEX + "\n"),
            ("leading-space", " sha256:" + HEX),
            ("empty", ""),
            ("number", 1),
        ]
    ],
    pytest.param(statement(process="host-a"), id="process-string"),
    pytest.param(statement(process=[]), id="process-array"),
    pytest.param(statement(process=None), id="process-null"),
    pytest.param(statement(process__extra="x"), id="process-extra-member"),
    *[
        pytest.param(_without_process_member(m), id=f"process-missing-{m}")
        for m in PROCESS_STRINGS + PROCESS_INTS
    ],
    *[
        pytest.param(statement(**{f"process__{m}": ""}), id=f"process-empty-{m}")
        for m in PROCESS_STRINGS
    ],
    *[
        pytest.param(statement(**{f"process__{m}": 1}), id=f"process-number-{m}")
        for m in PROCESS_STRINGS
    ],
    *[
        pytest.param(statement(**{name: v}), id=f"{name.replace('process__', 'process-')}-{i}")
        for name in INTS + [f"process__{m}" for m in PROCESS_INTS]
        for i, v in [
            ("negative", -1),
            ("true", True),
            ("false", False),
            ("string", "5"),
            ("null", None),
            ("minus-max", -(2**53 - 1)),
        ]
    ],
    pytest.param(statement(critical_claims="x"), id="claims-string"),
    pytest.param(statement(critical_claims={}), id="claims-object"),
    pytest.param(statement(critical_claims=None), id="claims-null"),
    pytest.param(statement(critical_claims=1), id="claims-number"),
    pytest.param(statement(critical_claims=[1]), id="claims-number-item"),
    pytest.param(statement(critical_claims=[None]), id="claims-null-item"),
    pytest.param(statement(critical_claims=[["x"]]), id="claims-array-item"),
    pytest.param(statement(critical_claims=["x", "x"]), id="claims-duplicated"),
    pytest.param(statement(critical_claims=["x", "y", "x"]), id="claims-duplicated-apart"),
]


@pytest.mark.parametrize("st", INVALID_STATEMENTS)
def test_invalid_statement(st: dict[str, Any]) -> None:
    assert code(st) == C.INVALID_STATEMENT


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"process__ordinal": 2**53 - 1, "process__epoch": 2**53 - 1}, id="max-int"),
        pytest.param({"process__ordinal": 0, "process__epoch": 0}, id="zero"),
        pytest.param({"issuer": "x"}, id="one-character-issuer"),
        pytest.param({"obligation": "NaN", "event": "-Infinity"}, id="nonfinite-words"),
        pytest.param({"subject": "host-runtime", "obligation": "\U0001f600"}, id="astral"),
        pytest.param({"artifact_digest": "sha256:" + HEX}, id="all-hex-digits"),
    ],
)
def test_statement_boundaries_accepted(changes: dict[str, Any]) -> None:
    st = statement(**changes)
    trust = store(trust_entry(issuer=st["issuer"]))
    assert code(st, trust) == OK


@pytest.mark.parametrize("name", [*INTS, "process.ordinal", "process.epoch"])
def test_statement_integer_above_max_is_invalid(name: str) -> None:
    """JSON cannot bring 2**53 this far (step 12 refuses it); the model refuses it too."""
    st = statement(**{name.replace(".", "__"): 2**53})
    with pytest.raises(ecpa.EcpaError) as info:
        check_statement(st)
    assert info.value.code == C.INVALID_STATEMENT


@pytest.mark.parametrize(
    "claims",
    [{"x"}, frozenset(), iter([]), [b"x"]],
    ids=["set", "frozenset", "iterator", "bytes-item"],
)
def test_statement_claims_must_be_an_array(claims: Any) -> None:
    """A Python caller's set or iterator is not a JSON array, bytes are not a string (JSON
    cannot bring either)."""
    with pytest.raises(ecpa.EcpaError) as info:
        check_statement(statement(critical_claims=claims))
    assert info.value.code == C.INVALID_STATEMENT


# --- steps 15-17 ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"schema": "ecpa-attestation-statement/0.2"}, id="schema-0.2"),
        pytest.param({"schema": "ecpa-trust-store/0.1"}, id="schema-other"),
        pytest.param({"profile": "ecpa-jcs-jws-eddsa/0.2"}, id="profile-0.2"),
        pytest.param({"profile": "ECPA-JCS-JWS-EDDSA/0.1"}, id="profile-uppercase"),
    ],
)
def test_statement_wrong_profile(changes: dict[str, Any]) -> None:
    assert code(statement(**changes)) == C.WRONG_PROFILE


@pytest.mark.parametrize("member", ["schema", "profile"])
def test_an_empty_schema_or_profile_is_an_invalid_statement(member: str) -> None:
    """Step 14 wants non-empty strings, as the reference manager's statement check does;
    only then does step 15 compare them with the constants."""
    assert code(statement(**{member: ""})) == C.INVALID_STATEMENT


def test_statement_kid_differs_from_header_kid() -> None:
    """Both kids are trusted for the issuer, so this is KEY_MISMATCH, not UNKNOWN_KEY."""
    trust = store()  # test-key-1 and test-key-2
    st = statement(kid="test-key-1")
    header = header_bytes(kid="test-key-2")
    assert code(st, trust, header=header, key=KEY_2) == C.KEY_MISMATCH
    assert code(statement(kid="test-key-2"), trust, header=header, key=KEY_2) == OK


def test_statement_kid_unknown_header_kid_known() -> None:
    assert code(statement(kid="test-key-9")) == C.KEY_MISMATCH


@pytest.mark.parametrize(
    "claims",
    [["x"], ["ecpa_profile"], ["exp"], ["a", "b"], [""]],
    ids=["x", "ecpa_profile", "exp", "two", "empty-string"],
)
def test_unknown_critical_claim(claims: list[str]) -> None:
    assert code(statement(critical_claims=claims)) == C.UNKNOWN_CRITICAL_CLAIM


# --- step 18: trust lookup and policy ------------------------------------------------------


def test_unknown_issuer() -> None:
    assert code(statement(issuer="urn:ecpa:issuer:other")) == C.UNKNOWN_KEY


def test_unknown_kid() -> None:
    st = statement(kid="test-key-3")
    assert code(st, header=header_bytes(kid="test-key-3")) == C.UNKNOWN_KEY


def test_kid_known_only_for_another_issuer() -> None:
    trust = store(
        trust_entry(),
        trust_entry(issuer="urn:other", kid="test-key-2", public_key_b64=KEY_2.public_key.to_b64()),
    )
    st = statement(kid="test-key-2")
    assert code(st, trust, header=header_bytes(kid="test-key-2"), key=KEY_2) == C.UNKNOWN_KEY


@pytest.mark.parametrize(
    ("stored", "sent", "expected"),
    [
        pytest.param("host-\u00e9", "host-\u00e9", OK, id="nfc-nfc"),
        pytest.param("host-e\u0301", "host-e\u0301", OK, id="nfd-nfd"),
        pytest.param("host-\u00e9", "host-e\u0301", C.UNKNOWN_KEY, id="nfc-vs-nfd"),
        pytest.param("host-e\u0301", "host-\u00e9", C.UNKNOWN_KEY, id="nfd-vs-nfc"),
        pytest.param("Host-a", "host-a", C.UNKNOWN_KEY, id="case"),
    ],
)
def test_issuer_compared_exactly(stored: str, sent: str, expected: str) -> None:
    assert code(statement(issuer=sent), store(trust_entry(issuer=stored))) == expected


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        pytest.param({"enabled": False}, C.TRUST_POLICY, id="disabled"),
        pytest.param({"subjects": ["other"]}, C.TRUST_POLICY, id="subject-not-listed"),
        pytest.param({"subjects": ["Host-runtime"]}, C.TRUST_POLICY, id="subject-case"),
        pytest.param({"subjects": ["other", "host-runtime"]}, OK, id="subject-among-several"),
        pytest.param({"not_before": NOW}, OK, id="now-equals-not_before"),
        pytest.param({"not_before": NOW + 1}, C.TRUST_POLICY, id="now-before-not_before"),
        pytest.param({"not_after": NOW}, OK, id="now-equals-not_after"),
        pytest.param({"not_after": NOW - 1}, C.TRUST_POLICY, id="now-after-not_after"),
        pytest.param({"not_before": NOW, "not_after": NOW}, OK, id="one-second-window"),
    ],
)
def test_trust_policy(entry: dict[str, Any], expected: str) -> None:
    assert code(statement(), store(trust_entry(**entry))) == expected


# --- step 20: signature ------------------------------------------------------------------


def _sig(signature: bytes) -> str:
    return f"{HSEG}..{b64u_encode(signature)}"


_SIG = KEY_1.sign(f"{HSEG}.{b64u_encode(GOOD)}".encode())


@pytest.mark.parametrize(
    ("payload", "jws"),
    [
        pytest.param(GOOD, _sig(_SIG[:63]), id="63-bytes"),
        pytest.param(GOOD, _sig(_SIG + b"\x00"), id="65-bytes"),
        pytest.param(GOOD, _sig(b""), id="0-bytes"),
        pytest.param(GOOD, _sig(bytes([_SIG[0] ^ 1]) + _SIG[1:]), id="flip-first-bit"),
        pytest.param(GOOD, _sig(_SIG[:-1] + bytes([_SIG[-1] ^ 0x80])), id="flip-last-bit"),
        pytest.param(GOOD, _sig(b"\x00" * 64), id="zeros"),
        pytest.param(GOOD, sign_raw(header_bytes(), GOOD, KEY_2), id="other-key"),
        pytest.param(payload_of(statement(launch_id="launch-2")), GOOD_JWS, id="payload-swapped"),
    ],
)
def test_invalid_signature(payload: bytes, jws: str) -> None:
    assert code_of(payload, jws) == C.INVALID_SIGNATURE


def test_signature_over_another_header_segment() -> None:
    """The signing input is the header segment as sent, not a re-encoding."""
    other = b64u_encode(header_bytes(kid="test-key-2"))
    signature = KEY_1.sign(f"{other}.{b64u_encode(GOOD)}".encode())
    assert code_of(GOOD, f"{HSEG}..{b64u_encode(signature)}") == C.INVALID_SIGNATURE


@pytest.mark.parametrize(
    ("wire", "python"), [("schema", "statement_schema")], ids=["statement_schema"]
)
def test_python_field_name_is_not_a_member_name(wire: str, python: str) -> None:
    """§1: exactly the 18 members, by their wire names. The model's Python name for
    ``schema`` must not be accepted in its place (it once was, via populate_by_name)."""
    st = statement()
    st[python] = st.pop(wire)
    assert code(st) == C.INVALID_STATEMENT
    doc = {"store_schema": "ecpa-trust-store/0.1", "keys": []}
    with pytest.raises(ecpa.EcpaError) as refused:
        ecpa.TrustStore.from_dict(doc)
    assert refused.value.code == C.TRUST_STORE_CONFIG
