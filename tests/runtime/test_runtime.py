"""runtime_effective derivation (RUNTIME.md "Deriving runtime_effective") and `ecpa status`."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ecpa
from ecpa._text import when
from ecpa.profile.b64 import b64u_encode
from ecpa.runtime.host.status import status_from_files, status_from_launch_dir
from ecpa.runtime.judge.derive import RuntimeStatus, derive
from ecpa.runtime.model.counters import parse_counters
from ecpa.runtime.model.evidence import LogLine, evidence_digest, read_log
from ecpa.runtime.model.launch import ExpectedLaunch, expected_from_dict, launch_from_file
from ecpa.runtime.model.process import Liveness, ProcessIdentity, check_alive, read_identity
from tests._cli_helpers import ecpa_main
from tests.support import (
    KEY_1,
    NOW,
    ROOT,
    check_reasons,
    codes,
    statement,
    store,
    texts,
    trust_doc,
)

CHALLENGE = "Q2hhbGxlbmdlLTEyOC1iaXRz"
EXPECTED = ExpectedLaunch(
    plan_id="plan:sha256:" + "1" * 64,
    launch_id="launch-1",
    plugin_id="plugin:sha256:" + "2" * 64,
    artifact_digest="sha256:" + "3" * 64,
    process_epoch=7,
    challenge=CHALLENGE,
    heartbeat_window_s=3,
)
IDENT = ProcessIdentity("host-a", 4242, 123456, "boot-aaaa")
BINDING_MISMATCH = "ATTESTATION_BINDING_MISMATCH"


def counters(seq: int, ident: ProcessIdentity = IDENT, **changes: Any) -> bytes:
    doc: dict[str, Any] = {
        "schema": "ecpa-dispatch-counters/0.1",
        "plugin_id": EXPECTED.plugin_id,
        "seq": seq,
        "process": {
            "host": ident.host,
            "pid": ident.pid,
            "start_ticks": ident.start_ticks,
            "boot_id": ident.boot_id,
        },
        "calls": 10 * seq,
        "selections": 5 * seq,
        "abstentions": 5 * seq,
        "failures": 0,
        "dropped": 0,
        "window_start": NOW - 2,
        "window_end": NOW - 1,
    }
    doc.update(changes)
    return ecpa.canonicalize(doc)


def binding_doc() -> dict[str, Any]:
    """The 0.1 binding members of EXPECTED (what a binding file or 0.1 launch.json holds)."""
    skip = ("slots", "version", "supervisor", "excluded", "judges_abstention")
    skip += ("host_evidence", "host_policy", "certified")
    return {k: v for k, v in dataclasses.asdict(EXPECTED).items() if k not in skip}


def record(
    seq: int,
    *,
    ident: ProcessIdentity = IDENT,
    issued_at: int = NOW - 1,
    raw: bytes | None = None,
    host_evidence: bool = True,
    counter_changes: dict[str, Any] | None = None,
    **changes: Any,
) -> bytes:
    """One evidence log line: a signed statement about a counters record of ``seq``."""
    raw = raw if raw is not None else counters(seq, ident, **(counter_changes or {}))
    values: dict[str, Any] = {
        "obligation": "victim-selector-dispatch",
        "challenge_nonce": f"{CHALLENGE}:{seq}",
        "evidence_digest": evidence_digest(raw),
        "process__host": ident.host,
        "process__start_identity": ident.start_identity,
        "observed_at": issued_at - 1,
        "issued_at": issued_at,
        "expires_at": issued_at + 60,
    }
    st = statement(**{**values, **changes})
    signed = ecpa.sign(st, KEY_1)
    obj = {"schema": "ecpa-evidence-record/0.1"}
    if host_evidence:
        obj["host_evidence_b64"] = b64u_encode(raw)
    obj["payload_b64"] = b64u_encode(signed.payload)
    obj["detached_jws"] = signed.detached_jws
    return json.dumps(obj).encode() + b"\n"


def lines(*records: bytes) -> list[LogLine]:
    return list(read_log(io.BytesIO(b"".join(records))))


def alive(identity: ProcessIdentity) -> Liveness:
    return Liveness(True, f"process {identity.pid} alive")


def dead(identity: ProcessIdentity) -> Liveness:
    return Liveness(False, f"process not alive: no running process {identity.pid}")


def run(*records: bytes, now: int = NOW, **kwargs: Any) -> RuntimeStatus:
    kwargs.setdefault("liveness", alive)
    status = derive(lines(*records), store(), EXPECTED, now=now, **kwargs)
    check_reasons(status)
    return status


def test_effective_true_with_reasons() -> None:
    status = run(record(1), record(2))
    assert status.effective
    assert status.accepted == 2
    assert status.last_seq == 2
    assert status.refused == {}
    assert status.newest is not None
    assert status.newest.challenge_nonce == f"{CHALLENGE}:2"
    assert status.counters is not None
    assert status.counters["selections"] == 10
    assert status.reasons
    assert not status.gaps
    assert status.torn == 0


def test_no_records_is_false_with_reason() -> None:
    status = run()
    assert not status.effective
    assert status.reasons
    assert status.newest is None


def test_stale_is_false() -> None:
    status = run(record(1, issued_at=NOW - 10))
    assert not status.effective
    assert "stale" in codes(status.reasons)
    assert "fresh" not in codes(status.reasons)


def test_dead_process_is_false() -> None:
    status = run(record(1), liveness=dead)
    assert not status.effective
    assert "not_alive" in codes(status.reasons)


@pytest.mark.parametrize(
    ("field", "changes"),
    [
        ("launch_id", {"launch_id": "launch-2"}),
        ("plan_id", {"plan_id": "plan:sha256:" + "9" * 64}),
        ("plugin_id", {"plugin_id": "plugin:sha256:" + "9" * 64}),
        ("artifact_digest", {"artifact_digest": "sha256:" + "9" * 64}),
        ("process.epoch", {"process__epoch": 8}),
    ],
)
def test_record_for_another_launch_is_refused(field: str, changes: dict[str, Any]) -> None:
    status = run(record(1, **changes))
    assert not status.effective
    assert status.refused == {BINDING_MISMATCH: 1}
    assert "refused" in codes(status.reasons)
    assert any(f"record for another launch: {field} " in r for r in texts(status.reasons))


def test_foreign_record_does_not_hide_a_good_one() -> None:
    status = run(record(1, launch_id="launch-2"), record(2))
    assert status.effective
    assert status.accepted == 1
    assert status.refused == {BINDING_MISMATCH: 1}


def test_wrong_challenge_prefix_is_refused() -> None:
    status = run(record(1, challenge_nonce="other-challenge:1"))
    assert not status.effective
    assert status.refused == {BINDING_MISMATCH: 1}
    assert any("challenge_nonce" in r for r in texts(status.reasons))  # names the field


def test_nonce_seq_must_match_counters_seq() -> None:
    status = run(record(1, challenge_nonce=f"{CHALLENGE}:2"))
    assert status.refused == {BINDING_MISMATCH: 1}


def test_replayed_record_is_refused() -> None:
    status = run(record(1), record(1))
    assert status.effective
    assert status.accepted == 1
    assert status.refused == {"REPLAYED_NONCE": 1}


def test_rereading_the_same_records_with_one_fence_is_not_a_replay() -> None:
    """docs/runtime.md "Files, replay fences, trust stores": the very same record (same
    nonce, same bytes) read again is not a replay, so a second status within one emit
    interval still says true for a healthy launch with a durable fence."""
    fence = ecpa.MemoryReplayFence()
    first = record(1)
    assert run(first, replay=fence).effective
    again = run(first, replay=fence)
    assert again.effective, again.reasons
    assert again.refused == {}


def test_another_record_with_an_accepted_nonce_is_a_replay_across_derivations() -> None:
    fence = ecpa.MemoryReplayFence()
    assert run(record(1), replay=fence).effective
    other = record(1, counter_changes={"selections": 4})  # same nonce, other bytes
    status = run(other, replay=fence)
    assert not status.effective
    assert status.refused == {"REPLAYED_NONCE": 1}


class ForgetfulFence:
    """A fence that accepts every nonce, as a purged or misconfigured one might."""

    def check_and_record(self, nonce: str, *, expires_at: int) -> None:
        del nonce, expires_at


def test_replay_is_refused_even_by_a_forgetful_fence() -> None:
    status = run(record(1), record(1), replay=ForgetfulFence())
    assert status.accepted == 1
    assert status.refused == {"REPLAYED_NONCE": 1}


def test_seq_going_backwards_is_refused() -> None:
    status = run(record(2), record(1))
    assert status.accepted == 1
    assert status.last_seq == 2
    assert status.refused == {"REPLAYED_NONCE": 1}


def test_no_selections_is_false() -> None:
    status = run(record(1, counter_changes={"selections": 0, "abstentions": 10}))
    assert not status.effective
    assert "no_selections" in codes(status.reasons)


def test_gap_is_reported_not_fatal() -> None:
    status = run(record(1), record(4))
    assert status.effective
    assert status.gaps == ((2, 3),)
    assert "gap: seq 2..3 missing" in texts(status.reasons)
    assert "gap" in codes(status.reasons)


def test_torn_tail_is_counted() -> None:
    status = run(record(1), record(2)[:40])
    assert status.effective
    assert status.torn == 1
    assert status.accepted == 1
    assert "torn" in codes(status.reasons)


def test_host_evidence_required_and_checked() -> None:
    assert run(record(1, host_evidence=False)).refused == {"ECPA_INVALID_RECORD": 1}
    wrong = record(1, raw=counters(1), evidence_digest="sha256:" + "0" * 64)
    assert run(wrong).refused == {"ATTESTATION_EVIDENCE_DIGEST_MISMATCH": 1}


def test_counters_parsed_strictly() -> None:
    extra = record(1, counter_changes={"surprise": 1})
    assert run(extra).refused == {"ECPA_INVALID_RECORD": 1}
    noncanonical = counters(1).replace(b",", b", ", 1)
    assert run(record(1, raw=noncanonical)).refused == {"ECPA_INVALID_RECORD": 1}
    other_process = counters(1, dataclasses.replace(IDENT, pid=1))
    assert run(record(1, raw=other_process)).refused == {BINDING_MISMATCH: 1}


@pytest.mark.parametrize(
    "start_identity",
    ["pid:0" + "4242:start_ticks:123456:boot:boot-aaaa", "pid:\u0664242:start_ticks:1:boot:b"],
)
def test_odd_start_identity_is_refused(start_identity: str) -> None:
    status = run(record(1, process__start_identity=start_identity))
    assert status.refused == {"ECPA_INVALID_RECORD": 1}


def test_huge_start_identity_is_refused() -> None:
    huge = "pid:" + "9" * 5000 + ":start_ticks:1:boot:b"
    assert run(record(1, process__start_identity=huge)).refused == {"ECPA_INVALID_RECORD": 1}


def test_untrusted_key_is_refused() -> None:
    status = derive(
        lines(record(1)),
        store(trust_doc()["keys"][1]),
        EXPECTED,
        now=NOW,
        liveness=alive,
    )
    assert not status.effective
    assert status.refused == {"ATTESTATION_UNKNOWN_KEY": 1}


def test_listed_refusals_are_capped() -> None:
    status = run(*(record(i, launch_id="x") for i in range(1, 31)))
    assert status.refused == {BINDING_MISMATCH: 30}
    assert codes(status.reasons).count("refused") == 20 + 1  # listed, then the rest counted
    assert "... and 10 more refused record(s)" in texts(status.reasons)


# --- liveness from a faked /proc -------------------------------------------------------


def fake_proc(root: Path, pid: int, ticks: int, boot: str) -> Path:
    proc = root / "proc"
    (proc / str(pid)).mkdir(parents=True, exist_ok=True)
    fields = [str(pid), "(python3 x)", "S"] + ["0"] * 49
    fields[21] = str(ticks)  # field 22: start time in clock ticks
    (proc / str(pid) / "stat").write_text(" ".join(fields) + "\n")
    (proc / "sys" / "kernel" / "random").mkdir(parents=True, exist_ok=True)
    (proc / "sys" / "kernel" / "random" / "boot_id").write_text(boot + "\n")
    return proc


@pytest.mark.parametrize(
    ("ticks", "boot", "effective", "why"),
    [
        (123456, "boot-aaaa", True, "alive"),
        (999999, "boot-aaaa", False, "process not alive: pid 4242 was reused"),
        (123456, "boot-bbbb", False, "rebooted"),
    ],
)
def test_liveness_from_fake_proc(
    tmp_path: Path, ticks: int, boot: str, effective: bool, why: str
) -> None:
    proc = fake_proc(tmp_path, IDENT.pid, ticks, boot)

    def liveness(identity: ProcessIdentity) -> Liveness:
        return check_alive(identity, proc_root=proc, host="host-a")

    status = run(record(1), liveness=liveness)
    assert status.effective is effective
    assert ("alive" if effective else "not_alive") in codes(status.reasons)
    assert any(why in r for r in texts(status.reasons))


# --- files, launch directory, real process ----------------------------------------------


def write_launch(tmp: Path, *records: bytes) -> Path:
    launch = tmp / "launch"
    (launch / "evidence").mkdir(parents=True)
    doc = {"schema": "ecpa-launch/0.1", **binding_doc()}
    doc.update(issuer="i", kid="test-key-1", subject="host-runtime", started_at=NOW - 5)
    doc.update(emit_interval_s=1)
    (launch / "launch.json").write_text(json.dumps(doc))
    (launch / "trust.json").write_text(json.dumps(trust_doc()))
    (launch / "evidence" / "launch-1.jsonl").write_bytes(b"".join(records))
    return launch


EMITTER = """
import sys, time
from ecpa.runtime.model.evidence import parse_record
from ecpa.runtime.host.evidence_log import EvidenceLog
from ecpa.runtime.model.process import read_identity
from tests.runtime.test_runtime import record

ident = read_identity()  # the child's own identity, read from its own /proc entry
with EvidenceLog(sys.argv[1]) as log:
    seq = 0
    while True:
        seq += 1
        log.append(parse_record(record(seq, ident=ident, issued_at=int(time.time()))))
        log.flush()
        if seq == 2:
            print("ready", flush=True)
        time.sleep(0.2)
"""


def test_real_child_process(tmp_path: Path) -> None:
    """A child that signs its own records is effective while it runs, and not after SIGKILL."""
    launch = write_launch(tmp_path)
    log = launch / "evidence" / "launch-1.jsonl"
    log.unlink()  # the child creates it, mode 0600
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", EMITTER, str(log)], cwd=ROOT, env=env, stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        status = status_from_launch_dir(launch, now=int(time.time()))
        assert status.effective, status.reasons
        assert status.newest is not None
        assert status.newest.process.start_identity.startswith(f"pid:{child.pid}:")
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
        status = status_from_launch_dir(launch, now=int(time.time()))
        assert not status.effective
        assert status.accepted >= 2  # its evidence still verifies; only the process is gone
        assert "not_alive" in codes(status.reasons), status.reasons
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


def test_status_from_files_with_replay_db(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, IDENT.pid, IDENT.start_ticks, IDENT.boot_id)
    launch = write_launch(tmp_path, record(1))
    log, trust = launch / "evidence" / "launch-1.jsonl", launch / "trust.json"
    db = tmp_path / "fence.db"
    kw: dict[str, Any] = {"now": NOW, "proc_root": proc, "host": "host-a", "replay_db": db}
    assert status_from_files(log, trust, EXPECTED, **kw).effective
    again = status_from_files(log, trust, EXPECTED, **kw)  # re-reading is no replay
    assert again.effective, again.reasons
    assert again.refused == {}
    log.write_bytes(record(1, counter_changes={"selections": 4}))  # same nonce, other bytes
    assert status_from_files(log, trust, EXPECTED, **kw).refused == {"REPLAYED_NONCE": 1}


# --- ecpa status ---------------------------------------------------------------------------


def test_cli_launch_dir(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        launch = write_launch(tmp_path, record(1, ident=read_identity(child.pid)))
        result = ecpa_main("status", "--launch", launch, "--now", NOW)
        assert result.status == 0, result.out + result.err
        assert result.lines[0] == "runtime_effective: true"
        assert result.lines[1] == f"now: {when(NOW)}  coverage: 1/1 slots"  # the derivation time
        assert all(line.startswith("reason: ") for line in result.lines[2:])
        assert any("0.1 launch" in line for line in result.lines)  # what it could not check
        result = ecpa_main("status", "--launch", launch, "--now", NOW + 100, "--json")
        assert result.status == 1
        doc = json.loads(result.out)
        assert doc["effective"] is False
        assert codes(doc["reasons"])[0] == "no_evidence"
        assert codes(doc["reasons"])[-2:] == ["v01_launch", "certified"]
        for reason in [*doc["reasons"], *doc["slots"][0]["reasons"]]:
            assert set(reason) == {"code", "text"}  # a 0.1 launch: no slot names
        assert doc["accepted"] == 0
        assert doc["refused"] == {"ATTESTATION_EXPIRED": 1}
    finally:
        child.kill()
        child.wait()


def test_cli_evidence_and_binding(tmp_path: Path) -> None:
    launch = write_launch(tmp_path, record(1), record(3))
    binding = tmp_path / "binding.json"
    binding.write_text(json.dumps(binding_doc()))
    args: list[str | Path | int] = ["status", "--evidence", launch / "evidence" / "launch-1.jsonl"]
    args += ["--trust", launch / "trust.json", "--binding", binding, "--now", NOW, "--json"]
    result = ecpa_main(*args)
    assert result.status == 1  # host-a is not this host: the process is not alive here
    doc = json.loads(result.out)
    assert doc["accepted"] == 2
    assert doc["last_seq"] == 3
    assert doc["gaps"] == [[2, 2]]
    assert doc["newest"]["challenge_nonce"] == f"{CHALLENGE}:3"
    assert doc["counters"]["seq"] == 3
    assert "not_alive" in codes(doc["reasons"])
    assert "gap" in codes(doc["reasons"])


def test_cli_usage_errors(tmp_path: Path) -> None:
    launch = write_launch(tmp_path, record(1))
    assert ecpa_main("status").status == 2
    both = ecpa_main("status", "--launch", launch, "--evidence", launch / "x.jsonl")
    assert both.status == 2
    assert ecpa_main("status", "--launch", tmp_path / "missing").status == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"plan_id": 1}')
    log = launch / "evidence" / "launch-1.jsonl"
    args: list[str | Path | int] = ["status", "--evidence", log, "--trust", launch / "trust.json"]
    assert ecpa_main(*args, "--binding", bad).status == 2
    assert ecpa_main(*args).status == 2
    (launch / "launch.json").write_text("{")
    assert ecpa_main("status", "--launch", launch).status == 2


def test_cli_help_has_example() -> None:
    result = ecpa_main("status", "--help")
    assert result.status == 0
    assert "ecpa status --launch" in result.out


# --- any bytes in: a status or an EcpaError, nothing else --------------------------------

GOOD = record(1)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=2048))
def test_any_log_bytes_give_a_status(data: bytes) -> None:
    status = derive(read_log(io.BytesIO(data)), store(), EXPECTED, now=NOW, liveness=alive)
    assert not status.effective  # nothing here was signed by the trusted key for this launch
    assert status.reasons


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_flipped_byte_in_a_good_record_gives_a_status(data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(GOOD) - 2))  # not the final newline
    value = data.draw(st.integers(0, 255).filter(lambda b: b != GOOD[index]))
    mutated = GOOD[:index] + bytes([value]) + GOOD[index + 1 :]
    status = run(mutated)
    assert status.reasons
    assert status.accepted + sum(status.refused.values()) + status.torn >= 1


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=512))
@example(raw=b'{"":0,"":0,"":0}')  # found by the derandomized CI run
@example(raw=b'{"schema":1e400}')
def test_any_counters_bytes_are_refused_with_a_code(raw: bytes) -> None:
    status = run(record(1, raw=raw))
    assert not status.effective
    assert len(status.refused) == 1
    # Strict JSON's own codes (PROFILE.md §4) for what does not parse, else the record's.
    assert set(status.refused) <= {
        "ECPA_INVALID_RECORD",
        "ATTESTATION_MALFORMED_JSON",
        "ATTESTATION_DUPLICATE_KEY",
        "ATTESTATION_UNSUPPORTED_VALUE",
    }


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=512))
def test_any_launch_file_bytes_give_a_launch_or_invalid_input(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("launch") / "launch.json"
    path.write_bytes(data)
    with pytest.raises(ecpa.EcpaError) as exc_info:
        launch_from_file(path)
    assert exc_info.value.code is ecpa.ErrorCode.INVALID_INPUT


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        ({"heartbeat_window_s": 0}, "expected heartbeat_window_s >= 1, found 0"),
        ({"heartbeat_window_s": -3}, "member 'heartbeat_window_s'"),
        ({"process_epoch": -1}, "member 'process_epoch'"),
        ({"challenge": ""}, "challenge"),
        ({"process_epoch": "7"}, "process_epoch"),
        ({"nonce": "x"}, "expected only the members"),
    ],
)
def test_binding_values_out_of_range_are_invalid_input(changes: dict[str, Any], found: str) -> None:
    doc = {**binding_doc(), **changes}
    with pytest.raises(ecpa.EcpaError) as exc_info:
        expected_from_dict(doc, "binding")
    assert exc_info.value.code is ecpa.ErrorCode.INVALID_INPUT
    assert found in exc_info.value.detail


# --- a launch that has ended (exit.json) -------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        (
            {"schema": "ecpa-launch-exit/0.1", "ended_at": NOW, "exit_status": 0, "signal": None},
            f"launch ended at {NOW}: the command exited with status 0",
        ),
        (
            {"schema": "ecpa-launch-exit/0.1", "ended_at": NOW, "exit_status": 137, "signal": 9},
            f"launch ended at {NOW}: the command was killed by signal 9 (status 137)",
        ),
        (
            {
                "schema": "ecpa-launch-exit/0.1",
                "ended_at": NOW,
                "exit_status": 127,
                "signal": None,
                "error": "x: command not found",
            },
            f"launch ended at {NOW}: the command could not start (status 127): x: command",
        ),
        ({"schema": "other", "ended_at": NOW, "exit_status": 0}, "launch ended (exit.json not an"),
        (
            {"schema": "ecpa-launch-exit/0.1", "ended_at": "soon", "exit_status": 0},
            "launch ended (exit",
        ),
        (b"{not json", "launch ended (exit.json unreadable: ATTESTATION_MALFORMED_JSON)"),
    ],
)
def test_an_ended_launch_is_never_effective(tmp_path: Path, doc: Any, reason: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        launch = write_launch(tmp_path, record(1, ident=read_identity(child.pid)))
        assert status_from_launch_dir(launch, now=NOW).effective  # alive, fresh, selections
        data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        (launch / "exit.json").write_bytes(data)
        status = status_from_launch_dir(launch, now=NOW)
        assert not status.effective
        assert codes(status.reasons)[0] == "launch_ended", status.reasons
        assert status.reasons[0].text.startswith(reason), status.reasons  # says how it ended
        assert status.accepted == 1  # the evidence itself still verifies
    finally:
        child.kill()
        child.wait()


# -- counters 0.1 / 0.2 / 0.3 (RUNTIME.md "Evidence record", "Counters 0.3") ------------------

_V2 = {"schema": "ecpa-dispatch-counters/0.2", "last_dispatch_at": NOW - 1}
_V3 = {
    "schema": "ecpa-dispatch-counters/0.3",
    "last_dispatch_at": NOW - 1,
    "changed": 3,
    "last_selection_at": NOW - 2,
}


@pytest.mark.parametrize("changes", [{}, _V2, _V3], ids=["0.1", "0.2", "0.3"])
def test_each_counters_schema_parses_with_exactly_its_members(changes: dict[str, Any]) -> None:
    obj = parse_counters(counters(1, **changes)).to_dict()
    assert obj["schema"] == changes.get("schema", "ecpa-dispatch-counters/0.1")
    for member, value in changes.items():
        assert obj[member] == value


@pytest.mark.parametrize(
    "changes",
    [
        {"last_dispatch_at": NOW},  # 0.1 with a 0.2 member
        {**_V2, "changed": 1},  # 0.2 with a 0.3 member
        {**_V2, "last_selection_at": None},
        {k: v for k, v in _V3.items() if k != "changed"},  # 0.3 without a member
        {k: v for k, v in _V3.items() if k != "last_selection_at"},
        {k: v for k, v in _V3.items() if k != "last_dispatch_at"},
        {**_V3, "changed": None},  # changed is a count, never null
        {**_V3, "changed": -1},
        {**_V3, "changed": True},
        {**_V3, "last_selection_at": "now"},
        # 0.3 counts must add up (calls 10, selections 5, abstentions 5, failures 0 here)
        {**_V3, "changed": 6},  # more changed decisions than selections
        {**_V3, "calls": 11},  # a call with no outcome
        {**_V3, "failures": 1},  # an outcome with no call
        {**_V3, "last_dispatch_at": None},  # calls, but no newest dispatch
        {**_V3, "calls": 0, "selections": 0, "abstentions": 0, "changed": 0},  # the reverse
        {**_V3, "selections": 0, "abstentions": 10, "changed": 0, "last_selection_at": NOW},
        {**_V3, "last_selection_at": NOW},  # a selection after the newest dispatch
        {"schema": "ecpa-dispatch-counters/0.4"},
        {"schema": 3},
    ],
)
def test_counters_schema_members_are_checked(changes: dict[str, Any]) -> None:
    with pytest.raises(ecpa.EcpaError) as exc_info:
        parse_counters(counters(1, **changes))
    assert exc_info.value.code.value == "ECPA_INVALID_RECORD"


def test_max_idle_with_a_record_that_does_not_say_is_false() -> None:
    """A 0.1 record has no last_dispatch_at (0.2 and 0.3 records always have one once the
    plugin was called): with --max-idle, idle is unknown, so false."""
    assert run(record(1)).effective
    status = run(record(1), max_idle=10)
    assert not status.effective
    assert "idle_unknown" in codes(status.reasons)
