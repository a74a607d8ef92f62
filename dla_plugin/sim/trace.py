"""Request traces to replay, in Vidur's trace-replay CSV format, checked strictly.

A trace is a CSV file whose header names the columns ``arrived_at, num_prefill_tokens,
num_decode_tokens`` — the columns of Vidur's trace-replay request generator, as Vidur names
them — and optionally ``predicted_decode_tokens``, in any order. Each data row is one request:

- ``arrived_at``: its arrival in seconds since the start of the trace, a non-negative finite
  decimal number of at most 1e9 (``3``, ``0.25``, ``.5``, ``1e2``; not ``inf``, ``nan``, one
  with spaces, nor an absolute timestamp in milliseconds), not smaller than the previous
  row's. Arrivals are kept as written, not shifted to start at 0;
- ``num_prefill_tokens``, ``num_decode_tokens``: its prompt and (true) output lengths,
  integers >= 1 in decimal digits (at most 18): a replayed request needs at least one token
  of each, so ``0`` is an error, and so are ``12.0``, ``-3`` and an empty field;
- ``predicted_decode_tokens`` (when the column exists): the predicted output length, an
  integer >= 1 under the same rules.

The lines follow the BurstGPT reader's rules (:mod:`dla_plugin.sim.burstgpt`): the file is
read in binary one line at a time and each line is decoded on its own, so NUL bytes and
invalid UTF-8 are reported at their exact line and byte; a UTF-8 byte order mark may open the
file; CRLF line ends are allowed; a line is at most 64 KiB; every row has as many fields as
the header; blank lines may end the file but not separate rows; CSV quoting must be
well-formed. A file with a header and no data row is an error.

Every problem raises :class:`~dla_plugin.sim.workload.WorkloadError` naming the file, line
and column, e.g. ``t.csv:3: column 'num_decode_tokens': expected ..., found '0' ... [value]``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from dla_plugin.sim.burstgpt import _NEGATIVE, _SECONDS, _TOKENS, RowProblem, csv_rows, show
from dla_plugin.sim.workload import Job, WorkloadError, _params_error, located

__all__ = ["Trace", "load_trace"]

COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
OPTIONAL = "predicted_decode_tokens"

_HEADER = (
    "a header with the columns " + ", ".join(COLUMNS) + f" and optionally {OPTIONAL} (in any order)"
)
_EACH = "a replayed request needs at least one token of each: prefill and decode"
_NEED = {
    "num_prefill_tokens": _EACH,
    "num_decode_tokens": _EACH,
    OPTIONAL: "a predicted output length is at least one token",
}


@dataclass(frozen=True)
class Trace:
    """The requests of a trace file, in the file's order.

    ``predicted`` holds one predicted output length per job when the file has the
    ``predicted_decode_tokens`` column, else None; ``lines`` holds the line of each job in the
    file (the header is line 1).
    """

    jobs: list[Job]
    predicted: list[int] | None
    lines: list[int]


def _value(text: str, line: int, column: str, expected: str, note: str = "") -> RowProblem:
    found = "a negative number " if _NEGATIVE.fullmatch(text) else ""
    return RowProblem("value", expected, found + show(text) + note, line=line, column=column)


# Seconds from the start of the trace: a bound that keeps the clock exact to the microsecond
# (a larger value is an absolute timestamp, or milliseconds, not a trace's time).
MAX_ARRIVAL_S = 1e9


def _seconds(text: str, line: int) -> float:
    expected = f"a non-negative number of seconds from the start, at most {MAX_ARRIVAL_S:g}"
    if _SECONDS.fullmatch(text):
        value = float(text)
        if math.isfinite(value) and value <= MAX_ARRIVAL_S:
            return value
    raise _value(text, line, "arrived_at", expected)


def _tokens(text: str, line: int, column: str) -> int:
    expected = "an integer >= 1 of at most 18 digits"
    if not _TOKENS.fullmatch(text):
        raise _value(text, line, column, expected)
    value = int(text)
    if value < 1:
        raise _value(text, line, column, expected, f" ({_NEED[column]})")
    return value


def _rows(stream: BinaryIO) -> Iterator[tuple[int, float, int, int, int | None]]:
    """``(line, arrived_at, prefill, decode, predicted)`` for each checked data row."""
    previous: tuple[float, str, int] | None = None  # (arrival, as written, line) before
    rows = csv_rows(stream, COLUMNS, (OPTIONAL,), header=_HEADER, empty=_HEADER)
    for start, row in rows:
        arrival = _seconds(row["arrived_at"], start)
        prefill = _tokens(row["num_prefill_tokens"], start, "num_prefill_tokens")
        decode = _tokens(row["num_decode_tokens"], start, "num_decode_tokens")
        predicted = _tokens(row[OPTIONAL], start, OPTIONAL) if OPTIONAL in row else None
        if previous is not None and arrival < previous[0]:
            raise RowProblem(
                "order",
                f"an arrived_at of at least {show(previous[1])} (line {previous[2]}; "
                "non-decreasing)",
                show(row["arrived_at"]),
                line=start,
                column="arrived_at",
            )
        previous = (arrival, row["arrived_at"], start)
        yield start, arrival, prefill, decode, predicted


def load_trace(path: str | os.PathLike[str], *, limit: int | None = None) -> Trace:
    """The requests of a trace file in Vidur's trace-replay CSV format (see the module).

    Each row gives a :class:`~dla_plugin.sim.workload.Job` arriving at ``arrived_at`` (as
    written), with ``num_prefill_tokens`` prompt tokens and ``num_decode_tokens`` output
    tokens, and, when the file has the column, a predicted output length. Reading stops
    after ``limit`` jobs: later lines are not read, nor checked.

    Raises:
        WorkloadError: (``params``) for a ``limit`` that is not an integer >= 1 or None;
            (``io``) when the file cannot be opened or read; (``encoding``, ``header``,
            ``row``, ``value``, ``order``) for a file that breaks the format, naming its line
            and column; (``empty``) for a file without data rows.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise _params_error("limit", "an integer >= 1 or None", limit)
    name = os.fspath(path)
    jobs: list[Job] = []
    predicted: list[int] = []
    lines: list[int] = []
    has_predicted = False
    try:
        with open(name, "rb") as stream:
            for line, arrival, prefill, decode, guess in _rows(stream):
                jobs.append(Job(arrival, prefill, decode))
                lines.append(line)
                if guess is not None:
                    has_predicted = True
                    predicted.append(guess)
                if limit is not None and len(jobs) >= limit:
                    break
    except RowProblem as problem:
        raise located(problem, name) from None
    except OSError as exc:
        raise WorkloadError("io", "a readable file", exc.strerror or str(exc), path=name) from exc
    if not jobs:
        raise WorkloadError("empty", "at least one data row", "only the header", path=name)
    return Trace(jobs, predicted if has_predicted else None, lines)
