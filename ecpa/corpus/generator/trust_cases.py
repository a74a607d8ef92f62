"""Trust-store loading cases (PROFILE §5): ``trust-store-vectors.json``.

Each case is a whole trust-store document and whether :meth:`ecpa.TrustStore.from_dict`
must load it ("OK") or refuse it (``ATTESTATION_TRUST_STORE_CONFIG``). The 14 small-order
Ed25519 encodings are derived here from the curve, not copied: ``y`` in ``{0, 1, p-1}``,
the two ``y`` of the order-8 points (roots of ``d*y**4 + 2*y**2 - 1``, see ``ecpa/keys.py``),
and the non-canonical ``y = p`` and ``y = p + 1``, each with both sign bits.
"""

from __future__ import annotations

import base64
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ecpa.corpus.generator.kit import DELETE, KEYS, MAX_SAFE, OK, entry
from ecpa.corpus.generator.upstream import DECOMPOSED, NFC, TRUSTED
from ecpa.errors import ErrorCode
from ecpa.profile.b64 import b64u_encode
from ecpa.profile.trust import TRUST_STORE_SCHEMA

__all__ = ["TRUST_VECTORS_SCHEMA", "small_order_keys", "trust_store_cases"]

TRUST_VECTORS_SCHEMA = "ecpa-trust-store-vectors/0.1"
CONFIG = ErrorCode.TRUST_STORE_CONFIG.value

P = 2**255 - 19
D = (-121665 * pow(121666, -1, P)) % P
SQRT_MINUS_1 = pow(2, (P - 1) // 4, P)


def _sqrt(value: int) -> int | None:
    """A square root mod p (p = 5 mod 8), or None when ``value`` is not a square."""
    root = pow(value, (P + 3) // 8, P)
    for candidate in (root, root * SQRT_MINUS_1 % P):
        if candidate * candidate % P == value % P:
            return candidate
    return None


def _order8_ys() -> list[int]:
    """The two y of the four points of order 8: y**2 = (-1 ± sqrt(1 + d)) / d."""
    s = _sqrt(1 + D)
    assert s is not None
    ys: set[int] = set()
    for root in (s, P - s):
        y = _sqrt((root - 1) * pow(D, -1, P) % P)
        if y is not None:
            ys.update((y, P - y))
    assert len(ys) == 2
    return sorted(ys)


def _encode(y: int, sign: int) -> bytes:
    return (y | sign << 255).to_bytes(32, "little")


def small_order_keys() -> dict[str, bytes]:
    """Name -> the 32-byte encoding, for all 14 small-order encodings (PROFILE §5)."""
    low, high = _order8_ys()
    ys = {
        "order4_y0": 0,
        "order1_identity_y1": 1,
        "order8_a": low,
        "order8_b": high,
        "order2_y_p_minus_1": P - 1,
        "order4_noncanonical_y_p": P,
        "order1_noncanonical_y_p_plus_1": P + 1,
    }
    keys: dict[str, bytes] = {}
    for name, y in ys.items():
        keys[name] = _encode(y, 0)
        keys[f"{name}_signbit"] = _encode(y, 1)
    return keys


def _doc(*entries: dict[str, Any], **members: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"schema": TRUST_STORE_SCHEMA, "keys": list(entries)}
    for name, value in members.items():
        if value is DELETE:
            del doc[name]
        else:
            doc[name] = value
    return doc


def _e(**changes: Any) -> dict[str, Any]:
    """test-key-1's entry for the published issuer; members replaced or DELETEd."""
    result = entry()
    for name, value in changes.items():
        if value is DELETE:
            del result[name]
        else:
            result[name] = value
    return result


def _key_form(**form: Any) -> dict[str, Any]:
    return _e(public_key_b64=DELETE, **form)


def _raw(raw: bytes) -> dict[str, Any]:
    return _e(public_key_b64=b64u_encode(raw))


def _pem_of(raw: bytes) -> str:
    """PEM SubjectPublicKeyInfo around 32 raw Ed25519 bytes (whatever they are)."""
    der = bytes.fromhex("302a300506032b6570032100") + raw
    body = base64.b64encode(der).decode("ascii")
    return f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n"


def _p256_pem() -> str:
    key = ec.derive_private_key(12345, ec.SECP256R1()).public_key()
    pem = key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return pem.decode()


def _case(ident: str, why: str, document: dict[str, Any], expected: str = CONFIG) -> dict[str, Any]:
    assert why.strip(), ident
    assert "\n" not in why, ident
    return {"id": ident, "why": why, "document": document, "expected": expected}


def _valid() -> list[dict[str, Any]]:
    key1 = KEYS[1].public_key
    jwk = key1.to_jwk()
    pem = key1.to_pem().decode()
    three = _doc(_e(), _key_form(kid="k-jwk", public_key_jwk=jwk),
                 _key_form(kid="k-pem", public_key_pem=pem))  # fmt: skip
    corpus = _doc(*(entry(issuer, number) for issuer, number in TRUSTED))
    return [
        _case("ts-ok-b64", "test-key-1 as 32 raw bytes in base64url", _doc(_e()), OK),
        _case("ts-ok-jwk", "test-key-1 as an OKP JWK", _doc(_key_form(public_key_jwk=jwk)), OK),
        _case("ts-ok-jwk-alg-use", "an OKP JWK with alg EdDSA and use sig",
              _doc(_key_form(public_key_jwk=jwk | {"alg": "EdDSA", "use": "sig"})), OK),
        _case("ts-ok-pem", "test-key-1 as a PEM SubjectPublicKeyInfo",
              _doc(_key_form(public_key_pem=pem)), OK),
        _case("ts-ok-three-forms", "three entries, one in each key form", three, OK),
        _case("ts-ok-empty", "keys []: a store that trusts no key", _doc(), OK),
        _case("ts-ok-corpus-keys", "the six entries of the published corpus", corpus, OK),
        _case("ts-ok-disabled", "a disabled entry loads (verify refuses it)",
              _doc(_e(enabled=False)), OK),
        _case("ts-ok-window-zero", "not_before == not_after == 0",
              _doc(_e(not_before=0, not_after=0)), OK),
        _case("ts-ok-window-max", "not_before == not_after == 2**53-1",
              _doc(_e(not_before=MAX_SAFE, not_after=MAX_SAFE)), OK),
        _case("ts-ok-same-kid-two-issuers", "kid test-key-1 for two issuers: no duplicate",
              _doc(_e(), _e(issuer="urn:ecpa:issuer:other")), OK),
        _case("ts-ok-normalization", "issuers 'host-\u00e9' and 'host-e\u0301' differ",
              _doc(_e(issuer=NFC), _e(issuer=DECOMPOSED)), OK),
        _case("ts-ok-subjects-two", "two subjects", _doc(_e(subjects=["a", "host-runtime"])), OK),
        _case("ts-ok-large-order-y3", "y = 3: a canonical point of large order",
              _doc(_raw(_encode(3, 0))), OK),
    ]  # fmt: skip


def _refused() -> list[dict[str, Any]]:
    key1 = KEYS[1].public_key
    jwk = key1.to_jwk()
    raw = key1.raw
    small = small_order_keys()
    return [
        _case("ts-schema-wrong", "schema 'ecpa-trust-store/0.2'",
              _doc(schema="ecpa-trust-store/0.2")),
        _case("ts-schema-missing", "no schema member", _doc(schema=DELETE)),
        _case("ts-keys-missing", "no keys member", _doc(keys=DELETE)),
        _case("ts-unknown-member", "an unknown document member 'comment'",
              _doc(_e(), comment="x")),
        _case("ts-entry-unknown-member", "an unknown entry member 'comment'",
              _doc(_e(comment="x"))),
        _case("ts-issuer-empty", "issuer ''", _doc(_e(issuer=""))),
        _case("ts-kid-empty", "kid ''", _doc(_e(kid=""))),
        _case("ts-duplicate", "the same entry twice", _doc(_e(), _e())),
        _case("ts-duplicate-other-form", "(issuer, kid) again with test-key-2 as a JWK",
              _doc(_e(), _key_form(public_key_jwk=KEYS[2].public_key.to_jwk()))),
        _case("ts-not-before-negative", "not_before -1", _doc(_e(not_before=-1))),
        _case("ts-window-inverted", "not_before 11 > not_after 10",
              _doc(_e(not_before=11, not_after=10))),
        _case("ts-not-before-true", "not_before true", _doc(_e(not_before=True))),
        _case("ts-not-after-false", "not_after false", _doc(_e(not_after=False))),
        _case("ts-enabled-1", "enabled 1: an integer is not a boolean", _doc(_e(enabled=1))),
        _case("ts-subjects-empty", "subjects []", _doc(_e(subjects=[]))),
        _case("ts-subjects-holding-empty", "subjects ['']", _doc(_e(subjects=[""]))),
        _case("ts-subjects-second-empty", "subjects ['host-runtime', '']",
              _doc(_e(subjects=["host-runtime", ""]))),
        _case("ts-no-key-form", "no public key member", _doc(_key_form())),
        _case("ts-two-key-forms", "public_key_b64 and public_key_jwk",
              _doc(_e(public_key_jwk=jwk))),
        _case("ts-key-31-bytes", "a key of 31 bytes", _doc(_raw(raw[:31]))),
        _case("ts-key-33-bytes", "a key of 33 bytes", _doc(_raw(raw + b"\x00"))),
        _case("ts-key-padded", "the key's base64url with '='",
              _doc(_e(public_key_b64=key1.to_b64() + "="))),
        *[
            _case(f"ts-small-order-{name}", f"small-order key {name}: it admits forgeries",
                  _doc(_raw(value)))
            for name, value in small.items()
        ],
        _case("ts-small-order-jwk", "small-order key order8_a as a JWK",
              _doc(_key_form(public_key_jwk=jwk | {"x": b64u_encode(small["order8_a"])}))),
        _case("ts-small-order-pem", "small-order key order8_a as PEM",
              _doc(_key_form(public_key_pem=_pem_of(small["order8_a"])))),
        _case("ts-noncanonical-y-p+3", "y = p + 3: non-canonical, not of small order",
              _doc(_raw(_encode(P + 3, 0)))),
        _case("ts-noncanonical-y-p+3-signbit", "y = p + 3 with the sign bit",
              _doc(_raw(_encode(P + 3, 1)))),
        _case("ts-not-on-curve", "y = 2: no curve point has it", _doc(_raw(_encode(2, 0)))),
        _case("ts-jwk-private", "a JWK holding the private member d",
              _doc(_key_form(public_key_jwk=jwk | {"d": b64u_encode(bytes(range(32)))}))),
        _case("ts-jwk-x25519", "a JWK of crv X25519",
              _doc(_key_form(public_key_jwk=jwk | {"crv": "X25519"}))),
        _case("ts-jwk-ed448", "a JWK of crv Ed448",
              _doc(_key_form(public_key_jwk=jwk | {"crv": "Ed448"}))),
        _case("ts-pem-p256", "PEM of a P-256 key (derived from 12345)",
              _doc(_key_form(public_key_pem=_p256_pem()))),
        _case("ts-pem-private", "PEM PKCS#8 private key of test-key-1",
              _doc(_key_form(public_key_pem=KEYS[1].to_pem().decode()))),
    ]  # fmt: skip


def trust_store_cases() -> dict[str, Any]:
    """The trust-store loading cases (``ecpa-trust-store-vectors/0.1``). TEST keys only."""
    return {
        "schema": TRUST_VECTORS_SCHEMA,
        "test_only": True,
        "cases": [*_valid(), *_refused()],
    }
