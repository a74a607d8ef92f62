"""Ed25519 sign and verify backends: libsodium (PyNaCl) when importable, else OpenSSL.

``cryptography`` (OpenSSL) stays the reference: it parses every key format and is the
fallback backend. libsodium is about twice as fast at verifying and a third faster at signing,
and it gives the same answer as OpenSSL on every input the key layer lets through (a public
key already checked by ``keys.check_public_key``: canonical, of large order, 64-byte
signatures only), with one exception, handled below.

libsodium refuses every signature whose ``R`` is one of the 14 encodings of a small-order
point (its ``ge25519_has_small_order`` blocklist, sign bit ignored). RFC 8032 §5.1.7 and
OpenSSL do not: with a large-order key, ``R`` the identity and ``S = k*a mod L`` is a valid
signature, one only the holder of the private scalar ``a`` can make. Refusing it would make
the backends disagree, so a signature with such an ``R`` is verified by OpenSSL instead: one
lookup in a set of 14 byte strings, and the RFC 8032 result on every input.

Both backends sign by RFC 8032 (deterministic, no random nonce): the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

__all__ = [
    "SMALL_ORDER_ENCODINGS",
    "BackendName",
    "backend",
    "set_backend",
    "sign",
    "sodium_secret",
    "verify",
]

BackendName = Literal["libsodium", "openssl"]

_P = 2**255 - 19
# y of two of the four points of order 8, (x, y) and (-x, y); the other two have -y.
_Y_ORDER_8 = 0x05FC536D880238B13933C6D305ACDFD5F098EFF289F4C345B027B2C28F95E826


def _small_order_encodings() -> frozenset[bytes]:
    # The 8 small-order points have y in {0, 1, -1, +-y8}; y = 0 and y = 1 also have the
    # non-canonical encodings p and p + 1 (below 2**255). Each y with either sign bit: 14.
    ys = (0, 1, _P - 1, _Y_ORDER_8, _P - _Y_ORDER_8, _P, _P + 1)
    return frozenset((y | sign << 255).to_bytes(32, "little") for y in ys for sign in (0, 1))


#: The encodings libsodium's verifier refuses as ``R`` (and as a public key) outright.
SMALL_ORDER_ENCODINGS = _small_order_encodings()


@dataclass(frozen=True)
class _Sodium:
    """libsodium's two calls, as used here, and its key derivation."""

    verify: Callable[[bytes, bytes], bool]  # (signature + message, pk) -> valid?
    sign: Callable[[bytes, bytes], bytes]  # (message, sk64) -> 64-byte signature
    seed_keypair: Callable[[bytes], tuple[bytes, bytes]]  # seed -> (pk, sk64)


def _load_sodium() -> _Sodium | None:
    try:
        from nacl.bindings import crypto_sign_seed_keypair
    except ImportError:  # PyNaCl is a dependency; without it, OpenSSL does everything
        return None
    try:
        # libsodium's own functions through PyNaCl's cffi module: its public wrappers copy
        # the message into and out of buffers they allocate on every call (see
        # docs/performance.md, "Instructions"). ``crypto_sign_open`` takes NULL for the
        # message it would hand back, and ``crypto_sign`` writes the signature first.
        from nacl._sodium import ffi, lib  # type: ignore[import-not-found]  # (compiled)
    except ImportError:  # pragma: no cover - a PyNaCl without its cffi module
        return _wrapped_sodium(crypto_sign_seed_keypair)
    null, sign_open, sign, new = ffi.NULL, lib.crypto_sign_open, lib.crypto_sign, ffi.new
    buffer, signed_message = ffi.buffer, ffi.typeof("unsigned char[]")

    def verify(signed: bytes, public: bytes) -> bool:
        status: int = sign_open(null, null, signed, len(signed), public)
        return status == 0

    def sign_detached(message: bytes, secret: bytes) -> bytes:
        out = new(signed_message, len(message) + 64)
        if sign(out, null, message, len(message), secret) != 0:  # pragma: no cover
            raise RuntimeError("libsodium failed to sign")
        signature: bytes = buffer(out, 64)[:]
        return signature

    return _Sodium(verify, sign_detached, crypto_sign_seed_keypair)


def _wrapped_sodium(seed_keypair: Callable[[bytes], tuple[bytes, bytes]]) -> _Sodium:
    """The same two calls through PyNaCl's public wrappers (slower, same results)."""
    from nacl.bindings import crypto_sign, crypto_sign_open
    from nacl.exceptions import BadSignatureError

    def verify(signed: bytes, public: bytes) -> bool:
        try:
            crypto_sign_open(signed, public)
        except BadSignatureError:
            return False
        return True

    def sign_detached(message: bytes, secret: bytes) -> bytes:
        return crypto_sign(message, secret)[:64]

    return _Sodium(verify, sign_detached, seed_keypair)


_SODIUM = _load_sodium()
_active: _Sodium | None = _SODIUM


def backend() -> BackendName:
    """The backend that signs and verifies now."""
    return "libsodium" if _active is not None else "openssl"


def set_backend(name: BackendName) -> BackendName:
    """Select the backend (for tests and benchmarks); returns the previous one.

    Raises:
        ValueError: ``name`` is unknown, or ``"libsodium"`` while PyNaCl is not importable.
    """
    global _active
    previous = backend()
    if name == "openssl":
        _active = None
    elif name == "libsodium" and _SODIUM is not None:
        _active = _SODIUM
    else:
        raise ValueError(f"expected an available backend ('libsodium', 'openssl'), found {name!r}")
    return previous


def sodium_secret(key: Ed25519PrivateKey) -> bytes | None:
    """libsodium's 64-byte secret key (seed then public key) for ``key``; None without PyNaCl.

    Built once per signing key: libsodium hashes the public half stored here into every
    signature, so it is derived from the seed, never taken from elsewhere.
    """
    if _SODIUM is None:
        return None
    public, secret = _SODIUM.seed_keypair(key.private_bytes_raw())
    if public != key.public_key().public_bytes_raw():  # pragma: no cover - a broken library
        raise RuntimeError("libsodium and OpenSSL derive different Ed25519 public keys")
    return secret


def verify(
    public_raw: bytes, public_key: Ed25519PublicKey, signature: bytes, message: bytes
) -> bool:
    """Whether ``signature`` (64 bytes) verifies ``message`` under the checked public key
    (its raw bytes and its OpenSSL object). Never raises for a bad signature."""
    sodium = _active
    if sodium is not None and bytes(signature[:32]) not in SMALL_ORDER_ENCODINGS:
        return sodium.verify(b"".join((signature, message)), public_raw)
    try:
        public_key.verify(signature, message)
    except InvalidSignature:
        return False
    return True


def sign(secret: bytes | None, key: Ed25519PrivateKey, message: bytes) -> bytes:
    """The 64-byte RFC 8032 signature of ``message``; ``secret`` from :func:`sodium_secret`."""
    sodium = _active
    if sodium is not None and secret is not None:
        return sodium.sign(bytes(message), secret)
    return key.sign(message)
