"""The logs of a launch as the evidence store holds them, for ``ecpa status --db``
(:mod:`ecpa.runtime.stores.remote`): each a :class:`~ecpa.runtime.judge.sources.LogSource`
read with a few queries per launch (:class:`Prefetched`) and, past what those hold, a few
per log."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

from ecpa.errors import EcpaError
from ecpa.runtime.judge import history
from ecpa.runtime.judge.certified import MEMO_KEYS
from ecpa.runtime.judge.memo import Memo, digest
from ecpa.runtime.judge.sources import FIRST_LINES, MAX_LINES
from ecpa.runtime.judge.stream import Stream
from ecpa.runtime.model.evidence import LogLine, parse_record
from ecpa.runtime.stores.store import EvidenceStore

__all__ = ["WALK_LINES", "Prefetched", "StoredLog"]

#: Lines read per query when a history is walked.
_PAGE = 500


class Prefetched:
    """What a status reads of every log of one launch, in a few queries rather than a few
    per log (a fleet's launch has hundreds of logs): this reader's checkpoints, and, in one
    query, each log's
    :data:`~ecpa.runtime.judge.sources.FIRST_LINES` newest lines (raw, newest first), the
    line its checkpoint is anchored to, and the first :data:`WALK_LINES` lines after its
    checkpoint (what a walk reads first: in a live fleet, all it reads). The checkpoints
    walked are saved together (:meth:`save_all`)."""

    def __init__(
        self, store: EvidenceStore, launch_id: str, names: list[str], ends: Mapping[str, int]
    ) -> None:
        self.store, self.launch_id = store, launch_id
        #: Each log's stored end (``ends``: read with the launch's listing; absent: nothing).
        self.ends = {n: ends[n] for n in names if n in ends}
        #: Each log's checkpoint document as stored (its text), when readable at all.
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
        #: Where each log's walk starts when its checkpoint holds (0 past the log's end:
        #: such a checkpoint never holds, and any offset reaches the query only in range).
        self.starts = {}
        for n in names:
            doc = (self.checkpoints or {}).get(n)
            saved = None if doc is None else _remembered(doc, n)  # (its offset only read)
            start = 0 if saved is None else max(0, saved.offset)
            self.starts[n] = start if start <= self.ends.get(n, 0) else 0
        self.newest: dict[str, list[tuple[int, bytes]]] = {n: [] for n in names}
        #: The line before each log's start (when it is not the newest), by the start.
        self.before: dict[str, tuple[int, bytes]] = {}
        self.walk: dict[str, list[tuple[int, bytes]]] = {n: [] for n in names}
        rows = store.query(  # the launch's day read once; one index probe a log and a part
            _PREFETCH,
            (names, [self.ends.get(n, 0) for n in names], [self.starts[n] for n in names],
             launch_id, FIRST_LINES, launch_id, launch_id, WALK_LINES),
        )  # fmt: skip
        for source, kind, offset, line in rows:
            name, item = str(source), (int(offset), bytes(line))
            if kind == 0:
                self.newest[name].insert(0, item)  # ascending rows: the newest first
            elif kind == 1:
                self.before[name] = item
            else:
                self.walk[name].append(item)
        self.pending: list[tuple[str, str]] = []

    def save_all(self) -> list[str]:
        """Save the checkpoints held for saving in one statement; what could not be saved
        (one line a log), or nothing."""
        pending, self.pending = list(dict(self.pending).items()), []  # a log's newest once
        if not pending:
            return []
        try:
            self.store.query(  # the reader is the database role (row level security)
                "INSERT INTO ecpa_reader_checkpoint (launch_id, source, doc)"
                " SELECT %s, s, d FROM unnest(%b::text[], %b::text[]) AS t(s, d)"
                " ON CONFLICT (reader, launch_id, source) DO UPDATE SET doc = EXCLUDED.doc",
                (self.launch_id, [n for n, _ in pending], [d for _, d in pending]),
            )
        except EcpaError as exc:
            return [f"checkpoint of {name} not saved: {exc.detail}" for name, _ in pending]
        return []


#: Lines after each log's checkpoint read with the launch's other lines (:class:`Prefetched`).
WALK_LINES = 16
#: :class:`Prefetched`'s query of the launch's lines: for each log (``t.s``, its end ``t.e``,
#: its checkpoint's offset ``t.c``), its newest lines (kind 0), the line before its
#: checkpoint when that is not the newest (1), the lines after its checkpoint (2); each
#: in the launch's day alone.
_PREFETCH = (
    "SELECT t.s, k.kind, k.file_offset, k.line"
    " FROM unnest(%b::text[], %b::bigint[], %b::bigint[]) AS t(s, e, c) CROSS JOIN LATERAL ("
    "(SELECT 0 AS kind, file_offset, line FROM ecpa_evidence WHERE (launch_id, launch_day) ="
    " (SELECT launch_id, day FROM ecpa_launch WHERE launch_id = %s)"
    " AND source = t.s AND file_offset < t.e ORDER BY file_offset DESC LIMIT %s)"
    " UNION ALL (SELECT 1, file_offset, line FROM ecpa_evidence WHERE (launch_id, launch_day) ="
    " (SELECT launch_id, day FROM ecpa_launch WHERE launch_id = %s)"
    " AND source = t.s AND file_offset < t.c AND t.c < t.e ORDER BY file_offset DESC LIMIT 1)"
    " UNION ALL (SELECT 2, file_offset, line FROM ecpa_evidence WHERE (launch_id, launch_day) ="
    " (SELECT launch_id, day FROM ecpa_launch WHERE launch_id = %s)"
    " AND source = t.s AND file_offset >= t.c AND file_offset < t.e"
    " ORDER BY file_offset LIMIT %s)) k ORDER BY t.s, k.kind, k.file_offset"
)


def _parsed(doc: str) -> object:
    try:
        return json.loads(doc)
    except (ValueError, RecursionError):  # any unusable checkpoint is a slower status
        return None


#: Each stored checkpoint as read (its document's text by its SHA-256, its log), parsed
#: and checked once (:func:`~ecpa.runtime.judge.history.checkpoint_from_dict`, pure):
#: a judging process of ``ecpa serve`` reads every log's checkpoint every refresh.
_SAVED: Memo[tuple[bytes, str], history.Checkpoint] = Memo("stored checkpoints", MEMO_KEYS)


def _remembered(doc: str, name: str) -> history.Checkpoint | None:
    """The checkpoint of log ``name`` stored as ``doc`` as remembered, shared (to be read,
    never changed), or None when it is none (never remembered: only a slower status)."""
    key = (digest(doc.encode("utf-8", "surrogatepass")), name)
    found = _SAVED.get(key)
    if found is None:
        parsed = _parsed(doc)
        if not isinstance(parsed, dict):
            return None
        try:
            found = history.checkpoint_from_dict(parsed, name)
        except Exception:  # any unusable checkpoint is only a slower status
            return None
        _SAVED.put(key, found)
    return found


def _saved(doc: str, name: str) -> history.Checkpoint | None:
    """The checkpoint of log ``name`` stored as ``doc``, a copy of its own (a walk goes on
    from it), or None when it is none."""
    found = _remembered(doc, name)
    if found is None:
        return None
    s = found.stream
    stream = replace(s, refused=dict(s.refused), listed=list(s.listed), gaps=list(s.gaps))
    return replace(found, stream=stream)


class StoredLog:
    """A process log as the evidence store holds it (a
    :class:`~ecpa.runtime.judge.sources.LogSource`): its lines in file order, its checkpoint
    in ``ecpa_reader_checkpoint``. A checkpoint holds while the line just before its offset
    is still the one it walked last (by hash): otherwise the history is walked again from
    the start. What ``prefetched`` holds of the launch's logs is not asked for again, and
    its checkpoint is saved with theirs (:meth:`Prefetched.save_all`)."""

    def __init__(
        self,
        store: EvidenceStore,
        launch_id: str,
        name: str,
        end: int,
        *,
        basis: str,
        prefetched: Prefetched,
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
        if end == self._end and limit <= FIRST_LINES:
            return self._pre.newest.get(self.name, [])[:limit]
        return self._lines(" AND file_offset < %s ORDER BY file_offset DESC LIMIT %s", (end, limit))

    def _anchor(self, offset: int) -> str:
        if offset == 0:
            return hashlib.sha256(b"").hexdigest()
        pre = self._pre
        if offset != self._end and offset == pre.starts.get(self.name) and self.name in pre.before:
            before = [pre.before[self.name]]
        else:
            before = self._newest(offset, 1)
        text = b"" if not before else str(before[0][0]).encode() + b":" + before[0][1]
        return hashlib.sha256(text).hexdigest()

    def load(self, launch_id: str, now: int) -> history.Checkpoint:
        doc = None if self._pre.checkpoints is None else self._pre.checkpoints.get(self.name)
        ck = None if doc is None else _saved(doc, self.name)  # (None: none readable, yet)
        if (
            ck is not None
            and ck.basis == self._basis  # (else walked under another trust)
            and ck.launch_id == launch_id
            and (ck.dev, ck.ino) == (0, 0)
            and 0 <= ck.offset <= self._end
            and ck.anchor == self._anchor(ck.offset)
            and ck.judged_at <= now
        ):
            ck.saved = True
            return ck
        return history.Checkpoint(launch_id, 0, 0, 0, self._anchor(0), 0, Stream(name=self.name))

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
        pre = self._pre
        first = None  # the lines read with the launch's, when the walk starts where they do
        if end == self._end and ck.offset == pre.starts.get(self.name):
            first = pre.walk.get(self.name, [])

        def lines() -> Iterator[LogLine]:
            nonlocal exhausted, first
            while True:
                if first is not None:  # fewer than asked for: every line to the end
                    page, last, first = first, len(first) < WALK_LINES, None
                else:
                    page, last = self._page(ck.offset, end), False
                if not page:
                    exhausted = True
                    return
                for offset, raw in page:
                    number = ck.number + 1
                    line = raw[:-1] if raw.endswith(b"\r") else raw
                    try:
                        item = LogLine(number, parse_record(line), None, raw=line)
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
                if last:
                    exhausted = True
                    return

        walk(lines(), ck.stream)
        if exhausted:  # to the end (a walk that stopped before a line leaves it for the next)
            ck.offset = end
        ck.anchor = self._anchor(ck.offset)
        return exhausted

    def _page(self, start: int, end: int) -> list[tuple[int, bytes]]:
        return self._lines(
            " AND file_offset >= %s AND file_offset < %s ORDER BY file_offset LIMIT %s",
            (start, end, _PAGE),
        )

    def newest_lines(self, end: int, limit: int = MAX_LINES) -> list[tuple[int, bytes]]:
        found = self._newest(end, limit)
        return [(o, line[:-1] if line.endswith(b"\r") else line) for o, line in found]

    def line_at(self, offset: int) -> bytes | None:
        found = self._lines(" AND file_offset = %s", (offset,))
        return found[0][1].removesuffix(b"\r") if found else None

    def save(self, ck: history.Checkpoint) -> str | None:
        # Called only when the status saves checkpoints (its judgement's save_checkpoints).
        # Held for Prefetched.save_all, which saves the launch's in one statement and says
        # what could not be saved: None here means "held", not yet "kept".
        doc = json.dumps({**ck.to_dict(), "basis": self._basis}, separators=(",", ":"))
        self._pre.pending.append((self.name, doc))
        return None
