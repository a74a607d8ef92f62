"""A throw-away SoftHSM token for the PKCS#11 tests: its own SOFTHSM2_CONF and token
directory under the session's temporary directory (the system's token directory is never
touched), holding the Ed25519 keys the tests name by label.

SoftHSM reads SOFTHSM2_CONF once, when the module is initialized, and python-pkcs11 keeps a
module initialized for the life of the process: so the token is made once per test process
(session scope), its configuration set for that session only. Skipped, saying why, where
SoftHSM or python-pkcs11 is missing (``sh scripts/softhsm-up`` installs SoftHSM).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import ecpa
from tests.support import write_secret

MODULE = "/usr/lib/softhsm/libsofthsm2.so"  # Debian's softhsm2
LABEL = "ecpa-test"
PIN = "ecpa-test-pin-7391"  # TEST ONLY; distinctive, so a test can say it is in no message
WRONG_PIN = "wrong-pin-5550"
#: Seeds of the keys put on the token whole (C_CreateObject with CKA_VALUE), TEST ONLY.
IMPORTED = ecpa.SigningKey.from_seed(b"i" * 32)
OTHER = ecpa.SigningKey.from_seed(b"o" * 32)
RAW = ecpa.SigningKey.from_seed(b"r" * 32)
SMALL_ORDER_POINT = b"\x01" + bytes(31)  # the identity point
ED25519_OID = bytes.fromhex("06032b6570")  # DER of 1.3.101.112, id-Ed25519
ED25519_NAME = bytes.fromhex("130c") + b"edwards25519"  # DER PrintableString


@dataclass(frozen=True)
class Token:
    """The test token: where its module and PIN file are, and URIs naming its keys."""

    directory: Path
    pin_file: Path
    public: dict[str, ecpa.VerifyKey]  # label -> the public key the token holds for it

    def uri(self, label: str = "manager", *, pin: bool = True, module: str = MODULE) -> str:
        """``pkcs11:token=ecpa-test;object=LABEL?module-path=...[&pin-source=...]``."""
        query = f"module-path={module}" + (f"&pin-source={self.pin_file}" if pin else "")
        return f"pkcs11:token={LABEL};object={label}?{query}"


def _objects(session: Any, pkcs11: Any) -> dict[str, ecpa.VerifyKey]:
    """The keys the tests use, by label: two generated (the two EC_PARAMS forms RFC 8410 and
    PKCS#11 3.0 allow), two that share a label, one whose seed is known, one whose public
    object is another key's, one whose public key is of small order, one whose CKA_EC_POINT
    is the 32 bytes alone."""
    attribute, kind = pkcs11.Attribute, pkcs11.KeyType.EC_EDWARDS
    public: dict[str, ecpa.VerifyKey] = {}
    for label, params, key_id in (
        ("manager", ED25519_NAME, b"\x01"),
        ("oid", ED25519_OID, b"\x02"),
        ("twin", ED25519_OID, b"\x03"),
        ("twin", ED25519_OID, b"\x04"),
    ):
        pub, _ = session.generate_keypair(
            kind,
            mechanism=pkcs11.Mechanism.EC_EDWARDS_KEY_PAIR_GEN,
            store=True,
            label=label,
            id=key_id,
            public_template={attribute.EC_PARAMS: params},
        )
        public[label] = ecpa.VerifyKey.from_bytes(pub[attribute.EC_POINT][2:])

    def put(label: str, key_id: bytes, private: ecpa.SigningKey, point: bytes) -> None:
        common = {attribute.KEY_TYPE: kind, attribute.TOKEN: True, attribute.LABEL: label}
        common |= {attribute.ID: key_id, attribute.EC_PARAMS: ED25519_OID}
        session.create_object(
            common
            | {attribute.CLASS: pkcs11.ObjectClass.PRIVATE_KEY, attribute.SIGN: True}
            | {attribute.PRIVATE: True, attribute.SENSITIVE: True}
            | {attribute.VALUE: private._key.private_bytes_raw()}  # the seed, RFC 8032
        )
        session.create_object(
            common
            | {attribute.CLASS: pkcs11.ObjectClass.PUBLIC_KEY, attribute.VERIFY: True}
            | {attribute.EC_POINT: point}
        )

    put("imported", b"\x05", IMPORTED, b"\x04\x20" + IMPORTED.public_key.raw)
    put("mismatch", b"\x06", IMPORTED, b"\x04\x20" + OTHER.public_key.raw)
    put("small-order", b"\x07", IMPORTED, b"\x04\x20" + SMALL_ORDER_POINT)
    put("raw-point", b"\x08", RAW, RAW.public_key.raw)
    public |= {"imported": IMPORTED.public_key, "raw-point": RAW.public_key}
    return public


@pytest.fixture(scope="session")
def softhsm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Token]:
    """The test token, made once per test process."""
    util = shutil.which("softhsm2-util")
    if util is None or not os.path.isfile(MODULE):
        pytest.skip(
            "SoftHSM is not installed (softhsm2-util and /usr/lib/softhsm/libsofthsm2.so); "
            "sh scripts/softhsm-up installs Debian's softhsm2"
        )
    pkcs11 = pytest.importorskip(
        "pkcs11", reason="python-pkcs11 is not installed: pip install -e '.[dev]'"
    )
    directory = tmp_path_factory.mktemp("softhsm")
    (directory / "tokens").mkdir(mode=0o700)
    conf = directory / "softhsm2.conf"
    conf.write_text(
        f"directories.tokendir = {directory / 'tokens'}\nobjectstore.backend = file\n"
        "log.level = ERROR\nslots.removable = false\n"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SOFTHSM2_CONF", str(conf))
        init = [util, "--init-token", "--free", "--label", LABEL, "--pin", PIN]
        subprocess.run([*init, "--so-pin", "so-" + PIN], check=True, capture_output=True)
        # ecpa loads a module by its real path: one name, one initialization per process.
        token = pkcs11.lib(os.path.realpath(MODULE)).get_token(token_label=LABEL)
        with token.open(rw=True, user_pin=PIN) as session:
            public = _objects(session, pkcs11)
        pin_file = write_secret(directory / "pin", PIN + "\n")
        yield Token(directory, pin_file, public)


@pytest.fixture
def token(softhsm: Token, monkeypatch: pytest.MonkeyPatch) -> Token:
    """The test token, with no module or PIN from the environment unless a test sets one."""
    for name in ("ECPA_PKCS11_PIN", "ECPA_PKCS11_MODULE", "ECPA_KEY_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    return softhsm
