"""A key named on the command line: a key file, or a ``pkcs11:`` URI naming one on a token."""

from __future__ import annotations

import os
from pathlib import Path

from ecpa.hsm.token import open_pkcs11_key
from ecpa.hsm.unlock import key_password
from ecpa.hsm.uri import is_pkcs11_uri
from ecpa.profile.keys import Ed25519Signer, SigningKey, VerifyKey, load_public_key

__all__ = ["load_public", "load_signer"]


def load_signer(spec: str | Path, password_file: Path | None, *, hint: str = "") -> Ed25519Signer:
    """The signing key ``spec`` names: a ``pkcs11:`` URI (:func:`~ecpa.hsm.open_pkcs11_key`,
    its PIN from the URI's pin-source, else ``password_file``, else ``$ECPA_PKCS11_PIN``),
    else a key file (:meth:`SigningKey.load`, an encrypted one's passphrase from
    ``password_file``, else ``$ECPA_KEY_PASSWORD``; ``hint`` says where, in a refusal).
    A token's key is closed when it is collected, or by its ``close()``.

    Raises:
        EcpaError: ``ECPA_INVALID_KEY`` when the key cannot be had (what
            :func:`~ecpa.hsm.open_pkcs11_key` or :meth:`SigningKey.load` refuses);
            ``ECPA_INVALID_INPUT`` for an unusable password file of a key file.
    """
    text = os.fspath(spec)
    if is_pkcs11_uri(text):
        return open_pkcs11_key(text, password_file=password_file)
    return SigningKey.load(text, key_password(password_file), hint=hint)


def load_public(spec: str | Path, password_file: Path | None, *, hint: str = "") -> VerifyKey:
    """The public key ``spec`` names: a ``pkcs11:`` URI (the token's key opened, its probe
    signature checked, then closed: the key a trust store lists is the one that signs),
    else a key file (:func:`~ecpa.profile.keys.load_public_key`).

    Raises:
        EcpaError: ``ECPA_INVALID_KEY`` when no usable Ed25519 key is found, as for
            :func:`load_signer`.
    """
    text = os.fspath(spec)
    if is_pkcs11_uri(text):
        with open_pkcs11_key(text, password_file=password_file) as key:
            return key.public_key
    return load_public_key(text, key_password(password_file), hint=hint)
