"""A log's line checked again (``ecpa.runtime.judge.records.check_line``): remembered by
its exact bytes as well as by its record's parts, it is not parsed again, and the answer is
always the one :func:`check_record` of the parsed line gives with nothing remembered: the
clock is read again, and any other bytes are another record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.launchdir import Written, write_launch
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.verify import Policy
from ecpa.runtime.judge import records
from ecpa.runtime.judge.context import Judgement
from ecpa.runtime.judge.memo import forget
from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.judge.records import VERIFIED, Accepted, check_line, check_record
from ecpa.runtime.model.enroll import kid_of_log
from ecpa.runtime.model.evidence import parse_record
from tests.runtime.test_memo_records import NOW, _judgement


@pytest.fixture
def w(tmp_path: Path) -> Written:
    return write_launch(tmp_path, slots=2, records=3, now=NOW)


def _line(w: Written) -> tuple[bytes, str]:
    """The newest line of the first log, and the key id its file is named after."""
    log = sorted((w.directory / "evidence").rglob("*.jsonl"))[0]
    kid = kid_of_log(log.name)
    assert kid is not None
    return [x for x in log.read_bytes().splitlines() if x.strip()][-1], kid


def _outcome(check: Any, judgement: Judgement, kid: str) -> Any:
    try:
        rec = check(judgement, kid)
    except EcpaError as exc:
        return exc.code
    return _fields(rec)


def test_a_line_checked_again_is_parsed_once(w: Written, monkeypatch: pytest.MonkeyPatch) -> None:
    judgement = _judgement(w)
    line, kid = _line(w)
    parsed: list[bytes] = []
    real = records.parse_record

    def counted(data: bytes) -> Any:
        parsed.append(data)
        return real(data)

    monkeypatch.setattr(records, "parse_record", counted)
    first = check_line(line, judgement, file_kid=kid)
    assert parsed == [line]
    assert check_line(bytes(line), judgement, file_kid=kid) is first
    assert parsed == [line]
    # the same record by its parts: the answer remembered when the line was checked
    assert check_record(real(line), judgement, file_kid=kid) is first
    forget()
    assert check_line(line, judgement, file_kid=kid) is not first
    assert len(parsed) == 2


@pytest.mark.parametrize("offset", [-(10**6), -301, -61, -1, 0, 1, 61, 299, 301, 10**9])
@pytest.mark.parametrize("policy", [Policy(), Policy(clock_skew=30), Policy(max_ttl=10)])
def test_a_line_checked_again_reads_the_clock_again(
    w: Written, offset: int, policy: Policy
) -> None:
    """Accepted at NOW, then checked at another time and policy: what a check of the parsed
    line with nothing remembered says then."""
    line, kid = _line(w)
    warm = _judgement(w)
    later = Judgement(warm.trust_store, warm.expected, NOW + offset, policy=policy)
    forget()
    assert isinstance(check_line(line, warm, file_kid=kid), Accepted)
    remembered = _outcome(lambda j, k: check_line(line, j, file_kid=k), later, kid)
    forget()
    afresh = _outcome(lambda j, k: check_record(parse_record(line), j, file_kid=k), later, kid)
    assert remembered == afresh
    if offset == 0 and policy == Policy():
        assert not isinstance(afresh, ErrorCode), afresh
    if abs(offset) >= 10**6:
        assert isinstance(afresh, ErrorCode), afresh


def test_other_bytes_are_another_line_and_a_bad_line_is_refused_each_time(w: Written) -> None:
    judgement = _judgement(w)
    line, kid = _line(w)
    forget()
    check_line(line, judgement, file_kid=kid)
    held = len(VERIFIED)
    assert held == 2  # by its parts and by its line
    spaced = line[:1] + b" " + line[1:]  # the same record, other bytes: parsed strictly
    assert check_line(spaced, judgement, file_kid=kid).fingerprint == (
        check_line(line, judgement, file_kid=kid).fingerprint
    )
    assert len(VERIFIED) == held + 1  # its own line's name, the same record's parts
    tampered = line.replace(b'"payload_b64":"', b'"payload_b64":"A')
    for bad in (b"{", line[:-2], tampered, b"[]", b" " * 10):
        before = len(VERIFIED)
        afresh = _outcome(lambda j, k, bad=bad: check_record(parse_record(bad), j, file_kid=k),
                          judgement, kid)  # fmt: skip
        assert isinstance(afresh, ErrorCode), bad
        for _ in range(2):
            with pytest.raises(EcpaError) as caught:
                check_line(bad, judgement, file_kid=kid)
            assert caught.value.code is afresh
        assert len(VERIFIED) == before
    assert len(VERIFIED) == held + 1
    with pytest.raises(EcpaError):  # read from another log: refused, as by its parts
        check_line(line, judgement, file_kid=kid + "x")


@given(st.sampled_from(list(ReasonCode)), st.text(max_size=40), st.text(max_size=20))
def test_a_reason_restated_for_its_slot_is_the_reason_made_so(
    code: ReasonCode, text: str, slot: str
) -> None:
    """``in_slot`` builds the launch's statement of a slot's reason without checking its
    code again: the very reason the constructor makes, equal, hashed and shown alike."""
    restated = Reason(code, text).in_slot(slot)
    made = Reason(code, f"slot {slot}: {text}", slot)
    assert restated == made
    assert hash(restated) == hash(made)
    assert repr(restated) == repr(made)
    assert restated.to_dict() == made.to_dict()
    assert type(restated.code) is ReasonCode


def test_a_line_given_parsed_is_not_parsed_and_answers_as_parsed_here(
    w: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``parsed`` (a walk's record, parsed from exactly these bytes): the line is not parsed
    again, the answer and what is remembered are those of a check that parses it, and the
    same line checked after without it is found remembered."""
    judgement = _judgement(w)
    line, kid = _line(w)
    real = records.parse_record
    forget()
    afresh = check_line(line, judgement, file_kid=kid)
    afresh_held = len(VERIFIED)
    forget()
    parsed: list[bytes] = []

    def counted(data: bytes) -> Any:
        parsed.append(data)
        return real(data)

    monkeypatch.setattr(records, "parse_record", counted)
    given_parsed = check_line(line, judgement, file_kid=kid, parsed=real(line))
    assert parsed == []
    assert _fields(given_parsed) == _fields(afresh)
    assert len(VERIFIED) == afresh_held  # by its line and by its parts, as when parsed here
    assert check_line(line, judgement, file_kid=kid) is given_parsed
    assert parsed == []


def test_a_walk_of_raw_lines_leaves_each_newest_line_remembered_by_its_bytes(
    w: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored log's walk (each line with its bytes, ``LogLine.raw``): the newest line,
    checked by its bytes right after, is neither parsed nor verified again; a walk of lines
    without their bytes leaves only their parts remembered."""
    from ecpa.runtime.judge.derive import walk
    from ecpa.runtime.model.evidence import LogLine

    judgement = _judgement(w)
    log = sorted((w.directory / "evidence").rglob("*.jsonl"))[0]
    kid = kid_of_log(log.name)
    assert kid is not None
    lines = [x for x in log.read_bytes().splitlines() if x.strip()]
    real = records.parse_record
    parsed: list[bytes] = []

    def counted(data: bytes) -> Any:
        parsed.append(data)
        return real(data)

    for keep in (True, False):
        forget()
        walked = [
            LogLine(n, parse_record(x), None, raw=x if keep else None)
            for n, x in enumerate(lines, 1)
        ]
        stream = walk(walked, judgement, file_kid=kid)
        assert stream.accepted == len(lines)
        parsed.clear()
        monkeypatch.setattr(records, "parse_record", counted)
        check_line(lines[-1], judgement, file_kid=kid)
        assert parsed == ([] if keep else [lines[-1]])
        monkeypatch.setattr(records, "parse_record", real)


def _fields(rec: Accepted) -> tuple[object, ...]:
    return (rec.statement, rec.seq, rec.identity, rec.slot, rec.fingerprint, rec.counters)
