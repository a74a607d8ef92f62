"""Deciding a process from the end of its log (RUNTIME.md "Slots": status time independent
of how long the launch has run).

The newest record of a process decides for it (counters are cumulative), so ``ecpa status``
reads each log backwards from its end and checks the newest complete lines, newest first,
until one is accepted: that record decides. A newer line that is refused (a forgery, a
foreign or replayed record) is reported and passed over; a run of :data:`MAX_EXPIRED_RUN`
expired ones ends the search, since everything before them is older still. At most
:data:`MAX_LINES` lines (blank ones included) or :data:`MAX_BYTES` bytes are read: a log
whose end holds nothing acceptable within that is decided as having no valid evidence. A
record the history walk has already passed (see :mod:`ecpa.runtime.judge.history`) decides only
if it is the newest that walk accepted; a record after it must have a higher seq.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime.judge.records import Accepted
from ecpa.runtime.model.evidence import MAX_RECORD_LENGTH, Evidence, parse_record

__all__ = ["MAX_BYTES", "MAX_EXPIRED_RUN", "MAX_LINES", "TailDecision", "decide", "newest_lines"]

MAX_LINES = 64
#: Consecutive expired records after which the search stops: one expired line may be an old
#: record copied to the end (a replay, passed over); a run of them is a log gone quiet.
MAX_EXPIRED_RUN = 8
MAX_BYTES = 4 << 20
_CHUNK = 65536


def newest_lines(
    fd: int, end: int, *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES
) -> list[tuple[int, bytes]]:
    """The non-blank lines among the newest ``max_lines`` complete lines ending at or before
    ``end`` (the offset just past a ``\n``), newest first, each with its byte offset,
    without its newline. Blank lines count toward ``max_lines`` like any other (a log ending
    in a million newlines costs what 64 lines cost, RUNTIME.md "Bounded work"). Reading
    stops after ``max_bytes``, and at a line longer than a record may be (never a record:
    what is before it is not read). Each byte is copied a bounded number of times."""
    found: list[tuple[int, bytes]] = []
    buf = b""  # bytes [pos, pos + len(buf)); the unconsumed part buf[:hi] ends with a newline
    hi = 0
    pos = end
    seen = 0
    while seen < max_lines:
        cut = buf.rfind(b"\n", 0, hi - 1) if hi else -1
        if cut >= 0 or (pos == 0 and hi):
            seen += 1
            line = buf[cut + 1 : hi - 1]
            if line.strip():
                found.append((pos + cut + 1, line.rstrip(b"\r")))
            hi = cut + 1
            continue
        if pos == 0 or end - pos >= max_bytes or hi > MAX_RECORD_LENGTH + 2:
            break
        start = max(0, pos - _CHUNK)
        buf = os.pread(fd, pos - start, start) + buf[:hi]
        hi += pos - start
        pos = start
    return found


@dataclass
class TailDecision:
    """What the end of one log says: the record that decides, and the newer lines refused."""

    newest: Accepted | None = None
    offset: int | None = None
    refused: list[tuple[int, EcpaError]] = field(default_factory=list)
    scanned: int = 0


def decide(
    lines: list[tuple[int, bytes]],
    check: Callable[[Evidence], Accepted],
    *,
    history_offset: int,
    history_last_seq: int | None,
) -> TailDecision:
    """Check ``lines`` (newest first) with ``check`` until one is accepted. A line the
    history walk has passed (before ``history_offset``) decides only if it is the newest
    record that walk accepted (``history_last_seq``): an older record copied to the end is a
    replay. A line after it must carry a higher seq.

    Raises:
        EcpaError: ``ECPA_REPLAY_STORE`` from the fence (inside ``check``).
    """
    result = TailDecision()
    expired = 0
    for offset, line in lines:
        result.scanned += 1
        try:
            rec = check(parse_record(line))
            _in_order(rec.seq, offset, history_offset, history_last_seq)
        except EcpaError as exc:
            if exc.code is ErrorCode.REPLAY_STORE:
                raise
            result.refused.append((offset, exc))
            expired = expired + 1 if exc.code is ErrorCode.EXPIRED else 0
            if expired >= MAX_EXPIRED_RUN:
                break  # a run of expired records: what lies before them is older still
            continue
        result.newest, result.offset = rec, offset
        break
    return result


def _in_order(seq: int, offset: int, history_offset: int, last: int | None) -> None:
    if offset < history_offset and seq != last:
        raise EcpaError(
            ErrorCode.REPLAYED_NONCE,
            f"expected the newest record of the log (seq {last}), found seq {seq} "
            "after it (a record seen before is a replay)",
        )
    if offset >= history_offset and last is not None and seq <= last:
        raise EcpaError(
            ErrorCode.REPLAYED_NONCE,
            f"expected seq > {last} (sequence numbers only grow), found {seq}",
        )
