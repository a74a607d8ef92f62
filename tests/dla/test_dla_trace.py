"""The trace-replay loader (:mod:`dla_plugin.sim.trace`): Vidur's request-trace CSV format,
read strictly. Every error is asserted with its full message, code, line and column."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dla_plugin.sim import trace
from dla_plugin.sim.trace import Trace, load_trace
from dla_plugin.sim.workload import Job, WorkloadError

HEADER = "arrived_at,num_prefill_tokens,num_decode_tokens\n"
ROWS = "0.5,10,20\n1.5,7,8\n1.5,3,4\n"
JOBS = [Job(0.5, 10, 20), Job(1.5, 7, 8), Job(1.5, 3, 4)]
PREDICTED = "num_decode_tokens,predicted_decode_tokens,arrived_at,num_prefill_tokens\n"
COLUMNS = (
    "a header with the columns arrived_at, num_prefill_tokens, num_decode_tokens "
    "and optionally predicted_decode_tokens (in any order)"
)
SECONDS = "a non-negative number of seconds from the start, at most 1e+09"
TOKENS = "an integer >= 1 of at most 18 digits"
NEED = "(a replayed request needs at least one token of each: prefill and decode)"


def _write(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "trace.csv"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


# --- good files ------------------------------------------------------------------------------


def test_api() -> None:
    assert trace.__all__ == ["Trace", "load_trace"]
    assert trace.COLUMNS == ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
    assert trace.OPTIONAL == "predicted_decode_tokens"


def test_a_good_file(tmp_path: Path) -> None:
    got = load_trace(_write(tmp_path, HEADER + ROWS))
    assert got == Trace(JOBS, None, [2, 3, 4])
    assert load_trace(str(tmp_path / "trace.csv")) == got
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.jobs = []  # type: ignore[misc]


def test_arrivals_are_kept_as_written(tmp_path: Path) -> None:
    got = load_trace(_write(tmp_path, HEADER + "100,1,1\n1e2,2,2\n100.25,3,3\n"))
    assert [j.arrival_s for j in got.jobs] == [100.0, 100.0, 100.25]


@pytest.mark.parametrize(("text", "seconds"), [("0", 0.0), (".5", 0.5), ("3.", 3.0), ("2E1", 20.0)])
def test_arrival_syntax(tmp_path: Path, text: str, seconds: float) -> None:
    assert load_trace(_write(tmp_path, HEADER + f"{text},1,1\n")).jobs == [Job(seconds, 1, 1)]


def test_predicted_column_in_any_order(tmp_path: Path) -> None:
    path = _write(tmp_path, PREDICTED + '20,25,0.5,10\n8,6,1.5,"7"\n4,4,1.5,3\n')
    assert load_trace(path) == Trace(JOBS, [25, 6, 4], [2, 3, 4])


def test_columns_reordered_and_leading_zeros(tmp_path: Path) -> None:
    path = _write(tmp_path, "num_decode_tokens,arrived_at,num_prefill_tokens\n020,0.5,010\n")
    assert load_trace(path) == Trace([Job(0.5, 10, 20)], None, [2])


def test_bom_crlf_and_trailing_blank_lines(tmp_path: Path) -> None:
    text = (HEADER + ROWS).replace("\n", "\r\n") + "\r\n\r\n"
    assert load_trace(_write(tmp_path, b"\xef\xbb\xbf" + text.encode())) == Trace(
        JOBS, None, [2, 3, 4]
    )


def test_limit(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + ROWS + "0,1,1\n")  # line 5 is out of order
    assert load_trace(path, limit=2) == Trace(JOBS[:2], None, [2, 3])
    assert load_trace(path, limit=3) == Trace(JOBS, None, [2, 3, 4])  # line 5 is never read
    with pytest.raises(WorkloadError) as info:
        load_trace(path, limit=4)
    assert info.value.code == "order"
    path = _write(tmp_path, PREDICTED + "20,25,0.5,10\n8,6,1.5,7\n")
    assert load_trace(path, limit=1) == Trace([Job(0.5, 10, 20)], [25], [2])
    assert load_trace(path, limit=10).predicted == [25, 6]


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "3"])
def test_bad_limit(tmp_path: Path, limit: object) -> None:
    with pytest.raises(WorkloadError) as info:
        load_trace(_write(tmp_path, HEADER + ROWS), limit=limit)  # type: ignore[arg-type]
    err = info.value
    assert (err.code, err.path, err.line, err.column) == ("params", None, None, None)
    assert str(err) == f"expected limit to be an integer >= 1 or None, found {limit!r} [params]"


# --- one case per error ----------------------------------------------------------------------

# (content, code, line, column, expected, found): the message is then exactly
# "PATH:LINE: column 'COLUMN': expected EXPECTED, found FOUND [CODE]" (parts left out when None).
ERRORS: dict[str, tuple[str | bytes, str, int | None, str | None, str, str]] = {
    "header-missing": (
        "arrived_at,num_prefill_tokens\n0,1\n",
        "header", 1, None, COLUMNS, "missing 'num_decode_tokens'",
    ),
    "header-unexpected": (
        HEADER.replace("\n", ",extra\n") + "0,1,1,x\n",
        "header", 1, None, COLUMNS, "unexpected 'extra'",
    ),
    "header-misspelled": (
        HEADER.replace("num_decode_tokens", "num_decode_token") + ROWS,
        "header", 1, None, COLUMNS, "missing 'num_decode_tokens'; unexpected 'num_decode_token'",
    ),
    "header-duplicated": (
        "arrived_at,num_prefill_tokens,arrived_at,num_decode_tokens\n0,1,0,1\n",
        "header", 1, None, COLUMNS, "duplicated 'arrived_at'",
    ),
    "header-duplicated-optional": (
        HEADER.replace("\n", ",predicted_decode_tokens,predicted_decode_tokens\n"),
        "header", 1, None, COLUMNS, "duplicated 'predicted_decode_tokens'",
    ),
    "header-all-three": (
        "arrived_at,arrived_at,num_prefill_tokens,Timestamp\n",
        "header", 1, None, COLUMNS,
        "missing 'num_decode_tokens'; unexpected 'Timestamp'; duplicated 'arrived_at'",
    ),
    "header-blank": ("\n" + HEADER + ROWS, "header", 1, None, COLUMNS, "a blank line"),
    "empty-file": (b"", "header", None, None, COLUMNS, "an empty file"),
    "only-header": (HEADER, "empty", None, None, "at least one data row", "only the header"),
    "only-header-and-blank-lines": (
        HEADER + "\n\r\n",
        "empty", None, None, "at least one data row", "only the header",
    ),
    "arrival-text": (HEADER + "0,1,1\nsoon,1,1\n", "value", 3, "arrived_at", SECONDS, "'soon'"),
    "arrival-negative": (
        HEADER + "-1.5,1,1\n",
        "value", 2, "arrived_at", SECONDS, "a negative number '-1.5'",
    ),
    "arrival-inf": (HEADER + "inf,1,1\n", "value", 2, "arrived_at", SECONDS, "'inf'"),
    "arrival-overflow": (HEADER + "1e999,1,1\n", "value", 2, "arrived_at", SECONDS, "'1e999'"),
    "arrival-nan": (HEADER + "nan,1,1\n", "value", 2, "arrived_at", SECONDS, "'nan'"),
    "arrival-milliseconds": (
        HEADER + "0,1,1\n1700000000000,1,1\n",
        "value", 3, "arrived_at", SECONDS, "'1700000000000'",
    ),
    "arrival-space": (HEADER + " 5,1,1\n", "value", 2, "arrived_at", SECONDS, "' 5'"),
    "arrival-empty": (HEADER + ",1,1\n", "value", 2, "arrived_at", SECONDS, "''"),
    "arrival-decreasing": (
        HEADER + "0,1,1\n5,1,1\n3,1,1\n",
        "order", 4, "arrived_at",
        "an arrived_at of at least '5' (line 3; non-decreasing)", "'3'",
    ),
    "prefill-zero": (HEADER + "0,0,1\n", "value", 2, "num_prefill_tokens", TOKENS, f"'0' {NEED}"),
    "decode-zero": (
        HEADER + "0,1,1\n1,1,000\n",
        "value", 3, "num_decode_tokens", TOKENS, f"'000' {NEED}",
    ),
    "prefill-decimal": (HEADER + "0,12.0,1\n", "value", 2, "num_prefill_tokens", TOKENS, "'12.0'"),
    "decode-negative": (
        HEADER + "0,1,-3\n",
        "value", 2, "num_decode_tokens", TOKENS, "a negative number '-3'",
    ),
    "decode-text": (HEADER + "0,1,x\n", "value", 2, "num_decode_tokens", TOKENS, "'x'"),
    "prefill-empty": (HEADER + "0,,1\n", "value", 2, "num_prefill_tokens", TOKENS, "''"),
    "prefill-19-digits": (
        HEADER + "0,1234567890123456789,1\n",
        "value", 2, "num_prefill_tokens", TOKENS, "'1234567890123456789'",
    ),
    "predicted-zero": (
        PREDICTED + "1,0,0,1\n",
        "value", 2, "predicted_decode_tokens", TOKENS,
        "'0' (a predicted output length is at least one token)",
    ),
    "predicted-decimal": (
        PREDICTED + "1,2.5,0,1\n",
        "value", 2, "predicted_decode_tokens", TOKENS, "'2.5'",
    ),
    "predicted-empty": (
        PREDICTED + "1,,0,1\n",
        "value", 2, "predicted_decode_tokens", TOKENS, "''",
    ),
    "fields-too-few": (HEADER + "0,1,1\n1,1\n", "row", 3, None, "3 fields", "2 fields"),
    "fields-too-many": (PREDICTED + "1,1,0,1,9\n", "row", 2, None, "4 fields", "5 fields"),
    "blank-between-rows": (
        HEADER + "0,1,1\n\n   \n1,1,1\n",
        "row", 3, None, "no blank line between rows", "a blank line at line 3",
    ),
    "unterminated-quote": (
        HEADER + '0,1,1\n1,"1,1\n',
        "row", 3, None, "well-formed CSV", "unexpected end of data",
    ),
    "text-after-quote": (
        HEADER + '0,"1"x,1\n',
        "row", 2, None, "well-formed CSV", "',' expected after '\"'",
    ),
    "nul-byte": (
        HEADER.encode() + b"0,\x001,1\n",
        "encoding", 2, None, "a text (CSV) file", "a NUL byte at byte 3",
    ),
    "nul-in-header": (
        b"arr\x00ived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n",
        "encoding", 1, None, "a text (CSV) file", "a NUL byte at byte 4",
    ),
    "bad-utf8": (
        HEADER.encode() + b"0,1,1\n1,1\xe9,1\n",
        "encoding", 3, None, "UTF-8 text", "the byte 0xe9 at byte 4",
    ),
    "binary-file": (
        b"\x89PNG\r\n\x1a\n",
        "encoding", 1, None, "UTF-8 text", "the byte 0x89 at byte 1",
    ),
    "overlong-line": (
        HEADER + "0,1," + "1" * 70_000 + "\n",
        "row", 2, None, "a line of at most 65536 bytes", "a longer one (is this a CSV file?)",
    ),
}  # fmt: skip


def _message(path: str, line: int | None, column: str | None, rest: str) -> str:
    where = path if line is None else f"{path}:{line}"
    return f"{where}: " + (f"column {column!r}: " if column is not None else "") + rest


@pytest.mark.parametrize("case", ERRORS.values(), ids=ERRORS.keys())
def test_errors(
    tmp_path: Path, case: tuple[str | bytes, str, int | None, str | None, str, str]
) -> None:
    content, code, line, column, expected, found = case
    path = _write(tmp_path, content)
    with pytest.raises(WorkloadError) as info:
        load_trace(path)
    err = info.value
    assert (err.code, err.path, err.line, err.column) == (code, str(path), line, column)
    assert (err.expected, err.found) == (expected, found)
    assert str(err) == _message(
        str(path), line, column, f"expected {expected}, found {found} [{code}]"
    )


def test_the_message_reads_as_documented(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + "0,1,1\n1,1,0\n")
    with pytest.raises(WorkloadError) as info:
        load_trace(path)
    assert info.value.code == "value"
    assert str(info.value) == (
        f"{path}:3: column 'num_decode_tokens': expected an integer >= 1 of at most 18 "
        "digits, found '0' (a replayed request needs at least one token of each: prefill "
        "and decode) [value]"
    )


def test_a_long_value_is_cut_in_the_message(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + "0,1," + "9" * 50 + "\n")
    with pytest.raises(WorkloadError) as info:
        load_trace(path)
    assert info.value.found == repr("9" * 40) + "... (50 characters)"


@pytest.mark.parametrize(
    ("name", "found"), [("absent.csv", "No such file or directory"), ("", "Is a directory")]
)
def test_unreadable_path(tmp_path: Path, name: str, found: str) -> None:
    path = str(tmp_path / name)  # "": the directory itself
    with pytest.raises(WorkloadError) as info:
        load_trace(path)
    err = info.value
    assert (err.code, err.path, err.line, err.column) == ("io", path, None, None)
    assert str(err) == f"{path}: expected a readable file, found {found} [io]"
    assert isinstance(err.__cause__, OSError)


# --- properties ------------------------------------------------------------------------------


def _load(path: Path) -> Trace | WorkloadError:
    try:
        return load_trace(path)
    except WorkloadError as err:
        return err


_PIECES = [
    "0,1,1\n", "2.5,3,4\n", "1,2,3,4\n", "9,", "1", "0", "-", ".", "e9", '"', ",", "\n",
    "\r\n", " ", "x", "\x00", "\xe9", "\ufeff", "inf",
]  # fmt: skip
# A header (or a broken one), then pieces of rows: many examples reach the rows' checks.
_TEXTS = st.tuples(
    st.sampled_from(["", "\ufeff"]),
    st.sampled_from([HEADER, PREDICTED, HEADER.rstrip("\n"), "arrived_at,"]),
    st.lists(st.sampled_from(_PIECES), max_size=16),
).map(lambda parts: (parts[0] + parts[1] + "".join(parts[2])).encode())


@settings(max_examples=300, deadline=None)
@given(data=st.one_of(st.binary(max_size=200), _TEXTS))
@example(data=b"\xef\xbb\xbf")
@example(data=b"\r")
@example(data=HEADER.encode() + b"0,1,1\r")
@example(data=HEADER.encode() + b'"0\n",1,1\n')
def test_any_bytes_give_a_trace_or_a_workload_error(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("trace") / "trace.csv"
    path.write_bytes(data)
    got = _load(path)
    if isinstance(got, WorkloadError):
        assert got.path == str(path)
        assert str(got).startswith(f"{path}: " if got.line is None else f"{path}:{got.line}: ")
        assert str(got).endswith(f" [{got.code}]")
        return
    assert got.jobs
    assert len(got.lines) == len(got.jobs)
    assert got.predicted is None or len(got.predicted) == len(got.jobs)
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(got.jobs))
    assert got.lines == sorted(set(got.lines))
    assert got.lines[0] >= 2


_ROWS = st.lists(
    st.tuples(
        st.floats(0, 1e9, allow_nan=False, allow_infinity=False),
        st.integers(1, 10**18 - 1),
        st.integers(1, 10**18 - 1),
        st.integers(1, 10**18 - 1),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=100, deadline=None)
@given(rows=_ROWS, predicted=st.booleans(), crlf=st.booleans())
def test_written_rows_read_back(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[tuple[float, int, int, int]],
    predicted: bool,
    crlf: bool,
) -> None:
    rows = sorted(rows)
    end = "\r\n" if crlf else "\n"
    header = PREDICTED if predicted else HEADER
    lines = [header.rstrip("\n")] + [
        f"{d},{p},{a!r},{n}" if predicted else f"{a!r},{n},{d}" for a, n, d, p in rows
    ]
    path = tmp_path_factory.mktemp("trace") / "trace.csv"
    path.write_text(end.join(lines) + end)
    assert load_trace(path) == Trace(
        [Job(a, n, d) for a, n, d, _ in rows],
        [p for *_, p in rows] if predicted else None,
        list(range(2, len(rows) + 2)),
    )
