"""The judgement of a launch's process logs, wherever they are kept (RUNTIME.md
"runtime_effective"): each log is a :class:`LogSource` (a file beside its checkpoint, or the
lines an evidence store holds), decided from its end (:func:`decide`), its full
history walked forward from the last checkpoint within a time budget
(:mod:`ecpa.runtime.judge.history`). No file or store is opened here: the sources are given.

Deciding a process from the end of its log (RUNTIME.md "Slots": status time independent of
how long the launch has run): the newest record of a process decides for it (counters are
cumulative), so ``ecpa status`` reads each log backwards from its end and checks the newest
complete lines, newest first, until one is accepted: that record decides. A newer line that
is refused (a forgery, a foreign or replayed record) is reported and passed over; a run of
:data:`MAX_EXPIRED_RUN` expired ones ends the search, since everything before them is older
still. At most :data:`MAX_LINES` lines (blank ones included) or :data:`MAX_BYTES` bytes are
read: a log whose end holds nothing acceptable within that is decided as having no valid
evidence. A record the history walk has already passed (see
:mod:`ecpa.runtime.judge.history`) decides only if it is the newest that walk accepted; a
record after it must have a higher seq.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.fence import record_nonce
from ecpa.runtime.judge import history
from ecpa.runtime.judge.context import Judgement
from ecpa.runtime.judge.derive import FUTURE_GRACE_S, Paused, just_ahead, walk
from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.judge.records import Accepted, check_line
from ecpa.runtime.judge.stream import Stream
from ecpa.runtime.model.enroll import kid_of_log, parse_kid
from ecpa.runtime.model.evidence import MAX_RECORD_LENGTH, LogLine, is_json, parse_record

__all__ = [
    "FIRST_LINES",
    "FUTURE_GRACE_S",
    "MAX_BYTES",
    "MAX_EXPIRED_RUN",
    "MAX_LINES",
    "LogSource",
    "TailDecision",
    "decide",
    "judge_sources",
    "newest_lines",
]

MAX_LINES = 64
#: The newest lines read first: the newest record decides in the common case, and the
#: other :data:`MAX_LINES` are read only when none of these is accepted (an evidence store
#: sends each line it is asked for over the network).
FIRST_LINES = 2
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
    #: Offsets of refused lines dated just after ``now`` (a later status judges them).
    later: set[int] = field(default_factory=set)


def decide(
    lines: list[tuple[int, bytes]],
    check: Callable[[bytes], Accepted],
    *,
    history_offset: int,
    history_last_seq: int | None,
    now: int | None = None,
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
            rec = check(line)
            _in_order(rec.seq, offset, history_offset, history_last_seq)
        except EcpaError as exc:
            if exc.code is ErrorCode.REPLAY_STORE:
                raise
            result.refused.append((offset, exc))
            ahead = exc.code is ErrorCode.NOT_YET_VALID  # (the line parsed only then)
            if now is not None and ahead and just_ahead(_parsed(line), exc, now):
                result.later.add(offset)
            expired = expired + 1 if exc.code is ErrorCode.EXPIRED else 0
            if expired >= MAX_EXPIRED_RUN:
                break  # a run of expired records: what lies before them is older still
            continue
        result.newest, result.offset = rec, offset
        break
    return result


def _parsed(line: bytes) -> object:
    """The record in ``line``, or None when it has none (for :func:`just_ahead`)."""
    try:
        return parse_record(line)
    except EcpaError:
        return None


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


def _merge(ck: history.Checkpoint, decision: TailDecision, name: str) -> Stream:
    """The history's facts, and the record the log's end decides by."""
    h = ck.stream
    named = parse_kid(kid_of_log(name))
    merged = Stream(
        name=name,
        slot=named[0] if named else None,
        accepted=h.accepted,
        refused=dict(h.refused),
        listed=list(h.listed),
        unlisted=h.unlisted,
        expired=h.expired,
        torn=h.torn,
        gaps=list(h.gaps),
        last_seq=h.last_seq,
        newest=decision.newest,
    )
    for at, exc in reversed(decision.refused):  # newer lines the history has not reached
        if at >= ck.offset and at not in decision.later:
            merged.refuse_at(f"{name} byte {at}", exc)
    rec, offset = decision.newest, decision.offset
    if rec is not None and offset is not None and offset >= ck.offset:
        merged.accepted += 1
        if h.last_seq is not None and rec.seq > h.last_seq + 1:
            merged.gaps.append((h.last_seq + 1, rec.seq - 1))
        merged.last_seq = rec.seq
    return merged


class LogSource(Protocol):
    """One process log as :func:`judge_sources` reads it: a file beside its checkpoint
    (:class:`ecpa.runtime.host.logs.FileLog`), or the lines an evidence store holds
    (:class:`ecpa.runtime.stores.stored_log.StoredLog`). Offsets order its lines; the checkpoint's
    offset is the first not yet walked."""

    name: str

    def load(self, launch_id: str, now: int) -> history.Checkpoint:
        """The saved checkpoint if it still holds for this log and a derivation at ``now``
        (judged no later than ``now``), else a fresh one."""
        ...

    def end(self) -> tuple[int, bytes]:
        """The offset after its last complete line, and the bytes after it (a line still
        being written, or torn; empty when there are none)."""
        ...

    def advance(
        self,
        ck: history.Checkpoint,
        walk: Callable[[Iterator[LogLine], Stream], None],
        *,
        end: int,
        deadline: float | None,
    ) -> bool:
        """Walk forward from ``ck`` until ``end`` or ``deadline``; True when at ``end``."""
        ...

    def newest_lines(self, end: int, limit: int = MAX_LINES) -> list[tuple[int, bytes]]:
        """The newest complete lines before ``end``, newest first, among the newest
        ``limit`` (see :func:`newest_lines`)."""
        ...

    def line_at(self, offset: int) -> bytes | None:
        """The line starting at ``offset`` (without its line end)."""
        ...

    def save(self, ck: history.Checkpoint) -> str | None:
        """Keep ``ck`` for the next status; None, or why it could not be kept."""
        ...


def _fall_back(
    source: LogSource,
    ck: history.Checkpoint,
    complete: bool,
    check: Callable[[bytes], Accepted],
    merged: Stream,
) -> None:
    """The log's end holds no acceptable record, yet records were accepted before: the
    newest of those decides, when the history reaches the end and that record still
    checks; otherwise the log is undecided (its slot is not covered: never the more
    permissive answer)."""
    offset = ck.newest_offset
    line = None if not complete or offset is None else source.line_at(offset)
    if line is not None:
        try:
            rec = check(line)
        except EcpaError as exc:
            if exc.code is ErrorCode.REPLAY_STORE:
                raise
        else:
            if rec.seq == ck.stream.last_seq:
                merged.newest = rec
                return
    merged.undecided = (
        "no acceptable record at the end of the log, and its newest accepted record "
        "could not be checked again"
    )


def _ahead(candidates: list[tuple[int, bytes]], decision: TailDecision, now: int) -> int:
    """How far after ``now`` the newer lines refused as not yet valid are dated, beyond
    :data:`FUTURE_GRACE_S` (0: none). Never raises."""
    lines = dict(candidates)
    worst = 0
    for offset, exc in decision.refused:
        if exc.code is not ErrorCode.NOT_YET_VALID or offset not in lines:
            continue
        try:
            issued = json.loads(parse_record(lines[offset]).payload).get("issued_at")
        except (EcpaError, ValueError, AttributeError):
            continue
        if type(issued) is int and issued - now > FUTURE_GRACE_S:
            worst = max(worst, issued - now)
    return worst


def judge_sources(
    sources: Iterable[LogSource], judgement: Judgement
) -> tuple[dict[str, Stream], list[Reason]]:
    """One :class:`~ecpa.runtime.judge.stream.Stream` per log, decided from its end, with its
    history's facts as far as the checkpoint and the ``judgement``'s ``history_budget_s``
    seconds of walking reach (``None``: to the end); and notes on what is not walked yet or
    not saved. Records are checked with the ``judgement``'s trust store, expected launch,
    ``now`` and policy, each nonce through its fence (a durable one, or this judgement's own
    in memory); checkpoints are saved only with its ``save_checkpoints``.

    Raises:
        EcpaError: ``ECPA_REPLAY_STORE`` when the fence's store fails.
    """
    expected, now, fence = judgement.expected, judgement.now, judgement.fence
    budget_s = judgement.history_budget_s
    started = time.monotonic()
    deadline = None if budget_s is None else started + budget_s
    streams: dict[str, Stream] = {}
    notes: list[Reason] = []
    for source in sources:
        name = source.name
        kid = kid_of_log(name)

        def check(line: bytes, kid: str = kid) -> Accepted:
            rec = check_line(line, judgement, file_kid=kid)
            st = rec.statement
            record_nonce(
                fence, st.challenge_nonce, expires_at=st.expires_at, fingerprint=rec.fingerprint
            )
            return rec

        def walk_into(lines: Iterator[LogLine], stream: Stream, kid: str = kid) -> None:
            with contextlib.suppress(Paused):  # a record of the next second: the next status
                walk(lines, judgement, file_kid=kid, stream=stream, pause_on_recent=True)

        ck = source.load(expected.launch_id, now)
        before = ck.offset
        end, fragment = source.end()
        complete = source.advance(ck, walk_into, end=end, deadline=deadline)
        if ck.offset != before:
            ck.judged_at = max(ck.judged_at, now)
        for limit in (FIRST_LINES, MAX_LINES):
            candidates = source.newest_lines(end, limit)
            if fragment and is_json(fragment):  # a whole record without its newline: a line
                candidates.insert(0, (end, fragment))
            decision = decide(
                candidates,
                check,
                history_offset=ck.offset,
                history_last_seq=ck.stream.last_seq,
                now=now,
            )
            if decision.newest is not None:  # none accepted is decided on all MAX_LINES
                break
        merged = _merge(ck, decision, name)
        if len(fragment) > MAX_RECORD_LENGTH:  # as the reader refuses an over-long line
            detail = f"expected a record line of at most {MAX_RECORD_LENGTH} bytes, found more"
            merged.refuse_at(f"{name} byte {end}", EcpaError(ErrorCode.TOO_LARGE, detail))
        elif fragment and not is_json(fragment):
            merged.torn += 1  # a last line cut short by a crash (or being written now)
        if decision.newest is None and ck.stream.last_seq is not None:
            _fall_back(source, ck, complete, check, merged)
        # Compared with now as it is when this log's end was read (a status of many logs,
        # or of a slow store, runs for seconds): a synced writer's newest record is no future.
        ahead = _ahead(candidates, decision, now + int(time.monotonic() - started))
        if ahead:  # RUNTIME.md "Clocks": records from the future are no evidence of life
            merged.undecided = (
                f"its newest record(s) are dated up to {ahead} s after now: a writer clock "
                "ahead of this reader's; an older record does not decide"
            )
        streams[name] = merged
        if not complete:
            text = (
                f"{name}: history walked to byte {ck.offset} of {end}, the rest at the next status"
            )
            notes.append(Reason(ReasonCode.HISTORY_PARTIAL, text))
        if judgement.save_checkpoints and (ck.offset != before or not ck.saved):
            problem = source.save(ck)
            if problem is not None:
                notes.append(Reason(ReasonCode.CHECKPOINT_NOT_SAVED, problem))
    return streams, notes
