"""Bounded work whatever a log holds (RUNTIME.md "Round 3", "Bounded work"): blank lines
count toward every line and byte limit, every read loop looks at its deadline, a status
interrupted by a signal keeps what it learned, and ``ecpa ship`` records the supervisor's
liveness on time. The third review dropped 4 MiB of newlines into each of eight logs: a
status went from 0.32 s to 52 s, and ship spent 10 s on 16 MiB of them without writing a
supervisor check. (Times are measured in ``bench/``; these tests count the work.)"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from bench.launchdir import Written, write_launch
from ecpa.runtime import history, logs, tail
from ecpa.runtime.history import checkpoint_name
from ecpa.runtime.ship import BATCH_BYTES, _complete_lines
from ecpa.runtime.status import status_from_launch_dir

NOW = 1_800_000_000


def _log(w: Written, slot: int = 0) -> Path:
    [log] = (w.directory / "evidence" / w.directory.name).glob(f"scheduler.{slot}-*.jsonl")
    return log


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

    monkeypatch.setattr(tail.os, "pread", counting)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert tail.newest_lines(fd, path.stat().st_size) == []  # 64 blank lines: nothing
        assert len(reads) == 1
        small = path.stat().st_size - (4 << 20) + 63
        assert tail.newest_lines(fd, small) == [(0, b'{"a": 1}')]  # within 64 lines: found
    finally:
        os.close(fd)


def test_a_blank_end_is_not_taken_for_evidence(written: Written) -> None:
    """A log whose last 64 lines are blank decides from its history's newest record, which
    is checked again; the verdict is the one without the blank lines."""
    before = status_from_launch_dir(
        written.directory,
        now=NOW,
        proc_root=written.proc_root,
        host="bench-host",
        history_budget_s=None,
    )
    with _log(written).open("ab") as out:
        out.write(b"\n" * 100_000)
    after = status_from_launch_dir(
        written.directory,
        now=NOW,
        proc_root=written.proc_root,
        host="bench-host",
        history_budget_s=None,
    )
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
    work. Interrupted mid-walk (``ecpa status`` turns SIGTERM into this), it saves first."""
    log = _log(written)
    real = logs.walk

    def interrupted(lines: Any, *args: Any, **kwargs: Any) -> None:
        taken = iter(lines)

        def three() -> Any:
            for _ in range(3):
                yield next(taken)
            raise KeyboardInterrupt("SIGTERM")

        real(three(), *args, **kwargs)

    monkeypatch.setattr(logs, "walk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        status_from_launch_dir(
            written.directory,
            now=NOW,
            proc_root=written.proc_root,
            host="bench-host",
            history_budget_s=None,
        )
    saved = log.parent / checkpoint_name(log.name)
    assert saved.exists()
    assert '"accepted":' in saved.read_text()


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
