"""The operator's conventions: ``--json`` on every reporting command, encrypted keys,
the verify summary and progress bar, the package's own corpus, the directory ``ecpa dev
pg-up`` takes."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ecpa
from ecpa.profile.keys import SigningKey
from tests._cli_helpers import ecpa_main, write_json, write_pair, write_trust
from tests.support import KEY_1, NOW, statement, write_secret

MAX = 2**53 - 1
WINDOW = ["--not-before", 0, "--not-after", MAX]
ISSUER = "urn:ecpa:issuer:host-a"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ECPA_KEY_PASSWORD", raising=False)
    write_secret(tmp_path / "k1.pem", KEY_1.to_pem())
    write_json(tmp_path / "st.json", statement())
    return tmp_path


def _one_json(out: str) -> dict[str, object]:
    (line,) = out.splitlines()
    value = json.loads(line)
    assert isinstance(value, dict)
    return value


# --- --json on every reporting command ---------------------------------------------------


def test_keygen_json_names_the_files_and_the_entry(here: Path) -> None:
    run = ecpa_main("keygen", "--issuer", ISSUER, "--kid", "k-9", "--trust", "t.json", "--json")
    assert run.status == 0, run
    doc = _one_json(run.out)
    assert doc["private_key"] == "k-9.pem"
    assert doc["public_key"] == "k-9.pub.pem"
    assert doc["trust"] == "t.json"
    assert doc["encrypted"] is False
    entry = doc["entry"]
    assert isinstance(entry, dict)
    key = SigningKey.load("k-9.pem")
    assert entry["public_key_b64"] == key.public_key.to_b64()
    assert json.loads(Path("t.json").read_text())["keys"] == [entry]


def test_sign_json_says_what_it_wrote(here: Path) -> None:
    run = ecpa_main("sign", "st.json", "--key", "k1.pem", "--out", "ev", "--json")
    assert run.status == 0, run
    doc = _one_json(run.out)
    assert doc == {
        "statement": "st.json",
        "jws": "ev.jws",
        "payload": "ev.json",
        "issuer": statement()["issuer"],
        "kid": statement()["kid"],
        "payload_sha256": hashlib.sha256(Path("ev.json").read_bytes()).hexdigest(),
    }


def test_trust_add_disable_check_json(here: Path) -> None:
    pub = KEY_1.public_key.to_b64()
    run = ecpa_main(
        "trust", "add", "t.json", "--issuer", ISSUER, "--kid", "a", "--public-key-b64", pub,
        *WINDOW, "--json",
    )  # fmt: skip
    assert run.status == 0, run
    added = _one_json(run.out)
    assert added["store"] == "t.json"
    assert added["added"] == json.loads(Path("t.json").read_text())["keys"][0]
    run = ecpa_main("trust", "disable", "t.json", "--issuer", ISSUER, "--kid", "a", "--json")
    assert (run.status, _one_json(run.out)) == (
        0,
        {"store": "t.json", "issuer": ISSUER, "kid": "a", "disabled": 1},
    )
    run = ecpa_main("trust", "check", "t.json", "--json")
    assert (run.status, _one_json(run.out)) == (
        0,
        {"store": "t.json", "ok": True, "keys": 1, "problems": []},
    )
    doc = json.loads(Path("t.json").read_text())
    doc["keys"][0]["not_before"] = MAX
    doc["keys"][0]["not_after"] = 0
    write_json(Path("bad.json"), doc)
    run = ecpa_main("trust", "check", "bad.json", "--json")
    found = _one_json(run.out)
    assert run.status == 2
    assert (found["ok"], found["keys"]) == (False, None)
    problems = found["problems"]
    assert isinstance(problems, list)
    assert len(problems) == 1
    assert problems[0]["code"] == "ATTESTATION_TRUST_STORE_CONFIG"
    assert "not_before <= not_after" in problems[0]["detail"]


def test_trust_check_json_gives_an_object_for_a_store_it_cannot_read(here: Path) -> None:
    Path("notjson.json").write_text("[1, 2")
    for store in ("notjson.json", "missing.json"):
        run = ecpa_main("trust", "check", store, "--json")
        assert run.status == 2
        doc = _one_json(run.out)
        assert (doc["store"], doc["ok"], doc["keys"]) == (store, False, None)
        problems = doc["problems"]
        assert isinstance(problems, list)
        assert len(problems) == 1


def test_corpus_generate_json_gives_each_file_and_its_digest(tmp_path: Path) -> None:
    run = ecpa_main("corpus", "generate", tmp_path / "c", "--json")
    assert run.status == 0, run
    lines = [json.loads(line) for line in run.lines]
    assert [Path(d["path"]).name for d in lines] == [
        "attestation-vectors.json",
        "attestation-vectors-extended.json",
        "trust-store-vectors.json",
    ]
    for d in lines:
        data = Path(d["path"]).read_bytes()
        assert (d["bytes"], d["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())


# --- the package's own corpus --------------------------------------------------------------


def test_corpus_check_builtin_runs_the_packaged_cases() -> None:
    run = ecpa_main("corpus", "check", "--builtin")
    assert run.status == 0, run
    passed, failed = run.out.strip().split(", ")
    assert int(passed.split()[0]) >= 400
    assert failed == "0 failed"


def test_corpus_check_builtin_excludes_paths_and_needs_one(tmp_path: Path) -> None:
    assert ecpa_main("corpus", "check", "--builtin", tmp_path).status == 2
    run = ecpa_main("corpus", "check")
    assert run.status == 2
    assert "--builtin" in run.err


# --- encrypted keys ------------------------------------------------------------------------


def _openssl_key(path: Path, passphrase: str) -> None:
    subprocess.run(
        [
            "openssl",
            "genpkey",
            "-algorithm",
            "ed25519",
            "-aes-256-cbc",
            "-pass",
            f"pass:{passphrase}",
            "-out",
            str(path),
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )


needs_openssl = pytest.mark.skipif(
    subprocess.run(["which", "openssl"], capture_output=True).returncode != 0,
    reason="no openssl command",
)


@needs_openssl
def test_sign_with_an_openssl_encrypted_key_from_the_environment(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _openssl_key(here / "enc.pem", "s3cret")
    run = ecpa_main("sign", "st.json", "--key", "enc.pem", "--out", "ev")
    assert run.status == 2, run
    assert "ECPA_INVALID_KEY" in run.err
    assert "$ECPA_KEY_PASSWORD" in run.err
    assert "--password-file" in run.err
    assert not Path("ev.jws").exists()
    monkeypatch.setenv("ECPA_KEY_PASSWORD", "wrong")
    run = ecpa_main("sign", "st.json", "--key", "enc.pem", "--out", "ev")
    assert run.status == 2, run
    assert "does not decrypt it" in run.err
    monkeypatch.setenv("ECPA_KEY_PASSWORD", "s3cret")
    assert ecpa_main("sign", "st.json", "--key", "enc.pem", "--out", "ev").status == 0


def test_password_file_first_line_and_never_a_flag_value(here: Path) -> None:
    key = SigningKey.generate()
    write_secret(here / "enc.pem", key.to_pem(b"from-file"))
    write_secret(here / "pw", b"from-file\nignored second line\n")
    run = ecpa_main(
        "sign", "st.json", "--key", "enc.pem", "--password-file", "pw", "--out", "ev", "--json"
    )
    assert run.status == 0, run
    write_secret(here / "empty", b"\n")
    run = ecpa_main("sign", "st.json", "--key", "enc.pem", "--password-file", "empty")
    assert run.status == 2
    assert "empty line" in run.err
    assert ecpa_main("sign", "st.json", "--key", "enc.pem", "--password", "x").status == 2


@needs_openssl
def test_keygen_encrypt_writes_a_key_openssl_and_sign_read(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = ecpa_main("keygen", "--issuer", ISSUER, "--kid", "e1", "--encrypt")
    assert run.status == 2
    assert "$ECPA_KEY_PASSWORD" in run.err
    assert "--password-file" in run.err
    assert not Path("e1.pem").exists()
    monkeypatch.setenv("ECPA_KEY_PASSWORD", "pass phrase")
    run = ecpa_main("keygen", "--issuer", ISSUER, "--kid", "e1", "--encrypt", "--json")
    assert run.status == 0, run
    assert _one_json(run.out)["encrypted"] is True
    pem = Path("e1.pem").read_bytes()
    assert pem.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert os.stat("e1.pem").st_mode & 0o777 == 0o600
    shown = subprocess.run(
        ["openssl", "pkey", "-in", "e1.pem", "-passin", "pass:pass phrase", "-pubout"],
        capture_output=True,
        check=True,
        timeout=30,
    )
    assert shown.stdout == Path("e1.pub.pem").read_bytes()
    st = {**statement(), "kid": "e1", "issuer": ISSUER}
    write_json(Path("e1.json"), st)
    assert ecpa_main("sign", "e1.json", "--key", "e1.pem", "--out", "ev1").status == 0


def test_library_refuses_an_encrypted_key_without_a_password() -> None:
    pem = KEY_1.to_pem(b"pw")
    with pytest.raises(ecpa.EcpaError) as info:
        SigningKey.from_pem(pem)
    assert info.value.code is ecpa.ErrorCode.INVALID_KEY
    assert "passphrase" in info.value.detail
    assert SigningKey.from_pem(pem, b"pw").public_key == KEY_1.public_key
    # a password given for a plain key is not needed and not in the way
    assert SigningKey.from_pem(KEY_1.to_pem(), b"pw").public_key == KEY_1.public_key


def test_trust_add_from_an_encrypted_private_key(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_secret(here / "enc.pem", KEY_1.to_pem(b"pw"))
    args = ["trust", "add", "t.json", "--issuer", ISSUER, "--kid", "a", "--key", "enc.pem"]
    run = ecpa_main(*args, *WINDOW)
    assert run.status == 2, run
    assert "ECPA_KEY_PASSWORD" in run.err
    monkeypatch.setenv("ECPA_KEY_PASSWORD", "pw")
    assert ecpa_main(*args, *WINDOW).status == 0
    assert json.loads(Path("t.json").read_text())["keys"][0]["public_key_b64"] == (
        KEY_1.public_key.to_b64()
    )


def test_keygen_password_file_without_encrypt_is_refused(here: Path) -> None:
    write_secret(here / "pw", "secret\n")
    run = ecpa_main("keygen", "--issuer", ISSUER, "--kid", "p1", "--password-file", "pw")
    assert run.status == 2
    assert "--encrypt" in run.err
    assert not Path("p1.pem").exists()  # never an unencrypted key the user thought encrypted


def test_keygen_encrypt_refuses_a_blank_passphrase(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECPA_KEY_PASSWORD", "   ")
    assert ecpa_main("keygen", "--issuer", ISSUER, "--kid", "b1", "--encrypt").status == 2
    assert not Path("b1.pem").exists()
    with pytest.raises(ecpa.EcpaError):
        KEY_1.to_pem(b"")  # never a silently unencrypted key


def test_an_encrypted_key_after_bag_attributes_is_read(here: Path) -> None:
    """``openssl pkcs12 -nocerts`` writes "Bag Attributes" lines before the key."""
    pem = b"Bag Attributes\n    localKeyID: 01 02\n" + KEY_1.to_pem(b"pw")
    assert SigningKey.from_pem(pem, b"pw").public_key == KEY_1.public_key
    with pytest.raises(ecpa.EcpaError) as info:
        SigningKey.from_pem(pem)
    assert info.value.code is ecpa.ErrorCode.INVALID_KEY
    # Read as an encrypted key behind its bag attributes, not refused as unreadable.
    assert "expected a passphrase" in info.value.detail


def test_a_passphrase_that_is_not_utf8_is_used_as_bytes(here: Path) -> None:
    passphrase = b"hunter2\xff"
    write_secret(here / "enc.pem", KEY_1.to_pem(passphrase))
    env = {**os.environ, "ECPA_KEY_PASSWORD": os.fsdecode(passphrase)}
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("ecpa")),
            "sign",
            "st.json",
            "--key",
            "enc.pem",
            "--out",
            "ev",
        ],
        cwd=here,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert b"hunter2" not in done.stderr


def test_password_file_dash_reads_standard_input(here: Path) -> None:
    write_secret(here / "enc.pem", KEY_1.to_pem(b"from stdin"))
    args = ["sign", "st.json", "--key", "enc.pem", "--password-file", "-", "--out", "ev"]
    run = ecpa_main(*args, stdin=b"from stdin\n")
    assert run.status == 0, run


# --- verify: the summary and the progress bar ---------------------------------------------


def test_verify_says_a_summary_after_several_items_only(here: Path) -> None:
    trust = write_trust(here)
    write_pair(here, "a")
    write_pair(here, "b")
    run = ecpa_main("verify", "a.jws", "--trust", trust, "--now", NOW)
    assert (run.status, run.err) == (0, "")
    run = ecpa_main("verify", "a.jws", "b.jws", "--trust", trust, "--now", NOW)
    assert (run.status, run.err) == (0, "2 verified, 0 failed\n")
    Path("b.json").write_bytes(Path("b.json").read_bytes().replace(b"nonce-1", b"nonce-2"))
    for jobs in ("1", "2"):
        run = ecpa_main("verify", "a.jws", "b.jws", "--trust", trust, "--now", NOW, "--jobs", jobs)
        assert (run.status, run.err) == (1, "1 verified, 1 failed\n")


def _on_a_terminal(
    argv: list[str], cwd: Path, *, stdout_too: bool = False
) -> tuple[int, bytes, bytes]:
    """``argv`` with standard error on a pseudo-terminal and standard output in a file (a
    pipe nobody reads would fill up), or on the terminal too (``stdout_too``): its status,
    the file's bytes and the terminal's."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    with (cwd / "stdout.txt").open("wb") as sink:
        out = follower if stdout_too else sink
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=follower, env=env)
    os.close(follower)
    seen = b""
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: the process and its terminal are gone
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        status = proc.wait(timeout=30)
        return status, (cwd / "stdout.txt").read_bytes(), seen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)


def _log(here: Path, records: int) -> Path:
    from tests._cli_helpers import signed

    lines = []
    for i in range(records):
        payload, jws = signed({**statement(), "challenge_nonce": f"nonce-{i}"})
        record = {
            "schema": "ecpa-evidence-record/0.1",
            "payload_b64": ecpa.profile.b64.b64u_encode(payload),
            "detached_jws": jws,
        }
        lines.append(json.dumps(record))
    path = here / "log.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.e2e
def test_a_progress_bar_on_a_terminal_and_nothing_on_a_pipe(here: Path) -> None:
    log = _log(here, 3000)
    trust = write_trust(here)
    ecpa_script = Path(sys.executable).with_name("ecpa")
    argv = [str(ecpa_script), "verify", str(log), "--trust", str(trust), "--now", str(NOW)]
    status, out, err = _on_a_terminal(argv, here)
    assert status == 0
    assert out.count(b"\nOK ") + out.startswith(b"OK ") == 3000  # results stay on stdout
    assert b"verifying" in err  # the bar, drawn on the terminal
    assert b"3000 verified, 0 failed" in err
    status, nothing, both = _on_a_terminal(argv, here, stdout_too=True)
    assert (status, nothing) == (0, b"")
    assert both.count(b"OK ") == 3000  # the results scroll on the terminal: no bar
    assert b"verifying" not in both
    piped = subprocess.run(argv, capture_output=True, timeout=120, cwd=here, check=False)
    assert piped.returncode == 0
    assert piped.stderr == b"3000 verified, 0 failed\n"  # no bar, no escape sequences
    assert piped.stdout == out


# --- ecpa dev pg-up: a new or an own empty directory, made private ------------------------


def test_dev_pg_up_refuses_what_is_not_a_new_or_own_directory(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    (mine / "notes.txt").write_text("important\n")
    run = ecpa_main("dev", "pg-up", mine)
    assert run.status == 2
    assert "notes.txt" in run.err
    assert stat_mode(mine) == 0o755  # untouched
    afile = tmp_path / "afile"
    afile.write_text("")
    assert ecpa_main("dev", "pg-up", afile).status == 2
    link = tmp_path / "link"
    link.symlink_to(mine)
    assert ecpa_main("dev", "pg-up", link).status == 2


def test_pg_up_makes_an_existing_empty_directory_private() -> None:
    import shutil
    import tempfile

    from ecpa.dev import pgcluster

    empty = Path(tempfile.mkdtemp(prefix="ecpa-pg-mode-", dir="/tmp"))  # postgres reaches it
    try:
        empty.chmod(0o755)
        pgcluster._prepare(empty)  # the step before initdb: the socket's directory
        assert stat_mode(empty) == 0o700
    finally:
        shutil.rmtree(empty, ignore_errors=True)


def stat_mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777
