"""Trust rooted outside the launch directory: a process key counts only through the
manager's enrollment certificate, checked against the operator's trust store."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.launchdir import (
    HOST,
    ISSUER,
    MANAGER,
    Written,
    environment,
    manager_entry,
    process_signer,
    write_launch,
)
from ecpa.errors import EcpaError, ErrorCode
from ecpa.observer.record import Window, build_evidence
from ecpa.profile.keys import SigningKey
from ecpa.profile.trust import TrustStore
from ecpa.runtime.host.status import status_from_launch_dir
from ecpa.runtime.judge.certified import launch_keys
from ecpa.runtime.judge.verdict import RuntimeStatus
from ecpa.runtime.model.certificates import read_certificates
from ecpa.runtime.model.enroll import log_name
from ecpa.runtime.model.enrollment import ENROLLMENTS_FILE, Enrollment, certificate_line
from ecpa.runtime.model.evidence import Evidence, parse_record, record_line
from ecpa.runtime.model.launch import ExpectedLaunch, Slot, launch_from_bytes
from ecpa.runtime.stores.operator import OperatorTrust, operator_trust
from tests.support import codes

NOW = 1_800_000_000
S0 = Slot("scheduler", 0)
OPERATOR = TrustStore.from_dict({"schema": "ecpa-trust-store/0.1", "keys": [manager_entry()]})


def _status(w: Written, operator: OperatorTrust | None = None) -> RuntimeStatus:
    return status_from_launch_dir(
        w.directory,
        now=NOW,
        proc_root=w.proc_root,
        host=HOST,
        history_budget_s=None,
        operator=operator if operator is not None else OperatorTrust(OPERATOR, "test"),
    )


def _expected(w: Written) -> ExpectedLaunch:
    return launch_from_bytes((w.directory / "launch.json").read_bytes(), "launch.json")


def _trust(w: Written) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((w.directory / "trust.json").read_text())
    return doc


def _put_trust(w: Written, doc: dict[str, Any]) -> None:
    (w.directory / "trust.json").write_text(json.dumps(doc))


def _certificates(w: Written) -> list[bytes]:
    return (w.directory / ENROLLMENTS_FILE).read_bytes().splitlines(keepends=True)


def _put_certificates(w: Written, lines: list[bytes]) -> None:
    (w.directory / ENROLLMENTS_FILE).write_bytes(b"".join(lines))


def _seal(w: Written) -> bytes:
    """The launch certificate (the first line) as the manager wrote it."""
    return _certificates(w)[0]


def _with(w: Written, *lines: bytes) -> None:
    """The launch's certificates: its seal, then ``lines``."""
    _put_certificates(w, [_seal(w), *lines])


def _records(w: Written, seed: bytes) -> None:
    """Fresh records for slot 0's live process, signed with the key of ``seed``."""
    who = w.processes[S0]
    signer = process_signer(S0, who, seed)
    lines = []
    for seq in range(1, 4):
        at = NOW - 3 + seq
        window = Window(seq, 4 * seq, 3 * seq, seq, 0, 0, at - 1, at, at, seq, at, None)
        lines.append(
            record_line(build_evidence(environment(w.directory), who, signer, window, issued_at=at))
        )
    log = w.directory / "evidence" / w.directory.name / log_name(signer.kid)
    log.write_bytes(b"".join(lines))


def _enrollment(w: Written, seed: bytes, *, seq: int = 2, **changes: Any) -> Enrollment:
    who = w.processes[S0]
    signer = process_signer(S0, who, seed)
    values: dict[str, Any] = {
        "seq": seq,
        "event": "enrolled",
        "issuer": ISSUER,
        "kid": signer.kid,
        "public_key_b64": signer.key.public_key.to_b64(),
        "subjects": ("host-runtime",),
        "slot": S0,
        "identity": who,
        "not_before": NOW - 100,
        "not_after": NOW + 86400,
    }
    values.update(changes)
    return Enrollment(**values)


@pytest.fixture
def w(tmp_path: Path) -> Written:
    written = write_launch(tmp_path, slots=1, records=3, now=NOW)
    status = _status(written)
    assert status.effective, status.reasons
    assert "certified" in codes(status.reasons)
    return written


def _refusals(status: RuntimeStatus) -> list[str]:
    """The texts of the records refused, as the status says them."""
    return [r.text for r in status.reasons if r.code.value == "refused"]


def _refused_for(w: Written, code: str) -> RuntimeStatus:
    status = _status(w)
    assert not status.effective
    assert code in codes(status.reasons), status.reasons
    return status


# --- what the launch directory says, against what the manager certified ---------------------


def test_a_key_replaced_in_the_launch_directory_with_forged_records_gives_false(
    w: Written,
) -> None:
    """An attacker who may write the launch directory replaces slot 0's key in trust.json by
    one of theirs and writes fresh records signed with it for the live process: the key is
    not the one the manager certified, so the slot is refused (uncertified_key)."""
    forged = process_signer(S0, w.processes[S0], b"f" * 32)
    doc = _trust(w)
    for entry in doc["keys"]:
        entry["public_key_b64"] = forged.key.public_key.to_b64()
    _put_trust(w, doc)
    _records(w, b"f" * 32)
    status = _refused_for(w, "uncertified_key")
    assert codes(status.reasons)[0] == "uncertified_key"  # what decides, first
    assert "another public key" in status.reasons[0].text


def test_a_key_added_to_trust_json_gives_false(w: Written) -> None:
    doc = _trust(w)
    extra = dict(
        doc["keys"][0], kid="scheduler.0-4242-1", public_key_b64=MANAGER.public_key.to_b64()
    )
    doc["keys"].append(extra)
    _put_trust(w, doc)
    status = _refused_for(w, "uncertified_key")
    assert codes(status.reasons)[0] == "uncertified_key"
    assert "'scheduler.0-4242-1'" in status.reasons[0].text


def test_without_its_certificates_no_key_of_the_launch_is_trusted(w: Written) -> None:
    (w.directory / ENROLLMENTS_FILE).unlink()
    _refused_for(w, "uncertified_key")


def test_a_certificate_forged_with_another_key_is_refused(w: Written) -> None:
    """A certificate for the attacker's key, signed with a key that looks like a manager's
    but that the operator does not list."""
    rogue = SigningKey.from_seed(b"r" * 32)
    line = certificate_line(_enrollment(w, b"f" * 32), _expected(w), rogue, issued_at=NOW)
    _with(w, line)
    doc = _trust(w)
    doc["keys"][0]["public_key_b64"] = process_signer(
        S0, w.processes[S0], b"f" * 32
    ).key.public_key.to_b64()
    _put_trust(w, doc)
    _records(w, b"f" * 32)
    status = _refused_for(w, "enrollment_refused")
    assert codes(status.reasons)[0] == "enrollment_refused"
    assert "ATTESTATION_UNKNOWN_KEY" in status.reasons[0].text
    assert "uncertified_key" in codes(status.reasons)


def test_an_altered_certificate_is_refused(w: Written) -> None:
    """The body swapped for one naming the attacker's key: its digest no longer matches the
    signed statement's."""
    [_, line] = _certificates(w)
    evidence = parse_record(line.rstrip(b"\n"))
    other = certificate_line(_enrollment(w, b"f" * 32), _expected(w), MANAGER, issued_at=NOW)
    body = parse_record(other.rstrip(b"\n")).host_evidence
    assert body is not None

    _with(w, record_line(Evidence(evidence.payload, evidence.detached_jws, body)))
    status = _refused_for(w, "enrollment_refused")
    assert codes(status.reasons)[0] == "enrollment_refused"
    assert "ATTESTATION_EVIDENCE_DIGEST_MISMATCH" in status.reasons[0].text


def test_a_certificate_of_another_launch_is_refused(w: Written, tmp_path: Path) -> None:
    other = write_launch(tmp_path / "b", slots=1, records=3, now=NOW, launch_id="launch-other")
    _with(w, _certificates(other)[1])
    status = _refused_for(w, "enrollment_refused")
    assert codes(status.reasons)[0] == "enrollment_refused"
    assert "launch-other" in status.reasons[0].text


def test_a_certificate_repeated_is_refused_and_the_rest_not_read(w: Written) -> None:
    """Lines repeated are refused before their signatures are checked, and after the first
    refusal nothing more is read: a writer cannot make a status verify more than the
    manager signed."""
    [seal, line] = _certificates(w)
    _put_certificates(w, [seal, line, *[line] * 5000])
    status = _refused_for(w, "enrollment_refused")
    assert codes(status.reasons)[:2] == ["enrollment_refused", "enrollment_refused"]
    assert "line 3: expected seq above 2" in status.reasons[0].text
    assert "4999 later line(s) of enrollments.jsonl not read" in status.reasons[1].text


def test_a_second_key_for_one_process_is_refused(w: Written) -> None:
    second = certificate_line(
        _enrollment(w, b"f" * 32, seq=3), _expected(w), MANAGER, issued_at=NOW
    )
    _put_certificates(w, [*_certificates(w), second])
    _refused_for(w, "enrollment_refused")


def test_a_kid_that_names_another_process_is_refused(w: Written) -> None:
    line = certificate_line(
        _enrollment(w, b"\0" * 31 + b"k", kid="scheduler.0-1-1"),
        _expected(w),
        MANAGER,
        issued_at=NOW,
    )
    _with(w, line)
    status = _refused_for(w, "enrollment_refused")
    assert codes(status.reasons)[0] == "enrollment_refused"
    assert "for the process it names" in status.reasons[0].text


def test_a_closing_certificate_ends_the_key_window(w: Written) -> None:
    closing = certificate_line(
        _enrollment(w, b"\0" * 31 + b"k", seq=3, event="closed", not_after=NOW - 50),
        _expected(w),
        MANAGER,
        issued_at=NOW,
    )
    _put_certificates(w, [*_certificates(w), closing])
    status = _status(w)
    assert not status.effective
    assert "certified" in codes(status.reasons)  # the certificates hold: the window ended
    assert any("ATTESTATION_TRUST_POLICY: expected now within" in t for t in _refusals(status))


def test_a_key_disabled_in_trust_json_stays_disabled(w: Written) -> None:
    """trust.json may take trust away (ecpa trust disable), never give it."""
    doc = _trust(w)
    doc["keys"][0]["enabled"] = False
    _put_trust(w, doc)
    status = _status(w)
    assert not status.effective
    assert "certified" in codes(status.reasons)
    assert any("found key" in t and "disabled" in t for t in _refusals(status))


def test_a_torn_last_certificate_is_said_and_not_read(w: Written) -> None:
    _put_certificates(w, [*_certificates(w), b"{" * 40])
    status = _status(w)
    assert status.effective
    [said] = [r for r in status.reasons if r.code.value == "certified"]
    assert "torn" in said.text


# --- the operator's trust store --------------------------------------------------------------


def test_a_manager_key_the_operator_disabled_certifies_nothing(w: Written) -> None:
    entry = dict(manager_entry(), enabled=False)
    disabled = TrustStore.from_dict({"schema": "ecpa-trust-store/0.1", "keys": [entry]})
    status = _status(w, OperatorTrust(disabled, "test"))
    assert not status.effective
    assert codes(status.reasons)[0] == "enrollment_refused"
    assert "ATTESTATION_TRUST_POLICY" in status.reasons[0].text


def test_a_manager_key_trusted_for_another_subject_certifies_nothing(w: Written) -> None:
    entry = dict(manager_entry(), subjects=["launch-audit"])
    other = TrustStore.from_dict({"schema": "ecpa-trust-store/0.1", "keys": [entry]})
    assert not _status(w, OperatorTrust(other, "test")).effective


def test_without_an_operator_trust_store_nothing_is_trusted(
    w: Written, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "empty"))
    monkeypatch.delenv("ECPA_TRUST_STORE", raising=False)
    found = operator_trust()
    assert found.store is None
    assert str(tmp_path / "empty" / "ecpa" / "trust.json") in found.where
    status = _status(w, found)
    assert not status.effective
    assert codes(status.reasons)[0] == "no_operator_trust"


def test_the_operator_store_is_found_by_flag_then_variable_then_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = {"schema": "ecpa-trust-store/0.1", "keys": [manager_entry()]}
    flag, var, default = (
        tmp_path / "flag.json",
        tmp_path / "var.json",
        tmp_path / "x" / "ecpa" / "trust.json",
    )
    default.parent.mkdir(parents=True)
    for path in (flag, var, default):
        path.write_text(json.dumps(doc))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "x"))
    monkeypatch.setenv("ECPA_TRUST_STORE", str(var))
    assert operator_trust(flag).where == str(flag)
    assert operator_trust().where == str(var)
    monkeypatch.delenv("ECPA_TRUST_STORE")
    assert operator_trust().where == str(default)
    monkeypatch.setenv("ECPA_TRUST_STORE", str(tmp_path / "missing.json"))
    with pytest.raises(EcpaError) as missing:
        operator_trust()  # named, not there: an error, never "none"
    assert missing.value.code is ErrorCode.TRUST_STORE_CONFIG


def test_an_operator_store_others_may_write_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "trust.json"
    store.write_text(json.dumps({"schema": "ecpa-trust-store/0.1", "keys": [manager_entry()]}))
    os.chmod(store, 0o666)
    with pytest.raises(EcpaError) as refused:
        operator_trust(store)
    assert refused.value.code is ErrorCode.TRUST_STORE_CONFIG
    assert "not writable by group or others" in refused.value.detail
    os.chmod(store, 0o644)
    assert operator_trust(store).store is not None


def test_an_operator_store_reached_through_a_symlink_is_judged_as_opened(
    tmp_path: Path,
) -> None:
    """The mode is checked on the file the descriptor holds, not on the link's name."""
    target = tmp_path / "real.json"
    target.write_text(json.dumps({"schema": "ecpa-trust-store/0.1", "keys": [manager_entry()]}))
    os.chmod(target, 0o666)
    link = tmp_path / "trust.json"
    link.symlink_to(target)
    with pytest.raises(EcpaError) as refused:
        operator_trust(link)
    assert refused.value.code is ErrorCode.TRUST_STORE_CONFIG
    os.chmod(target, 0o644)
    assert operator_trust(link).store is not None


def test_an_operator_store_below_a_directory_others_may_write_is_refused(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    store = shared / "trust.json"
    store.write_text(json.dumps({"schema": "ecpa-trust-store/0.1", "keys": [manager_entry()]}))
    os.chmod(store, 0o644)
    os.chmod(shared, 0o777)  # anyone may rename trust.json away and put theirs in
    with pytest.raises(EcpaError) as refused:
        operator_trust(store)
    assert refused.value.code is ErrorCode.TRUST_STORE_CONFIG
    assert str(shared) in refused.value.detail
    os.chmod(shared, 0o777 | stat.S_ISVTX)  # sticky, as /tmp: only the owner may rename
    assert operator_trust(store).store is not None


def test_a_01_launch_key_the_operator_does_not_list_gives_false(tmp_path: Path) -> None:
    from tests.runtime.test_runtime import record
    from tests.runtime.test_runtime import write_launch as write_01

    launch = write_01(tmp_path, record(1))
    status = status_from_launch_dir(launch, now=NOW, operator=OperatorTrust(OPERATOR, "test"))
    assert not status.effective
    assert codes(status.reasons)[0] == "uncertified_key"
    assert "entry of the operator's trust store" in status.reasons[0].text


# --- the pure parts ------------------------------------------------------------------------


def test_certified_keys_come_from_the_certificates_not_from_trust_json(w: Written) -> None:
    expected = _expected(w)
    claimed = TrustStore.from_dict(_trust(w))
    launch_doc = (w.directory / "launch.json").read_bytes()
    data = (w.directory / ENROLLMENTS_FILE).read_bytes()
    judged = launch_keys(
        claimed,
        expected,
        launch_doc=launch_doc,
        certificates=data,
        operator=OPERATOR,
        operator_where="test",
    )
    assert codes(judged.reasons) == ["certified"]
    [trusted] = list(judged.store)
    [certified] = read_certificates(data, OPERATOR, expected, launch_doc).keys.values()
    assert judged.identities == {certified.kid: w.processes[S0]}
    assert trusted.key.to_b64() == certified.public_key_b64
    assert (trusted.entry.not_before, trusted.entry.not_after) == (
        certified.not_before,
        certified.not_after,
    )


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=4096))
def test_any_bytes_as_certificates_are_refused_never_raised(data: bytes) -> None:
    expected = ExpectedLaunch("p", "l", "x", "sha256:" + "0" * 64, 1, "c")
    found = read_certificates(data, OPERATOR, expected, b"{}")
    assert found.keys == {}
    assert not found.sealed
    assert len(found.refused) + found.unread == found.lines


def test_the_audit_of_a_launch_with_an_uncertified_key_exits_1(w: Written, tmp_path: Path) -> None:
    from tests._cli_helpers import ecpa_main

    operator = tmp_path / "operator.json"
    operator.write_text(json.dumps(OPERATOR.to_dict()))
    args = ("audit", "--launch", w.directory, "--now", NOW, "--trust", operator)
    good = ecpa_main(*args)
    assert good.status == 0, good
    assert "keys: certified" in good.out
    doc = _trust(w)
    doc["keys"][0]["public_key_b64"] = MANAGER.public_key.to_b64()
    _put_trust(w, doc)
    bad = ecpa_main(*args)
    assert bad.status == 1, bad
    assert "keys: NOT certified" in bad.out
    assert "exercised: false (a key of the launch is not backed" in bad.out


def _signed_with(
    monkeypatch: pytest.MonkeyPatch, w: Written, enrollment: Enrollment, **statement: Any
) -> bytes:
    """A certificate whose signed statement differs from the body by ``statement``."""
    from ecpa.profile import sign as signing
    from ecpa.runtime.model import enrollment as module

    def changed(st: dict[str, Any], key: Any) -> Any:
        return signing.sign({**st, **statement}, key)

    monkeypatch.setattr(module, "sign", changed)
    try:
        return certificate_line(enrollment, _expected(w), MANAGER, issued_at=NOW)
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize(
    ("statement", "why"),
    [
        ({"event": "closed"}, "the body's event"),
        ({"subject": "host-runtime"}, "ATTESTATION_TRUST_POLICY"),  # not what the key may say
        ({"obligation": "victim-selector-dispatch"}, "obligation"),
        (
            {"process": {"host": HOST, "role": "scheduler", "start_identity": "x", "ordinal": 0,
                         "epoch": 1}},
            "the statement's process to be the one the body names",
        ),
    ],
)  # fmt: skip
def test_a_certificate_whose_statement_says_otherwise_than_its_body_is_refused(
    w: Written, monkeypatch: pytest.MonkeyPatch, statement: dict[str, Any], why: str
) -> None:
    line = _signed_with(monkeypatch, w, _enrollment(w, b"\0" * 31 + b"k"), **statement)
    _with(w, line)
    status = _refused_for(w, "enrollment_refused")
    assert codes(status.reasons)[0] == "enrollment_refused"
    assert why in status.reasons[0].text


def test_a_closing_before_the_key_was_enrolled_is_refused(w: Written) -> None:
    closing = certificate_line(
        _enrollment(w, b"\0" * 31 + b"k", event="closed"), _expected(w), MANAGER, issued_at=NOW
    )
    _with(w, closing)
    status = _refused_for(w, "enrollment_refused")
    assert codes(status.reasons)[0] == "enrollment_refused"
    assert "enrolled before it is closed" in status.reasons[0].text


def test_a_certificate_of_a_small_order_key_is_refused(w: Written) -> None:
    from ecpa.profile.b64 import b64u_encode

    small = b64u_encode(bytes([1]) + bytes(31))  # the identity point: order 1
    line = certificate_line(
        _enrollment(w, b"\0" * 31 + b"k", public_key_b64=small),
        _expected(w),
        MANAGER,
        issued_at=NOW,
    )
    _with(w, line)
    status = _refused_for(w, "enrollment_refused")
    assert codes(status.reasons)[0] == "enrollment_refused"
    assert "ECPA_INVALID_KEY" in status.reasons[0].text


# --- launch.json: sealed by the manager ---------------------------------------------------


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"slots": [{"role": "scheduler", "ordinal": 0}, {"role": "scheduler", "ordinal": 1}]},
         "fewer or other slots"),
        ({"heartbeat_window_s": 10**9}, "a stale slot made fresh"),
        ({"host_evidence": "required"}, "the host's witness required"),
        ({"max_abstain_s": 10**9}, "abstention no longer judged"),
        ({"supervisor": {"host": HOST, "pid": 1, "start_ticks": 1, "boot_id": "boot-bench"}},
         "another process as the supervisor"),
    ],
)  # fmt: skip
def test_launch_json_changed_after_the_manager_sealed_it_gives_false(
    w: Written, change: dict[str, Any], why: str
) -> None:
    """Everything a verdict reads from launch.json is the manager's: a writer of the launch
    directory who changes it (to cut a silent slot, widen a window, drop the host's witness,
    name a live process as the supervisor) is refused, whatever the change."""
    path = w.directory / "launch.json"
    doc = json.loads(path.read_text())
    doc.update(change)
    path.write_text(json.dumps(doc))
    status = _refused_for(w, "enrollment_refused")
    assert codes(status.reasons)[0] == "enrollment_refused"
    assert status.reasons[0].text.startswith("enrollments.jsonl line 1: expected "), why


def test_without_the_managers_seal_launch_json_is_not_trusted(w: Written) -> None:
    [_, key] = _certificates(w)
    _put_certificates(w, [key])
    status = _refused_for(w, "enrollment_refused")
    assert codes(status.reasons)[0] == "enrollment_refused"
    assert "expected the launch certificate first" in status.reasons[0].text


def test_another_launchs_files_in_a_launch_directory_are_refused(
    w: Written, tmp_path: Path
) -> None:
    """A writer links launch aa's files (sealed, certified, fresh) into silent launch bb's
    directory: bb is judged as bb or not at all."""
    import shutil

    other = tmp_path / "runs" / "launch-00000000000000bb"
    shutil.copytree(w.directory, other, symlinks=True)
    with pytest.raises(EcpaError) as refused:
        status_from_launch_dir(other, now=NOW, proc_root=w.proc_root, host=HOST)
    assert refused.value.code is ErrorCode.INVALID_INPUT
    assert "another launch's files" in refused.value.detail


def test_a_01_claim_of_a_launch_with_certificates_is_refused(w: Written) -> None:
    """A 0.2 launch rewritten as 0.1 (no supervisor, no descent checked) is refused: a 0.1
    launch has no manager, so certificates say it was not one."""
    path = w.directory / "launch.json"
    doc = json.loads(path.read_text())
    legacy = {k: doc[k] for k in ("plan_id", "launch_id", "plugin_id", "artifact_digest")}
    legacy |= {"schema": "ecpa-launch/0.1", "process_epoch": 1, "challenge": doc["challenge"]}
    path.write_text(json.dumps(legacy))
    (w.directory / "evidence" / log_name(doc["launch_id"])).write_bytes(b"")  # its 0.1 log
    operator = TrustStore.from_dict({"schema": "ecpa-trust-store/0.1", "keys": _trust(w)["keys"]})
    status = status_from_launch_dir(
        w.directory,
        now=NOW,
        proc_root=w.proc_root,
        host=HOST,
        operator=OperatorTrust(operator, "t"),
    )
    assert not status.effective
    assert codes(status.reasons)[0] == "enrollment_refused"
    assert "a 0.1 launch (no manager) with the manager's" in status.reasons[0].text


def test_a_certificate_under_another_issuer_is_refused(w: Written) -> None:
    """The operator lists the manager's key under another issuer too: a certificate whose
    statement names that issuer verifies, and is still refused."""
    elsewhere = dict(manager_entry(), issuer="urn:ecpa:elsewhere")
    operator = TrustStore.from_dict(
        {"schema": "ecpa-trust-store/0.1", "keys": [manager_entry(), elsewhere]}
    )
    from ecpa.profile import sign as signing
    from ecpa.runtime.model import enrollment as module

    real = module.sign
    module.sign = lambda st, key: signing.sign({**st, "issuer": "urn:ecpa:elsewhere"}, key)  # type: ignore[assignment]
    try:
        line = certificate_line(
            _enrollment(w, b"\0" * 31 + b"k"), _expected(w), MANAGER, issued_at=NOW
        )
    finally:
        module.sign = real
    _with(w, line)
    status = _status(w, OperatorTrust(operator, "t"))
    assert not status.effective
    assert codes(status.reasons)[0] == "enrollment_refused"
    assert "expected issuer 'urn:ecpa:manager'" in status.reasons[0].text


def test_a_record_naming_another_identity_than_its_key_certificate_is_refused(
    w: Written,
) -> None:
    """The certificate binds the key to host, pid, start ticks and boot id: a record signed
    with it that names the same pid and ticks on another boot is refused."""
    from dataclasses import replace as replaced

    who = replaced(w.processes[S0], boot_id="another-boot")
    signer = process_signer(S0, who, b"\0" * 31 + b"k")
    at = NOW
    window = Window(4, 16, 12, 4, 0, 0, at - 1, at, at, 4, at, None)
    line = record_line(build_evidence(environment(w.directory), who, signer, window, issued_at=at))
    log = w.directory / "evidence" / w.directory.name / log_name(signer.kid)
    with log.open("ab") as out:
        out.write(line)
    status = _status(w)
    assert any("which the manager certified for" in t for t in _refusals(status))


def test_ecpa_run_says_when_the_operator_trusts_its_manager_key_but_not_now() -> None:
    from ecpa.launcher.manager import ManagerKey

    manager = ManagerKey(MANAGER, "test")

    def store(**changed: Any) -> OperatorTrust:
        doc = {"schema": "ecpa-trust-store/0.1", "keys": [dict(manager_entry(), **changed)]}
        return OperatorTrust(TrustStore.from_dict(doc), "operator.json")

    assert manager.unlisted(store(), now=NOW) is None
    late = manager.unlisted(store(not_after=NOW - 1), now=NOW)
    assert f"not now ({NOW})" in str(late)
    early = manager.unlisted(store(not_before=NOW + 1), now=NOW)
    assert "not now" in str(early)
    other = manager.unlisted(store(enabled=False), now=NOW)
    assert "ecpa trust add operator.json" in str(other)
