"""The BurstGPT CSV format: lines, header and rows, checked strictly (DLA.md "Value check").

A BurstGPT trace is a CSV file with the columns ``Timestamp, Model, Request tokens,
Response tokens, Total tokens, Log Type`` (in the order its header gives). This module knows
that format: it yields checked rows, and :mod:`dla_plugin.sim.workload` turns them into jobs
(filters, zero-token rows, clamping). Its line, header and row checks (:func:`csv_rows`) also
serve the trace-replay format (:mod:`dla_plugin.sim.trace`). Problems are raised as
:class:`RowProblem`, which knows the line and column but not the file; the caller adds it.

The file is read in binary, one line at a time, and each line is decoded on its own, so a
problem in the encoding is reported at its exact line and byte. (A UTF-8 sequence never
contains the byte ``\\n``, so splitting before decoding is safe.)
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Literal

# The stable codes of dla_plugin.sim.workload.WorkloadError (defined here, where most are raised).
WorkloadCode = Literal[
    "params",  # a bad argument: generator parameters, loader options, a job, a prediction model
    "io",  # the file cannot be opened or read
    "encoding",  # the file is not UTF-8 text (or is binary)
    "header",  # an empty file, or missing / unexpected / duplicated columns
    "row",  # a line too long, a wrong number of fields, a blank line between rows, bad quoting
    "value",  # a field that is not a non-negative number
    "total",  # Total tokens != Request tokens + Response tokens
    "order",  # a timestamp smaller than the previous row's
    "empty",  # no job left: no data rows, or filters and zero-token rows removed them all
]

COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")

_BOM = b"\xef\xbb\xbf"
# Bounds before parsing (STYLE rule 4): a longer line is not a BurstGPT row (a binary file
# without newlines would otherwise be read whole into one line).
_MAX_LINE_BYTES = 64 * 1024
_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?")
_TOKENS = re.compile(r"[0-9]{1,18}")
_NEGATIVE = re.compile(r"-[0-9.]+(?:[eE][+-]?[0-9]+)?")
_SHOW = 40  # characters of a found value quoted in a message


class RowProblem(Exception):
    """A problem at a line (and column) of the file, with a stable code."""

    def __init__(
        self,
        code: WorkloadCode,
        expected: str,
        found: str,
        *,
        line: int | None,
        column: str | None = None,
    ) -> None:
        super().__init__(f"{code}: expected {expected}, found {found}")
        self.code = code
        self.expected = expected
        self.found = found
        self.line = line
        self.column = column


@dataclass(frozen=True)
class Row:
    """One checked data row; ``line`` is the line where it starts (the header is line 1)."""

    line: int
    timestamp: float
    model: str
    request_tokens: int
    response_tokens: int
    log_type: str


def show(value: str) -> str:
    """``value`` quoted for a message, cut to a readable length."""
    if len(value) > _SHOW:
        return repr(value[:_SHOW]) + f"... ({len(value)} characters)"
    return repr(value)


def _lines(stream: BinaryIO) -> Iterator[str]:
    """The decoded lines of ``stream`` (line endings kept, for :mod:`csv`)."""
    number = 0
    while True:
        raw = stream.readline(_MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > _MAX_LINE_BYTES:
            raise RowProblem(
                "row",
                f"a line of at most {_MAX_LINE_BYTES} bytes",
                "a longer one (is this a CSV file?)",
                line=number,
            )
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]  # utf-8-sig: a byte order mark may open the file
        nul = raw.find(b"\x00")
        if nul >= 0:
            raise RowProblem(
                "encoding", "a text (CSV) file", f"a NUL byte at byte {nul + 1}", line=number
            )
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = raw[exc.start : exc.start + 1].hex()
            raise RowProblem(
                "encoding", "UTF-8 text", f"the byte 0x{bad} at byte {exc.start + 1}", line=number
            ) from None


def check_header(
    names: list[str], required: tuple[str, ...], optional: tuple[str, ...], expected: str
) -> None:
    """Raise a ``header`` :class:`RowProblem` when ``names`` (the header's fields) is blank,
    misses a ``required`` column, has one neither required nor ``optional``, or repeats one."""
    if not names or names == [""]:
        raise RowProblem("header", expected, "a blank line", line=1)
    known = (*required, *optional)
    problems = []
    missing = [c for c in required if c not in names]
    unexpected = [n for n in names if n not in known]
    duplicated = sorted({n for n in names if n in known and names.count(n) > 1})
    if missing:
        problems.append("missing " + ", ".join(map(show, missing)))
    if unexpected:
        problems.append("unexpected " + ", ".join(map(show, unexpected)))
    if duplicated:
        problems.append("duplicated " + ", ".join(map(show, duplicated)))
    if problems:
        raise RowProblem("header", expected, "; ".join(problems), line=1)


def csv_rows(
    stream: BinaryIO,
    required: tuple[str, ...],
    optional: tuple[str, ...],
    *,
    header: str,
    empty: str,
) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line, fields by column name)`` of each data row of a CSV file opened in binary mode,
    whose header :func:`check_header` accepts (``header``: what it expects; ``empty``: what an
    empty file is told). Blank lines may end the file, but not separate rows.

    Raises:
        RowProblem: ``encoding``, ``header`` and ``row`` problems, at their line.
    """
    reader = csv.reader(_lines(stream), strict=True)
    end = 0  # the last line read so far
    blank: int | None = None  # the first of a run of blank lines
    index: dict[str, int] = {}
    while True:
        start = end + 1
        try:
            fields = next(reader, None)
        except csv.Error as exc:
            raise RowProblem("row", "well-formed CSV", str(exc), line=start) from None
        end = reader.line_num
        if fields is None:
            if not index:
                raise RowProblem("header", empty, "an empty file", line=None)
            return
        if not index:
            check_header(fields, required, optional, header)
            index = {name: i for i, name in enumerate(fields)}
            continue
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            blank = start if blank is None else blank
            continue
        if blank is not None:
            raise RowProblem(
                "row", "no blank line between rows", f"a blank line at line {blank}", line=blank
            )
        if len(fields) != len(index):
            raise RowProblem("row", f"{len(index)} fields", f"{len(fields)} fields", line=start)
        yield start, {name: fields[i] for name, i in index.items()}


def _seconds(text: str, line: int) -> float:
    if _SECONDS.fullmatch(text):
        value = float(text)
        if math.isfinite(value):
            return value
    found = "a negative number " if _NEGATIVE.fullmatch(text) else ""
    raise RowProblem(
        "value",
        "a non-negative number of seconds",
        found + show(text),
        line=line,
        column="Timestamp",
    )


def _tokens(text: str, line: int, column: str) -> int:
    if _TOKENS.fullmatch(text):
        return int(text)
    found = "a negative number " if _NEGATIVE.fullmatch(text) else ""
    raise RowProblem(
        "value",
        "a non-negative integer of at most 18 digits",
        found + show(text),
        line=line,
        column=column,
    )


def read_rows(stream: BinaryIO) -> Iterator[Row]:
    """The checked data rows of a BurstGPT CSV file opened in binary mode.

    Blank lines may end the file, but not separate rows.

    Raises:
        RowProblem: ``encoding`` (not UTF-8, or binary), ``header`` (an empty file, missing,
            unexpected or duplicated columns), ``row`` (a line too long, a wrong number of
            fields, a blank line between rows, broken CSV quoting), ``value`` (a timestamp
            or token count that is not a non-negative number), ``total`` (Total tokens is
            not Request tokens + Response tokens), ``order`` (a decreasing timestamp).
    """
    previous: tuple[float, str, int] | None = None  # (timestamp, as written, line) before
    rows = csv_rows(
        stream,
        COLUMNS,
        (),
        header="a header with the columns " + ", ".join(COLUMNS) + " (in any order)",
        empty="a header with the columns " + ", ".join(COLUMNS),
    )
    for start, row in rows:
        timestamp = _seconds(row["Timestamp"], start)
        request = _tokens(row["Request tokens"], start, "Request tokens")
        response = _tokens(row["Response tokens"], start, "Response tokens")
        total = _tokens(row["Total tokens"], start, "Total tokens")
        if total != request + response:
            raise RowProblem(
                "total",
                f"Request tokens + Response tokens = {request} + {response} = {request + response}",
                str(total),
                line=start,
                column="Total tokens",
            )
        if previous is not None and timestamp < previous[0]:
            raise RowProblem(
                "order",
                f"a timestamp of at least {show(previous[1])} (line {previous[2]}; non-decreasing)",
                show(row["Timestamp"]),
                line=start,
                column="Timestamp",
            )
        previous = (timestamp, row["Timestamp"], start)
        yield Row(start, timestamp, row["Model"], request, response, row["Log Type"])
