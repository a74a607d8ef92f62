"""``ecpa sign``, ``ecpa keygen`` and ``ecpa trust list|add|disable|check``."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

import ecpa
from ecpa.profile.b64 import b64u_encode
from tests._cli_helpers import OK_LINE, Run, ecpa_main, verify, write_json, write_trust
from tests.support import (
    DELETE,
    ISSUER,
    KEY_1,
    KEY_2,
    NOW,
    SEED_2,
    statement,
    trust_doc,
    trust_entry,
    write_secret,
)

MAX = 2**53 - 1
WINDOW = ["--not-before", 0, "--not-after", MAX]
SMALL_ORDER_KEY = b64u_encode(b"\x01" + bytes(31))  # the identity point


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path as the working directory, holding KEY_1 as k1.pem and the statement."""
    monkeypatch.chdir(tmp_path)
    write_secret(tmp_path / "k1.pem", KEY_1.to_pem())
    write_json(tmp_path / "st.json", statement())
    return tmp_path


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- sign --------------------------------------------------------------------------------


def test_sign_writes_the_pair_and_it_verifies(here: Path) -> None:
    run = ecpa_main("sign", "st.json", "--key", "k1.pem", "--out", "ev")
    assert run.status == 0, run
    assert Path("ev.json").read_bytes() == ecpa.canonicalize(statement())
    expected = ecpa.sign(statement(), KEY_1).detached_jws  # deterministic
    assert Path("ev.jws").read_text() == expected + "\n"
    run = verify("ev.jws", trust=write_trust(here))
    assert (run.status, run.lines) == (0, [f"OK ev.jws {OK_LINE}"])


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
@pytest.mark.parametrize("command", ["sign", "audit"])
def test_a_private_key_or_passphrase_others_may_read_is_refused(
    here: Path, mode: int, command: str
) -> None:
    """ecpa sign --key, ecpa audit --sign and --password-file refuse a secret's file that group
    or others may read (as the plugin's key loader and serve's token file do), naming it and
    its mode; 0600 is taken."""
    key = here / "k1.pem"
    key.chmod(mode)
    args = ["sign", "st.json", "--key", "k1.pem", "--out", "ev"]
    if command == "audit":
        args = ["audit", "--launch", str(here), "--sign", "k1.pem", "--issuer", "i", "--kid", "k"]
        args += ["--out", "r"]
    run = ecpa_main(*args)
    assert run.status == 2, run
    assert "ECPA_INVALID_KEY" in run.err
    assert f"{mode:04o}" in run.err
    assert "BEGIN" not in run.err  # never the key
    key.chmod(0o600)
    write_secret(here / "pw", "a passphrase\n").chmod(mode)
    run = ecpa_main("sign", "st.json", "--key", "k1.pem", "--password-file", "pw", "--out", "ev")
    assert run.status == 2, run
    assert "password file" in run.err
    assert "passphrase" not in run.err


def test_sign_default_prefix_and_jwk_key(here: Path) -> None:
    jwk = {**KEY_1.public_key.to_jwk(), "d": b64u_encode(bytes(range(32)))}
    write_json(here / "k1.jwk", jwk)
    (here / "k1.jwk").chmod(0o600)
    run = ecpa_main("sign", "st.json", "--key", "k1.jwk")
    assert run.status == 0, run
    assert Path("st.signed.json").read_bytes() == ecpa.canonicalize(statement())
    assert verify("st.signed.jws", trust=write_trust(here)).status == 0


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (json.dumps(statement(issuer=DELETE)), "ATTESTATION_INVALID_STATEMENT"),
        (json.dumps(statement(issuer="")), "ATTESTATION_INVALID_STATEMENT"),
        (json.dumps(statement(extra="x")), "ATTESTATION_INVALID_STATEMENT"),
        (json.dumps(statement(observed_at=NOW - 2.5)), "ATTESTATION_UNSUPPORTED_VALUE"),
        (json.dumps(statement())[:-1] + ',"kid":"x"}', "ATTESTATION_DUPLICATE_KEY"),
    ],
    ids=["missing-member", "empty-issuer", "extra-member", "float", "duplicate-member"],
)
def test_sign_refuses_an_invalid_statement(here: Path, text: str, code: str) -> None:
    Path("bad.json").write_text(text)
    run = ecpa_main("sign", "bad.json", "--key", "k1.pem", "--out", "ev")
    assert run.status == 1, run
    assert run.err.startswith(f"ecpa: {code}: ")
    assert not Path("ev.json").exists()
    assert not Path("ev.jws").exists()


def test_sign_never_overwrites_without_force(here: Path) -> None:
    assert ecpa_main("sign", "st.json", "--key", "k1.pem", "--out", "ev").status == 0
    before = (Path("ev.json").read_bytes(), Path("ev.jws").read_bytes())
    write_json(here / "st.json", statement(challenge_nonce="nonce-2"))
    run = ecpa_main("sign", "st.json", "--key", "k1.pem", "--out", "ev")
    assert run.status == 2, run
    assert run.err.startswith("ecpa: ECPA_INVALID_INPUT: ")
    assert (Path("ev.json").read_bytes(), Path("ev.jws").read_bytes()) == before
    run = ecpa_main("sign", "st.json", "--key", "k1.pem", "--out", "ev", "--force")
    assert run.status == 0, run
    assert Path("ev.json").read_bytes() == ecpa.canonicalize(statement(challenge_nonce="nonce-2"))
    assert Path("ev.jws").read_bytes() != before[1]


def test_sign_refusal_writes_nothing(here: Path) -> None:
    Path("ev.jws").write_text("old\n")
    run = ecpa_main("sign", "st.json", "--key", "k1.pem", "--out", "ev")
    assert run.status == 2, run
    assert not Path("ev.json").exists()


@pytest.mark.parametrize(
    "content",
    [None, b"not a key\n", KEY_1.public_key.to_pem(), b'{"kty": "OKP"}'],
    ids=["missing", "garbage", "public-key", "jwk-without-d"],
)
def test_sign_bad_key_file_exits_2(here: Path, content: bytes | None) -> None:
    name = "key.jwk" if content and content.startswith(b"{") else "key.pem"
    if content is not None:
        Path(name).write_bytes(content)
    run = ecpa_main("sign", "st.json", "--key", name, "--out", "ev")
    assert run.status == 2, run
    assert run.err.startswith("ecpa: ECPA_INVALID_KEY: ")
    assert not Path("ev.json").exists()


def test_sign_missing_statement_exits_2(here: Path) -> None:
    assert ecpa_main("sign", "nothing.json", "--key", "k1.pem").status == 2
    assert ecpa_main("sign", "st.json").status == 2  # --key is required


# --- sign: a key other than the statement's kid names ------------------------------------


@pytest.mark.parametrize(
    ("kid", "code"),
    [("test-key-2", "ATTESTATION_INVALID_SIGNATURE"), ("test-key-9", "ATTESTATION_UNKNOWN_KEY")],
    ids=["another-entrys-kid", "no-entry"],
)
def test_sign_with_trust_refuses_a_key_the_store_does_not_trust_for_the_kid(
    here: Path, kid: str, code: str
) -> None:
    """--trust: the code verification would give (exit 1), naming the statement's kid and
    the kid the store trusts KEY for; nothing written."""
    write_json(here / "st.json", statement(kid=kid))
    run = ecpa_main(
        "sign", "st.json", "--key", "k1.pem", "--out", "ev", "--trust", write_trust(here)
    )
    assert run.status == 1, run
    assert run.err.startswith(f"ecpa: {code}: ")
    assert f"'{kid}'" in run.err
    assert "'test-key-1'" in run.err
    assert not Path("ev.json").exists()
    assert not Path("ev.jws").exists()


def test_sign_with_trust_signs_with_the_key_trusted_for_the_kid(here: Path) -> None:
    run = ecpa_main(
        "sign", "st.json", "--key", "k1.pem", "--out", "ev", "--trust", write_trust(here)
    )
    assert (run.status, run.err) == (0, ""), run
    assert verify("ev.jws", trust=write_trust(here)).status == 0
    Path("bad-trust.json").write_text("{}")
    run = ecpa_main(
        "sign", "st.json", "--key", "k1.pem", "--out", "ev2", "--trust", "bad-trust.json"
    )
    assert run.status == 2, run  # an unusable store is a usage error, as for verify
    assert run.err.startswith("ecpa: ATTESTATION_TRUST_STORE_CONFIG: ")


def test_sign_notes_keygens_public_half_of_another_key_for_the_kid(here: Path) -> None:
    """Without --trust, KID.pub.pem beside the key file (as keygen writes it) holding another
    key is a note on stderr; the pair is still written. Verification then names both kids."""
    write_json(here / "st.json", statement(kid="test-key-2"))
    (here / "test-key-2.pub.pem").write_bytes(KEY_2.public_key.to_pem())
    run = ecpa_main("sign", "st.json", "--key", "k1.pem", "--out", "ev")
    assert run.status == 0, run
    assert run.err.startswith("ecpa sign: note: expected the key of the statement's kid ")
    assert "test-key-2.pub.pem" in run.err
    assert "k1.pem" in run.err
    run = verify("ev.jws", trust=write_trust(here))
    assert run.status == 1, run
    assert run.lines[0].startswith("FAIL ev.jws ATTESTATION_INVALID_SIGNATURE: ")
    assert "'test-key-2'" in run.lines[0]
    assert "'test-key-1'" in run.lines[0]
    (here / "test-key-2.pub.pem").write_bytes(KEY_1.public_key.to_pem())  # the key itself
    run = ecpa_main("sign", "st.json", "--key", "k1.pem", "--out", "ev", "--force")
    assert (run.status, run.err) == (0, ""), run


# --- keygen ------------------------------------------------------------------------------


def _keygen(kid: str, *args: str | Path | int) -> Run:
    return ecpa_main("keygen", "--issuer", ISSUER, "--kid", kid, *WINDOW, *args)


def test_keygen_writes_the_key_files(here: Path) -> None:
    (here / "keys").mkdir()
    run = _keygen("key-1", "--out-dir", "keys")
    assert run.status == 0, run
    private, public = here / "keys" / "key-1.pem", here / "keys" / "key-1.pub.pem"
    assert _mode(private) == 0o600
    assert private.read_text().startswith("-----BEGIN PRIVATE KEY-----\n")  # PKCS#8
    key = ecpa.SigningKey.load(private)
    assert ecpa.VerifyKey.from_pem(public.read_bytes()) == key.public_key
    entry = json.loads(run.out)
    assert entry == {
        "issuer": ISSUER,
        "kid": "key-1",
        "public_key_b64": key.public_key.to_b64(),
        "subjects": ["host-runtime"],
        "enabled": True,
        "not_before": 0,
        "not_after": MAX,
    }
    ecpa.TrustStore.from_dict(trust_doc(entry))


def test_keygen_never_overwrites_a_key(here: Path) -> None:
    assert _keygen("key-1").status == 0
    before = Path("key-1.pem").read_bytes()
    run = _keygen("key-1")
    assert run.status == 2, run
    assert Path("key-1.pem").read_bytes() == before
    # the public file alone existing is enough to refuse, before any file is written
    Path("key-2.pub.pem").write_text("placeholder\n")
    assert _keygen("key-2").status == 2
    assert not Path("key-2.pem").exists()


def test_keygen_trust_store_created_then_appended(here: Path) -> None:
    run = _keygen("key-1", "--trust", "t.json", "--subject", "host-runtime", "--subject", "x")
    assert run.status == 0, run
    doc = json.loads(Path("t.json").read_text())
    assert [e["kid"] for e in doc["keys"]] == ["key-1"]
    assert doc["keys"][0] == json.loads(run.out)
    assert doc["keys"][0]["subjects"] == ["host-runtime", "x"]
    assert _keygen("key-2", "--trust", "t.json").status == 0
    loaded = ecpa.TrustStore.load("t.json")
    assert [t.entry.kid for t in loaded] == ["key-1", "key-2"]
    # the new key signs evidence that verifies under the store it was added to
    write_json(here / "st2.json", statement(kid="key-2"))
    assert ecpa_main("sign", "st2.json", "--key", "key-2.pem", "--out", "ev").status == 0
    assert verify("ev.jws", trust=here / "t.json").status == 0


def test_keygen_refusals_write_no_key(here: Path) -> None:
    write_trust(here)  # already holds (ISSUER, test-key-1)
    run = _keygen("test-key-1", "--trust", "trust.json")
    assert run.status == 2, run
    assert "ATTESTATION_TRUST_STORE_CONFIG" in run.err
    Path("bad.json").write_text("{")
    assert _keygen("key-9", "--trust", "bad.json").status == 2
    assert list(here.glob("*.pem")) == [here / "k1.pem"]


# --- trust list / add / disable / check --------------------------------------------------


def test_trust_list(here: Path) -> None:
    write_trust(here)
    run = ecpa_main("trust", "list", "trust.json")
    assert run.status == 0, run
    assert len(run.lines) == 2
    assert run.lines[0].startswith(f"enabled issuer={ISSUER} kid=test-key-1 ")
    assert run.lines[0].endswith(f" key={KEY_1.public_key.to_b64()}")
    run = ecpa_main("trust", "list", "trust.json", "--json")
    assert run.status == 0, run
    assert [json.loads(line) for line in run.lines] == trust_doc()["keys"]
    assert ecpa_main("trust", "list", "missing.json").status == 2


def _jwk_private() -> dict[str, str]:
    return {**KEY_2.public_key.to_jwk(), "d": b64u_encode(SEED_2)}


@pytest.mark.parametrize(
    "key_args",
    [
        ("--key", "pub.pem", KEY_2.public_key.to_pem()),
        ("--key", "priv.pem", KEY_2.to_pem()),
        ("--key", "pub.jwk", json.dumps(KEY_2.public_key.to_jwk()).encode()),
        ("--key", "priv.jwk", json.dumps(_jwk_private()).encode()),
        ("--public-key-b64", KEY_2.public_key.to_b64(), None),
    ],
    ids=["pem-public", "pem-private", "jwk", "jwk-private", "b64"],
)
def test_trust_add_key_forms(here: Path, key_args: tuple[str, str, bytes | None]) -> None:
    option, value, content = key_args
    if content is not None:
        Path(value).write_bytes(content)
    write_trust(here, trust_doc(trust_entry()))
    run = ecpa_main(
        "trust", "add", "trust.json", "--issuer", ISSUER, "--kid", "k2", option, value, *WINDOW
    )
    assert run.status == 0, run
    found = ecpa.TrustStore.load("trust.json").lookup(ISSUER, "k2")
    assert found is not None
    assert found.key == KEY_2.public_key
    text = Path("trust.json").read_text()
    assert set(json.loads(text)["keys"][1]) == set(trust_entry())  # no private member
    assert b64u_encode(SEED_2) not in text


def test_trust_add_creates_a_store(here: Path) -> None:
    args = ["--issuer", ISSUER, "--kid", "k2", "--public-key-b64", KEY_2.public_key.to_b64()]
    assert ecpa_main("trust", "add", "new.json", *args).status == 0
    assert len(ecpa.TrustStore.load("new.json")) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["--kid", "k9", "--public-key-b64", SMALL_ORDER_KEY],
        ["--kid", "k9", "--public-key-b64", "AAAA"],
        ["--kid", "test-key-1", "--public-key-b64", KEY_2.public_key.to_b64()],
        ["--kid", "k9", "--public-key-b64", KEY_2.public_key.to_b64(), "--not-before", -1],
    ],
    ids=["small-order", "short-key", "duplicate", "bad-window"],
)
def test_trust_add_refusals_exit_2(here: Path, args: list[Any]) -> None:
    before = write_trust(here).read_bytes()
    run = ecpa_main("trust", "add", "trust.json", "--issuer", ISSUER, *args)
    assert run.status == 2, run
    assert run.err.startswith("ecpa: ATTESTATION_TRUST_STORE_CONFIG: ")
    assert Path("trust.json").read_bytes() == before


def test_trust_add_needs_exactly_one_key(here: Path) -> None:
    write_trust(here)
    base = ["trust", "add", "trust.json", "--issuer", ISSUER, "--kid", "k9"]
    assert ecpa_main(*base).status == 2
    b64 = KEY_2.public_key.to_b64()
    assert ecpa_main(*base, "--key", "k1.pem", "--public-key-b64", b64).status == 2
    assert ecpa_main(*base, "--key", "missing.pem").status == 2


def test_trust_disable(here: Path) -> None:
    ecpa_main("sign", "st.json", "--key", "k1.pem", "--out", "ev")
    write_trust(here)
    assert verify("ev.jws", trust=here / "trust.json").status == 0
    run = ecpa_main("trust", "disable", "trust.json", "--issuer", ISSUER, "--kid", "test-key-1")
    assert run.status == 0, run
    run = verify("ev.jws", trust=here / "trust.json")
    assert run.status == 1
    assert run.lines[0].startswith("FAIL ev.jws ATTESTATION_TRUST_POLICY: ")
    assert ecpa_main("trust", "list", "trust.json").lines[0].startswith("DISABLED ")
    run = ecpa_main("trust", "disable", "trust.json", "--issuer", ISSUER, "--kid", "nope")
    assert run.status == 2, run


def test_trust_check_valid(here: Path) -> None:
    write_trust(here)
    run = ecpa_main("trust", "check", "trust.json")
    assert run.status == 0, run
    assert run.lines[0].startswith("OK trust.json")


def test_trust_check_reports_every_problem(here: Path) -> None:
    doc = trust_doc(
        trust_entry(),
        trust_entry(),  # duplicate (issuer, kid)
        trust_entry(kid="k-small", public_key_b64=SMALL_ORDER_KEY),
        trust_entry(kid="k-window", not_before=10, not_after=5),
    )
    write_trust(here, doc)
    run = ecpa_main("trust", "check", "trust.json")
    assert run.status == 2, run
    assert len(run.lines) == 3
    for line, where in zip(run.lines, ["keys.1", "keys.2", "keys.3"], strict=True):
        assert line.startswith("PROBLEM trust.json ATTESTATION_TRUST_STORE_CONFIG: ")
        assert where in line
    Path("bad.json").write_text("[]")
    assert ecpa_main("trust", "check", "bad.json").status == 2
    assert ecpa_main("trust", "check", "missing.json").status == 2
