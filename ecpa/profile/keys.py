"""Ed25519 keys: seed, PEM, JWK and raw forms; refusal of weak public keys (PROFILE §5).

A public key is accepted only when it is the canonical encoding of a curve point of large
order. OpenSSL accepts small-order keys, and with them signatures forged without any private
key (see ``ed25519-small-order-keys.json`` in the conformance data), so the check is ours.

The small-order test needs no point arithmetic. The eight points of order dividing 8 have
``y`` in ``{1, -1, 0}`` (orders 1, 2, 4) or satisfy ``d*y**4 + 2*y**2 - 1 == 0`` (order 8):
doubling a point on ``-x**2 + y**2 = 1 + d*x**2*y**2`` gives
``y' = (y**2 + x**2) / (2 + x**2 - y**2)``, which is 0 (an order-4 point) exactly when
``x**2 == -y**2``; put into the curve equation, that leaves ``2*y**2 = 1 - d*y**4``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from ecpa._files import read_bounded, read_private
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile import _ed25519
from ecpa.profile.b64 import b64u_decode, b64u_encode

__all__ = ["Ed25519Signer", "SigningKey", "VerifyKey", "is_encrypted_pem", "load_public_key"]

_P = 2**255 - 19
_D = (-121665 * pow(121666, -1, _P)) % _P
_SIGNATURE_LEN = 64
_KEY_LEN = 32
#: A PEM or JWK private key file is a few hundred bytes; anything past this is not a key.
MAX_KEY_FILE_BYTES = 64 * 1024


def _bad(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.INVALID_KEY, detail)


#: Keys that passed :func:`check_public_key`, so that a key read again (every status reads
#: each key of a launch, every certificate names one) is checked once per process (about
#: 0.12 ms of big-integer arithmetic each); emptied when full.
_PASSED: dict[bytes, None] = {}
_MAX_PASSED = 1 << 16


def check_public_key(raw: bytes) -> None:
    """Refuse anything but the canonical encoding of a large-order Ed25519 point.

    Raises:
        EcpaError: ``ECPA_INVALID_KEY`` naming the defect.
    """
    if len(raw) != _KEY_LEN:
        raise _bad(f"expected a 32-byte Ed25519 public key, found {len(raw)} bytes")
    raw = bytes(raw)
    if raw in _PASSED:
        return
    encoded = int.from_bytes(raw, "little")
    y = encoded & ((1 << 255) - 1)
    x_odd = encoded >> 255
    if y >= _P:
        raise _bad("expected a canonical point encoding, found y >= 2**255 - 19")
    y2 = y * y % _P
    x2 = (y2 - 1) * pow(_D * y2 + 1, -1, _P) % _P
    if x2 != 0 and pow(x2, (_P - 1) // 2, _P) != 1:
        raise _bad("expected a point on Ed25519, found an encoding with no x coordinate")
    if x2 == 0 and x_odd:
        raise _bad("expected a canonical point encoding, found x = 0 with the sign bit set")
    if y in (0, 1, _P - 1) or (_D * pow(y, 4, _P) + 2 * y2 - 1) % _P == 0:
        raise _bad(
            "expected a public key of large order, found a small-order point "
            "(it accepts forged signatures)"
        )
    if len(_PASSED) >= _MAX_PASSED:
        _PASSED.clear()
    _PASSED[raw] = None


class VerifyKey:
    """A checked Ed25519 public key. Construct with one of the ``from_*`` class methods."""

    __slots__ = ("_key", "raw")

    raw: bytes
    _key: Ed25519PublicKey

    def __init__(self, raw: bytes) -> None:
        """Wrap 32 raw bytes; prefer :meth:`from_bytes`.

        Raises:
            EcpaError: ``ECPA_INVALID_KEY`` for a malformed or small-order key.
        """
        raw = bytes(raw)
        check_public_key(raw)
        self.raw = raw
        self._key = Ed25519PublicKey.from_public_bytes(raw)

    @classmethod
    def from_bytes(cls, raw: bytes) -> VerifyKey:
        """From the 32-byte RFC 8032 encoding. Raises ``EcpaError`` (``ECPA_INVALID_KEY``)."""
        return cls(raw)

    @classmethod
    def from_b64(cls, text: str) -> VerifyKey:
        """From strict unpadded base64url of the 32 raw bytes (the trust store's form)."""
        if not isinstance(text, str):
            raise _bad(f"expected base64url text, found {type(text).__name__}")
        return cls(b64u_decode(text, what="public key", code=ErrorCode.INVALID_KEY))

    @classmethod
    def from_jwk(cls, jwk: dict[str, Any]) -> VerifyKey:
        """From an RFC 8037 OKP JWK (``kty`` ``OKP``, ``crv`` ``Ed25519``, ``x``).

        A JWK holding the private member ``d`` is refused: private keys never belong where
        public keys are expected.
        """
        if not isinstance(jwk, dict):
            raise _bad(f"expected a JWK object, found {type(jwk).__name__}")
        if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            raise _bad(
                "expected a JWK with kty 'OKP' and crv 'Ed25519', "
                f"found kty {jwk.get('kty')!r} and crv {jwk.get('crv')!r}"
            )
        if "d" in jwk:
            raise _bad("expected a public JWK, found private member 'd'")
        if jwk.get("alg", "EdDSA") not in ("EdDSA", "Ed25519"):
            raise _bad(f"expected JWK alg 'EdDSA' or 'Ed25519', found {jwk.get('alg')!r}")
        if jwk.get("use", "sig") != "sig":
            raise _bad(f"expected JWK use 'sig', found {jwk.get('use')!r}")
        x = jwk.get("x")
        if not isinstance(x, str):
            raise _bad(f"expected JWK member 'x' as base64url text, found {x!r}")
        return cls(b64u_decode(x, what="JWK x", code=ErrorCode.INVALID_KEY))

    @classmethod
    def from_pem(cls, data: bytes | str) -> VerifyKey:
        """From a PEM ``PUBLIC KEY`` (SubjectPublicKeyInfo) holding an Ed25519 key."""
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives import serialization  # PEM only: not on verify's path

        if isinstance(data, str):
            data = data.encode("utf-8")
        try:
            key = serialization.load_pem_public_key(data)
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            raise _bad(
                f"expected a PEM SubjectPublicKeyInfo, found unreadable data ({exc})"
            ) from None
        if not isinstance(key, Ed25519PublicKey):
            raise _bad(f"expected an Ed25519 public key, found {type(key).__name__}")
        return cls(key.public_bytes_raw())

    def to_b64(self) -> str:
        """The trust store's form: unpadded base64url of the 32 raw bytes."""
        return b64u_encode(self.raw)

    def to_jwk(self) -> dict[str, str]:
        """The RFC 8037 public JWK."""
        return {"kty": "OKP", "crv": "Ed25519", "x": self.to_b64()}

    def to_pem(self) -> bytes:
        """PEM SubjectPublicKeyInfo."""
        from cryptography.hazmat.primitives import serialization  # PEM only: not on verify's path

        return self._key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def verify(self, signature: bytes, message: bytes) -> None:
        """Check an Ed25519 signature (RFC 8032, cofactorless, canonical ``S``), with
        libsodium when PyNaCl is importable, else OpenSSL: the same result (``_ed25519``).

        Raises:
            EcpaError: ``ATTESTATION_INVALID_SIGNATURE`` when it does not verify, a wrong
                length included.
        """
        if len(signature) != _SIGNATURE_LEN:
            raise EcpaError(
                ErrorCode.INVALID_SIGNATURE,
                f"expected a {_SIGNATURE_LEN}-byte Ed25519 signature, found {len(signature)} bytes",
            )
        if not _ed25519.verify(self.raw, self._key, signature, message):
            raise EcpaError(
                ErrorCode.INVALID_SIGNATURE,
                "expected a signature by the trusted key over the signing input, found one that "
                "does not verify",
            )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VerifyKey) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash(self.raw)

    def __repr__(self) -> str:
        return f"VerifyKey({self.to_b64()!r})"


class Ed25519Signer(Protocol):
    """What signs a statement: a :class:`SigningKey` in memory, or a key held elsewhere (a
    token over PKCS#11, :mod:`ecpa.hsm`) that signs with Ed25519 (RFC 8032) on request."""

    @property
    def public_key(self) -> VerifyKey:
        """The public half: what a trust store lists."""
        ...

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message``."""
        ...


class SigningKey:
    """An Ed25519 private key. Never printed; ``repr`` shows only the public half."""

    __slots__ = ("_key", "_secret", "public_key")

    _key: Ed25519PrivateKey
    _secret: bytes | None  # libsodium's 64-byte secret key, built once; None without PyNaCl
    public_key: VerifyKey

    def __init__(self, key: Ed25519PrivateKey) -> None:
        """Wrap a ``cryptography`` key; prefer :meth:`from_seed`, :meth:`load`, :meth:`generate`."""
        self._key = key
        self.public_key = VerifyKey(key.public_key().public_bytes_raw())
        self._secret = _ed25519.sodium_secret(key)

    @classmethod
    def from_seed(cls, seed: bytes) -> SigningKey:
        """From the 32-byte RFC 8032 private key (seed).

        Raises:
            EcpaError: ``ECPA_INVALID_KEY`` when ``seed`` is not 32 bytes.
        """
        if not isinstance(seed, (bytes, bytearray)) or len(seed) != _KEY_LEN:
            found = f"{len(seed)} bytes" if isinstance(seed, (bytes, bytearray)) else type(seed)
            raise _bad(f"expected a 32-byte Ed25519 seed, found {found}")
        return cls(Ed25519PrivateKey.from_private_bytes(bytes(seed)))

    @classmethod
    def generate(cls) -> SigningKey:
        """A fresh key from the operating system's random source."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_pem(
        cls,
        data: bytes | str,
        password: bytes | None = None,
        *,
        hint: str = "",
    ) -> SigningKey:
        """From a PEM ``PRIVATE KEY`` (PKCS#8) holding an Ed25519 key, or an ``ENCRYPTED
        PRIVATE KEY`` (PKCS#8 with a passphrase, as ``openssl genpkey -aes-256-cbc`` or
        :meth:`to_pem` with a password write it) decrypted with ``password``. A password
        given for a key that is not encrypted is not needed and not used.
        ``hint`` is added to a refusal (where the passphrase comes from).

        Raises:
            EcpaError: ``ECPA_INVALID_KEY`` for unreadable PEM, another key type, an
                encrypted key without a password or with a wrong one.
        """
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives import serialization  # PEM only: not on verify's path

        if isinstance(data, str):
            data = data.encode("utf-8")
        encrypted = is_encrypted_pem(data)
        if encrypted and not password:
            raise _bad(f"expected a passphrase for this encrypted private key{hint}, found none")
        try:
            key = serialization.load_pem_private_key(data, password=password if encrypted else None)
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            if encrypted:
                raise _bad(
                    f"expected the passphrase of this encrypted private key{hint}, "
                    "found one that does not decrypt it"
                ) from None
            raise _bad(
                f"expected a PEM PKCS#8 private key, found unreadable data ({exc})"
            ) from None
        if not isinstance(key, Ed25519PrivateKey):
            raise _bad(f"expected an Ed25519 private key, found {type(key).__name__}")
        return cls(key)

    @classmethod
    def load(
        cls,
        path: str | Path,
        password: bytes | None = None,
        *,
        hint: str = "",
    ) -> SigningKey:
        """Read a PEM PKCS#8 private key file, encrypted or not (:meth:`from_pem`), or a
        JWK with ``d`` if it ends in ``.jwk``. The file must be private: this user's, mode
        0600 (group or others may not read it; :func:`ecpa._files.private_enough`).

        Raises:
            EcpaError: ``ECPA_INVALID_KEY`` when the file cannot be read or parsed, or may be
                read by others, naming it.
        """
        path = Path(path)
        data = read_private(path, MAX_KEY_FILE_BYTES, ErrorCode.INVALID_KEY, "key file")
        if path.suffix == ".jwk":
            return cls.from_jwk(_load_jwk(data, path))
        try:
            return cls.from_pem(data, password, hint=hint)
        except EcpaError as exc:
            raise _bad(f"{path}: {exc.detail}") from None

    @classmethod
    def from_jwk(cls, jwk: dict[str, Any]) -> SigningKey:
        """From an RFC 8037 private OKP JWK (``d`` and ``x``); ``x`` must match ``d``."""
        public = VerifyKey.from_jwk({k: v for k, v in jwk.items() if k != "d"})
        d = jwk.get("d")
        if not isinstance(d, str):
            raise _bad(f"expected JWK member 'd' as base64url text, found {d!r}")
        key = cls.from_seed(b64u_decode(d, what="JWK d", code=ErrorCode.INVALID_KEY))
        if key.public_key != public:
            raise _bad("expected JWK 'x' to be the public half of 'd', found another key")
        return key

    def to_pem(self, password: bytes | None = None) -> bytes:
        """PEM PKCS#8: unencrypted, or with ``password`` an ``ENCRYPTED PRIVATE KEY``
        (PBES2, as OpenSSL reads it). Write it with mode 0600 either way.

        Raises:
            EcpaError: ``ECPA_INVALID_KEY`` for an empty password (never a silently
                unencrypted key).
        """
        if password is not None and not password:
            raise _bad("expected a non-empty passphrase to encrypt the key, found an empty one")
        from cryptography.hazmat.primitives import serialization  # PEM only: not on verify's path

        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password)
            if password
            else serialization.NoEncryption()
        )
        return self._key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message`` (deterministic, RFC 8032; the same
        bytes from libsodium and from OpenSSL)."""
        return _ed25519.sign(self._secret, self._key, message)

    def __repr__(self) -> str:
        return f"SigningKey(public={self.public_key.to_b64()!r})"


def is_encrypted_pem(data: bytes) -> bool:
    """Whether ``data`` is a PEM ``ENCRYPTED PRIVATE KEY`` (PKCS#8 with a passphrase)."""
    return b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in data  # text may precede it (a PKCS#12 bag)


def load_public_key(
    path: str | Path, password: bytes | None = None, *, hint: str = ""
) -> VerifyKey:
    """The public key in a file: a PEM public key, a JWK (its ``d`` ignored), or the
    public half of a PEM private key (encrypted ones decrypted with ``password``; ``hint``
    as for :meth:`SigningKey.from_pem`).

    Raises:
        EcpaError: ``ECPA_INVALID_KEY`` when the file holds no usable Ed25519 key.
    """
    path = Path(path)
    data = read_bounded(path, MAX_KEY_FILE_BYTES, ErrorCode.INVALID_KEY, follow=True)
    if b"PRIVATE KEY" in data:
        return SigningKey.from_pem(data, password, hint=hint).public_key
    if data.lstrip().startswith(b"{"):
        jwk = _load_jwk(data, path)
        return VerifyKey.from_jwk({k: v for k, v in jwk.items() if k != "d"})
    return VerifyKey.from_pem(data)


def _load_jwk(data: bytes, path: Path) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise _bad(f"expected a JWK JSON object in {path}, found unreadable JSON") from None
    if not isinstance(value, dict):
        raise _bad(f"expected a JWK JSON object in {path}, found {type(value).__name__}")
    return value
