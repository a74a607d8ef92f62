"""``ecpa audit`` on launch directories written directly (``bench.launchdir``): the report is
the same whenever it is made, gaps carry their causes, and the signed receipt fails with
the digest's code for a changed report and with the key's code for another key."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import ecpa
from bench.launchdir import Written, environment, process_signer, write_launch
from ecpa.runtime import EXIT_SCHEMA, audit_launch_dir, check_receipt, report_bytes, sign_receipt
from tests._cli_helpers import ecpa_main

NOW = int(time.time()) - 3600  # an hour ago: the launch ended long before the audit
MANAGER = ecpa.SigningKey.from_seed(b"m" * 32)
OTHER = ecpa.SigningKey.from_seed(b"o" * 32)


def ended_launch(tmp_path: Path, *, records: int = 30, host_evidence: bool = False) -> Written:
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    written = write_launch(
        runs,
        slots=2,
        records=records,
        now=NOW,
        interval=1,
        launch_id="launch-00000000000000aa",
        host_evidence=host_evidence,
    )
    # ecpa run closes each key's window when the launch ends, and records the end.
    trust = json.loads((written.directory / "trust.json").read_text())
    for entry in trust["keys"]:
        entry["not_after"] = NOW + 1
    (written.directory / "trust.json").write_text(json.dumps(trust))
    exit_doc = {"schema": EXIT_SCHEMA, "ended_at": NOW + 1, "exit_status": 0}
    (written.directory / "exit.json").write_text(json.dumps(exit_doc))
    return written


def trust_of(key: ecpa.SigningKey) -> ecpa.TrustStore:
    return ecpa.TrustStore.from_dict(
        {
            "schema": "ecpa-trust-store/0.1",
            "keys": [
                {
                    "issuer": "urn:ecpa:issuer:mgr",
                    "kid": "mgr-1",
                    "public_key_b64": key.public_key.to_b64(),
                    "subjects": ["launch-audit"],
                    "enabled": True,
                    "not_before": 0,
                    "not_after": 2**40,
                }
            ],
        }
    )


def test_an_ended_launchs_audit_is_the_same_whenever_it_is_made(tmp_path: Path) -> None:
    written = ended_launch(tmp_path)
    first = audit_launch_dir(written.directory, now=NOW + 10).report
    a_year_later = audit_launch_dir(written.directory, now=NOW + 366 * 86400).report
    assert report_bytes(first) == report_bytes(a_year_later)
    assert first["ended_at"] == NOW + 1
    assert first["judged_until"] == NOW + 1
    [s0, s1] = first["slots"]
    assert s1["effective_intervals"] == s0["effective_intervals"]
    # 30 records a second apart, the newest at NOW: covered from the first record on.
    assert s0["effective_intervals"] == [[NOW - 29, NOW + 1]]
    assert s0["effective_s"] == 30
    assert first["effective_intervals"] == [[NOW - 29, NOW + 1]]
    assert first["startup_s"] == (NOW - 29) - first["started_at"]
    assert [g["cause"] for g in s0["gaps"]] == ["no evidence yet"]
    assert first["exercised"] is True
    assert first["selections"] == 2 * (3 * 30 - 3 * 0)  # per process: 3 * seq at the newest
    assert first["records"] == {"accepted": 60, "refused": {}}


def test_a_launch_backed_by_the_host_is_audited_on_its_witness(tmp_path: Path) -> None:
    written = ended_launch(tmp_path, host_evidence=True)
    report = audit_launch_dir(written.directory, now=NOW + 100).report
    assert report["source"] == "host"
    assert report["host"]["selected"] > 0
    assert report["exercised"] is True
    assert "witnessed by the host" in report["exercised_detail"]
    for slot in report["slots"]:
        assert slot["host"]["selected"] > 0
    assert report["host_journals"]["mismatches"] == []
    assert len(report["host_journals"]["journals"]) == 2


def test_a_window_cuts_the_intervals_and_the_counts(tmp_path: Path) -> None:
    written = ended_launch(tmp_path)
    report = audit_launch_dir(written.directory, now=NOW + 10, window=(NOW - 20, NOW - 10)).report
    assert report["window"] == {"from": NOW - 20, "to": NOW - 10}
    assert report["effective_intervals"] == [[NOW - 20, NOW - 10]]
    assert report["effective_fraction"] == 1.0
    # bench.launchdir's record seq n counts 3n selections: records NOW-20 .. NOW-11 are in.
    assert report["slots"][0]["selections"] == 3 * 19 - 3 * 9


def test_a_process_whose_evidence_stops_is_a_gap_that_says_so(tmp_path: Path) -> None:
    written = ended_launch(tmp_path)
    log = next((written.directory / "evidence" / written.directory.name).glob("scheduler.1-*"))
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:10]))  # its records stop 20 s before the end
    report = audit_launch_dir(written.directory, now=NOW + 10).report
    s1 = report["slots"][1]
    assert s1["effective_intervals"] == [[NOW - 29, NOW - 20 + 3 + 1]]  # + heartbeat window
    assert s1["gaps"][-1]["cause"] == "process died (its evidence stopped)"
    assert report["exercised"] is False


def test_a_supervisor_gone_without_an_end_record_is_never_exercised(tmp_path: Path) -> None:
    written = ended_launch(tmp_path)
    (written.directory / "exit.json").unlink()  # ecpa run SIGKILLed: no record of the end
    report = audit_launch_dir(
        written.directory, now=NOW + 3600, proc_root=tmp_path / "no-proc"
    ).report
    assert report["exercised"] is False
    assert "recorded no end" in report["exercised_detail"]
    assert report["ended_how"].startswith("supervisor gone without recording the end")
    assert report["judged_until"] == NOW + 3 + 1  # the last evidence and its window


def test_a_changed_report_fails_with_the_digests_code(tmp_path: Path) -> None:
    written = ended_launch(tmp_path)
    report = audit_launch_dir(written.directory, now=NOW + 10).report
    data = report_bytes(report)
    signed = sign_receipt(report, data, MANAGER, issuer="urn:ecpa:issuer:mgr", kid="mgr-1", now=NOW)
    checked = check_receipt(data, signed.payload, signed.detached_jws, trust_of(MANAGER))
    assert checked.statement.evidence_digest.startswith("sha256:")
    assert (checked.statement.event, checked.statement.subject) == ("audited", "launch-audit")
    changed = data.replace(b'"exercised":true', b'"exercised":fals', 1)
    assert changed != data
    with pytest.raises(ecpa.EcpaError) as caught:
        check_receipt(changed, signed.payload, signed.detached_jws, trust_of(MANAGER))
    assert caught.value.code is ecpa.ErrorCode.EVIDENCE_DIGEST_MISMATCH


def test_a_receipt_from_another_key_fails_with_the_keys_code(tmp_path: Path) -> None:
    written = ended_launch(tmp_path)
    report = audit_launch_dir(written.directory, now=NOW + 10).report
    data = report_bytes(report)
    signed = sign_receipt(report, data, OTHER, issuer="urn:ecpa:issuer:mgr", kid="mgr-1", now=NOW)
    with pytest.raises(ecpa.EcpaError) as caught:
        check_receipt(data, signed.payload, signed.detached_jws, trust_of(MANAGER))
    assert caught.value.code is ecpa.ErrorCode.INVALID_SIGNATURE


def test_a_receipt_for_another_launch_is_refused(tmp_path: Path) -> None:
    written = ended_launch(tmp_path)
    report = audit_launch_dir(written.directory, now=NOW + 10).report
    data = report_bytes(report)
    other = {**report, "launch_id": "launch-00000000000000bb"}
    signed = sign_receipt(other, data, MANAGER, issuer="urn:ecpa:issuer:mgr", kid="mgr-1", now=NOW)
    with pytest.raises(ecpa.EcpaError) as caught:
        check_receipt(data, signed.payload, signed.detached_jws, trust_of(MANAGER))
    assert caught.value.code is ecpa.ErrorCode.BINDING_MISMATCH


def test_the_status_of_an_ended_launch_judges_its_evidence_as_of_its_end(tmp_path: Path) -> None:
    """An hour after the end, the key windows closed at the end: status said "undecided" and
    "no evidence" for records that were valid when they were written."""
    written = ended_launch(tmp_path)
    out = ecpa_main("status", "--launch", written.directory, "--json")
    doc: dict[str, Any] = json.loads(out.out)
    assert doc["runtime_effective"] is False
    first = doc["reasons"][0]
    assert first["code"] == "launch_ended"
    assert "ecpa audit --launch" in first["text"]
    assert " s ago)" in first["text"]
    assert "undecided" not in out.out
    assert doc["accepted"] > 0
    assert doc["refused"] == {}


def test_status_text_says_its_time_in_iso_8601_beside_epoch_seconds(tmp_path: Path) -> None:
    """Times in text output say ISO 8601 beside the epoch seconds, never raw epoch seconds
    alone (`now=1796181697`)."""
    import re

    written = ended_launch(tmp_path)
    out = ecpa_main("status", "--launch", written.directory)
    assert re.fullmatch(
        r"now: \d+ \(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)  coverage: 0/2 slots", out.lines[1]
    ), out.lines[:2]


def test_the_audit_command_text_json_and_plot(tmp_path: Path) -> None:
    written = ended_launch(tmp_path)
    png = tmp_path / "timeline.png"
    out = ecpa_main("audit", "--launch", written.directory, "--plot", png)
    assert out.status == 0, out
    assert out.lines[0].startswith("launch launch-00000000000000aa: exercised: true")
    assert "slot scheduler.1: effective 30 s" in out.out
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    out = ecpa_main("audit", "--launch", written.directory, "--json")
    assert json.loads(out.out)["schema"] == "ecpa-audit-report/0.2"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "expected --launch DIR or --db DSN"),
        (("--db", "postgresql://x/y"), "expected --launch-id ID with --db"),
        (("--db", "file.db", "--launch-id", "x"), "expected --db postgresql://"),
        (("--launch", "nowhere"), "expected a launch directory"),
        (("--launch", ".", "--from", "10", "--to", "5"), "expected --to after --from"),
        (("--launch", ".", "--sign", "k.pem"), "expected --sign KEY with --issuer"),
        (("--check", "r.json"), "expected --receipt"),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...], expected: str) -> None:
    out = ecpa_main("audit", *args)
    assert out.status == 2, out
    assert expected in out.err


@pytest.mark.parametrize("host_evidence", [False, True], ids=["plugin", "host"])
def test_the_store_gives_the_same_audit_as_the_directory(
    tmp_path: Path, pg_dsn: str, host_evidence: bool
) -> None:
    """The same report from the store, the host's journals shipped and checked there too."""
    written = ended_launch(tmp_path, host_evidence=host_evidence)
    shipped = ecpa_main("ship", "--launch", written.directory, "--db", pg_dsn, "--once")
    assert shipped.status == 0, shipped
    assert "not a process log" not in shipped.out + shipped.err
    out = ecpa_main(
        "audit", "--db", pg_dsn, "--launch-id", written.directory.name, "--json", "--now", NOW
    )
    assert out.status == 0, out
    from_store = json.loads(out.out)
    from_dir = audit_launch_dir(written.directory, now=NOW + 10).report
    assert report_bytes(from_store) == report_bytes(from_dir)
    assert len(from_store["host_journals"]["journals"]) == (2 if host_evidence else 0)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_verify_at_issue_accepts_an_ended_launchs_logs(tmp_path: Path, jobs: str) -> None:
    """After the launch the key windows are closed: every line failed with
    ATTESTATION_TRUST_POLICY unless the user found the right --now."""
    written = ended_launch(tmp_path, records=5)
    [log, _] = sorted((written.directory / "evidence" / written.directory.name).glob("*.jsonl"))
    trust = written.directory / "trust.json"
    now = ecpa_main("verify", log, "--trust", trust, "--jobs", jobs)
    assert now.status == 1
    assert "ATTESTATION_TRUST_POLICY" in now.out
    past = ecpa_main("verify", log, "--trust", trust, "--at-issue", "--jobs", jobs)
    assert past.status == 0, past
    assert len(past.lines) == 5
    assert all(line.startswith("OK ") and " at_issue=" in line for line in past.lines), past.out
    assert "each item verified as of its own issued_at" in past.err
    as_json = ecpa_main("verify", log, "--trust", trust, "--at-issue", "--json", "--jobs", jobs)
    docs = [json.loads(line) for line in as_json.lines]
    assert [d["verified_at"] for d in docs] == [d["statement"]["issued_at"] for d in docs]
    both = ecpa_main("verify", log, "--trust", trust, "--at-issue", "--now", "5")
    assert both.status == 2
    assert "expected --now T or --at-issue, not both" in both.err


def test_verify_at_issue_refuses_a_replay_fence(tmp_path: Path) -> None:
    written = ended_launch(tmp_path, records=2)
    [log, _] = sorted((written.directory / "evidence" / written.directory.name).glob("*.jsonl"))
    out = ecpa_main(
        "verify",
        log,
        "--trust",
        written.directory / "trust.json",
        "--at-issue",
        "--replay-db",
        tmp_path / "fence.db",
    )
    assert out.status == 2
    assert "expected --at-issue without --replay-db" in out.err


# --- a writer clock stepping back ---------------------------------------------------------


def rewrite_log(written: Written, ordinal: int, items: list[tuple[int, int, int]]) -> None:
    """Replace slot ``scheduler.<ordinal>``'s log by records ``(seq, issued_at, selections)``
    signed with its process key, as bench.launchdir signs them."""
    from ecpa.observer.record import Window, build_evidence
    from ecpa.runtime.model.enroll import log_name
    from ecpa.runtime.model.evidence import record_line
    from ecpa.runtime.model.launch import Slot

    directory = written.directory
    env = environment(directory)
    slot = Slot("scheduler", ordinal)
    who = written.processes[slot]
    signer = process_signer(slot, who)
    with (directory / "evidence" / directory.name / log_name(signer.kid)).open("wb") as out:
        for seq, at, selections in items:
            window = Window(seq, selections + seq, selections, seq, 0, 0, at - 1, at, at, seq, at)
            out.write(record_line(build_evidence(env, who, signer, window, issued_at=at)))


def test_a_writer_clock_stepping_back_never_decides_with_a_record_not_yet_written(
    tmp_path: Path,
) -> None:
    """Records dated back after a clock step are there from the latest date written before
    them, not before the records written earlier (as an unsorted bisect would take them):
    selections over a window are not doubled, and coverage does not end early."""
    written = ended_launch(tmp_path)
    start = NOW - 29
    items = [(seq, start + seq - 1, seq) for seq in range(1, 21)]  # start .. start+19
    items += [(seq, start + seq - 11, seq) for seq in range(21, 31)]  # dated 10 s back
    for ordinal in (0, 1):
        rewrite_log(written, ordinal, items)
    report = audit_launch_dir(written.directory, now=NOW + 10).report
    last = start + 19  # the latest date written: every record is there from then on
    assert report["effective_intervals"] == [[start, last + 3 + 1]]
    window = audit_launch_dir(written.directory, now=NOW + 10, window=(start + 10, last + 1))
    # seq 30 (30 selections) is there at `last`; seq 10 was the newest before the window.
    assert window.report["slots"][0]["selections"] == 30 - 10
