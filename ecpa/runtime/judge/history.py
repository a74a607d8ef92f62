"""A process log's full history, walked once and kept in a checkpoint beside it (RUNTIME.md
"Slots": status time independent of how long the launch has run).

``ecpa status`` decides each slot from the end of each log (:mod:`ecpa.runtime.judge.sources`); the
facts that need the whole history (records accepted and refused, gaps, torn lines) are
walked forward from where the last status stopped, within a time budget, and saved in
``.<log name>.status`` beside the log (mode 0600, replaced atomically). A checkpoint counts
only while it is the same file (device and inode), no longer than it is, ending on a line
boundary (or inside a line longer than a record may be, which the next walk goes on passing)
whose preceding bytes still hash as recorded, of the same launch, and judged at a
time no later than the derivation's ``now`` (a record refused then, say for a key window
closed since, may be acceptable at an earlier ``now``); otherwise the history is walked again
from the start. It never decides a slot: a forged checkpoint can distort history counts,
never coverage.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ecpa._files import write_file
from ecpa.profile.trust import TrustStore
from ecpa.runtime.judge.certified import MEMO_KEYS
from ecpa.runtime.judge.context import HISTORY_BUDGET_S  # with the judgement it bounds
from ecpa.runtime.judge.memo import Memo, Same
from ecpa.runtime.judge.stream import Stream
from ecpa.runtime.model.evidence import MAX_RECORD_LENGTH, LogLine, read_log

__all__ = [
    "HISTORY_BUDGET_S",
    "Checkpoint",
    "advance",
    "checkpoint_from_dict",
    "checkpoint_name",
    "complete_end",
    "load",
    "save",
    "trust_basis",
]

CHECKPOINT_SCHEMA = "ecpa-status-checkpoint/0.5"
#: Set (``ecpa status`` does, on SIGTERM or SIGINT) to end every history walk at its next
#: line boundary: the walk then stops as at its deadline, consistent, and is saved
#: (RUNTIME.md "Bounded work": a status interrupted keeps what it learned).
STOP = threading.Event()
_ANCHOR_BYTES = 4096
_MAX_CHECKPOINT = 1 << 20


#: Each trust store's basis by the store itself (:class:`~ecpa.runtime.judge.memo.Same`: a
#: store is never changed once built, and a launch's keys, remembered, give the same store
#: every refresh), weighing as many as its keys.
_BASES: Memo[Same, str] = Memo("trust bases", MEMO_KEYS)


def trust_basis(store: TrustStore) -> str:
    """A digest of the keys ``store`` trusts, as a checkpoint records them (computed once a
    store while remembered: the JSON of a fleet launch's hundred keys, each refresh)."""
    key = Same(store)
    found = _BASES.get(key)
    if found is None:
        doc = json.dumps(store.to_dict(), sort_keys=True, separators=(",", ":"))
        found = _BASES.put(key, "keys:" + hashlib.sha256(doc.encode()).hexdigest(), len(store))
    return found


def checkpoint_name(log: str) -> str:
    """``.<log>.status``: hidden beside the log, never taken for a process log."""
    return f".{log}.status"


@dataclass
class Checkpoint:
    """Where the history walk of one log stopped, and what it had seen until there."""

    launch_id: str
    dev: int
    ino: int
    offset: int
    anchor: str
    number: int
    stream: Stream
    #: Where the newest record the walk accepted starts (None: none accepted yet).
    newest_offset: int | None = None
    #: The latest ``now`` its lines were judged at (a derivation at an earlier time may not
    #: use it).
    judged_at: int = 0
    #: Whether this checkpoint came from (or went to) its file as it is.
    saved: bool = False
    #: The walk stopped this many bytes into a line longer than a record may be, numbered
    #: ``number`` (0: at a line boundary).
    skipping: int = 0
    #: The trust its lines were judged under (a digest of the keys): under other keys (one
    #: disabled, a certificate refused since) the history is walked again.
    basis: str = ""

    def to_dict(self) -> dict[str, Any]:
        s = self.stream
        return {
            "schema": CHECKPOINT_SCHEMA,
            "launch_id": self.launch_id,
            "dev": self.dev,
            "ino": self.ino,
            "offset": self.offset,
            "anchor": self.anchor,
            "number": self.number,
            "accepted": s.accepted,
            "refused": s.refused,
            "listed": s.listed,
            "unlisted": s.unlisted,
            "expired": s.expired,
            "torn": s.torn,
            "gaps": [list(g) for g in s.gaps],
            "last_seq": s.last_seq,
            "newest_offset": self.newest_offset,
            "judged_at": self.judged_at,
            "skipping": self.skipping,
            "basis": self.basis,
        }


def _anchor(fd: int, offset: int) -> str:
    start = max(0, offset - _ANCHOR_BYTES)
    return hashlib.sha256(os.pread(fd, offset - start, start)).hexdigest()


def checkpoint_from_dict(doc: dict[str, Any], name: str) -> Checkpoint:
    """A checkpoint from its saved form (:meth:`Checkpoint.to_dict`).

    Raises:
        ValueError, TypeError, KeyError: for anything that is not one.
    """
    ints = (
        "dev",
        "ino",
        "offset",
        "number",
        "accepted",
        "unlisted",
        "expired",
        "torn",
        "judged_at",
        "skipping",
    )
    if doc.get("schema") != CHECKPOINT_SCHEMA or any(type(doc.get(k)) is not int for k in ints):
        raise ValueError("not a checkpoint")
    refused = doc["refused"]
    if not isinstance(refused, dict) or any(type(v) is not int for v in refused.values()):
        raise ValueError("refused")
    gaps = [(int(a), int(b)) for a, b in doc["gaps"]]
    last = doc["last_seq"]
    if last is not None and type(last) is not int:
        raise ValueError("last_seq")
    stream = Stream(
        name=name,
        accepted=doc["accepted"],
        refused={str(k): v for k, v in refused.items()},
        listed=[str(x) for x in doc["listed"]][:20],
        unlisted=doc["unlisted"],
        expired=doc["expired"],
        torn=doc["torn"],
        gaps=gaps,
        last_seq=last,
    )
    newest = doc.get("newest_offset")
    if newest is not None and (type(newest) is not int or newest < 0):
        raise ValueError("newest_offset")
    if (newest is None) != (last is None):
        raise ValueError("newest_offset and last_seq disagree")
    return Checkpoint(
        str(doc["launch_id"]),
        doc["dev"],
        doc["ino"],
        doc["offset"],
        str(doc["anchor"]),
        doc["number"],
        stream,
        newest,
        doc["judged_at"],
        skipping=doc["skipping"],
        basis=str(doc.get("basis", "")),
    )


def load(dir_fd: int, log: str, fd: int, launch_id: str, now: int, basis: str = "") -> Checkpoint:
    """The checkpoint of ``log`` (open as ``fd``) if it still holds for that file, a
    derivation at ``now`` and the trust ``basis``, else a fresh one at its start. Never
    raises: an unusable checkpoint is only a slower status."""
    st = os.fstat(fd)
    fresh = Checkpoint(
        launch_id, st.st_dev, st.st_ino, 0, _anchor(fd, 0), 0, Stream(name=log), basis=basis
    )
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        cfd = os.open(checkpoint_name(log), flags, dir_fd=dir_fd)
    except OSError:
        return fresh
    try:
        if not stat.S_ISREG(os.fstat(cfd).st_mode):
            return fresh
        data = os.read(cfd, _MAX_CHECKPOINT + 1)
        doc = json.loads(data)
        if not isinstance(doc, dict):
            return fresh
        ck = checkpoint_from_dict(doc, log)
    except Exception:  # any unusable checkpoint is only a slower status
        return fresh
    finally:
        os.close(cfd)
    holds = (
        ck.launch_id == launch_id
        and (ck.dev, ck.ino) == (st.st_dev, st.st_ino)
        and 0 <= ck.offset <= st.st_size
        # at a line boundary, or (skipping) inside a line longer than a record may be
        and (ck.offset == 0 or ck.skipping > 0 or os.pread(fd, 1, ck.offset - 1) == b"\n")
        and (ck.skipping == 0 or MAX_RECORD_LENGTH < ck.skipping <= ck.offset)
        and ck.anchor == _anchor(fd, ck.offset)
        and ck.judged_at <= now
        and ck.basis == basis
    )
    if not holds:
        return fresh
    ck.saved = True
    return ck


def save(dir_fd: int, log: str, ck: Checkpoint) -> str | None:
    """Replace the checkpoint of ``log`` atomically; None, or why it could not be saved."""
    name = checkpoint_name(log)
    data = json.dumps(ck.to_dict(), separators=(",", ":")).encode()
    try:  # not synced: a checkpoint lost in a crash is walked again, never trusted wrongly
        write_file(Path(name), data, mode=0o600, dir_fd=dir_fd, sync=False)
    except OSError as exc:
        return f"checkpoint of {log} not saved: {exc.strerror}"
    ck.saved = True
    return None


class _Upto:
    """A reader of ``fd`` from ``offset`` to ``end`` (complete lines only), that says where
    it is."""

    def __init__(self, fd: int, offset: int, end: int) -> None:
        self._stream: BinaryIO = os.fdopen(os.dup(fd), "rb")
        self._stream.seek(offset)
        self.pos = offset
        self._end = end

    def readline(self, limit: int = -1) -> bytes:
        room = self._end - self.pos
        if room <= 0:
            return b""
        line = self._stream.readline(room if limit < 0 else min(limit, room))
        self.pos += len(line)
        return line

    def close(self) -> None:
        self._stream.close()


def complete_end(fd: int, size: int) -> int:
    """The offset just past the last ``\\n`` of the file (a line still being written, or
    torn by a crash, is left for later). A last line longer than any record may be is not
    searched through: then the whole file counts, and its reader refuses that line."""
    start = max(0, size - (MAX_RECORD_LENGTH + 2))
    chunk = os.pread(fd, size - start, start)
    cut = chunk.rfind(b"\n")
    if cut >= 0:
        return start + cut + 1
    return 0 if start == 0 else size


def advance(
    fd: int,
    ck: Checkpoint,
    walk: Callable[[Iterator[LogLine], Stream], None],
    *,
    end: int,
    deadline: float | None,
) -> bool:
    """Walk ``ck``'s log forward from its offset to ``end`` (a line boundary) with ``walk``
    until ``deadline`` (``time.monotonic``), at least one line a call so that the history
    always catches up, updating ``ck`` (and where its newest accepted record starts); True
    when it reached ``end``."""
    if ck.offset >= end:
        return True
    reader = _Upto(fd, ck.offset, end)
    try:
        # Marks every 1024 blank lines: the deadline is looked at inside a run of them too.
        lines = read_log(
            reader,  # type: ignore[arg-type]
            first=ck.number + (0 if ck.skipping else 1),
            marks=1024,
            skipping=ck.skipping,
        )
        exhausted = False

        def bounded() -> Iterator[LogLine]:
            nonlocal exhausted
            start = ck.offset
            for line in lines:
                newest = ck.stream.newest
                yield line  # walked when the generator resumes
                if ck.stream.newest is not newest:
                    ck.newest_offset = start
                ck.offset, ck.number, ck.skipping = reader.pos, line.number, line.skipped
                start = reader.pos
                if STOP.is_set() or (deadline is not None and time.monotonic() >= deadline):
                    return
            exhausted = True

        walk(bounded(), ck.stream)
        if exhausted:  # to the end, blank lines after the last record included (a walk
            ck.offset = reader.pos  # that stopped before a line leaves it for the next)
    finally:
        reader.close()
    ck.anchor = _anchor(fd, ck.offset)
    return ck.offset >= end
