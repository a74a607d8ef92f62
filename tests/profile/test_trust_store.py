"""PROFILE §5: loading a trust store refuses every bad document with
``ATTESTATION_TRUST_STORE_CONFIG``; good keys load in each of their three forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

import ecpa
from ecpa.errors import ErrorCode
from ecpa.profile.b64 import b64u_encode
from tests.support import (
    KEY_1,
    KEY_2,
    NOW,
    code_of,
    header_bytes,
    payload_of,
    sign_raw,
    statement,
    trust_doc,
    trust_entry,
)

CONFIG = ErrorCode.TRUST_STORE_CONFIG
P = 2**255 - 19
KEY_1_B64 = KEY_1.public_key.to_b64()
KEY_1_RAW = KEY_1.public_key.raw
GOOD = payload_of(statement())
GOOD_JWS = sign_raw(header_bytes(), GOOD)


def refused(doc: Any) -> ErrorCode:
    with pytest.raises(ecpa.EcpaError) as info:
        ecpa.TrustStore.from_dict(doc)
    return info.value.code


def entry_without(*names: str, **changes: Any) -> dict[str, Any]:
    entry = trust_entry(**changes)
    for name in names:
        del entry[name]
    return entry


def test_valid_document_loads_and_verifies() -> None:
    trust = ecpa.TrustStore.from_dict(trust_doc())
    assert len(trust) == 2
    assert code_of(GOOD, GOOD_JWS, trust) == "OK"


# --- the document ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param({"schema": "ecpa-trust-store/0.2", "keys": []}, id="schema-0.2"),
        pytest.param({"schema": "ecpa-attestation-statement/0.1", "keys": []}, id="schema-other"),
        pytest.param({"schema": "", "keys": []}, id="schema-empty"),
        pytest.param({"schema": None, "keys": []}, id="schema-null"),
        pytest.param({"keys": []}, id="schema-missing"),
        pytest.param({"schema": "ecpa-trust-store/0.1"}, id="keys-missing"),
        pytest.param({"schema": "ecpa-trust-store/0.1", "keys": {}}, id="keys-object"),
        pytest.param({"schema": "ecpa-trust-store/0.1", "keys": [1]}, id="entry-number"),
        pytest.param({"schema": "ecpa-trust-store/0.1", "keys": [], "x": 1}, id="extra-member"),
        pytest.param([], id="array"),
    ],
)
def test_bad_document(doc: Any) -> None:
    assert refused(doc) == CONFIG


def test_empty_key_list_is_a_valid_store_that_knows_no_key() -> None:
    trust = ecpa.TrustStore.from_dict({"schema": "ecpa-trust-store/0.1", "keys": []})
    assert code_of(GOOD, GOOD_JWS, trust) == ErrorCode.UNKNOWN_KEY


# --- entries -----------------------------------------------------------------------------

BAD_ENTRIES = [
    pytest.param(trust_entry(issuer=""), id="issuer-empty"),
    pytest.param(trust_entry(kid=""), id="kid-empty"),
    pytest.param(trust_entry(issuer=1), id="issuer-number"),
    pytest.param(trust_entry(kid=None), id="kid-null"),
    pytest.param(entry_without("issuer"), id="issuer-missing"),
    pytest.param(entry_without("kid"), id="kid-missing"),
    pytest.param(trust_entry(not_before=-1), id="not_before-negative"),
    pytest.param(trust_entry(not_before=11, not_after=10), id="not_before-after-not_after"),
    pytest.param(trust_entry(not_before=0, not_after=-1), id="not_after-negative"),
    pytest.param(trust_entry(not_before=True), id="not_before-true"),
    pytest.param(trust_entry(not_before=False), id="not_before-false"),
    pytest.param(trust_entry(not_after=True), id="not_after-true"),
    pytest.param(trust_entry(not_before=0.0), id="not_before-float"),
    pytest.param(trust_entry(not_after="10"), id="not_after-string"),
    pytest.param(trust_entry(not_after=2**53), id="not_after-above-2**53-1"),
    pytest.param(trust_entry(not_before=2**53, not_after=2**53), id="not_before-above-2**53-1"),
    pytest.param(entry_without("not_before"), id="not_before-missing"),
    pytest.param(entry_without("not_after"), id="not_after-missing"),
    pytest.param(trust_entry(enabled=1), id="enabled-1"),
    pytest.param(trust_entry(enabled=0), id="enabled-0"),
    pytest.param(trust_entry(enabled="true"), id="enabled-string"),
    pytest.param(entry_without("enabled"), id="enabled-missing"),
    pytest.param(trust_entry(subjects=[]), id="subjects-empty"),
    pytest.param(trust_entry(subjects=[""]), id="subjects-holding-empty"),
    pytest.param(trust_entry(subjects=["host-runtime", ""]), id="subjects-second-empty"),
    pytest.param(trust_entry(subjects="host-runtime"), id="subjects-string"),
    pytest.param(trust_entry(subjects=[1]), id="subjects-number"),
    pytest.param(entry_without("subjects"), id="subjects-missing"),
    pytest.param(trust_entry(extra="x"), id="extra-member"),
    pytest.param(trust_entry(public_key=KEY_1_B64), id="misnamed-key-member"),
    pytest.param(entry_without("public_key_b64"), id="no-key-form"),
    pytest.param(trust_entry(public_key_jwk=KEY_1.public_key.to_jwk()), id="two-key-forms-b64-jwk"),
    pytest.param(
        trust_entry(public_key_pem=KEY_1.public_key.to_pem().decode()), id="two-key-forms-b64-pem"
    ),
    pytest.param(
        entry_without(
            "public_key_b64",
            public_key_jwk=KEY_1.public_key.to_jwk(),
            public_key_pem=KEY_1.public_key.to_pem().decode(),
        ),
        id="two-key-forms-jwk-pem",
    ),
]


@pytest.mark.parametrize("entry", BAD_ENTRIES)
def test_bad_entry(entry: dict[str, Any]) -> None:
    assert refused(trust_doc(entry)) == CONFIG


def test_bad_entry_after_a_good_one() -> None:
    assert refused(trust_doc(trust_entry(), trust_entry(kid="k2", not_before=-1))) == CONFIG


@pytest.mark.parametrize(
    "window",
    [(0, 0), (NOW, NOW), (0, 2**53 - 1), (2**53 - 1, 2**53 - 1)],
    ids=["zero", "equal", "widest", "max"],
)
def test_window_boundaries_accepted(window: tuple[int, int]) -> None:
    entry = trust_entry(not_before=window[0], not_after=window[1])
    assert len(ecpa.TrustStore.from_dict(trust_doc(entry))) == 1


def test_duplicated_issuer_kid() -> None:
    entry = trust_entry()
    assert refused(trust_doc(entry, dict(entry))) == CONFIG
    # the same pair with another key and window is still a duplicate
    other = trust_entry(public_key_b64=KEY_2.public_key.to_b64(), enabled=False)
    assert refused(trust_doc(entry, other)) == CONFIG


def test_same_kid_for_two_issuers_is_not_a_duplicate() -> None:
    trust = ecpa.TrustStore.from_dict(trust_doc(trust_entry(), trust_entry(issuer="urn:other")))
    assert len(trust) == 2


def test_issuers_differing_by_normalization_are_not_duplicates() -> None:
    doc = trust_doc(trust_entry(issuer="host-\u00e9"), trust_entry(issuer="host-e\u0301"))
    assert len(ecpa.TrustStore.from_dict(doc)) == 2


# --- the key: raw base64url --------------------------------------------------------------

SMALL_ORDER_HEX = {
    "order4_y0": "00" * 32,
    "order4_y0_signbit": "00" * 31 + "80",
    "order1_identity": "01" + "00" * 31,
    "order1_identity_signbit": "01" + "00" * 30 + "80",
    "order8_a": "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "order8_a_signbit": "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    "order8_b": "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "order8_b_signbit": "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
    "order2_y_p_minus_1": "ec" + "ff" * 30 + "7f",
    "order2_y_p_minus_1_signbit": "ec" + "ff" * 31,
    "order4_noncanonical_y_p": "ed" + "ff" * 30 + "7f",
    "order4_noncanonical_y_p_signbit": "ed" + "ff" * 31,
    "order1_noncanonical_y_p_plus_1": "ee" + "ff" * 30 + "7f",
    "order1_noncanonical_y_p_plus_1_signbit": "ee" + "ff" * 31,
}


def _y(value: int, sign: int = 0) -> bytes:
    return (value | sign << 255).to_bytes(32, "little")


BAD_KEYS = [
    pytest.param(b64u_encode(KEY_1_RAW[:31]), id="31-bytes"),
    pytest.param(b64u_encode(KEY_1_RAW + b"\x00"), id="33-bytes"),
    pytest.param(b64u_encode(KEY_1_RAW * 2), id="64-bytes"),
    pytest.param("", id="0-bytes"),
    pytest.param(KEY_1_B64 + "=", id="padding"),
    pytest.param(KEY_1_B64[:20] + " " + KEY_1_B64[20:], id="space"),
    pytest.param(KEY_1_B64[:20] + "\n\t \r" + KEY_1_B64[20:], id="four-whitespace"),
    pytest.param(b64u_encode(_y(P + 3)), id="noncanonical-y-p+3"),
    pytest.param(b64u_encode(_y(P + 3, 1)), id="noncanonical-y-p+3-signbit"),
    pytest.param(b64u_encode(_y(2)), id="not-on-curve-y2"),
    pytest.param(b64u_encode(_y(7, 1)), id="not-on-curve-y7-signbit"),
    *[pytest.param(b64u_encode(bytes.fromhex(h)), id=n) for n, h in SMALL_ORDER_HEX.items()],
]


@pytest.mark.parametrize("key", BAD_KEYS)
def test_bad_public_key_b64(key: str) -> None:
    assert refused(trust_doc(trust_entry(public_key_b64=key))) == CONFIG


def test_key_in_standard_alphabet_refused() -> None:
    b64 = next(
        k.public_key.to_b64()
        for k in (ecpa.SigningKey.from_seed(bytes([i]) * 32) for i in range(256))
        if "-" in k.public_key.to_b64()
    )
    assert len(ecpa.TrustStore.from_dict(trust_doc(trust_entry(public_key_b64=b64)))) == 1
    assert refused(trust_doc(trust_entry(public_key_b64=b64.replace("-", "+")))) == CONFIG


def test_key_with_nonzero_trailing_bits_refused() -> None:
    # 32 bytes are 43 characters: the last one carries 4 data bits and 2 zero bits
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(KEY_1_B64[-1])
    assert last % 4 == 0
    changed = KEY_1_B64[:-1] + alphabet[last + 1]
    assert refused(trust_doc(trust_entry(public_key_b64=changed))) == CONFIG


@pytest.mark.parametrize("value", [None, 1, KEY_1_RAW], ids=["null", "number", "bytes"])
def test_key_not_text_refused(value: Any) -> None:
    assert refused(trust_doc(trust_entry(public_key_b64=value))) == CONFIG


def test_canonical_point_near_zero_is_accepted() -> None:
    """y = 3 is a point of large order: the refusals above are not about small y."""
    assert (
        len(ecpa.TrustStore.from_dict(trust_doc(trust_entry(public_key_b64=b64u_encode(_y(3))))))
        == 1
    )


# --- the key: JWK and PEM ----------------------------------------------------------------


def _entry_with(**form: Any) -> dict[str, Any]:
    return entry_without("public_key_b64", **form)


@pytest.mark.parametrize(
    "jwk",
    [
        pytest.param({"kty": "OKP", "crv": "Ed25519", "x": KEY_1_B64}, id="minimal"),
        pytest.param(
            {"kty": "OKP", "crv": "Ed25519", "x": KEY_1_B64, "alg": "EdDSA", "use": "sig"},
            id="alg-EdDSA-use-sig",
        ),
        pytest.param(
            {"kty": "OKP", "crv": "Ed25519", "x": KEY_1_B64, "alg": "Ed25519"}, id="alg-Ed25519"
        ),
    ],
)
def test_jwk_key_loads_and_verifies(jwk: dict[str, Any]) -> None:
    trust = ecpa.TrustStore.from_dict(trust_doc(_entry_with(public_key_jwk=jwk)))
    assert code_of(GOOD, GOOD_JWS, trust) == "OK"
    assert (
        code_of(GOOD, sign_raw(header_bytes(), GOOD, KEY_2), trust)
        == "ATTESTATION_INVALID_SIGNATURE"
    )


def test_pem_key_loads_and_verifies() -> None:
    pem = KEY_1.public_key.to_pem().decode()
    assert pem.startswith("-----BEGIN PUBLIC KEY-----")
    trust = ecpa.TrustStore.from_dict(trust_doc(_entry_with(public_key_pem=pem)))
    assert code_of(GOOD, GOOD_JWS, trust) == "OK"
    assert (
        code_of(GOOD, sign_raw(header_bytes(), GOOD, KEY_2), trust)
        == "ATTESTATION_INVALID_SIGNATURE"
    )


def _jwk(**changes: Any) -> dict[str, Any]:
    jwk: dict[str, Any] = {"kty": "OKP", "crv": "Ed25519", "x": KEY_1_B64}
    for name, value in changes.items():
        if value is None:
            del jwk[name]
        else:
            jwk[name] = value
    return jwk


@pytest.mark.parametrize(
    "jwk",
    [
        pytest.param(_jwk(d=b64u_encode(bytes(range(32)))), id="private-d"),
        pytest.param(_jwk(d=""), id="private-d-empty"),
        pytest.param(_jwk(kty="EC"), id="kty-EC"),
        pytest.param(_jwk(kty=None), id="kty-missing"),
        pytest.param(_jwk(crv="X25519"), id="crv-X25519"),
        pytest.param(_jwk(crv="Ed448"), id="crv-Ed448"),
        pytest.param(_jwk(alg="ES256"), id="alg-ES256"),
        pytest.param(_jwk(use="enc"), id="use-enc"),
        pytest.param(_jwk(x=None), id="x-missing"),
        pytest.param(_jwk(x=1), id="x-number"),
        pytest.param(_jwk(x=KEY_1_B64 + "="), id="x-padding"),
        pytest.param(_jwk(x=b64u_encode(KEY_1_RAW[:31])), id="x-31-bytes"),
        pytest.param(
            _jwk(x=b64u_encode(bytes.fromhex(SMALL_ORDER_HEX["order8_a"]))), id="x-small-order"
        ),
        pytest.param(KEY_1_B64, id="not-an-object"),
    ],
)
def test_bad_jwk(jwk: Any) -> None:
    assert refused(trust_doc(_entry_with(public_key_jwk=jwk))) == CONFIG


def _ec_pem() -> str:
    key = ec.derive_private_key(5, ec.SECP256R1())
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


@pytest.mark.parametrize(
    "pem",
    [
        pytest.param("not a pem", id="garbage"),
        pytest.param("", id="empty"),
        pytest.param(_ec_pem(), id="p256-key"),
        pytest.param(KEY_1.to_pem().decode(), id="private-key-pem"),
        pytest.param(KEY_1.public_key.to_pem().decode().replace("MCow", "MCox"), id="corrupted"),
    ],
)
def test_bad_pem(pem: str) -> None:
    assert refused(trust_doc(_entry_with(public_key_pem=pem))) == CONFIG


# --- TrustStore.load ---------------------------------------------------------------------


def test_load_valid_file(tmp_path: Path) -> None:
    path = tmp_path / "trust.json"
    path.write_text(json.dumps(trust_doc()), encoding="utf-8")
    trust = ecpa.TrustStore.load(path)
    assert len(trust) == 2
    assert code_of(GOOD, GOOD_JWS, trust) == "OK"
    assert len(ecpa.TrustStore.load(str(path))) == 2


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"{", id="invalid-json"),
        pytest.param(b"", id="empty-file"),
        pytest.param(b"[]", id="top-level-array"),
        pytest.param(
            b'{"schema":"ecpa-trust-store/0.1","schema":"x","keys":[]}', id="duplicate-name"
        ),
        pytest.param(b'\xef\xbb\xbf{"schema":"ecpa-trust-store/0.1","keys":[]}', id="bom"),
        pytest.param(b'{"schema":"ecpa-trust-store/0.1","keys":[],"n":1.5}', id="float"),
        pytest.param(b'{"schema":"ecpa-trust-store/0.2","keys":[]}', id="wrong-schema"),
        pytest.param(json.dumps(trust_doc(trust_entry(kid=""))).encode(), id="bad-entry"),
    ],
)
def test_load_bad_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "trust.json"
    path.write_bytes(content)
    with pytest.raises(ecpa.EcpaError) as info:
        ecpa.TrustStore.load(path)
    assert info.value.code == CONFIG


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ecpa.EcpaError) as info:
        ecpa.TrustStore.load(tmp_path / "absent.json")
    assert info.value.code == CONFIG


def test_load_directory(tmp_path: Path) -> None:
    with pytest.raises(ecpa.EcpaError) as info:
        ecpa.TrustStore.load(tmp_path)
    assert info.value.code == CONFIG


def test_load_file_over_16_mib(tmp_path: Path) -> None:
    doc = json.dumps(trust_doc()).encode()
    path = tmp_path / "big.json"
    path.write_bytes(doc[:-1] + b" " * (16 * 1024 * 1024 + 1 - len(doc)) + b"}")
    assert path.stat().st_size == 16 * 1024 * 1024 + 1
    with pytest.raises(ecpa.EcpaError) as info:
        ecpa.TrustStore.load(path)
    assert info.value.code == CONFIG


def test_verify_never_raises_trust_store_config() -> None:
    """A store is whole or refused; verify reports policy, not configuration."""
    trust = ecpa.TrustStore.from_dict(trust_doc(trust_entry(enabled=False)))
    assert code_of(GOOD, GOOD_JWS, trust) == ErrorCode.TRUST_POLICY


@pytest.mark.parametrize(
    ("make", "value"),
    [
        pytest.param(ecpa.VerifyKey.from_b64, KEY_1_RAW, id="b64-given-bytes"),
        pytest.param(ecpa.VerifyKey.from_b64, None, id="b64-given-none"),
        pytest.param(ecpa.VerifyKey.from_jwk, KEY_1_B64, id="jwk-given-text"),
        pytest.param(ecpa.VerifyKey.from_jwk, [KEY_1_B64], id="jwk-given-list"),
    ],
)
def test_key_api_refuses_wrong_types(make: Any, value: Any) -> None:
    """The key layer under the store checks types itself (the store's model does too)."""
    with pytest.raises(ecpa.EcpaError) as info:
        make(value)
    assert info.value.code == ErrorCode.INVALID_KEY
