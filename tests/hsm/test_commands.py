"""The commands that take a key, given a ``pkcs11:`` URI naming one on the SoftHSM token:
``ecpa sign --key``, ``ecpa audit --sign`` and ``ecpa trust add --key``; what they sign
verifies, and a wrong PIN is exit 2 naming the token, never the PIN."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import ecpa
from bench.launchdir import manager_entry, write_launch
from ecpa.runtime import EXIT_SCHEMA, RECEIPT_SUBJECT
from tests._cli_helpers import OK_LINE, ecpa_main, verify, write_json, write_trust
from tests.hsm.conftest import IMPORTED, LABEL, PIN, WRONG_PIN, Token
from tests.support import statement, trust_doc, trust_entry, write_secret

WINDOW = ["--not-before", "0", "--not-after", str(2**53 - 1)]


@pytest.fixture
def here(token: Token, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_json(tmp_path / "st.json", statement())
    return tmp_path


def test_ecpa_sign_with_a_token_key_makes_evidence_ecpa_verify_accepts(
    token: Token, here: Path
) -> None:
    """The URI reaches the parser as typed (``--key`` is text, not a path, which would fold
    ``file://localhost/p`` into ``file:/localhost/p``); the JWS is the one SigningKey makes
    for the seed on the token, byte for byte."""
    uri = (
        f"pkcs11:token={LABEL};object=imported"
        f"?module-path=//usr/lib//softhsm/libsofthsm2.so&pin-source=file://localhost{token.pin_file}"
    )
    run = ecpa_main("sign", "st.json", "--key", uri, "--out", "ev")
    assert run.status == 0, run
    assert Path("ev.jws").read_text() == ecpa.sign(statement(), IMPORTED).detached_jws + "\n"
    trust = write_trust(here, trust_doc(trust_entry(public_key_b64=IMPORTED.public_key.to_b64())))
    run = verify("ev.jws", trust=trust)
    assert (run.status, run.lines) == (0, [f"OK ev.jws {OK_LINE}"])


def test_the_pin_from_password_file_or_the_environment(
    token: Token, here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trust = write_trust(
        here, trust_doc(trust_entry(public_key_b64=token.public["manager"].to_b64()))
    )
    bare = token.uri(pin=False)
    write_secret(here / "pin", PIN + "\n")
    run = ecpa_main("sign", "st.json", "--key", bare, "--password-file", "pin", "--out", "a")
    assert run.status == 0, run
    monkeypatch.setenv("ECPA_PKCS11_PIN", PIN)
    run = ecpa_main("sign", "st.json", "--key", bare, "--out", "b")
    assert run.status == 0, run
    for name in ("a", "b"):
        assert verify(f"{name}.jws", trust=trust).status == 0


def test_a_wrong_pin_is_exit_2_naming_the_token_never_the_pin(token: Token, here: Path) -> None:
    write_secret(here / "wrong", WRONG_PIN)
    run = ecpa_main("sign", "st.json", "--key", token.uri(pin=False), "--password-file", "wrong")
    assert run.status == 2, run
    assert run.err.startswith("ecpa: ECPA_INVALID_KEY: ")
    assert f"token {LABEL!r}" in run.err
    assert WRONG_PIN not in run.out + run.err
    assert not Path("st.signed.jws").exists()
    run = ecpa_main("sign", "st.json", "--key", token.uri() + f"&pin-value={PIN}")
    assert run.status == 2, run
    assert PIN not in run.out + run.err


def test_ecpa_trust_add_takes_the_tokens_public_key(token: Token, here: Path) -> None:
    args = ["--issuer", "urn:ecpa:issuer:hsm", "--kid", "hsm-1", "--key", token.uri(), *WINDOW]
    run = ecpa_main("trust", "add", "trust.json", *args)
    assert run.status == 0, run
    [entry] = json.loads(Path("trust.json").read_text())["keys"]
    assert entry["public_key_b64"] == token.public["manager"].to_b64()
    run = ecpa_main("trust", "add", "other.json", *args[:-4], "--key", token.uri("twin"), *WINDOW)
    assert run.status == 2, run
    assert "found 2" in run.err
    assert not Path("other.json").exists()


def test_ecpa_audit_sign_with_a_token_key_writes_a_receipt_that_verifies(
    token: Token, here: Path
) -> None:
    now = int(time.time()) - 3600
    (here / "runs").mkdir(mode=0o700)
    written = write_launch(
        here / "runs", slots=1, records=5, now=now, launch_id="launch-" + "b" * 16
    )
    # ecpa run closes each key's window when the launch ends, and records the end.
    launch_trust = json.loads((written.directory / "trust.json").read_text())
    for launch_entry in launch_trust["keys"]:
        launch_entry["not_after"] = now + 1
    (written.directory / "trust.json").write_text(json.dumps(launch_trust))
    exit_doc = {"schema": EXIT_SCHEMA, "ended_at": now + 1, "exit_status": 0}
    (written.directory / "exit.json").write_text(json.dumps(exit_doc))
    mgr = ["--issuer", "urn:ecpa:issuer:mgr", "--kid", "mgr-1"]
    run = ecpa_main(
        "audit", "--launch", written.directory, "--sign", token.uri(), *mgr, "--out", "r"
    )
    assert run.status == 0, run
    entry = trust_entry(
        issuer="urn:ecpa:issuer:mgr",
        kid="mgr-1",
        subjects=[RECEIPT_SUBJECT],
        public_key_b64=token.public["manager"].to_b64(),
    )
    # The operator's trust store: the receipt's signer, and the manager that certified the
    # launch's keys (the report is derived again with it).
    trust = write_json(here / "mgr-trust.json", trust_doc(entry, manager_entry()))
    assert ecpa_main("verify", "r.jws", "--trust", trust).status == 0
    check = ["--check", "r.report.json", "--receipt", "r.jws", "--trust", trust]
    run = ecpa_main("audit", *check, "--launch", written.directory)
    assert run.status == 0, run
    assert "identical" in run.out
