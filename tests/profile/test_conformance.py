"""Conformance against the shared data: the published ECPA 0.1 corpus, RFC 8785 pairs,
RFC 8037/8032 vectors, Wycheproof Ed25519 and the small-order key list.

Every test here reads ../shared and is skipped cleanly when it is absent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import ecpa
from ecpa.errors import ErrorCode
from ecpa.profile.b64 import b64u_decode, b64u_encode
from ecpa.profile.json.strict_json import parse_object
from ecpa.profile.keys import VerifyKey
from tests.support import CONFORMANCE, SEED_1, SEED_2, b64d, load_json, needs_shared

pytestmark = needs_shared

UPSTREAM = CONFORMANCE / "upstream-ecpa-0.1" / "attestation-vectors.json"
SEEDS = {"test-key-1": SEED_1, "test-key-2": SEED_2}


def _corpus() -> dict[str, Any]:
    return load_json(UPSTREAM) if UPSTREAM.is_file() else {"cases": [], "keys": []}


CORPUS = _corpus()
CASES = CORPUS["cases"]


def _store() -> ecpa.TrustStore:
    return ecpa.TrustStore.from_dict({"schema": "ecpa-trust-store/0.1", "keys": CORPUS["keys"]})


def test_upstream_corpus_codes_in_file_order() -> None:
    """PROFILE §3, last paragraph: every case at its `now` with default policy; binding and
    one shared replay fence only for cases whose binding is not null, in file order."""
    assert len(CASES) == 56
    store = _store()
    fence = ecpa.MemoryReplayFence()
    results = []
    for case in CASES:
        bound = case["binding"] is not None
        try:
            ecpa.verify(
                b64d(case["payload_b64"]),
                case["detached_jws"],
                store,
                now=case["now"],
                binding=ecpa.Binding(**case["binding"]) if bound else None,
                replay=fence if bound else None,
            )
            got = "OK"
        except ecpa.EcpaError as exc:
            got = exc.code.value
        results.append((case["id"], case["expected"], got))
    wrong = [r for r in results if r[1] != r[2]]
    assert wrong == []
    assert sum(1 for r in results if r[1] == "OK") == 10


@pytest.mark.parametrize("case", [c for c in CASES if c["expected"] == "OK"], ids=lambda c: c["id"])
def test_sign_reproduces_published_bytes(case: dict[str, Any]) -> None:
    """Ed25519 is deterministic: signing each positive statement with its TEST seed gives
    the published payload and detached JWS byte for byte."""
    payload = b64d(case["payload_b64"])
    statement = json.loads(payload)
    signed = ecpa.sign(statement, ecpa.SigningKey.from_seed(SEEDS[statement["kid"]]))
    assert signed.payload == payload
    assert signed.detached_jws == case["detached_jws"]


def test_corpus_keys_are_the_test_seeds() -> None:
    for entry in CORPUS["keys"]:
        key = ecpa.SigningKey.from_seed(SEEDS[entry["kid"]])
        assert key.public_key.to_b64() == entry["public_key_b64"]


JCS_NAMES = ["arrays", "french", "structures", "unicode", "values", "weird"]


@pytest.mark.parametrize("name", JCS_NAMES)
def test_rfc8785_reference_pairs(name: str) -> None:
    source = (CONFORMANCE / "jcs" / "input" / f"{name}.json").read_text(encoding="utf-8")
    expected = (CONFORMANCE / "jcs" / "output" / f"{name}.json").read_bytes()
    assert ecpa.canonicalize(json.loads(source)) == expected


JOSE = load_json(CONFORMANCE / "jose" / "rfc-vectors.json") if CONFORMANCE.is_dir() else {}


def test_rfc8037_a4_signature_reproduced() -> None:
    vec = JOSE["rfc8037"]
    key = ecpa.SigningKey.from_jwk(vec["A.1_private_key_jwk"])
    assert key.public_key == VerifyKey.from_jwk(vec["A.2_public_key_jwk"])
    signing_input = vec["A.4_signing_input"].encode("ascii")
    signature = key.sign(signing_input)
    assert signature.hex() == vec["A.4_signature_hex"]
    assert b64u_encode(signature) == vec["A.4_signature_b64u"]
    key.public_key.verify(signature, signing_input)


def test_rfc8032_test1_vector() -> None:
    vec = JOSE["rfc8032_s7.1"][0]
    key = ecpa.SigningKey.from_seed(bytes.fromhex(vec["secret_key"]))
    assert key.public_key.raw.hex() == vec["public_key"]
    assert key.sign(bytes.fromhex(vec["message"])).hex() == vec["signature"]


def _generic_jws_check(compact: str, jwk: dict[str, Any]) -> None:
    """A plain compact JWS pushed through ecpa's layers: key import, strict base64url,
    strict JSON header, the profile's algorithm, no unknown ``crit``, then Ed25519."""
    key = VerifyKey.from_jwk(jwk)
    header_b64, payload_b64, signature_b64 = compact.split(".")
    header = parse_object(b64u_decode(header_b64, what="header"), what="header")
    if header.get("alg") != ecpa.profile.jws.ALG:
        raise ecpa.EcpaError(ErrorCode.WRONG_ALGORITHM, str(header.get("alg")))
    if "crit" in header:
        raise ecpa.EcpaError(ErrorCode.UNKNOWN_CRITICAL_HEADER, str(header["crit"]))
    signature = b64u_decode(signature_b64, what="signature")
    key.verify(signature, f"{header_b64}.{payload_b64}".encode("ascii"))


@pytest.mark.parametrize(
    "case",
    JOSE.get("rfc8037", {}).get("derived_negative_cases", []),
    ids=lambda c: c["name"][:50],
)
def test_rfc8037_derived_negatives_refused(case: dict[str, Any]) -> None:
    """Each derived negative is refused by one of ecpa's layers (duplicate ``alg`` members
    included: a last-wins parser accepts one of them)."""
    jwk = case.get("public_key_jwk", JOSE["rfc8037"]["A.2_public_key_jwk"])
    with pytest.raises(ecpa.EcpaError):
        _generic_jws_check(case["compact"], jwk)


def test_rfc8037_a5_positive_passes_the_same_layers() -> None:
    vec = JOSE["rfc8037"]["A.5_verification"]
    _generic_jws_check(vec["compact_jws"], vec["public_key_jwk"])


def test_rfc8037_detached_form_is_not_our_profile() -> None:
    """RFC 8037 A.4 in detached form is a fine JWS, but its header is not the profile's."""
    vec = JOSE["rfc8037"]
    entry = {
        "issuer": "i",
        "kid": "k",
        "public_key_jwk": vec["A.2_public_key_jwk"],
        "subjects": ["s"],
        "enabled": True,
        "not_before": 0,
        "not_after": 10,
    }
    store = ecpa.TrustStore.from_dict({"schema": "ecpa-trust-store/0.1", "keys": [entry]})
    with pytest.raises(ecpa.EcpaError) as info:
        ecpa.verify(
            vec["A.4_payload_utf8"].encode(), vec["derived_A.4_detached_compact"], store, now=1
        )
    assert info.value.code == ErrorCode.UNKNOWN_CRITICAL_HEADER


def _wycheproof() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    path = CONFORMANCE / "wycheproof" / "ed25519_test.json"
    if not path.is_file():
        return []
    doc = load_json(path)
    return [(f"tc{t['tcId']}", group, t) for group in doc["testGroups"] for t in group["tests"]]


WYCHEPROOF = _wycheproof()


def test_wycheproof_count() -> None:
    assert len(WYCHEPROOF) == 151


@pytest.mark.parametrize(("tc", "group", "test"), WYCHEPROOF, ids=[w[0] for w in WYCHEPROOF])
def test_wycheproof_ed25519(tc: str, group: dict[str, Any], test: dict[str, Any]) -> None:
    """Through the project's key layer: the key from the group's JWK (or raw bytes), the
    signature checked by VerifyKey.verify. valid -> accepted; invalid -> EcpaError."""
    raw = bytes.fromhex(group["publicKey"]["pk"])
    key = VerifyKey.from_bytes(raw)
    if "publicKeyJwk" in group:
        assert VerifyKey.from_jwk(group["publicKeyJwk"]) == key
    if "publicKeyPem" in group:
        assert VerifyKey.from_pem(group["publicKeyPem"]) == key
    msg, sig = bytes.fromhex(test["msg"]), bytes.fromhex(test["sig"])
    if test["result"] == "valid":
        key.verify(sig, msg)
    else:
        assert test["result"] == "invalid"
        with pytest.raises(ecpa.EcpaError) as info:
            key.verify(sig, msg)
        assert info.value.code == ErrorCode.INVALID_SIGNATURE


def _small_order() -> list[dict[str, Any]]:
    path = CONFORMANCE / "wycheproof" / "ed25519-small-order-keys.json"
    return load_json(path)["keys"] if path.is_file() else []


SMALL_ORDER = _small_order()


def test_small_order_list_is_complete() -> None:
    assert len(SMALL_ORDER) == 14


@pytest.mark.parametrize("form", ["b64", "jwk", "pem"])
@pytest.mark.parametrize("weak", SMALL_ORDER, ids=lambda k: k["name"])
def test_small_order_keys_refused_by_trust_store(weak: dict[str, Any], form: str) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    raw = bytes.fromhex(weak["public_key_hex"])
    x = b64u_encode(raw)
    entry: dict[str, Any] = {
        "issuer": "urn:ecpa:issuer:x",
        "kid": "weak",
        "subjects": ["host-runtime"],
        "enabled": True,
        "not_before": 0,
        "not_after": 10,
    }
    if form == "b64":
        entry["public_key_b64"] = x
    elif form == "jwk":
        entry["public_key_jwk"] = {"kty": "OKP", "crv": "Ed25519", "x": x}
    else:
        # OpenSSL loads these encodings, so a PEM of each can be made; ecpa must refuse it.
        pem = Ed25519PublicKey.from_public_bytes(raw).public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        entry["public_key_pem"] = pem.decode()
    with pytest.raises(ecpa.EcpaError) as info:
        ecpa.TrustStore.from_dict({"schema": "ecpa-trust-store/0.1", "keys": [entry]})
    assert info.value.code == ErrorCode.TRUST_STORE_CONFIG


def test_wycheproof_keys_and_random_keys_are_not_small_order() -> None:
    """The small-order test does not refuse ordinary keys (no false positives)."""
    for _, group, _ in WYCHEPROOF:
        VerifyKey.from_bytes(bytes.fromhex(group["publicKey"]["pk"]))
    for i in range(200):
        ecpa.SigningKey.from_seed(i.to_bytes(32, "little"))
