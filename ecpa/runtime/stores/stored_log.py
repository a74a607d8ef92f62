"""The logs of a launch as the evidence store holds them, for ``ecpa status --db``
(:mod:`ecpa.runtime.stores.remote`): each a :class:`~ecpa.runtime.judge.sources.LogSource`
read with a few queries per launch (:class:`Prefetched`) and, past what those hold, a few
per log."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator

from ecpa.errors import EcpaError
from ecpa.runtime.judge import history
from ecpa.runtime.judge.sources import FIRST_LINES, MAX_LINES
from ecpa.runtime.judge.stream import Stream
from ecpa.runtime.model.evidence import LogLine, parse_record
from ecpa.runtime.stores.store import EvidenceStore

__all__ = ["Prefetched", "StoredLog"]

#: Lines read per query when a history is walked.
_PAGE = 500


class Prefetched:
    """What a status reads of every log of one launch, in a few queries rather than a few
    per log (a fleet's launch has hundreds of logs): each log's stored end, this reader's
    checkpoints, and each log's :data:`~ecpa.runtime.judge.sources.FIRST_LINES` newest
    lines (raw, newest first)."""

    def __init__(self, store: EvidenceStore, launch_id: str, names: list[str]) -> None:
        self.ends = {n: p.end for n, p in store.positions(launch_id, names).items()}
        self.checkpoints: dict[str, str] | None = None  # None: not readable (no right yet)
        try:
            rows = store.query(
                "SELECT source, doc FROM ecpa_reader_checkpoint"
                " WHERE reader = current_user AND launch_id = %s",
                (launch_id,),
            )
            self.checkpoints = {str(source): str(doc) for source, doc in rows}
        except EcpaError:
            pass
        self.newest: dict[str, list[tuple[int, bytes]]] = {n: [] for n in names}
        rows = store.query(  # the launch's day read once; one index probe a log
            "SELECT t.s, e.file_offset, e.line FROM unnest(%b::text[], %b::bigint[]) AS t(s, o)"
            " CROSS JOIN LATERAL (SELECT file_offset, line FROM ecpa_evidence"
            " WHERE (launch_id, launch_day) ="
            " (SELECT launch_id, day FROM ecpa_launch WHERE launch_id = %s)"
            " AND source = t.s AND file_offset < t.o ORDER BY file_offset DESC LIMIT %s) e"
            " ORDER BY t.s, e.file_offset DESC",
            (names, [self.ends.get(n, 0) for n in names], launch_id, FIRST_LINES),
        )
        for source, offset, line in rows:
            self.newest[str(source)].append((int(offset), bytes(line)))


class StoredLog:
    """A process log as the evidence store holds it (a
    :class:`~ecpa.runtime.judge.sources.LogSource`): its lines in file order, its checkpoint
    in ``ecpa_reader_checkpoint``. A checkpoint holds while the line just before its offset
    is still the one it walked last (by hash): otherwise the history is walked again from
    the start. With ``prefetched``, what it holds is not asked for again."""

    def __init__(
        self,
        store: EvidenceStore,
        launch_id: str,
        name: str,
        end: int,
        *,
        basis: str,
        prefetched: Prefetched | None = None,
    ) -> None:
        self.store = store
        self.launch_id = launch_id
        self.name = name
        self._end = end
        self._basis = basis
        self._pre = prefetched

    def _lines(self, sql: str, params: tuple[int, ...]) -> list[tuple[int, bytes]]:
        # ``sql`` is one of this class's constant clauses, never input.
        # The launch's day: its partition alone is read (pruned when the query runs).
        head = (
            "SELECT file_offset, line FROM ecpa_evidence WHERE (launch_id, launch_day) ="
            " (SELECT launch_id, day FROM ecpa_launch WHERE launch_id = %s) AND source = %s"
        )
        rows = self.store.query(head + sql, (self.launch_id, self.name, *params))
        return [(int(o), bytes(line)) for o, line in rows]

    def _newest(self, end: int, limit: int) -> list[tuple[int, bytes]]:
        if self._pre is not None and end == self._end and limit <= FIRST_LINES:
            return self._pre.newest.get(self.name, [])[:limit]
        return self._lines(" AND file_offset < %s ORDER BY file_offset DESC LIMIT %s", (end, limit))

    def _anchor(self, offset: int) -> str:
        if offset == 0:
            return hashlib.sha256(b"").hexdigest()
        before = self._newest(offset, 1)
        text = b"" if not before else str(before[0][0]).encode() + b":" + before[0][1]
        return hashlib.sha256(text).hexdigest()

    def load(self, launch_id: str, now: int) -> history.Checkpoint:
        fresh = history.Checkpoint(launch_id, 0, 0, 0, self._anchor(0), 0, Stream(name=self.name))
        if self._pre is not None and self._pre.checkpoints is not None:
            found = self._pre.checkpoints.get(self.name)
            rows = [] if found is None else [(found,)]
        else:
            try:
                rows = self.store.query(
                    "SELECT doc FROM ecpa_reader_checkpoint"
                    " WHERE reader = current_user AND launch_id = %s AND source = %s",
                    (launch_id, self.name),
                )
            except EcpaError:  # no right to read it (yet): only a slower status
                return fresh
        try:
            doc = json.loads(rows[0][0]) if rows else None
        except (ValueError, RecursionError):  # any unusable checkpoint is a slower status
            doc = None
        if (
            not isinstance(doc, dict) or doc.get("basis") != self._basis
        ):  # walked under another trust store
            return fresh
        try:
            ck = history.checkpoint_from_dict(doc, self.name)
        except Exception:  # any unusable checkpoint is only a slower status
            return fresh
        holds = (
            ck.launch_id == launch_id
            and (ck.dev, ck.ino) == (0, 0)
            and 0 <= ck.offset <= self._end
            and ck.anchor == self._anchor(ck.offset)
            and ck.judged_at <= now
        )
        if not holds:
            return fresh
        ck.saved = True
        return ck

    def end(self) -> tuple[int, bytes]:
        return self._end, b""  # only complete lines are shipped

    def advance(
        self,
        ck: history.Checkpoint,
        walk: Callable[[Iterator[LogLine], Stream], None],
        *,
        end: int,
        deadline: float | None,
    ) -> bool:
        if ck.offset >= end:
            return True
        exhausted = False

        def lines() -> Iterator[LogLine]:
            nonlocal exhausted
            while True:
                page = self._lines(
                    " AND file_offset >= %s AND file_offset < %s ORDER BY file_offset LIMIT %s",
                    (ck.offset, end, _PAGE),
                )
                if not page:
                    exhausted = True
                    return
                for offset, raw in page:
                    number = ck.number + 1
                    line = raw[:-1] if raw.endswith(b"\r") else raw
                    try:
                        item = LogLine(number, parse_record(line), None)
                    except EcpaError as exc:
                        item = LogLine(number, None, exc)
                    newest = ck.stream.newest
                    yield item  # walked when the generator resumes
                    if ck.stream.newest is not newest:
                        ck.newest_offset = offset
                    ck.offset, ck.number = offset + 1, number
                    if history.STOP.is_set() or (
                        deadline is not None and time.monotonic() >= deadline
                    ):
                        return

        walk(lines(), ck.stream)
        if exhausted:  # to the end (a walk that stopped before a line leaves it for the next)
            ck.offset = end
        ck.anchor = self._anchor(ck.offset)
        return exhausted

    def newest_lines(self, end: int, limit: int = MAX_LINES) -> list[tuple[int, bytes]]:
        found = self._newest(end, limit)
        return [(o, line[:-1] if line.endswith(b"\r") else line) for o, line in found]

    def line_at(self, offset: int) -> bytes | None:
        found = self._lines(" AND file_offset = %s", (offset,))
        return found[0][1].removesuffix(b"\r") if found else None

    def save(self, ck: history.Checkpoint) -> str | None:
        # Called only when the status saves checkpoints (its judgement's save_checkpoints).
        try:
            doc = json.dumps({**ck.to_dict(), "basis": self._basis}, separators=(",", ":"))
            self.store.query(  # the reader is the database role (row level security)
                "INSERT INTO ecpa_reader_checkpoint (launch_id, source, doc) VALUES (%s, %s, %s)"
                " ON CONFLICT (reader, launch_id, source) DO UPDATE SET doc = EXCLUDED.doc",
                (self.launch_id, self.name, doc),
            )
        except EcpaError as exc:
            return f"checkpoint of {self.name} not saved: {exc.detail}"
        ck.saved = True
        return None
