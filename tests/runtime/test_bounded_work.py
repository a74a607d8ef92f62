"""Bounded work whatever a log holds (RUNTIME.md "Bounded work"): blank lines count
toward every line and byte limit, every read loop looks at its deadline, a status
interrupted by a signal keeps what it learned, and ``ecpa ship`` records the supervisor's
liveness on time. Without the bounds, 4 MiB of newlines dropped into each of eight logs took
a status from 0.32 s to 52 s, and ship spent 10 s on 16 MiB of them without writing a
supervisor check. (Times are measured in ``bench/``; these tests count the work.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench.launchdir import Written, write_launch
from ecpa.runtime.host.ship import BATCH_BYTES, _complete_lines
from ecpa.runtime.host.status import status_from_launch_dir
from ecpa.runtime.judge import history, sources
from ecpa.runtime.judge.history import checkpoint_name
from ecpa.runtime.judge.reasons import ReasonCode
from tests.support import ROOT

NOW = 1_800_000_000


def _log(w: Written, slot: int = 0) -> Path:
    [log] = (w.directory / "evidence" / w.directory.name).glob(f"scheduler.{slot}-*.jsonl")
    return log


def _status(w: Written) -> Any:
    """A status of ``w`` at NOW, its history walked to the end."""
    return status_from_launch_dir(
        w.directory, now=NOW, proc_root=w.proc_root, host="bench-host", history_budget_s=None
    )


@pytest.fixture
def written(tmp_path: Path) -> Written:
    return write_launch(tmp_path, slots=1, records=5, now=NOW)


def test_the_tail_reads_a_bounded_amount_of_a_blank_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each blank line was a copy of the 64 KiB buffer: quadratic. Now blank lines count
    toward the 64 lines read, and one chunk is read for them."""
    path = tmp_path / "log"
    path.write_bytes(b'{"a": 1}\n' + b"\n" * (4 << 20))
    reads: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        reads.append(n)
        return real(fd, n, offset)

    monkeypatch.setattr(sources.os, "pread", counting)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert sources.newest_lines(fd, path.stat().st_size) == []  # 64 blank lines: nothing
        assert len(reads) == 1
        small = path.stat().st_size - (4 << 20) + 63
        assert sources.newest_lines(fd, small) == [(0, b'{"a": 1}')]  # within 64 lines: found
    finally:
        os.close(fd)


def test_a_blank_end_is_not_taken_for_evidence(written: Written) -> None:
    """A log whose last 64 lines are blank decides from its history's newest record, which
    is checked again; the verdict is the one without the blank lines."""
    before = _status(written)
    with _log(written).open("ab") as out:
        out.write(b"\n" * 100_000)
    after = _status(written)
    assert before.effective
    assert after.effective
    assert after.slots[0].newest_seq == before.slots[0].newest_seq == 5


def test_the_history_walk_looks_at_its_deadline_inside_blank_lines(tmp_path: Path) -> None:
    """The walk checked its budget only after a non-blank line: a million blank lines before
    a record were walked in one go. Now it stops within 1,024 of them once the deadline has
    passed."""
    log = tmp_path / "scheduler.0-1-1.jsonl"
    log.write_bytes(b"\n" * 1_000_000 + b'{"not": "a record"}\n')
    fd = os.open(log, os.O_RDONLY)
    dir_fd = os.open(tmp_path, os.O_RDONLY)
    try:
        ck = history.load(dir_fd, log.name, fd, "launch-1", NOW)
        walked: list[Any] = []

        def walk(lines: Any, stream: Any) -> None:
            walked.extend(lines)

        end = log.stat().st_size
        assert not history.advance(fd, ck, walk, end=end, deadline=time.monotonic())
        assert 0 < ck.offset <= 1024
        assert ck.number <= 1024
        assert [(w.evidence, w.error) for w in walked] == [(None, None)]  # one mark, no record
    finally:
        os.close(fd)
        os.close(dir_fd)


def test_a_status_interrupted_keeps_what_it_learned(
    written: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A status killed by a monitor's timeout saved no checkpoint: the next one repeated the
    work. ``ecpa status`` turns SIGTERM and SIGINT into ``history.STOP``: the walk stops at
    the next line boundary, consistent, and what it walked is saved."""
    log = _log(written)
    real = sources.walk

    def interrupted(lines: Any, *args: Any, **kwargs: Any) -> None:
        def then_stop() -> Any:
            for n, line in enumerate(lines):
                if n == 2:
                    history.STOP.set()  # as the signal handler does, mid-walk
                yield line

        real(then_stop(), *args, **kwargs)

    monkeypatch.setattr(sources, "walk", interrupted)
    try:
        got = _status(written)
    finally:
        history.STOP.clear()
    assert any(r.code is ReasonCode.HISTORY_PARTIAL for r in got.reasons)  # stopped early
    saved = json.loads((log.parent / checkpoint_name(log.name)).read_text())
    assert (saved["number"], saved["accepted"], saved["last_seq"]) == (3, 3, 3)  # consistent


def test_ecpa_status_exits_130_when_interrupted_and_saves_first(written: Written) -> None:
    """The command: SIGTERM during a long history walk; the checkpoint is on disk after."""
    log = _log(written)
    with log.open("ab") as out:
        # A long walk (the budget is off below): a million short refused lines, about 6 s
        # here (3 million blank lines, passed at C speed, were walked in 1.3 s: before the
        # signal, on a fast day).
        out.write(b"x\n" * 1_000_000)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = (
        "import sys\n"
        "from ecpa.runtime.host import status\n"
        "status.status_from_launch_dir.__kwdefaults__['history_budget_s'] = None\n"
        "from ecpa.cli import main\n"
        "sys.exit(main(['status', '--launch', sys.argv[1]]))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(written.directory)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        saved = log.parent / checkpoint_name(log.name)
        time.sleep(1.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130
        assert saved.exists()
        assert json.loads(saved.read_text())["number"] > 5  # it had walked into the blanks
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()


def test_ship_passes_blank_lines_at_c_speed_within_its_batch(tmp_path: Path) -> None:
    """16 MiB of newlines were 16 million turns of a Python loop, uncounted by the batch
    limits. Now a batch ends after BATCH_BYTES of them, with no line taken."""
    path = tmp_path / "log"
    path.write_bytes(b"\n" * (16 << 20) + b'{"a": 1}\n')
    fd = os.open(path, os.O_RDONLY)
    try:
        lines, end = _complete_lines(fd, 0, path.stat().st_size)
        assert (lines, end) == ([], BATCH_BYTES)
        lines, end = _complete_lines(fd, (16 << 20) - 1, path.stat().st_size)
        assert lines == [(16 << 20, b'{"a": 1}')]
    finally:
        os.close(fd)


def test_the_newest_record_after_blank_lines_is_found_again(written: Written) -> None:
    """Blank lines before the newest record never make the history's record of where it
    starts point at them (the fall back would then read an empty line, undecided): the
    newest record is found again and decides."""
    log = _log(written)
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-1]) + b"\n" * 10 + lines[-1] + b"\n" * 100)
    got = _status(written)
    assert got.effective, got.reasons
    assert got.slots[0].newest_seq == 5


def _read_bytes() -> int:
    """Bytes this process has read so far (``/proc/self/io``'s ``rchar``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_a_log_ending_in_one_huge_line_costs_a_status_its_budget(written: Written) -> None:
    """A sparse 10 GiB of NULs at the end of a log (``truncate``): a status read all of it to
    get past the line (8.9 s at 2 GiB, over 60 s at 10 GiB, and every launch of a board
    waited). Now each status reads a bounded piece of it and the history goes on from there
    at the next one; meanwhile the slot is not covered (its end holds nothing to decide)."""
    log = _log(written)
    size = log.stat().st_size
    os.truncate(log, size + (10 << 30))
    for _ in range(3):
        before = _read_bytes()
        status = status_from_launch_dir(
            written.directory, now=NOW, proc_root=written.proc_root, host="bench-host"
        )
        assert _read_bytes() - before < 1 << 30  # far from 10 GiB: at most its budget's worth
        assert not status.effective
        assert ReasonCode.HISTORY_PARTIAL in {r.code for r in status.reasons}


def test_an_over_long_line_is_walked_across_calls_and_counted_once(tmp_path: Path) -> None:
    """The walk stops inside a line longer than a record may be and goes on there at the next
    call: the same history as one walk to the end (the line refused once, every record after
    it accepted)."""
    w = write_launch(tmp_path, slots=1, records=3, now=NOW)
    log = _log(w)
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(lines[0] + b"\0" * (40 << 20) + b"\n" + b"".join(lines[1:]))
    whole = _status(w)
    (log.parent / checkpoint_name(log.name)).unlink()
    calls = 0
    while True:
        calls += 1
        status = status_from_launch_dir(
            w.directory, now=NOW, proc_root=w.proc_root, host="bench-host", history_budget_s=0.0
        )
        if ReasonCode.HISTORY_PARTIAL not in {r.code for r in status.reasons}:
            break
        assert calls < 100
    assert calls > 2  # it did stop inside the line
    assert (
        (status.accepted, status.refused)
        == (whole.accepted, whole.refused)
        == (
            3,
            {"ATTESTATION_TOO_LARGE": 1},
        )
    )
    assert status.effective == whole.effective


def test_a_record_of_the_next_second_is_left_for_the_next_status(tmp_path: Path) -> None:
    """A status takes its ``now`` first; a record its process wrote a moment later, dated the
    next second, was refused (ATTESTATION_NOT_YET_VALID) and that refusal kept in the history
    for good: a healthy launch's ``refused`` was not empty (two flaky tests). It is left for
    the next status now, which accepts it."""
    w = write_launch(tmp_path, slots=1, records=3, now=NOW + 1)  # the newest dated NOW + 1
    first = status_from_launch_dir(
        w.directory, now=NOW, proc_root=w.proc_root, host="bench-host", history_budget_s=None
    )
    assert first.refused == {}
    assert first.effective
    assert first.accepted == 2  # the third waits
    second = _status_at(w, NOW + 1)
    assert second.refused == {}
    assert second.accepted == 3
    assert second.last_seq == 3


def _status_at(w: Written, now: int) -> Any:
    return status_from_launch_dir(
        w.directory, now=now, proc_root=w.proc_root, host="bench-host", history_budget_s=None
    )


def test_a_record_dated_further_ahead_is_still_refused(tmp_path: Path) -> None:
    """Beyond the grace (2 s), a record from the future is a writer clock ahead: refused, as
    before, and its log undecided."""
    w = write_launch(tmp_path, slots=1, records=3, now=NOW + 10, interval=5)  # NOW, +5, +10
    status = _status_at(w, NOW)
    assert status.refused == {"ATTESTATION_NOT_YET_VALID": 2}
    assert not status.effective
