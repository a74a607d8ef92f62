"""Keys that are not files: an Ed25519 key held by a token (an HSM, a smart card, SoftHSM)
over PKCS#11, named by an RFC 7512 URI (``pkcs11:token=...;object=...``), for ``ecpa sign
--key``, ``ecpa audit --sign``, ``ecpa trust add --key`` and ``ecpa run --manager-key``
(docs/pkcs11.md, ADR 0006); and where the secrets that unlock a key come from (a key
file's passphrase, a token's PIN: files, standard input, the environment, never argv).

:func:`load_signer` and :func:`load_public` take what a user typed after ``--key``: a URI or
a key file. python-pkcs11 (the ``hsm`` extra) is imported only when a URI is opened.

May import: :mod:`ecpa.profile`, :mod:`ecpa.errors`, :mod:`ecpa._files`; never runtime,
observer, launcher, corpus or cli.
"""

from __future__ import annotations

from ecpa.hsm.load import load_public, load_signer
from ecpa.hsm.module import MODULE_ENV
from ecpa.hsm.token import Pkcs11Key, open_pkcs11_key
from ecpa.hsm.unlock import PIN_ENV, key_password, pkcs11_pin
from ecpa.hsm.uri import Pkcs11Uri, is_pkcs11_uri, parse_pkcs11_uri

__all__ = [
    "MODULE_ENV",
    "PIN_ENV",
    "Pkcs11Key",
    "Pkcs11Uri",
    "is_pkcs11_uri",
    "key_password",
    "load_public",
    "load_signer",
    "open_pkcs11_key",
    "parse_pkcs11_uri",
    "pkcs11_pin",
]
