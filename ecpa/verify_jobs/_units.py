"""What ``ecpa verify --jobs`` hands to its workers and gets back: units of work cut from
the EVIDENCE arguments in input order, read as a stream, and the results of each unit.

A log is cut into chunks of whole lines exactly as ``read_log`` reads it (a line is what one
``readline`` of at most the longest record and ``\r\n`` returns), so that ``read_log`` over a
chunk sees the very bytes it would see in the file: blank lines, ``\r\n``, over-long lines
and a torn last line come out the same. An over-long line never travels: the main process
lets ``read_log`` skip it from the stream itself, in bounded memory.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple, cast

from ecpa.errors import EcpaError
from ecpa.runtime import MAX_RECORD_LENGTH, read_log
from ecpa.verify_jobs._inputs import open_log, read_stdin
from ecpa.verify_jobs._results import render_result

__all__ = [
    "Batch",
    "Bundle",
    "Fenced",
    "Files",
    "LogChunk",
    "LogEnd",
    "LogStart",
    "Sizes",
    "Slot",
    "Unit",
    "slots",
    "stopped",
]

#: What ``read_log`` reads of a line at most: the longest record and room for ``\r\n``.
_LINE_LIMIT = MAX_RECORD_LENGTH + 2


class LogChunk(NamedTuple):
    """Whole lines of the log ``name``, for a worker to read with ``read_log``."""

    name: str
    first_line: int  # the number of the chunk's first line in the log
    data: bytes  # whole lines, newlines included; only the log's last line may lack one


class Files(NamedTuple):
    """EVIDENCE arguments that are single files, for a worker to read and verify."""

    specs: tuple[str, ...]  # .jws files and JSON bundles
    payload: Path | None


class Bundle(NamedTuple):
    """A bundle read from standard input."""

    name: str
    data: bytes


class Fenced(NamedTuple):
    """An item that passed every check but the replay fence, which the main process holds."""

    position: int  # of the item's line in Batch.texts
    nonce: str
    expires_at: int
    source: str
    line: int | None


class Batch(NamedTuple):
    """What one unit gave, in order: output lines, then maybe a torn line, then maybe a stop."""

    texts: list[str]
    items: int  # items verified (a log without any fails whole)
    failed: int  # of those items, how many failed
    fenced: list[Fenced]
    torn: str | None = None  # the message for standard error
    stop: EcpaError | None = None  # an input that is not evidence: exit 2 after the lines
    crash: tuple[str, str] | None = None  # a foreign exception (type name, text): exit 3


class LogStart(NamedTuple):
    """A log begins: the main process starts counting its items."""


class LogEnd(NamedTuple):
    """A log ends: without any item, it fails whole (``ECPA_INVALID_RECORD``)."""

    name: str


Unit = LogChunk | Files | Bundle
Slot = Unit | LogStart | LogEnd | Batch


def stopped(exc: Exception, batch: Batch | None = None) -> Batch:
    """``batch`` (default: empty) ended by ``exc``: an unreadable input (``EcpaError``, exit
    2) or a foreign exception (exit 3), raised by the main process after the lines before."""
    if batch is None:
        batch = Batch([], 0, 0, [])
    if isinstance(exc, EcpaError):
        return batch._replace(stop=exc)
    return batch._replace(crash=(type(exc).__name__, str(exc)))


class Sizes(NamedTuple):
    """How the main process cuts inputs: lines and bytes per log chunk, files per group;
    and how it renders the results it makes itself (over-long lines)."""

    lines: int
    bytes: int
    files: int
    as_json: bool


class _Replay:
    """A stream that gives back the first bytes of a line once, then reads on from ``rest``:
    lets ``read_log`` judge an over-long line itself, skipping it in bounded memory."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head: bytes | None = head
        self._rest = rest

    def readline(self, size: int = -1) -> bytes:
        if self._head is not None:
            head, self._head = self._head, None
            return head
        return self._rest.readline(size)


def _log_slots(name: str, stream: BinaryIO, sizes: Sizes) -> Iterator[Slot]:
    yield LogStart()
    lines: list[bytes] = []
    size, number, first = 0, 0, 1
    while True:
        raw = stream.readline(_LINE_LIMIT)  # as read_log reads it
        if raw:
            number += 1
        too_long = len(raw) == _LINE_LIMIT and not raw.endswith(b"\n")
        if lines and (not raw or too_long or len(lines) == sizes.lines or size >= sizes.bytes):
            yield LogChunk(name, first, b"".join(lines))
            lines, size, first = [], 0, number
        if not raw:
            break
        if too_long:  # never held whole: read_log skips the rest of the line from the stream
            [line] = itertools.islice(read_log(cast(BinaryIO, _Replay(raw, stream))), 1)
            text = render_result(name, number, line.error, None, sizes.as_json)
            yield Batch([text] if text else [], 1, 1, [])
            first = number + 1
            continue
        lines.append(raw)
        size += len(raw)
    yield LogEnd(name)


def _stdin_slots(sizes: Sizes) -> Iterator[Slot]:
    data, one_object = read_stdin()  # as evidence_items("-") reads it
    if one_object:
        yield Bundle("-", data.strip())
    else:
        yield from _log_slots("-", io.BytesIO(data), sizes)


def slots(specs: list[str], payload: Path | None, sizes: Sizes) -> Generator[Slot, None, None]:
    """Every input as units of work and markers, in input order, read lazily."""
    files: list[str] = []
    for spec in specs:
        if spec != "-" and Path(spec).suffix != ".jsonl":
            files.append(spec)
            if len(files) == sizes.files:
                yield Files(tuple(files), payload)
                files = []
            continue
        if files:
            yield Files(tuple(files), payload)
            files = []
        if spec == "-":
            yield from _stdin_slots(sizes)
            continue
        with open_log(spec) as stream:
            yield from _log_slots(spec, stream, sizes)
    if files:
        yield Files(tuple(files), payload)
