"""A key on a SoftHSM token through ecpa.hsm: the signatures are Ed25519's (byte for byte
those of SigningKey for a seed put on the token), the public half is checked, and every way
of getting the token, the key or the PIN wrong is refused with ECPA_INVALID_KEY, naming the
token or the file and never the PIN."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ecpa
from ecpa.errors import EcpaError, ErrorCode
from ecpa.hsm import Pkcs11Key, load_public, load_signer, open_pkcs11_key
from tests.hsm.conftest import IMPORTED, LABEL, MODULE, PIN, RAW, WRONG_PIN, Token
from tests.support import KEY_1, ROOT, statement, write_secret

MESSAGES = [b"", b"ecpa", bytes(range(256)) * 40]


def refused(uri: str, **kwargs: object) -> str:
    gc.collect()  # no key of an earlier test still holds the token's login
    with pytest.raises(EcpaError) as caught:
        open_pkcs11_key(uri, **kwargs)
    assert caught.value.code is ErrorCode.INVALID_KEY
    detail = caught.value.detail
    assert PIN not in detail
    assert WRONG_PIN not in detail
    return detail


def test_a_seed_on_the_token_signs_byte_for_byte_as_signing_key(token: Token) -> None:
    """CKM_EDDSA is pure Ed25519 (RFC 8032): deterministic, so the token's signature of a key
    put on it whole (C_CreateObject with CKA_VALUE) equals SigningKey's of the same seed."""
    with open_pkcs11_key(token.uri("imported")) as key:
        assert key.public_key == IMPORTED.public_key
        for message in MESSAGES:
            assert key.sign(message) == IMPORTED.sign(message)


@pytest.mark.parametrize("label", ["manager", "oid"])
def test_a_key_made_on_the_token_signs_what_its_public_key_verifies(
    token: Token, label: str
) -> None:
    """Both EC_PARAMS forms: the curve's name (PrintableString) and its OID."""
    with open_pkcs11_key(token.uri(label)) as key:
        assert key.public_key == token.public[label]
        for message in MESSAGES:
            signature = key.sign(message)
            assert len(signature) == 64
            key.public_key.verify(signature, message)
        assert LABEL in repr(key)
        assert label in repr(key)


def test_a_public_point_of_the_32_bytes_alone_is_taken(token: Token) -> None:
    with open_pkcs11_key(token.uri("raw-point")) as key:
        assert key.public_key == RAW.public_key
        assert key.sign(b"x") == RAW.sign(b"x")


def test_a_public_object_of_another_key_is_refused_when_opened(token: Token) -> None:
    """The probe signature: the token's public object 'mismatch' is another key's."""
    detail = refused(token.uri("mismatch"))
    assert "does not" in detail
    assert "mismatch" in detail


def test_a_small_order_public_key_on_the_token_is_refused(token: Token) -> None:
    assert "small-order" in refused(token.uri("small-order"))


@pytest.mark.parametrize(
    ("uri", "said"),
    [
        ("pkcs11:token=ecpa-test;object=twin", "found 2"),
        ("pkcs11:token=ecpa-test;object=nobody", "found 0"),
        ("pkcs11:token=ecpa-test;id=%01%02", "found 0"),
        ("pkcs11:token=ecpa-test;object=manager;id=%05", "found 0"),  # both must match
        ("pkcs11:token=another;object=manager", "one initialized token"),
        ("pkcs11:token=ecpa-test;serial=0;object=manager", "one initialized token"),
        ("pkcs11:library-manufacturer=Snake%20Oil;object=manager", "the library the URI names"),
        ("pkcs11:token=ecpa-test;object=manager;type=public", "type=private"),
    ],
)
def test_a_uri_selecting_no_key_or_several_is_refused_saying_how_many(
    token: Token, uri: str, said: str
) -> None:
    assert said in refused(f"{uri}?module-path={MODULE}&pin-source={token.pin_file}")


def test_the_token_slot_and_library_attributes_select(token: Token) -> None:
    query = f"?module-path={MODULE}&pin-source={token.pin_file}"
    uri = f"pkcs11:library-manufacturer=SoftHSM;model=SoftHSM%20v2;token={LABEL};id=%01{query}"
    with open_pkcs11_key(uri) as key:
        assert key.public_key == token.public["manager"]


def test_a_wrong_pin_is_refused_naming_the_token(token: Token, tmp_path: Path) -> None:
    wrong = write_secret(tmp_path / "wrong", WRONG_PIN + "\n")
    detail = refused(token.uri(pin=False) + f"&pin-source={wrong}")
    assert f"token {LABEL!r}" in detail
    assert "PIN is wrong" in detail


def test_the_pin_comes_from_pin_source_then_password_file_then_the_environment(
    token: Token, tmp_path: Path
) -> None:
    wrong = write_secret(tmp_path / "wrong", WRONG_PIN)
    right = write_secret(tmp_path / "right", PIN)  # no newline: taken as it is
    bare = token.uri(pin=False)
    environ = {"ECPA_PKCS11_PIN": WRONG_PIN}
    with open_pkcs11_key(token.uri(), password_file=wrong, environ=environ) as key:
        assert key.public_key == token.public["manager"]
    with open_pkcs11_key(bare, password_file=right, environ=environ) as key:
        assert key.public_key == token.public["manager"]
    with open_pkcs11_key(bare, environ={"ECPA_PKCS11_PIN": PIN}) as key:
        assert key.public_key == token.public["manager"]
    assert "PIN is wrong" in refused(bare, password_file=wrong, environ={"ECPA_PKCS11_PIN": PIN})


def test_no_pin_anywhere_is_refused_naming_the_three_ways(token: Token) -> None:
    detail = refused(token.uri(pin=False), environ={})
    assert "pin-source" in detail
    assert "--password-file" in detail
    assert "$ECPA_PKCS11_PIN" in detail


@pytest.mark.parametrize(
    ("content", "mode", "said"),
    [
        (PIN, 0o644, "0644"),
        (PIN, 0o640, "0640"),
        ("", 0o600, "empty"),
        ("\n", 0o600, "empty"),
        (f"{PIN}\n{PIN}\n", 0o600, "one line"),
        (b"\xff\xfe", 0o600, "UTF-8"),
    ],
)
def test_a_pin_file_others_may_read_or_that_holds_no_pin_is_refused(
    token: Token, tmp_path: Path, content: str | bytes, mode: int, said: str
) -> None:
    pin = write_secret(tmp_path / "pin", content)
    pin.chmod(mode)
    detail = refused(token.uri(pin=False) + f"&pin-source={pin}")
    assert said in detail
    assert str(pin) in detail


def test_the_module_comes_from_the_uri_or_the_environment(token: Token) -> None:
    uri = f"pkcs11:token={LABEL};object=manager?pin-source={token.pin_file}"
    with open_pkcs11_key(uri, environ={"ECPA_PKCS11_MODULE": MODULE}) as key:
        assert key.public_key == token.public["manager"]
    detail = refused(uri, environ={})
    assert "module-path=" in detail
    assert "$ECPA_PKCS11_MODULE" in detail
    assert "absolute" in refused(uri, environ={"ECPA_PKCS11_MODULE": "libsofthsm2.so"})
    assert "module-name" in refused(uri + "&module-name=softhsm2", environ={})


def test_module_name_finds_the_module_in_the_directory_module_path_names(token: Token) -> None:
    directory = os.path.dirname(os.path.realpath(MODULE))
    uri = f"pkcs11:token={LABEL};object=manager?pin-source={token.pin_file}"
    with open_pkcs11_key(f"{uri}&module-path={directory}&module-name=softhsm2") as key:
        assert key.public_key == token.public["manager"]
    assert "found none" in refused(f"{uri}&module-path={directory}&module-name=nothing")
    assert "one module" in refused(f"{uri}&module-path={MODULE}&module-name=nothing")


def test_a_module_others_may_write_is_refused_before_it_is_loaded(
    token: Token, tmp_path: Path
) -> None:
    """Loading a module runs its code: one that group or others may replace is refused."""
    copy = tmp_path / "lib" / "libcopy.so"
    copy.parent.mkdir(mode=0o700)
    shutil.copyfile(os.path.realpath(MODULE), copy)
    copy.chmod(0o666)
    uri = token.uri(module=str(copy))
    assert "not writable by group or others" in refused(uri)
    copy.chmod(0o644)
    copy.parent.chmod(0o777)
    assert "every directory above" in refused(uri)
    assert "No such file" in refused(token.uri(module=str(tmp_path / "none.so")))


def test_a_file_that_is_no_pkcs11_module_is_refused(token: Token, tmp_path: Path) -> None:
    fake = write_secret(tmp_path / "fake.so", b"not ELF")
    assert "load the PKCS#11 module" in refused(token.uri(module=str(fake)))


def test_two_keys_on_one_token_share_its_login(token: Token) -> None:
    """PKCS#11 logs in per token: opening a second key must not log in again (the token
    would answer CKR_USER_ALREADY_LOGGED_IN), nor closing one log the other out."""
    gc.collect()
    first = open_pkcs11_key(token.uri("manager"))
    second = open_pkcs11_key(token.uri("imported"))
    first.close()
    assert second.sign(b"still logged in") == IMPORTED.sign(b"still logged in")
    second.close()
    with open_pkcs11_key(token.uri("manager")) as again:
        again.public_key.verify(again.sign(b"x"), b"x")


def test_a_key_closed_while_it_signs_finishes_the_signature_first(token: Token) -> None:
    """One lock around sign and close: closing the session under a signature in progress
    crashes the process (SoftHSM; seen when the lock was left out), so in a child."""
    code = (
        "import threading, time\n"
        "from ecpa.hsm import open_pkcs11_key\n"
        "from tests.hsm.conftest import IMPORTED\n"
        f"key = open_pkcs11_key({token.uri('imported')!r})\n"
        "big, out = bytes(32 << 20), {}\n"  # about 0.15 s to sign on the token
        "worker = threading.Thread(target=lambda: out.update(sig=key.sign(big)))\n"
        "worker.start()\n"
        "while not key._lock.locked():\n"  # the signature is under way
        "    time.sleep(0.0005)\n"
        "key.close()\n"
        "worker.join()\n"
        "print(out['sig'] == IMPORTED.sign(big))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr[-2000:]


def test_a_closed_key_refuses_to_sign(token: Token) -> None:
    key = open_pkcs11_key(token.uri())
    key.close()
    key.close()  # twice is fine
    with pytest.raises(EcpaError) as caught:
        key.sign(b"x")
    assert caught.value.code is ErrorCode.INVALID_KEY
    assert "closed" in caught.value.detail


def test_load_signer_and_load_public_take_a_uri_or_a_key_file(token: Token, tmp_path: Path) -> None:
    pem = write_secret(tmp_path / "k.pem", KEY_1.to_pem())
    assert isinstance(load_signer(pem, None), ecpa.SigningKey)
    assert load_public(str(pem), None) == KEY_1.public_key
    signer = load_signer(token.uri(), None)
    assert isinstance(signer, Pkcs11Key)
    assert ecpa.sign(statement(), signer).detached_jws
    signer.close()
    assert load_public(token.uri(), None) == token.public["manager"]


def test_without_python_pkcs11_ecpa_imports_and_a_uri_says_how_to_install_it(
    token: Token,
) -> None:
    code = (
        "import sys; sys.modules['pkcs11'] = None\n"
        "import ecpa.hsm, ecpa.cli._sign, ecpa.cli._trust, ecpa.cli._audit\n"
        "from ecpa.hsm import open_pkcs11_key\n"
        "try:\n"
        f"    open_pkcs11_key({token.uri()!r})\n"
        "except ecpa.EcpaError as exc:\n"
        "    print(exc.code.value, exc.detail)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.startswith("ECPA_INVALID_KEY ")
    assert "pip install 'ecpa[hsm]'" in done.stdout
