"""`ecpa status` decides each slot from the end of its log and keeps the full-history facts in
an incremental checkpoint (docs/runtime.md "What a status costs"): the same answer as a full
re-verification of every line, whether the history has been walked or not. (The time it takes
is measured in ``python -m bench.status``, not here.)"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from bench.launchdir import HOST, Written, write_launch
from ecpa.profile.trust import TrustStore
from ecpa.runtime.host.status import status_from_launch_dir
from ecpa.runtime.judge.derive import derive_launch
from ecpa.runtime.judge.history import checkpoint_name
from ecpa.runtime.judge.reasons import ReasonCode
from ecpa.runtime.judge.verdict import RuntimeStatus
from ecpa.runtime.model.evidence import read_log
from ecpa.runtime.model.launch import launch_from_file
from ecpa.runtime.model.process import ProcessIdentity, check_alive, descends_from
from tests.support import check_reasons

NOW = 1_800_000_000


def logs_of(written: Written) -> Path:
    return written.directory / "evidence" / written.directory.name


def full(written: Written, now: int = NOW) -> RuntimeStatus:
    """A full re-verification: every line of every log walked, the verdict on them."""
    expected = launch_from_file(written.directory / "launch.json")
    store = TrustStore.load(written.directory / "trust.json")
    streams = {
        p.name: read_log(io.BytesIO(p.read_bytes()))
        for p in sorted(logs_of(written).glob("*.jsonl"))
    }
    proc = written.proc_root

    def descends(who: ProcessIdentity) -> bool:
        return descends_from(who.pid, 100, proc_root=proc)

    return derive_launch(
        streams,
        store,
        expected,
        now=now,
        liveness=lambda who: check_alive(who, proc_root=proc, host=HOST),
        descends=descends,
        supervisor=check_alive(expected.supervisor, proc_root=proc, host=HOST),  # type: ignore[arg-type]
    )


def status(written: Written, now: int = NOW, budget: float | None = None) -> RuntimeStatus:
    got = status_from_launch_dir(
        written.directory, now=now, proc_root=written.proc_root, host=HOST, history_budget_s=budget
    )
    check_reasons(got)
    return got


def decision(s: RuntimeStatus) -> Any:
    slots = [(x.slot, x.covered, x.process, x.kid, x.newest_seq, x.counters) for x in s.slots]
    return (s.effective, slots)


def history(s: RuntimeStatus) -> Any:
    return (s.accepted, s.refused, s.gaps, s.torn)


def pending(s: RuntimeStatus) -> bool:
    return any(r.code is ReasonCode.HISTORY_PARTIAL for r in s.reasons)


def append(written: Written, slot: int, data: bytes) -> None:
    [log] = list(logs_of(written).glob(f"scheduler.{slot}-*.jsonl"))
    with log.open("ab") as out:
        out.write(data)


def line_of(written: Written, slot: int, index: int) -> bytes:
    [log] = list(logs_of(written).glob(f"scheduler.{slot}-*.jsonl"))
    return log.read_bytes().splitlines(keepends=True)[index]


@pytest.fixture
def written(tmp_path: Path) -> Written:
    w = write_launch(tmp_path, slots=4, records=120, now=NOW)
    append(w, 1, b"not json at all\n")  # refused
    append(w, 2, line_of(w, 2, 10))  # an old record copied to the end: a replay
    return w


def test_a_cold_status_with_no_budget_is_a_full_reverification(written: Written) -> None:
    reference = full(written)
    got = status(written)
    assert decision(got) == decision(reference)
    assert history(got) == history(reference)
    assert not pending(got)
    assert reference.effective  # slot 2 decided by its newest real record, not the copy
    # the junk line, and the old records (the copy at the end among them) past expires_at
    assert set(reference.refused) == {"ATTESTATION_MALFORMED_JSON", "ATTESTATION_EXPIRED"}


def test_the_decision_needs_no_history_and_the_history_catches_up(written: Written) -> None:
    reference = full(written)
    first = status(written, budget=0.0)  # a few lines of history per call, no more
    assert pending(first)
    assert decision(first) == decision(reference)  # decided from the ends alone
    calls = 1
    current = first
    while pending(current):
        current = status(written, budget=0.0)
        calls += 1
        assert decision(current) == decision(reference)
        assert calls < 200
    assert calls > 2  # it did take several calls
    assert history(current) == history(reference)


def test_new_records_after_a_checkpoint_are_walked_incrementally(written: Written) -> None:
    assert not pending(status(written))
    names = sorted(p.name for p in logs_of(written).iterdir() if p.name.startswith("."))
    assert names == sorted(checkpoint_name(p.name) for p in logs_of(written).glob("*.jsonl"))
    # Later: a gap in slot 0 (seq 122 without 121), junk in slot 3, at a later time.
    more = write_launch(written.directory.parent / "more", slots=4, records=122, now=NOW + 2)
    append(written, 0, line_of(more, 0, 121))
    append(written, 3, b"\x00\x01\n")
    later = NOW + 2
    assert decision(status(written, later)) == decision(full(written, later))
    got, reference = status(written, later), full(written, later)
    # Facts that do not depend on the time are the same; a record accepted by an earlier
    # status and expired since is counted as accepted there, as expired here.
    assert (got.gaps, got.torn) == (reference.gaps, reference.torn)
    timeless = {k: v for k, v in got.refused.items() if k != "ATTESTATION_EXPIRED"}
    assert timeless == {k: v for k, v in reference.refused.items() if k != "ATTESTATION_EXPIRED"}
    seen = got.accepted + got.refused.get("ATTESTATION_EXPIRED", 0)
    assert seen == reference.accepted + reference.refused.get("ATTESTATION_EXPIRED", 0)
    assert reference.gaps == ((121, 121),)


def test_a_replaced_log_is_walked_again_from_its_start(written: Written) -> None:
    assert not pending(status(written))
    [log] = list(logs_of(written).glob("scheduler.3-*.jsonl"))
    data = log.read_bytes()
    log.unlink()
    log.write_bytes(data[: len(data) // 2])  # another file, shorter: the checkpoint is void
    os.chmod(log, 0o600)
    got, reference = status(written), full(written)
    assert decision(got) == decision(reference)
    assert history(got) == history(reference)


def test_a_forged_checkpoint_never_makes_a_slot_covered(written: Written) -> None:
    """Whoever writes the checkpoint can distort history counts, never coverage: a slot
    with no valid record at its end stays uncovered whatever the checkpoint says."""
    [log] = list(logs_of(written).glob("scheduler.0-*.jsonl"))
    log.write_bytes(b"junk\n" * 10)
    status(written)  # writes a checkpoint for the junk log
    ck_path = logs_of(written) / checkpoint_name(log.name)
    doc = json.loads(ck_path.read_text())
    doc.update(accepted=999, refused={}, last_seq=10)
    ck_path.write_text(json.dumps(doc))
    got = status(written)
    assert not got.slots[0].covered
    assert not got.effective


def test_junk_after_a_second_claimants_records_never_makes_the_slot_covered(
    tmp_path: Path,
) -> None:
    """A second live process's log in slot 0, with 64 junk lines after its records (or a
    checkpoint forged to make its end look out of order), stays in the conflict check: status
    agrees with a full re-verification (a conflict), never says covered. A log whose end
    decides nothing is decided by the newest record its history accepted (checked again),
    or leaves its slot uncovered: never the more permissive answer."""
    w = write_launch(tmp_path, slots=1, records=30, now=NOW, twin=True)
    assert not full(w).effective  # two live processes claim scheduler.0
    assert not status(w).effective
    [twin] = list(logs_of(w).glob("scheduler.0-2000-*.jsonl"))
    with twin.open("ab") as out:
        out.write(b"junk\n" * 70)  # nothing acceptable within the end's 64 lines
    assert not full(w).effective
    got = status(w)
    assert not got.effective
    assert not got.slots[0].covered
    ck_path = logs_of(w) / checkpoint_name(twin.name)
    doc = json.loads(ck_path.read_text())
    doc["last_seq"] = 10**9  # forged: every record at its end now looks out of order
    ck_path.write_text(json.dumps(doc))
    forged = status(w)
    assert not forged.effective
    assert not forged.slots[0].covered


@pytest.mark.parametrize("content", ["[]", '"x"', '{"schema": 1}', '{"gaps": [[1e400, 1]]}'])
def test_a_garbled_checkpoint_is_only_a_slower_status(written: Written, content: str) -> None:
    """A checkpoint holding [] or a huge number makes a status slower, never a crash: the
    decision and the history are those of a full re-verification."""
    assert not pending(status(written))
    for ck in logs_of(written).glob(".*.status"):
        ck.write_text(content)
    got = status(written)
    assert decision(got) == decision(full(written))
    assert history(got) == history(full(written))


def test_a_last_record_without_its_newline_decides_like_a_full_walk(tmp_path: Path) -> None:
    w = write_launch(tmp_path, slots=1, records=1, now=NOW)
    [log] = list(logs_of(w).glob("*.jsonl"))
    log.write_bytes(log.read_bytes().rstrip(b"\n"))
    assert decision(status(w)) == decision(full(w))
    assert status(w).effective


def test_a_huge_unterminated_last_line_is_not_read_through(tmp_path: Path) -> None:
    w = write_launch(tmp_path, slots=1, records=5, now=NOW)
    [log] = list(logs_of(w).glob("*.jsonl"))
    with log.open("ab") as out:
        out.write(b"x" * (8 << 20))  # 8 MiB without a newline
    got, reference = status(w), full(w)
    assert decision(got) == decision(reference)
    assert (got.refused, got.torn) == (reference.refused, reference.torn)
    assert got.refused.get("ATTESTATION_TOO_LARGE") == 1


def test_a_checkpoint_judged_later_is_not_used_for_an_earlier_now(written: Written) -> None:
    """A status at a later time refuses records whose statements have expired since; a
    status asked about an earlier time (``--now``) must judge them as of that time, not
    reuse those refusals (it decided a slot from an older record, with older counters)."""
    early = NOW
    reference = full(written, early)
    late = NOW + 3600  # every statement expired: the history refuses them all
    assert not pending(status(written, late))
    got = status(written, early)
    assert decision(got) == decision(reference)
    assert history(got) == history(reference)
    # And the checkpoint it left serves a later status again (its history counts the records
    # as of when they were walked, as any checkpoint does).
    again = status(written, late)
    assert decision(again) == decision(full(written, late))
    assert again.accepted + again.refused.get("ATTESTATION_EXPIRED", 0) == (
        reference.accepted + reference.refused.get("ATTESTATION_EXPIRED", 0)
    )


@pytest.mark.parametrize(("ahead", "covered"), [(20, False), (2, True)])
def test_a_record_from_the_future_is_no_evidence_of_life(
    written: Written, ahead: int, covered: bool
) -> None:
    """RUNTIME.md "Clocks" (docs/runtime.md "Several hosts", a writer clock
    ahead): passing over records dated in the future to decide by an older one would keep a
    host whose clock runs 20 s ahead "alive" for 20 s after it died, its future records
    becoming acceptable one by one. A log whose newest records are dated after now (beyond a
    2 s race of the same second) decides nothing."""
    more = write_launch(written.directory.parent / "more", slots=4, records=121, now=NOW + ahead)
    append(written, 0, line_of(more, 0, 120))  # seq 121, signed by slot 0's own key
    got = status(written)
    slot = next(s for s in got.slots if s.slot == "scheduler.0")
    assert slot.covered is covered
    if not covered:
        assert slot.reasons[0].code is ReasonCode.UNDECIDED, slot.reasons
        assert f"dated up to {ahead} s after now" in slot.reasons[0].text  # says how far
        assert not got.effective
    else:
        assert slot.newest_seq == 120  # the race: the record of the next second waits
