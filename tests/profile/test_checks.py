"""PROFILE §3 steps 1-13: sizes, the JWS form, the header, the canonical payload.

Every negative carries exactly one defect (or, in the order tests, exactly the defects
named) and a *valid* signature over the bytes it sends, so the code can only come from the
step under test. Steps 14-20 are in test_checks_statement.py, 21-25 and the order of the
late steps in test_checks_time_binding.py, signing in test_sign_checks.py, strict JSON (§4)
in test_strict_json.py, trust store loading (§5) in test_trust_store.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import ecpa
from ecpa.errors import ErrorCode
from ecpa.profile.b64 import b64u_encode
from tests._checks_helpers import (
    GOOD,
    GOOD_JWS,
    HSEG,
    OK,
    SSEG,
    C,
    code,
    jws_of_length,
    payload_of_length,
)
from tests.support import (
    DELETE,
    NOW,
    code_of,
    header_bytes,
    payload_of,
    sign_raw,
    statement,
    store,
    trust_entry,
)


def test_baseline_is_accepted() -> None:
    verified = ecpa.verify(GOOD, GOOD_JWS, store(), now=NOW)
    assert verified.payload == GOOD
    assert verified.statement.kid == "test-key-1"
    assert verified.header["kid"] == "test-key-1"


# --- step 1: sizes before parsing ----------------------------------------------------------


def test_jws_of_exactly_16384_characters_is_accepted() -> None:
    payload, jws, trust = jws_of_length(16384)
    assert code_of(payload, jws, trust) == OK
    assert code_of(payload, jws.encode("ascii"), trust) == OK


def test_jws_of_16385_characters_is_too_large() -> None:
    payload, jws, trust = jws_of_length(16384)
    longer = jws + "A"  # otherwise a 65-byte signature: INVALID_SIGNATURE at step 20
    assert len(longer) == 16385
    assert code_of(payload, longer, trust) == C.TOO_LARGE
    assert code_of(payload, longer.encode("ascii"), trust) == C.TOO_LARGE


def test_jws_size_is_checked_before_decoding_bytes() -> None:
    """Non-ASCII bytes beyond the bound are TOO_LARGE (step 1), not MALFORMED_JWS."""
    assert code_of(GOOD, b"\xff" * 16385) == C.TOO_LARGE
    assert code_of(GOOD, GOOD_JWS.encode() + b"\xff" * (16385 - len(GOOD_JWS))) == C.TOO_LARGE


def test_jws_size_is_checked_before_parsing() -> None:
    assert code_of(GOOD, "!" * 70_000) == C.TOO_LARGE


def test_payload_of_exactly_65536_bytes_is_accepted() -> None:
    assert code(payload_of_length(65536)) == OK


def test_payload_of_65537_bytes_is_too_large() -> None:
    assert code(payload_of_length(65537)) == C.TOO_LARGE


def test_payload_size_is_checked_before_parsing() -> None:
    garbage = b"\xff{[" * 24_000  # 72 000 bytes of invalid UTF-8 and broken JSON
    assert code_of(garbage, sign_raw(header_bytes(), garbage)) == C.TOO_LARGE


# --- step 2: three parts, empty middle -----------------------------------------------------


@pytest.mark.parametrize(
    "jws",
    [
        pytest.param(HSEG + SSEG, id="no-dot"),
        pytest.param(HSEG + "." + SSEG, id="two-parts"),
        pytest.param(GOOD_JWS + ".", id="four-parts-trailing-dot"),
        pytest.param(HSEG + "..." + SSEG, id="four-parts-two-empty"),
        pytest.param("", id="empty"),
    ],
)
def test_not_three_parts_is_malformed_jws(jws: str) -> None:
    assert code_of(GOOD, jws) == C.MALFORMED_JWS


def test_attached_payload_is_malformed_jws() -> None:
    attached = f"{HSEG}.{b64u_encode(GOOD)}.{SSEG}"
    assert code_of(GOOD, attached) == C.MALFORMED_JWS


# --- step 3 and step 19: strict base64url -------------------------------------------------

ALPHABET_KID = "???>"  # its header segment holds both '-' and '_'
ALPHABET_HSEG = b64u_encode(header_bytes(kid=ALPHABET_KID))


def test_alphabet_kid_header_holds_url_characters() -> None:
    assert "-" in ALPHABET_HSEG
    assert "_" in ALPHABET_HSEG
    assert len(HSEG) % 4 == 2  # the variants below rely on it
    assert len(SSEG) % 4 == 2


def _swap_last(segment: str) -> str:
    """Same decoded bytes, non-zero trailing bits (the segment's length is 4k+2)."""
    value = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".index(segment[-1])
    assert value % 16 == 0
    return (
        segment[:-1] + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[value + 1]
    )


def _bad_segments(seg: str) -> list[Any]:
    mid = len(seg) // 2
    return [
        pytest.param(seg + "==", id="padding"),
        pytest.param(seg + "=", id="single-padding"),
        pytest.param(seg[:mid] + " \t\r\n" + seg[mid:], id="four-whitespace"),
        pytest.param(seg[:mid] + " " + seg[mid:], id="one-space"),
        pytest.param(seg + "\n", id="trailing-newline"),
        pytest.param(seg[:-1], id="length-4k+1"),
        pytest.param(seg + "AAA", id="length-4k+1-longer"),
        pytest.param(_swap_last(seg), id="nonzero-trailing-bits"),
        pytest.param(seg[:mid] + "*" + seg[mid + 1 :], id="star"),
    ]


@pytest.mark.parametrize("hseg", _bad_segments(HSEG))
def test_header_segment_not_strict_base64url(hseg: str) -> None:
    assert code_of(GOOD, sign_raw(hseg, GOOD)) == C.MALFORMED_JWS


@pytest.mark.parametrize(("std", "url"), [("+", "-"), ("/", "_")], ids=["plus", "slash"])
def test_header_segment_in_standard_alphabet(std: str, url: str) -> None:
    payload = payload_of(statement(kid=ALPHABET_KID))
    trust = store(trust_entry(kid=ALPHABET_KID))
    assert code_of(payload, sign_raw(ALPHABET_HSEG, payload), trust) == OK
    jws = sign_raw(ALPHABET_HSEG.replace(url, std), payload)
    assert code_of(payload, jws, trust) == C.MALFORMED_JWS


def test_header_segment_with_non_ascii_character() -> None:
    jws = HSEG[:10] + "é" + HSEG[11:] + ".." + SSEG
    assert code_of(GOOD, jws) == C.MALFORMED_JWS


@pytest.mark.parametrize("sseg", _bad_segments(SSEG))
def test_signature_segment_not_strict_base64url(sseg: str) -> None:
    """Step 19."""
    assert code_of(GOOD, f"{HSEG}..{sseg}") == C.MALFORMED_JWS


@pytest.mark.parametrize("sseg", _bad_segments(SSEG))
def test_signature_segment_checked_after_trust_lookup(sseg: str) -> None:
    """Step 18 before step 19: an unknown key hides a malformed signature segment."""
    payload = payload_of(statement(issuer="urn:ecpa:issuer:unknown"))
    hseg = sign_raw(header_bytes(), payload).partition("..")[0]
    assert code_of(payload, f"{hseg}..{sseg}") == C.UNKNOWN_KEY


@pytest.mark.parametrize(("std", "url"), [("+", "-"), ("/", "_")], ids=["plus", "slash"])
def test_signature_segment_in_standard_alphabet(std: str, url: str) -> None:
    # find a valid signature holding the URL-safe character (Ed25519 is deterministic)
    for n in range(100):
        payload = payload_of(statement(launch_id=f"launch-{n}"))
        jws = sign_raw(header_bytes(), payload)
        if url in jws.partition("..")[2]:
            break
    else:  # pragma: no cover
        pytest.fail("no signature with the character")
    assert code_of(payload, jws) == OK
    assert code_of(payload, jws.replace(url, std)) == C.MALFORMED_JWS


def test_signature_segment_with_non_ascii_character() -> None:
    assert code_of(GOOD, f"{HSEG}..{SSEG[:10]}é{SSEG[11:]}") == C.MALFORMED_JWS


@pytest.mark.parametrize("encode", [str, lambda t: t.encode("utf-8")], ids=["str", "bytes"])
def test_non_ascii_in_signature_segment_keeps_the_step_order(encode: Any) -> None:
    """A JWS given as bytes gets the code the same text gets: a non-ASCII byte in the
    signature segment fails at step 19, so an unknown key (step 18) is reported first."""
    payload = payload_of(statement(issuer="urn:ecpa:issuer:unknown"))
    jws = sign_raw(header_bytes(), payload)
    bad = jws[:-5] + "é" + jws[-4:]
    assert code_of(payload, encode(bad)) == C.UNKNOWN_KEY
    assert code_of(GOOD, encode(f"{HSEG}..{SSEG[:10]}é{SSEG[11:]}")) == C.MALFORMED_JWS
    assert code_of(GOOD, encode(f"{HSEG[:10]}é{HSEG[11:]}..{SSEG}")) == C.MALFORMED_JWS


# --- step 5: header member set -------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"x": 1}, id="extra-x"),
        pytest.param({"b64": False}, id="extra-b64"),
        pytest.param({"jku": "https://example.invalid/keys"}, id="extra-jku"),
        pytest.param({"zip": "DEF"}, id="extra-zip"),
        pytest.param({"alg": DELETE}, id="missing-alg"),
        pytest.param({"crit": DELETE}, id="missing-crit"),
        pytest.param({"ecpa_profile": DELETE}, id="missing-ecpa_profile"),
        pytest.param({"kid": DELETE}, id="missing-kid"),
        pytest.param({"typ": DELETE}, id="missing-typ"),
        pytest.param({"kid": DELETE, "x": "test-key-1"}, id="renamed-kid"),
    ],
)
def test_header_member_set(changes: dict[str, Any]) -> None:
    assert code_of(GOOD, sign_raw(header_bytes(**changes), GOOD)) == C.UNKNOWN_CRITICAL_HEADER


# --- step 6: canonical header --------------------------------------------------------------

_HEADER = json.loads(header_bytes())


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(json.dumps(_HEADER, sort_keys=True).encode(), id="whitespace"),
        pytest.param(
            json.dumps(dict(reversed(_HEADER.items())), separators=(",", ":")).encode(),
            id="reordered",
        ),
        pytest.param(header_bytes().replace(b'"EdDSA"', b'"\\u0045dDSA"'), id="escaped-letter"),
        pytest.param(
            header_bytes().replace(b"application/", b"application\\/"), id="escaped-slash"
        ),
        pytest.param(header_bytes() + b"\n", id="trailing-newline"),
        pytest.param(b" " + header_bytes(), id="leading-space"),
    ],
)
def test_noncanonical_header_is_malformed_jws(raw: bytes) -> None:
    assert json.loads(raw) == _HEADER
    assert code_of(GOOD, sign_raw(raw, GOOD)) == C.MALFORMED_JWS


# --- steps 7-11: header values -------------------------------------------------------------

HEADER_VALUE_CASES = [
    *[
        pytest.param("alg", v, C.WRONG_ALGORITHM, id=f"alg={json.dumps(v)}")
        for v in ["none", "HS256", "Ed25519", "ES256", "eddsa", "EdDSA ", 1, None, ["EdDSA"]]
    ],
    *[
        pytest.param("typ", v, C.WRONG_TYPE, id=f"typ={json.dumps(v)}")
        for v in [
            "JWT",
            "ecpa-attestation+jws",
            "application/ecpa-attestation+JWS",
            "application/jose",
            "",
            1,
            None,
        ]
    ],
    *[
        pytest.param("crit", v, C.UNKNOWN_CRITICAL_HEADER, id=f"crit={json.dumps(v)}")
        for v in [
            [],
            ["ecpa_profile", "ecpa_profile"],
            ["b64"],
            ["ecpa_profile", "b64"],
            ["b64", "ecpa_profile"],
            ["ECPA_PROFILE"],
            [1],
            "ecpa_profile",
            None,
            {"ecpa_profile": True},
        ]
    ],
    *[
        pytest.param("ecpa_profile", v, C.WRONG_PROFILE, id=f"ecpa_profile={json.dumps(v)}")
        for v in ["ecpa-jcs-jws-eddsa/0.2", "ecpa-jcs-jws-eddsa/0.1 ", "", 1, None]
    ],
    *[
        pytest.param("kid", v, C.UNKNOWN_KEY, id=f"kid={json.dumps(v)}")
        for v in [1, None, ["test-key-1"], {"k": "test-key-1"}, True]
    ],
]


@pytest.mark.parametrize(("member", "value", "expected"), HEADER_VALUE_CASES)
def test_header_value(member: str, value: Any, expected: ErrorCode) -> None:
    assert code_of(GOOD, sign_raw(header_bytes(**{member: value}), GOOD)) == expected


HEADER_LADDER = [
    ("alg", "none", C.WRONG_ALGORITHM),
    ("typ", "JWT", C.WRONG_TYPE),
    ("crit", [], C.UNKNOWN_CRITICAL_HEADER),
    ("ecpa_profile", "x", C.WRONG_PROFILE),
    ("kid", 1, C.UNKNOWN_KEY),
]


@pytest.mark.parametrize("first", range(len(HEADER_LADDER)), ids=[c[0] for c in HEADER_LADDER])
def test_header_value_checks_in_order(first: int) -> None:
    """Steps 7-11: with this defect and every later one, this defect's code wins."""
    changes = {member: value for member, value, _ in HEADER_LADDER[first:]}
    expected = HEADER_LADDER[first][2]
    assert code_of(GOOD, sign_raw(header_bytes(**changes), GOOD)) == expected


def test_header_checks_before_payload() -> None:
    """Steps 5/6/11 come before step 12: a broken payload does not hide them."""
    bad = b'{"a":1,"a":2}'
    assert code_of(bad, sign_raw(header_bytes(x=1), bad)) == C.UNKNOWN_CRITICAL_HEADER
    assert code_of(bad, sign_raw(header_bytes() + b" ", bad)) == C.MALFORMED_JWS
    assert code_of(bad, sign_raw(header_bytes(kid=1), bad)) == C.UNKNOWN_KEY


def test_member_set_before_canonical_form_and_values() -> None:
    """Step 5 before steps 6 and 7."""
    raw = json.dumps({**_HEADER, "alg": "none", "x": 1}).encode()
    assert code_of(GOOD, sign_raw(raw, GOOD)) == C.UNKNOWN_CRITICAL_HEADER
    # step 6 before step 7
    raw = json.dumps({**_HEADER, "alg": "none"}).encode()
    assert code_of(GOOD, sign_raw(raw, GOOD)) == C.MALFORMED_JWS


# --- step 13: canonical payload ------------------------------------------------------------

_ST = statement()
_UNI = statement(obligation="oblig-\u00e9\t\x1f")


@pytest.mark.parametrize(
    ("st", "raw"),
    [
        pytest.param(_ST, json.dumps(_ST, sort_keys=True).encode(), id="whitespace"),
        pytest.param(_ST, json.dumps(_ST, separators=(",", ":")).encode(), id="key-order"),
        pytest.param(_ST, GOOD.replace(b'"launch-1"', b'"l\\u0061unch-1"'), id="escaped-a"),
        pytest.param(_ST, GOOD.replace(b"eddsa/0.1", b"eddsa\\/0.1"), id="escaped-slash"),
        pytest.param(_ST, GOOD.replace(b'"ordinal":0', b'"ordinal":-0'), id="minus-zero"),
        pytest.param(_ST, GOOD + b"\n", id="trailing-newline"),
        pytest.param(_ST, b" " + GOOD, id="leading-space"),
        pytest.param(
            _UNI, payload_of(_UNI).replace("é".encode(), b"\\u00e9"), id="escaped-e-acute"
        ),
        pytest.param(_UNI, payload_of(_UNI).replace(b"\\t", b"\\u0009"), id="tab-as-u0009"),
        pytest.param(_UNI, payload_of(_UNI).replace(b"\\u001f", b"\\u001F"), id="uppercase-hex"),
    ],
)
def test_noncanonical_payload(st: dict[str, Any], raw: bytes) -> None:
    assert raw != payload_of(st)
    assert json.loads(raw) == st
    assert code(st) == OK
    assert code_of(raw, sign_raw(header_bytes(), raw)) == C.NONCANONICAL_PAYLOAD


# --- input types -------------------------------------------------------------------------


def test_jws_and_payload_as_bytes() -> None:
    assert code_of(GOOD, GOOD_JWS.encode("ascii")) == OK
    assert code_of(bytearray(GOOD), bytearray(GOOD_JWS.encode("ascii"))) == OK
    assert code_of(memoryview(GOOD), memoryview(GOOD_JWS.encode("ascii"))) == OK


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(GOOD_JWS.encode()[:20] + b"\xc3\xa9" + GOOD_JWS.encode()[21:], id="utf8-e"),
        pytest.param(GOOD_JWS.encode() + b"\xff", id="trailing-ff"),
        pytest.param(b"\x80" + GOOD_JWS.encode(), id="leading-80"),
    ],
)
def test_jws_bytes_not_ascii(raw: bytes) -> None:
    assert code_of(GOOD, raw) == C.MALFORMED_JWS
