"""The command line: exit statuses, help and version, the installed script, internal
errors, output escaping, ``inspect``, ``corpus check``, the published corpus run through
``verify``, and the demo's end-to-end run.

``verify`` is tested in test_cli_verify.py; ``sign``, ``keygen`` and ``trust`` in
test_cli_keys.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from ecpa.cli import app, main
from ecpa.demo.acts import ACTS
from tests._cli_helpers import (
    OK_LINE,
    RUNNER,
    bundle,
    ecpa_main,
    json_results,
    record,
    signed,
    verify,
    write_json,
    write_pair,
    write_trust,
)
from tests.support import (
    CONFORMANCE,
    ISSUER,
    KEY_1,
    NOW,
    header_bytes,
    load_json,
    needs_shared,
    payload_of,
    sign_raw,
    statement,
    trust_doc,
    trust_entry,
    write_secret,
)

UPSTREAM = CONFORMANCE / "upstream-ecpa-0.1" / "attestation-vectors.json"
SCRIPT = Path(sys.executable).parent / "ecpa"


def test_demo_runs_the_whole_loop(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    kept = tmp_path / "kept"  # --keep: everything stays, so its commands can be run again
    assert main(["demo", "--keep", str(kept)]) == 0
    out = capsys.readouterr().out
    # Each act says its title as it begins, in the order `ecpa demo --help` lists them.
    titles = [line[3:] for line in out.splitlines() if line.startswith("## ")]
    assert titles == list(ACTS.values())
    assert f"everything the demo made is in {kept}" in out
    assert {"trust.json", "evidence.jws", "evidence.json", "runs", "runs2", "runs3"} <= {
        p.name for p in kept.iterdir()
    }
    assert f"$ ecpa verify {kept / 'evidence.jws'} --trust {kept / 'trust.json'}" in out
    again = ecpa_main("trust", "list", kept / "trust.json")  # the store as the demo left it
    assert (again.status, again.out.split()[0]) == (0, "DISABLED")
    # 34 steps (the last: the DLA value simulator): 2 of a key replaced in trust.json (false,
    # then true once put back), 4 of ecpa serve (it listens, its API,
    # its metrics before and after a rank is killed), 1 of ecpa audit after the launch, 5
    # of the host's witness (launched, true, stopped, its journal audited, a line taken out
    # found), 2 (ship, status --db) where PostgreSQL can be started
    counted = re.search(r"(\d+) of (\d+) steps behaved as the profile says", out)
    assert counted, out
    assert counted.group(1) == counted.group(2)
    assert "the serve extra is not installed" not in out  # the dev extra installs it
    want = 34 - 2 * ("(skipped: " in out)
    assert int(counted.group(2)) == want, out
    for code in (
        "REPLAYED_NONCE",
        "ATTESTATION_INVALID_SIGNATURE",
        "ATTESTATION_EXPIRED",
        "ATTESTATION_TRUST_POLICY",
    ):
        assert code in out
    assert "!! expected" not in out
    assert "step time profiled (a100-llama2-7b)" in out
    assert "source: host; host witnessed: selected" in out
    assert "host_journal_mismatch" in out
    assert "another public key in the certificate" in out
    assert re.search(
        r'ecpa_slot_covered\{launch_id="launch-[0-9a-f]{16}",slot="scheduler.1"\} 0.0', out
    )


def test_demo_keep_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("not the demo's\n")
    run = ecpa_main("demo", "--keep", tmp_path)
    assert run.status == 2
    assert "expected --keep" in run.err
    assert "mine.txt" in run.err
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]


def test_demo_help_lists_every_act() -> None:
    run = ecpa_main("demo", "--help")
    assert run.status == 0
    shown = " ".join(run.out.split())
    for number, title in enumerate(ACTS.values(), 1):
        assert f"{number}. {' '.join(title.split())}" in shown, title
    assert "--keep DIR" in run.out


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-command"]) == 2
    assert "No such command" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert "ecpa-jcs-jws-eddsa/0.1" in capsys.readouterr().out


def test_python_dash_m_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ecpa", "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ecpa ")


# --- help and version --------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["verify"],
        ["inspect"],
        ["sign"],
        ["keygen"],
        pytest.param(["trust"], id="trust"),
        ["trust", "list"],
        ["trust", "add"],
        ["trust", "disable"],
        ["trust", "check"],
        pytest.param(["corpus"], id="corpus"),
        ["corpus", "check"],
        ["demo"],
    ],
    ids=lambda command: " ".join(command) or "ecpa",
)
def test_help_has_an_example(command: list[str]) -> None:
    result = RUNNER.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Usage: ecpa")
    assert "Example" in result.stdout


def test_version_via_cli_runner() -> None:
    result = RUNNER.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == "ecpa 0.1.0 (ecpa-jcs-jws-eddsa/0.1)\n"


# --- the installed script, in a subprocess -----------------------------------------------


def _script(*args: str | Path, cwd: Path, stdin: str | None = None) -> Any:
    return subprocess.run(
        [str(SCRIPT), *(str(a) for a in args)],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_installed_script_exit_statuses(tmp_path: Path) -> None:
    assert SCRIPT.is_file(), SCRIPT
    trust = write_trust(tmp_path)
    write_pair(tmp_path)
    tampered = statement(launch_id="launch-9")
    write_json(tmp_path / "tampered.json", bundle((json.dumps(tampered).encode(), signed()[1])))
    common = ["--trust", trust, "--now", str(NOW)]
    proc = _script("verify", "ev.jws", *common, cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"OK ev.jws {OK_LINE}\n", "")
    proc = _script("verify", "-", *common, cwd=tmp_path, stdin=json.dumps(bundle()))
    assert (proc.returncode, proc.stdout) == (0, f"OK - {OK_LINE}\n")
    proc = _script("verify", "tampered.json", "--json", *common, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["code"] == "ATTESTATION_NONCANONICAL_PAYLOAD"
    proc = _script("verify", "missing.jws", *common, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("ecpa: ECPA_INVALID_INPUT: ")
    assert "Traceback" not in proc.stderr


def test_installed_script_ends_quietly_on_a_closed_pipe(tmp_path: Path) -> None:
    """`ecpa verify log | head -1`: head closing the pipe is not "invalid evidence" (1)
    and prints no error; the script dies of SIGPIPE like any Unix filter (141)."""
    trust = write_trust(tmp_path)
    line = json.dumps(bundle()) + "\n"
    (tmp_path / "big.jsonl").write_text(line * 5000)
    proc = subprocess.run(
        [
            "bash",
            "-c",
            f"{SCRIPT} verify big.jsonl --trust {trust} --now {NOW} | head -1; "
            'echo "status=${PIPESTATUS[0]}" >&2',
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.stdout.startswith("OK big.jsonl:1 ")
    assert proc.stderr.strip() == "status=141", proc.stderr


# --- internal errors: exit 3, one line, no traceback -------------------------------------


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("boom\nTraceback (most recent call last): forged")


@pytest.mark.parametrize(
    ("target", "argv"),
    [
        ("ecpa.verify_jobs._serial.verify_evidence", ["verify", "ev.jws", "--trust", "trust.json"]),
        ("ecpa.cli._sign.sign", ["sign", "ev.json", "--key", "k1.pem", "--out", "out"]),
        ("ecpa.cli._corpus.run_any", ["corpus", "check", "trust.json"]),
    ],
    ids=["verify", "sign", "corpus-check"],
)
def test_internal_error_exits_3_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, argv: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_trust(tmp_path)
    write_pair(tmp_path)
    write_secret(tmp_path / "k1.pem", KEY_1.to_pem())
    write_json(tmp_path / "ev.json", statement())
    monkeypatch.setattr(target, _boom)
    run = ecpa_main(*argv)
    assert run.status == 3, run
    assert run.out == ""
    assert run.err.count("\n") == 1
    assert run.err.startswith("ecpa: internal error: RuntimeError: boom\\nTraceback")


# --- inspect -----------------------------------------------------------------------------


def test_inspect_human_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_pair(tmp_path)
    run = ecpa_main("inspect", "ev.jws")
    assert run.status == 0, run
    assert run.lines[0].startswith("UNVERIFIED ev.jws")
    shown = json.loads("\n".join(run.lines[1:]))
    assert shown["verified"] is False
    assert shown["payload"] == statement()
    assert shown["header"]["kid"] == "test-key-1"


def test_inspect_json_and_tampered_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tampered = signed()[0].replace(b"launch-1", b"launch-9")
    write_pair(tmp_path, "bad", (tampered, "e30..AAAA"))  # header {}, no real signature
    (tmp_path / "run.jsonl").write_text(record() + "\n{oops\n")
    run = ecpa_main("inspect", "bad.jws", "run.jsonl", "--json")
    assert run.status == 0, run
    shown = [json.loads(line) for line in run.lines]
    assert [(s["input"], s["line"], s["verified"]) for s in shown] == [
        ("bad.jws", None, False),
        ("run.jsonl", 1, False),
        ("run.jsonl", 2, False),
    ]
    assert shown[0]["header"] == {}
    assert shown[0]["payload"]["launch_id"] == "launch-9"
    assert shown[1]["payload"] == statement()
    assert "error" in shown[2]
    assert ecpa_main("inspect", "missing.jws").status == 2


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def test_inspect_json_output_is_strict_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_pair(tmp_path, evidence=(b'{"a":NaN,"b":1e999}', signed()[1]))
    run = ecpa_main("inspect", "ev.jws", "--json")
    assert run.status == 0, run
    shown = json.loads(run.out, parse_constant=_not_json)
    assert shown["verified"] is False


# --- output escaping ---------------------------------------------------------------------


@pytest.fixture
def trust(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A trust store in the working directory (tmp_path); $ECPA_TRUST_STORE unset."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ECPA_TRUST_STORE", raising=False)
    return write_trust(tmp_path)


@pytest.mark.parametrize(
    "issuer",
    [
        f"{ISSUER}\nOK forged.jws issuer=x kid=y subject=z nonce=n",
        f"{ISSUER}\x1b[2K\rOK forged.jws",
        f"{ISSUER}\u2028OK forged.jws",
        f"{ISSUER}\u202eOK forged.jws",
        f"{ISSUER}\x85OK forged.jws",
    ],
    ids=["newline", "escape", "line-separator", "bidi-override", "next-line"],
)
@pytest.mark.parametrize("trusted", [True, False], ids=["ok", "fail"])
def test_issuer_cannot_forge_output_lines(trust: Path, issuer: str, trusted: bool) -> None:
    st = statement(issuer=issuer)
    payload = payload_of(st)
    write_pair(Path(), evidence=(payload, sign_raw(header_bytes(), payload)))
    if trusted:
        write_trust(Path(), trust_doc(trust_entry(issuer=issuer)))
    run = verify("ev.jws", trust=trust)
    assert run.status == (0 if trusted else 1), run
    assert run.out.endswith("\n")
    text = run.out[:-1]
    assert text.isprintable(), repr(text)  # no control, separator or bidi character at all
    assert text.isascii(), repr(text)
    assert text.startswith("OK ev.jws issuer=" if trusted else "FAIL ev.jws ")
    assert not any(unicodedata.category(c).startswith(("C", "Z")) for c in text if c != " ")
    run = verify("ev.jws", "--json", trust=trust)
    [r] = json_results(run.out)
    if trusted:
        assert r["statement"]["issuer"] == issuer


def test_file_name_cannot_forge_output_lines(trust: Path) -> None:
    name = "x\nOK forged.json"
    write_json(Path(name), bundle())
    run = verify(name, trust=trust)
    assert run.status == 0, run
    assert len(run.out.splitlines()) == 1
    assert run.out.startswith('OK "x\\nOK forged.json" ')


# --- corpus check ------------------------------------------------------------------------


@needs_shared
def test_corpus_check_upstream() -> None:
    run = ecpa_main("corpus", "check", UPSTREAM)
    assert run.status == 0, run
    assert run.lines == ["56 passed, 0 failed"]
    run = ecpa_main("corpus", "check", UPSTREAM, "--json")
    assert run.status == 0
    results = [json.loads(line) for line in run.lines]
    assert len(results) == 56
    assert all(set(r) == {"file", "id", "expected", "got", "passed", "detail"} for r in results)
    assert all(r["passed"] is True and r["expected"] == r["got"] for r in results)
    assert run.err == "56 passed, 0 failed\n"


def _corpus_copy(tmp_path: Path, case_id: str, expected: str) -> Path:
    corpus = load_json(UPSTREAM)
    [case] = [c for c in corpus["cases"] if c["id"] == case_id]
    case["expected"] = expected
    return write_json(tmp_path / "corpus.json", corpus)


@needs_shared
def test_corpus_check_mismatch(tmp_path: Path) -> None:
    path = _corpus_copy(tmp_path, "negative-expired", "ATTESTATION_TRUST_POLICY")
    run = ecpa_main("corpus", "check", path)
    assert run.status == 1, run
    assert len(run.lines) == 2
    assert run.lines[0].startswith(
        "MISMATCH negative-expired: expected ATTESTATION_TRUST_POLICY, got ATTESTATION_EXPIRED"
    )
    assert run.lines[1] == "55 passed, 1 failed"


@needs_shared
def test_corpus_check_escapes_expected(tmp_path: Path) -> None:
    path = _corpus_copy(tmp_path, "negative-expired", "X\nMISMATCH forged: expected OK")
    run = ecpa_main("corpus", "check", path)
    assert run.status == 1
    assert len(run.lines) == 2


@pytest.mark.parametrize(
    "content",
    [
        None,
        json.dumps({"cases": []}),
        pytest.param("{not json", id="not-json"),
    ],
    ids=["missing", "not-a-corpus", "not-json"],
)
def test_corpus_check_bad_file_exits_2(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "corpus.json"
    if content is not None:
        path.write_text(content)
    assert ecpa_main("corpus", "check", path).status == 2


# --- the published corpus, case by case through the command line -------------------------


@needs_shared
def test_verify_upstream_corpus_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PROFILE §3, last paragraph: each case at its `now` with default policy; cases whose
    binding is not null get a --binding file and ONE --replay-db shared by the whole run."""
    monkeypatch.chdir(tmp_path)
    corpus = load_json(UPSTREAM)
    trust = write_trust(tmp_path, {"schema": "ecpa-trust-store/0.1", "keys": corpus["keys"]})
    assert len(corpus["cases"]) == 56
    wrong = []
    for index, case in enumerate(corpus["cases"]):
        assert "policy" not in case  # the default policy
        assert "trust" not in case  # the shared keys
        name = f"case-{index:02d}.json"
        write_json(
            tmp_path / name,
            {"payload_b64": case["payload_b64"], "detached_jws": case["detached_jws"]},
        )
        extra: list[str] = []
        if case["binding"] is not None:
            write_json(tmp_path / f"binding-{index:02d}.json", case["binding"])
            extra = ["--binding", f"binding-{index:02d}.json", "--replay-db", "replay.db"]
        run = verify(name, *extra, trust=trust, now=case["now"])
        expected = case["expected"]
        want = (0, f"OK {name} ") if expected == "OK" else (1, f"FAIL {name} {expected}: ")
        if run.status != want[0] or len(run.lines) != 1 or not run.lines[0].startswith(want[1]):
            wrong.append((case["id"], expected, run))
    assert wrong == []


def test_an_ok_line_shows_each_value_as_it_is() -> None:
    """The OK line names the nonce ``nonce=``; a value holding ``challenge_nonce=`` is shown
    escaped and whole, never rewritten (the name is written, not substituted afterwards)."""
    from ecpa.verify_jobs._results import render_result

    statement = {
        "issuer": "a challenge_nonce=b",
        "kid": "k=challenge_nonce=",
        "subject": "s",
        "challenge_nonce": "n",
    }
    line = render_result("log.jsonl", 3, None, statement, False)
    assert line == (
        'OK log.jsonl:3 issuer="a challenge_nonce=b" kid="k=challenge_nonce=" subject=s nonce=n'
    )


@pytest.mark.parametrize(
    "command",
    [
        ["verify"],
        ["inspect"],
        ["sign"],
        ["keygen"],
        ["trust", "add"],
        ["trust", "disable"],
        ["corpus", "check"],
        ["corpus", "generate"],
        ["run"],
        ["status"],
        ["ship"],
        ["launches"],
        ["serve"],
        ["audit"],
        ["demo"],
    ],
    ids=" ".join,
)
def test_help_shows_no_python_types(command: list[str]) -> None:
    """`ecpa run --help` showed `COMMAND <list[str]>`, `--grace <float range>`."""
    result = RUNNER.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "list[" not in result.stdout
    assert " range>" not in result.stdout


def test_shell_completion_is_on() -> None:
    """typer's completion was switched off."""
    out = subprocess.run(
        [str(SCRIPT), "--show-completion", "bash"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert "_ecpa_completion" in out.stdout
    assert "_ECPA_COMPLETE" in out.stdout
    completed = subprocess.run(
        [str(SCRIPT)],
        capture_output=True,
        text=True,
        check=False,
        env={
            **os.environ,
            "_ECPA_COMPLETE": "complete_bash",
            "COMP_WORDS": "ecpa ser",
            "COMP_CWORD": "1",
        },
    )
    assert "serve" in completed.stdout.split()
