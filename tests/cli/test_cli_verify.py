"""``ecpa verify``: every input form, the trust store, usage errors (exit 2), binding,
replay fence, host-evidence digest and time policy. Output escaping and the published corpus
run through ``verify`` are in test_cli.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ecpa.cli import app
from ecpa.profile.b64 import b64u_encode
from ecpa.runtime.model.evidence import evidence_digest
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
    NOW,
    binding,
    payload_of,
    statement,
    trust_doc,
    trust_entry,
)

TAMPERED = (payload_of(statement()).replace(b"launch-1", b"launch-9"), signed()[1])
BINDING = binding().to_dict()  # the binding statement() satisfies


@pytest.fixture
def trust(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A trust store in the working directory (tmp_path); $ECPA_TRUST_STORE unset."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ECPA_TRUST_STORE", raising=False)
    return write_trust(tmp_path)


# --- input forms -------------------------------------------------------------------------


def test_jws_with_sibling_payload(trust: Path) -> None:
    write_pair(Path())
    run = verify("ev.jws", trust=trust)
    assert run.status == 0, run
    assert run.lines == [f"OK ev.jws {OK_LINE}"]
    assert run.err == ""


def test_jws_with_payload_option(trust: Path, tmp_path: Path) -> None:
    payload, jws = signed()
    (tmp_path / "e.jws").write_text(jws + "\n")
    (tmp_path / "body.bin").write_bytes(payload)
    run = verify("e.jws", "--payload", "body.bin", trust=trust)
    assert run.status == 0, run
    assert run.lines == [f"OK e.jws {OK_LINE}"]


@pytest.mark.parametrize(
    ("tail", "status", "start"),
    [
        ("", 0, "OK ev.jws "),
        ("\n", 0, "OK ev.jws "),
        ("\n\n", 1, "FAIL ev.jws ATTESTATION_MALFORMED_JWS:"),
    ],
    ids=["no-newline", "one-newline", "two-newlines"],
)
def test_jws_trailing_newlines(trust: Path, tail: str, status: int, start: str) -> None:
    write_pair(Path(), tail=tail)
    run = verify("ev.jws", trust=trust)
    assert run.status == status, run
    assert len(run.lines) == 1
    assert run.lines[0].startswith(start)


def test_bundle_file(trust: Path) -> None:
    write_json(Path("bundle.json"), bundle())
    write_json(Path("tampered.json"), bundle(TAMPERED))
    write_json(Path("not-a-bundle.json"), {"payload_b64": "e30"})
    run = verify("bundle.json", trust=trust)
    assert (run.status, run.lines) == (0, [f"OK bundle.json {OK_LINE}"])
    run = verify("bundle.json", "tampered.json", "not-a-bundle.json", trust=trust)
    assert run.status == 1
    assert run.lines[0] == f"OK bundle.json {OK_LINE}"
    assert run.lines[1].startswith("FAIL tampered.json ATTESTATION_INVALID_SIGNATURE: ")
    assert run.lines[2].startswith("FAIL not-a-bundle.json ECPA_INVALID_RECORD: ")


def _log_lines() -> list[str]:
    second = signed(statement(challenge_nonce="nonce-2"))
    return [record(), record(TAMPERED), "", record(second)]


def test_log_reports_each_line(trust: Path) -> None:
    Path("run.jsonl").write_text("\n".join(_log_lines()) + "\n")
    run = verify("run.jsonl", trust=trust)
    assert run.status == 1, run
    assert len(run.lines) == 3  # the blank line 3 is no item
    assert run.lines[0] == f"OK run.jsonl:1 {OK_LINE}"
    assert run.lines[1].startswith("FAIL run.jsonl:2 ATTESTATION_INVALID_SIGNATURE: ")
    assert run.lines[2].startswith("OK run.jsonl:4 ")
    assert run.lines[2].endswith(" nonce=nonce-2")


def test_log_json_output(trust: Path) -> None:
    Path("run.jsonl").write_text("\n".join(_log_lines()) + "\n")
    run = verify("run.jsonl", "--json", trust=trust)
    assert run.status == 1, run
    results = json_results(run.out)
    assert [(r["input"], r["line"], r["ok"], r["code"]) for r in results] == [
        ("run.jsonl", 1, True, None),
        ("run.jsonl", 2, False, "ATTESTATION_INVALID_SIGNATURE"),
        ("run.jsonl", 4, True, None),
    ]
    assert results[0]["statement"] == statement()
    assert results[2]["statement"]["challenge_nonce"] == "nonce-2"


def test_log_torn_last_line_is_reported_not_counted(trust: Path) -> None:
    lines = _log_lines()
    torn = record()[:40]  # a write cut short by a crash: no newline, truncated JSON
    Path("run.jsonl").write_text(lines[0] + "\n" + lines[3] + "\n" + torn)
    run = verify("run.jsonl", trust=trust)
    assert run.status == 0, run
    assert [line.split(" ")[:2] for line in run.lines] == [
        ["OK", "run.jsonl:1"],
        ["OK", "run.jsonl:2"],
    ]
    assert "run.jsonl:3" in run.err
    assert "torn" in run.err


@pytest.mark.parametrize("content", ["", "\n\n"], ids=["empty", "blank-lines"])
def test_empty_log_fails(trust: Path, content: str) -> None:
    Path("run.jsonl").write_text(content)
    run = verify("run.jsonl", "--json", trust=trust)
    assert run.status == 1, run
    [result] = json_results(run.out)
    assert (result["input"], result["ok"]) == ("run.jsonl", False)
    assert result["code"] == "ECPA_INVALID_RECORD"
    run = verify("run.jsonl", trust=trust)
    assert run.lines == [run.lines[0]]
    assert run.lines[0].startswith("FAIL run.jsonl ECPA_INVALID_RECORD: ")


def test_stdin_bundle(trust: Path) -> None:
    text = json.dumps(bundle(), indent=2)  # pretty-printed: still one bundle
    args = ["verify", "-", "--trust", str(trust), "--now", str(NOW)]
    result = RUNNER.invoke(app, args, input=text)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"OK - {OK_LINE}"]
    result = RUNNER.invoke(app, [*args, "--json"], input=json.dumps(bundle(TAMPERED)))
    assert result.exit_code == 1
    [r] = json_results(result.stdout)
    assert (r["input"], r["line"], r["code"]) == ("-", None, "ATTESTATION_INVALID_SIGNATURE")


def test_stdin_log(trust: Path) -> None:
    text = "\n".join(_log_lines()) + "\n"
    args = ["verify", "-", "--trust", str(trust), "--now", str(NOW)]
    result = RUNNER.invoke(app, args, input=text)
    assert result.exit_code == 1, result.output
    assert [line.split(" ")[:2] for line in result.stdout.splitlines()] == [
        ["OK", "-:1"],
        ["FAIL", "-:2"],
        ["OK", "-:4"],
    ]


def test_several_evidence_arguments_in_order(trust: Path) -> None:
    write_pair(Path())
    write_json(Path("bundle.json"), bundle())
    Path("run.jsonl").write_text(record() + "\n" + record() + "\n")
    run = ecpa_main("verify", "ev.jws", "bundle.json", "run.jsonl", "--trust", trust, "--now", NOW)
    assert run.status == 0, run
    assert [line.split(" ")[1] for line in run.lines] == [
        "ev.jws",
        "bundle.json",
        "run.jsonl:1",
        "run.jsonl:2",
    ]


# --- trust store -------------------------------------------------------------------------


def test_trust_store_from_environment(trust: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_pair(Path())
    monkeypatch.setenv("ECPA_TRUST_STORE", str(trust))
    run = verify("ev.jws", trust=None)
    assert (run.status, run.lines) == (0, [f"OK ev.jws {OK_LINE}"])
    # --trust wins over the environment
    monkeypatch.setenv("ECPA_TRUST_STORE", "no-such-store.json")
    assert verify("ev.jws", trust=trust).status == 0


def test_missing_trust_store_exits_2(trust: Path) -> None:
    write_pair(Path())
    run = verify("ev.jws", trust=None)
    assert run.status == 2
    assert run.out == ""
    assert "--trust" in run.err


SMALL_ORDER_KEY = b64u_encode(b"\x01" + bytes(31))  # the identity point


@pytest.mark.parametrize(
    "content",
    [
        None,
        "{not json",
        json.dumps(trust_doc(trust_entry(public_key_b64=SMALL_ORDER_KEY))),
        json.dumps(trust_doc(trust_entry(), trust_entry())),
        json.dumps({"schema": "ecpa-trust-store/0.1"}),
    ],
    ids=["missing", "not-json", "small-order-key", "duplicate-entry", "no-keys"],
)
def test_bad_trust_store_exits_2(trust: Path, content: str | None) -> None:
    write_pair(Path())
    bad = Path("bad-trust.json")
    if content is not None:
        bad.write_text(content)
    run = verify("ev.jws", trust=bad)
    assert run.status == 2, run
    assert run.out == ""
    assert run.err.startswith("ecpa: ATTESTATION_TRUST_STORE_CONFIG: ")
    assert run.err.count("\n") == 1


# --- inputs that are not evidence: exit 2 ------------------------------------------------


@pytest.mark.parametrize("name", ["missing.jws", "missing.json", "missing.jsonl"])
def test_missing_evidence_file_exits_2(trust: Path, name: str) -> None:
    run = verify(name, trust=trust)
    assert run.status == 2, run
    assert run.err.startswith("ecpa: ECPA_INVALID_INPUT: ")


def test_missing_sibling_payload_exits_2(trust: Path) -> None:
    write_pair(Path())
    Path("ev.json").unlink()
    run = verify("ev.jws", trust=trust)
    assert run.status == 2, run
    assert "ev.json" in run.err
    run = verify("ev.jws", "--payload", "nothing-here.json", trust=trust)
    assert run.status == 2, run


@pytest.mark.parametrize(("make", "found"), [(os.mkfifo, "a FIFO"), (os.mkdir, "a directory")])
def test_a_sibling_payload_that_is_no_file_says_what_it_is(
    trust: Path, make: Any, found: str
) -> None:
    """Not "no such file": what is there, and that it was the .jws's payload; never a wait
    on a FIFO with no writer."""
    write_pair(Path())
    Path("ev.json").unlink()
    make("ev.json")
    run = verify("ev.jws", trust=trust)
    assert run.status == 2, run
    assert "no such file" not in run.err
    assert found in run.err
    assert "payload of ev.jws" in run.err


def test_payload_option_needs_exactly_one_jws(trust: Path) -> None:
    write_pair(Path())
    write_pair(Path(), "other")
    write_json(Path("bundle.json"), bundle())
    assert verify("ev.jws", "other.jws", "--payload", "ev.json", trust=trust).status == 2
    assert verify("bundle.json", "--payload", "ev.json", trust=trust).status == 2


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(None, id="missing"),
        pytest.param(json.dumps({"plan_id": "x"}), id="members-missing"),
        pytest.param(json.dumps({**BINDING, "process_epoch": "7"}), id="wrong-type"),
        pytest.param(json.dumps({**BINDING, "extra": 1}), id="extra-member"),
        pytest.param("{not json", id="not-json"),
        pytest.param(json.dumps([BINDING]), id="array"),
        pytest.param(json.dumps(BINDING).replace("7", "7.0"), id="float"),
    ],
)
def test_bad_binding_file_exits_2(trust: Path, content: str | None) -> None:
    write_pair(Path())
    if content is not None:
        Path("binding.json").write_text(content)
    run = verify("ev.jws", "--binding", "binding.json", trust=trust)
    assert run.status == 2, run
    assert run.out == ""


def test_command_line_usage_errors_exit_2(trust: Path) -> None:
    write_pair(Path())
    assert ecpa_main("verify", "--trust", trust).status == 2  # no EVIDENCE
    assert verify("ev.jws", "--no-such-option", trust=trust).status == 2
    assert ecpa_main("verify", "ev.jws", "--trust", trust, "--now", "soon").status == 2


def test_unusable_replay_db_exits_2(trust: Path, tmp_path: Path) -> None:
    write_pair(Path())
    run = verify("ev.jws", "--replay-db", tmp_path, trust=trust)  # a directory
    assert run.status == 2, run


# --- binding, replay fence, host evidence ------------------------------------------------


def test_binding(trust: Path) -> None:
    write_pair(Path())
    write_json(Path("good.json"), BINDING)
    write_json(Path("other.json"), {**BINDING, "launch_id": "launch-2"})
    assert verify("ev.jws", "--binding", "good.json", trust=trust).status == 0
    run = verify("ev.jws", "--binding", "other.json", trust=trust)
    assert run.status == 1
    assert run.lines[0].startswith("FAIL ev.jws ATTESTATION_BINDING_MISMATCH: ")


def test_replay_db_accepts_a_nonce_once(trust: Path) -> None:
    write_pair(Path())
    db = ["--replay-db", "replay.db"]
    assert verify("ev.jws", *db, trust=trust).status == 0
    run = verify("ev.jws", *db, trust=trust)
    assert run.status == 1
    assert run.lines[0].startswith("FAIL ev.jws REPLAYED_NONCE: ")
    # within one run too
    run = verify("ev.jws", "ev.jws", "--replay-db", "other.db", trust=trust)
    assert [line.split(" ")[0] for line in run.lines] == ["OK", "FAIL"]
    assert "REPLAYED_NONCE" in run.lines[1]


def test_binding_mismatch_does_not_consume_the_nonce(trust: Path) -> None:
    write_pair(Path())
    write_json(Path("good.json"), BINDING)
    write_json(Path("other.json"), {**BINDING, "process_epoch": 8})
    db = ["--replay-db", "replay.db"]
    run = verify("ev.jws", *db, "--binding", "other.json", trust=trust)
    assert "ATTESTATION_BINDING_MISMATCH" in run.out
    assert verify("ev.jws", *db, "--binding", "good.json", trust=trust).status == 0
    assert "REPLAYED_NONCE" in verify("ev.jws", *db, trust=trust).out


def test_host_evidence_digest(trust: Path) -> None:
    host = b'{"counters":{"invoked":3}}'
    evidence = signed(statement(evidence_digest=evidence_digest(host)))
    Path("bad.jsonl").write_text(record(evidence, host=host + b" ") + "\n")
    Path("good.jsonl").write_text(record(evidence, host=host) + "\n")
    db = ["--replay-db", "replay.db"]
    run = verify("bad.jsonl", *db, "--json", trust=trust)
    assert run.status == 1
    [r] = json_results(run.out)
    assert (r["line"], r["code"]) == (1, "ATTESTATION_EVIDENCE_DIGEST_MISMATCH")
    # the refused record did not consume the nonce
    run = verify("good.jsonl", *db, trust=trust)
    assert run.status == 0, run
    assert "REPLAYED_NONCE" in verify("good.jsonl", *db, trust=trust).out


# --- time policy -------------------------------------------------------------------------
# statement(): observed_at NOW-2, issued_at NOW-1, expires_at NOW+60 (TTL 61, age 2 at NOW)


@pytest.mark.parametrize(
    ("options", "code"),
    [
        (["--now", NOW + 60], "OK"),  # expires_at == now is still valid
        (["--now", NOW + 61], "ATTESTATION_EXPIRED"),
        (["--now", NOW + 61, "--clock-skew", 1], "OK"),
        (["--now", NOW - 1], "OK"),
        (["--now", NOW - 2], "ATTESTATION_NOT_YET_VALID"),
        (["--now", NOW - 2, "--clock-skew", 1], "OK"),
        (["--max-ttl", 61], "OK"),
        (["--max-ttl", 60], "ATTESTATION_INVALID_TIME"),
        (["--max-age", 2], "OK"),
        (["--max-age", 1], "ATTESTATION_INVALID_TIME"),
        (["--max-age", 1, "--clock-skew", 1], "OK"),
    ],
)
def test_time_policy_boundaries(trust: Path, options: list[Any], code: str) -> None:
    write_pair(Path())
    run = ecpa_main("verify", "ev.jws", "--trust", trust, "--now", NOW, *options)
    if code == "OK":
        assert (run.status, run.lines[0].split(" ")[0]) == (0, "OK"), run
    else:
        assert run.status == 1, run
        assert run.lines[0].startswith(f"FAIL ev.jws {code}: ")


@pytest.mark.parametrize(
    "option",
    [
        ["--clock-skew", -1],
        ["--max-ttl", -1],
        ["--max-age", -1],
        ["--clock-skew", 2**53],
        ["--max-ttl", 2**53],
        pytest.param(["--now", -1], id="now-negative"),
        pytest.param(["--now", 2**53], id="now-too-large"),
    ],
)
def test_bad_policy_values_exit_2(trust: Path, option: list[Any]) -> None:
    write_pair(Path())
    run = ecpa_main("verify", "ev.jws", "--trust", trust, "--now", NOW, *option)
    assert run.status == 2, run
    assert run.out == ""


def test_results_and_messages_keep_their_order_on_one_stream(trust: Path) -> None:
    """``ecpa verify`` buffers its result lines (a log of many records is one write per
    buffer, not per line) yet flushes them before anything goes to standard error: with
    both streams on one file (``2>&1``), a torn last line's message follows the results
    before it, and a second log's results follow the message."""
    import subprocess

    from tests._launch_helpers import ECPA, clean_env

    lines = _log_lines()
    Path("a.jsonl").write_text(f"{lines[0]}\n{lines[1]}\n{record()[:40]}")
    Path("b.jsonl").write_text(lines[3] + "\n")
    with open("both.txt", "wb") as both:
        done = subprocess.run(
            [str(ECPA), "verify", "a.jsonl", "b.jsonl", "--trust", str(trust), "--now", str(NOW)],
            stdout=both,
            stderr=both,
            env={k: v for k, v in clean_env().items() if k != "PYTHONUNBUFFERED"},
            timeout=60,
            check=False,
        )
    assert done.returncode == 1  # a.jsonl:2 is tampered
    heads = [line.split(" ")[:2] for line in Path("both.txt").read_text().splitlines()]
    assert heads == [
        ["OK", "a.jsonl:1"],
        ["FAIL", "a.jsonl:2"],
        ["ecpa:", "a.jsonl:3:"],
        ["OK", "b.jsonl:1"],
        ["2", "verified,"],  # the summary, last: "2 verified, 1 failed"
    ]
