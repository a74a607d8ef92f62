"""The Ed25519 backends (ecpa.profile._ed25519): libsodium and OpenSSL give the same answers.

libsodium is the fast backend and OpenSSL the reference. Every test here that compares them
runs the same input through both and asserts the same result: "OK" or the same error code.
Signatures with a small-order ``R`` are crafted below with the private scalar, the one input
on which raw libsodium and RFC 8032 differ (see the module docstring of ecpa.profile._ed25519).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ecpa
from ecpa.corpus.runner import CORPUS_FILES, generate, run_any
from ecpa.errors import ErrorCode
from ecpa.profile import _ed25519
from ecpa.profile._ed25519 import SMALL_ORDER_ENCODINGS, BackendName
from ecpa.profile.b64 import b64u_encode
from ecpa.profile.keys import SigningKey, VerifyKey, check_public_key
from tests.support import CONFORMANCE, ROOT, SEED_1, load_json, needs_shared

BACKENDS: tuple[BackendName, ...] = ("libsodium", "openssl")


@contextmanager
def backend(name: BackendName) -> Iterator[None]:
    previous = _ed25519.set_backend(name)
    try:
        yield
    finally:
        _ed25519.set_backend(previous)


def outcome(call: Callable[[], object]) -> str:
    """ "OK" or the code of the EcpaError raised."""
    try:
        call()
    except ecpa.EcpaError as exc:
        return exc.code.value
    return "OK"


def both(key: VerifyKey, signature: bytes, message: bytes) -> tuple[str, str]:
    """The verification outcome under each backend, libsodium first."""
    results = []
    for name in BACKENDS:
        with backend(name):
            results.append(outcome(lambda: key.verify(signature, message)))
    return results[0], results[1]


# --- The fast backend is the one in use ---------------------------------------------------


def test_libsodium_is_the_active_backend() -> None:
    """PyNaCl is a declared dependency: a silent fall-back to OpenSSL fails here."""
    assert importlib.util.find_spec("nacl") is not None, "pynacl (a dependency) is not installed"
    assert _ed25519.backend() == "libsodium"
    assert SigningKey.from_seed(SEED_1)._secret is not None


def test_set_backend_switches_and_refuses_unknown_names() -> None:
    with backend("openssl"):
        assert _ed25519.backend() == "openssl"
    assert _ed25519.backend() == "libsodium"
    with pytest.raises(ValueError, match="available backend"):
        _ed25519.set_backend("gnutls")  # type: ignore[arg-type]
    assert _ed25519.backend() == "libsodium"


def test_without_pynacl_openssl_does_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ed25519, "_SODIUM", None)
    monkeypatch.setattr(_ed25519, "_active", None)
    assert _ed25519.backend() == "openssl"
    with pytest.raises(ValueError, match="available backend"):
        _ed25519.set_backend("libsodium")
    key = SigningKey.from_seed(SEED_1)
    assert key._secret is None
    signature = key.sign(b"message")
    key.public_key.verify(signature, b"message")
    monkeypatch.undo()
    assert key.sign(b"message") == signature  # still OpenSSL: this key has no secret


# --- Minimal Ed25519 arithmetic, to craft signatures no signer API makes ------------------

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
D = -121665 * pow(121666, -1, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)
Point = tuple[int, int]
IDENTITY: Point = (0, 1)


def _x_of(y: int, odd: int) -> int:
    u, v = (y * y - 1) % P, (D * y * y + 1) % P
    x2 = u * pow(v, -1, P) % P
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P:
        x = x * SQRT_M1 % P
    assert (x * x - x2) % P == 0, "not a point"
    return P - x if x & 1 != odd and x else x


def decode(raw: bytes) -> Point:
    n = int.from_bytes(raw, "little")
    y = (n & ((1 << 255) - 1)) % P
    return _x_of(y, n >> 255), y


def encode(pt: Point) -> bytes:
    x, y = pt
    return (y | (x & 1) << 255).to_bytes(32, "little")


def add(a: Point, b: Point) -> Point:
    (x1, y1), (x2, y2) = a, b
    t = D * x1 * x2 * y1 * y2 % P
    return (x1 * y2 + x2 * y1) * pow(1 + t, -1, P) % P, (y1 * y2 + x1 * x2) * pow(1 - t, -1, P) % P


def mul(k: int, pt: Point) -> Point:
    out = IDENTITY
    while k:
        if k & 1:
            out = add(out, pt)
        pt, k = add(pt, pt), k >> 1
    return out


BASE = (_x_of(4 * pow(5, -1, P) % P, 0), 4 * pow(5, -1, P) % P)


def scalar_of(seed: bytes) -> int:
    """RFC 8032 §5.1.5: the clamped secret scalar of a seed."""
    h = bytearray(hashlib.sha512(seed).digest()[:32])
    h[0] &= 248
    h[31] = (h[31] & 127) | 64
    return int.from_bytes(h, "little")


def challenge(r: bytes, public: bytes, message: bytes) -> int:
    return int.from_bytes(hashlib.sha512(r + public + message).digest(), "little") % L


def signature(r: bytes, s: int) -> bytes:
    return r + s.to_bytes(32, "little")


CANONICAL_SMALL_ORDER = [raw for raw in sorted(SMALL_ORDER_ENCODINGS) if encode(decode(raw)) == raw]


# --- The small-order encodings ------------------------------------------------------------


def test_small_order_encodings_are_exactly_the_torsion_points() -> None:
    """14 encodings (7 values of y, each sign bit); the 8 canonical ones are the 8 distinct
    points of order dividing 8; the key layer refuses every one of them."""
    assert len(SMALL_ORDER_ENCODINGS) == 14
    assert len(CANONICAL_SMALL_ORDER) == 8
    assert len({decode(raw) for raw in CANONICAL_SMALL_ORDER}) == 8
    for raw in CANONICAL_SMALL_ORDER:
        assert mul(8, decode(raw)) == IDENTITY
    for raw in SMALL_ORDER_ENCODINGS:
        with pytest.raises(ecpa.EcpaError) as info:
            check_public_key(raw)
        assert info.value.code == ErrorCode.INVALID_KEY


@needs_shared
def test_small_order_encodings_match_the_shared_list() -> None:
    doc = load_json(CONFORMANCE / "wycheproof" / "ed25519-small-order-keys.json")
    assert {bytes.fromhex(k["public_key_hex"]) for k in doc["keys"]} == SMALL_ORDER_ENCODINGS


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("raw", sorted(SMALL_ORDER_ENCODINGS), ids=lambda r: r.hex()[:8])
def test_small_order_keys_refused_at_load_with_either_backend(
    raw: bytes, name: BackendName
) -> None:
    entry = {
        "issuer": "urn:ecpa:issuer:x",
        "kid": "weak",
        "public_key_b64": b64u_encode(raw),
        "subjects": ["host-runtime"],
        "enabled": True,
        "not_before": 0,
        "not_after": 10,
    }
    doc = {"schema": "ecpa-trust-store/0.1", "keys": [entry]}
    with backend(name):
        assert outcome(lambda: VerifyKey.from_bytes(raw)) == ErrorCode.INVALID_KEY.value
        assert outcome(lambda: ecpa.TrustStore.from_dict(doc)) == ErrorCode.TRUST_STORE_CONFIG.value


# --- Signatures with a small-order R: valid by RFC 8032, refused by raw libsodium ---------

SCALAR_1 = scalar_of(SEED_1)
KEY_1 = SigningKey.from_seed(SEED_1)
IDENTITY_R = encode(IDENTITY)


def test_identity_r_signature_is_accepted_by_both_backends() -> None:
    """With R the identity and S = k*a mod L, [S]B = R + [k]A holds: a valid signature by
    RFC 8032 (only the key holder can make it). OpenSSL accepts it, and so must the libsodium
    backend, which routes such an R to OpenSSL; raw libsodium refuses it."""
    from nacl.bindings import crypto_sign_open
    from nacl.exceptions import BadSignatureError

    public = KEY_1.public_key.raw
    for message in (b"", b"crafted", bytes(range(256))):
        sig = signature(IDENTITY_R, challenge(IDENTITY_R, public, message) * SCALAR_1 % L)
        assert both(KEY_1.public_key, sig, message) == ("OK", "OK")
        with pytest.raises(BadSignatureError):
            crypto_sign_open(sig + message, public)


def _mixed_order_key(torsion: bytes) -> VerifyKey:
    """a*B + T: a key of large order (the key layer accepts it) with a torsion component."""
    return VerifyKey.from_bytes(encode(add(mul(SCALAR_1, BASE), decode(torsion))))


MIXED_KEYS = [_mixed_order_key(t) for t in CANONICAL_SMALL_ORDER if t != IDENTITY_R]


@pytest.mark.parametrize("key", MIXED_KEYS, ids=lambda k: k.raw.hex()[:8])
def test_small_order_r_under_mixed_order_keys_agree(key: VerifyKey) -> None:
    """[S]B - [k]A = -[k]T when S = k*a: equal to R for some messages and some small-order R.
    Both backends give the same answer on every one, and accept some (the crafted case is
    really exercised)."""
    results = []
    for i in range(8):
        message = f"message {i}".encode()
        for r in sorted(SMALL_ORDER_ENCODINGS):
            sig = signature(r, challenge(r, key.raw, message) * SCALAR_1 % L)
            results.append(both(key, sig, message))
    assert all(a == b for a, b in results)
    assert ("OK", "OK") in results


@pytest.mark.parametrize("key", MIXED_KEYS, ids=lambda k: k.raw.hex()[:8])
def test_honest_signatures_under_mixed_order_keys_agree(key: VerifyKey) -> None:
    """Cofactorless verification: R = rB, S = r + k*a verifies only when [k]T = 0. Both
    backends are cofactorless: same answers, some accepted and some refused."""
    results = []
    for i in range(32):
        message = f"honest {i}".encode()
        r = challenge(b"nonce", key.raw, message)
        big_r = encode(mul(r, BASE))
        sig = signature(big_r, (r + challenge(big_r, key.raw, message) * SCALAR_1) % L)
        results.append(both(key, sig, message))
    assert all(a == b for a, b in results)
    assert {a for a, _ in results} == {"OK", ErrorCode.INVALID_SIGNATURE.value}


def test_mixed_order_r_is_refused_by_both_backends() -> None:
    """R = rB + T with T of small order, S honest: refused by both (cofactorless)."""
    public = KEY_1.public_key.raw
    for t in CANONICAL_SMALL_ORDER:
        message = b"mixed R " + t
        r = challenge(b"nonce", public, message)
        big_r = encode(add(mul(r, BASE), decode(t)))
        sig = signature(big_r, (r + challenge(big_r, public, message) * SCALAR_1) % L)
        expected = "OK" if t == IDENTITY_R else ErrorCode.INVALID_SIGNATURE.value
        assert both(KEY_1.public_key, sig, message) == (expected, expected)


# --- Wycheproof: every case through both backends -----------------------------------------


def _wycheproof() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    path = CONFORMANCE / "wycheproof" / "ed25519_test.json"
    if not path.is_file():
        return []
    doc = load_json(path)
    return [(group, test) for group in doc["testGroups"] for test in group["tests"]]


WYCHEPROOF = _wycheproof()


@needs_shared
def test_wycheproof_is_all_there() -> None:
    assert len(WYCHEPROOF) == 151


@needs_shared
@pytest.mark.parametrize(
    ("group", "test"), WYCHEPROOF, ids=[f"tc{t['tcId']}" for _, t in WYCHEPROOF]
)
def test_wycheproof_same_result_on_both_backends(
    group: dict[str, Any], test: dict[str, Any]
) -> None:
    key = VerifyKey.from_bytes(bytes.fromhex(group["publicKey"]["pk"]))
    expected = "OK" if test["result"] == "valid" else ErrorCode.INVALID_SIGNATURE.value
    got = both(key, bytes.fromhex(test["sig"]), bytes.fromhex(test["msg"]))
    assert got == (expected, expected), (test["flags"], test["comment"])


# --- Mutations of valid signatures, messages and keys -------------------------------------


def flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8 % len(out)] ^= 1 << (bit % 8)
    return bytes(out)


@settings(max_examples=300, deadline=None)
@given(
    seed=st.binary(min_size=32, max_size=32),
    message=st.binary(max_size=200),
    where=st.sampled_from(["none", "signature", "message", "key"]),
    bit=st.integers(min_value=0, max_value=2**12),
)
def test_backends_agree_on_bit_flips(seed: bytes, message: bytes, where: str, bit: int) -> None:
    key = SigningKey.from_seed(seed)
    sig, public = key.sign(message), key.public_key.raw
    if where == "signature":
        sig = flip(sig, bit)
    elif where == "message":
        message = flip(message, bit) if message else b"\x00"
    elif where == "key":
        public = flip(public, bit)
    loaded = []
    for name in BACKENDS:
        with backend(name):
            loaded.append(outcome(lambda: VerifyKey.from_bytes(public)))
    assert loaded[0] == loaded[1]
    if loaded[0] != "OK":  # a key the key layer refuses never reaches a backend
        assert loaded[0] == ErrorCode.INVALID_KEY.value
        return
    got = both(VerifyKey.from_bytes(public), sig, message)
    assert got[0] == got[1]
    expected = "OK" if where == "none" else ErrorCode.INVALID_SIGNATURE.value
    assert got[0] == expected


@settings(max_examples=200, deadline=None)
@given(
    message=st.binary(max_size=64),
    r=st.one_of(
        st.sampled_from(sorted(SMALL_ORDER_ENCODINGS)),
        st.binary(min_size=32, max_size=32),
        st.none(),  # keep the signature's own R
    ),
    s=st.one_of(
        st.integers(min_value=0, max_value=2**256 - 1),
        st.integers(min_value=1, max_value=15).map(lambda j: -j),  # S + j*L, same residue
        st.none(),  # keep the signature's own S
    ),
    length=st.sampled_from([0, 1, 32, 63, 64, 65, 128]),
)
def test_backends_agree_on_rewritten_signatures(
    message: bytes, r: bytes | None, s: int | None, length: int
) -> None:
    """R replaced (small-order encodings included), S replaced or made non-canonical by adding
    multiples of L, and wrong lengths: the same answer from both backends."""
    sig = KEY_1.sign(message)
    new_r = sig[:32] if r is None else r
    new_s = int.from_bytes(sig[32:], "little")
    if s is not None:
        new_s = s if s >= 0 else new_s + (-s) * L
    if new_s >= 2**256:
        new_s = int.from_bytes(sig[32:], "little")
    full = new_r + new_s.to_bytes(32, "little")
    forged = full if length == 64 else (full + bytes(64))[:length]
    a, b = both(KEY_1.public_key, forged, message)
    assert a == b
    if forged != sig:
        assert a == ErrorCode.INVALID_SIGNATURE.value


# --- Signing: byte-identical on both backends ---------------------------------------------


@settings(max_examples=200, deadline=None)
@given(seed=st.binary(min_size=32, max_size=32), message=st.binary(max_size=2048))
def test_signatures_are_byte_identical(seed: bytes, message: bytes) -> None:
    key = SigningKey.from_seed(seed)
    signatures = []
    for name in BACKENDS:
        with backend(name):
            signatures.append(key.sign(message))
    assert signatures[0] == signatures[1]
    assert len(signatures[0]) == 64
    assert both(key.public_key, signatures[0], message) == ("OK", "OK")


def test_keys_from_every_form_sign_identically() -> None:
    keys = [
        KEY_1,
        SigningKey.from_pem(KEY_1.to_pem()),
        SigningKey.from_jwk({**KEY_1.public_key.to_jwk(), "d": b64u_encode(SEED_1)}),
        SigningKey.generate(),
    ]
    for key in keys:
        with backend("openssl"):
            reference = key.sign(b"signing input")
        assert key.sign(b"signing input") == reference


# --- Corpora: every case with either backend, the corpus re-signed byte for byte ---------

CORPUS = ROOT / "corpus" / "ecpa-0.1"


@pytest.mark.parametrize("name", BACKENDS)
def test_project_corpus_with_either_backend(name: BackendName) -> None:
    with backend(name):
        for file in CORPUS_FILES:
            results = run_any(json.loads((CORPUS / file).read_text(encoding="utf-8")))
            assert results
            assert [(r.id, r.expected, r.got) for r in results if not r.passed] == []
        generated = generate()
    for file in CORPUS_FILES:
        assert generated[file] == (CORPUS / file).read_text(encoding="utf-8")


@needs_shared
@pytest.mark.parametrize("name", BACKENDS)
def test_published_corpus_with_either_backend(name: BackendName) -> None:
    doc = load_json(CONFORMANCE / "upstream-ecpa-0.1" / "attestation-vectors.json")
    with backend(name):
        results = run_any(doc)
    assert len(results) == 56
    assert [(r.id, r.expected, r.got) for r in results if not r.passed] == []


# --- libsodium called directly (cffi) and through PyNaCl's public wrappers ---------------


@settings(max_examples=200, deadline=None)
@given(
    message=st.binary(max_size=300),
    flip=st.integers(min_value=-1, max_value=8 * 64 - 1),
    cut=st.integers(min_value=0, max_value=70),
)
def test_direct_libsodium_calls_equal_the_public_wrappers(
    message: bytes, flip: int, cut: int
) -> None:
    """The backend calls libsodium's crypto_sign/crypto_sign_open through PyNaCl's cffi
    module (no buffers copied in and out); the public wrappers of nacl.bindings give the
    same signatures and the same verdicts: valid, a bit flipped in the signature, cut short."""
    direct = _ed25519._load_sodium()
    wrapped = _ed25519._wrapped_sodium(direct.seed_keypair) if direct else None
    if direct is None or wrapped is None:
        pytest.skip("PyNaCl is not importable")
    public, secret = direct.seed_keypair(SEED_1)
    sig = direct.sign(message, secret)
    assert sig == wrapped.sign(message, secret) == KEY_1.sign(message)
    assert len(sig) == 64
    if flip >= 0:
        changed = bytearray(sig)
        changed[flip // 8] ^= 1 << (flip % 8)
        sig = bytes(changed)
    signed = (sig + message)[: 64 + len(message) - cut] if cut else sig + message
    assert direct.verify(signed, public) is wrapped.verify(signed, public)
    if flip < 0 and not cut:
        assert direct.verify(signed, public) is True
