"""RUNTIME.md "Evidence record": bundles and records parse strictly, the JSONL log streams
with 1-based line numbers and a torn last line, and ``verify_evidence`` checks the host
evidence digest after PROFILE §3 and before the replay fence."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ecpa
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.b64 import b64u_encode
from ecpa.runtime.model.evidence import (
    MAX_RECORD_LENGTH,
    RECORD_SCHEMA,
    Evidence,
    LogLine,
    parse_record,
    read_log,
    record_line,
    verify_evidence,
)
from ecpa.runtime.stores.replay import MemoryReplayFence, SqliteReplayFence
from tests.support import KEY_1, KEY_2, NOW, binding, statement, store

HOST = ecpa.canonicalize(
    {
        "schema": "ecpa-dispatch-counters/0.1",
        "plugin_id": "plugin:sha256:" + "2" * 64,
        "seq": 7,
        "process": {"host": "host-a", "pid": 4242, "start_ticks": 123456, "boot_id": "b-1"},
        "calls": 120,
        "selections": 80,
        "abstentions": 38,
        "failures": 2,
        "dropped": 0,
        "window_start": NOW - 3,
        "window_end": NOW - 2,
    }
)
DIGEST = "sha256:" + hashlib.sha256(HOST).hexdigest()
SIGNED = ecpa.sign(statement(evidence_digest=DIGEST), KEY_1)
OTHER_HOST = HOST.replace(b'"selections":80', b'"selections":81')


def record(**changes: Any) -> dict[str, Any]:
    """A full evidence record of SIGNED and HOST; keyword arguments replace members."""
    rec: dict[str, Any] = {
        "schema": RECORD_SCHEMA,
        "host_evidence_b64": b64u_encode(HOST),
        "payload_b64": b64u_encode(SIGNED.payload),
        "detached_jws": SIGNED.detached_jws,
    }
    rec.update(changes)
    return {name: value for name, value in rec.items() if value is not DROP}


DROP = object()


def line(**changes: Any) -> bytes:
    return json.dumps(record(**changes)).encode()


def parse_code(data: bytes) -> str:
    try:
        parse_record(data)
    except EcpaError as exc:
        return exc.code.value
    return "OK"


# --- parse_record ----------------------------------------------------------------------------


def test_full_record_parses() -> None:
    evidence = parse_record(line())
    assert evidence == Evidence(SIGNED.payload, SIGNED.detached_jws, HOST)


def test_bundle_of_two_members_parses() -> None:
    evidence = parse_record(line(schema=DROP, host_evidence_b64=DROP))
    assert evidence.payload == SIGNED.payload
    assert evidence.detached_jws == SIGNED.detached_jws
    assert evidence.host_evidence is None


def test_record_without_host_evidence_parses() -> None:
    assert parse_record(line(host_evidence_b64=DROP)).host_evidence is None


def test_empty_host_evidence_is_bytes_not_none() -> None:
    assert parse_record(line(host_evidence_b64="")).host_evidence == b""


def test_record_with_surrounding_whitespace_parses() -> None:
    assert parse_record(b" \t" + line() + b" \n").payload == SIGNED.payload


INVALID_RECORDS = [
    ("unknown-member", {"comment": "hi"}),
    ("unknown-member-in-bundle", {"schema": DROP, "host_evidence_b64": DROP, "seq": 1}),
    ("wrong-schema", {"schema": "ecpa-evidence-record/0.2"}),
    ("schema-not-a-string", {"schema": 1}),
    ("schema-null", {"schema": None}),
    ("payload-missing", {"payload_b64": DROP}),
    ("payload-null", {"payload_b64": None}),
    ("payload-number", {"payload_b64": 1}),
    ("payload-array", {"payload_b64": ["eyJ9"]}),
    ("jws-missing", {"detached_jws": DROP}),
    ("jws-null", {"detached_jws": None}),
    ("jws-object", {"detached_jws": {}}),
    ("host-not-a-string", {"host_evidence_b64": 5}),
    ("host-null", {"host_evidence_b64": None}),
    ("payload-padded", {"payload_b64": b64u_encode(b"ab") + "=="}),
    ("payload-standard-alphabet", {"payload_b64": "a+b/"}),
    ("payload-whitespace", {"payload_b64": "YWJj ZA"}),
    ("payload-length-4k+1", {"payload_b64": "abcde"}),
    ("payload-trailing-bits", {"payload_b64": "YR"}),  # canonical form of b"a" is "YQ"
    ("payload-non-ascii", {"payload_b64": "YWJj\u00e9"}),
    ("host-padded", {"host_evidence_b64": b64u_encode(HOST) + "="}),
    ("host-trailing-bits", {"host_evidence_b64": "YR"}),
    ("host-standard-alphabet", {"host_evidence_b64": "+/+/"}),
]


@pytest.mark.parametrize(
    "changes", [c for _, c in INVALID_RECORDS], ids=[i for i, _ in INVALID_RECORDS]
)
def test_invalid_record(changes: dict[str, Any]) -> None:
    assert parse_code(line(**changes)) == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", ErrorCode.MALFORMED_JSON),
        (b"not json", ErrorCode.MALFORMED_JSON),
        (b'{"payload_b64": "eyJ9"', ErrorCode.MALFORMED_JSON),  # cut short
        (b"[]", ErrorCode.MALFORMED_JSON),  # not an object
        (b'"a string"', ErrorCode.MALFORMED_JSON),
        (b"\xef\xbb\xbf" + line(), ErrorCode.MALFORMED_JSON),  # byte-order mark
        (b'{"payload_b64": "\xff"}', ErrorCode.MALFORMED_JSON),  # invalid UTF-8
        (b'{"payload_b64": "a", "payload_b64": "a"}', ErrorCode.DUPLICATE_KEY),
        (b'{"payload_b64": "a", "seq": 1.5}', ErrorCode.UNSUPPORTED_VALUE),
    ],
    ids=["empty", "text", "truncated", "array", "string", "bom", "utf8", "dup", "float"],
)
def test_record_that_is_not_strict_json(data: bytes, expected: ErrorCode) -> None:
    assert parse_code(data) == expected


def test_record_over_the_limit_is_refused_before_parsing() -> None:
    # Not JSON at all: only a size check before parsing gives TOO_LARGE rather than
    # MALFORMED_JSON.
    assert parse_code(b"x" * (MAX_RECORD_LENGTH + 1)) == ErrorCode.TOO_LARGE
    assert parse_code(b"x" * MAX_RECORD_LENGTH) == ErrorCode.MALFORMED_JSON


def test_record_of_exactly_the_limit_parses() -> None:
    data = padded(line(), MAX_RECORD_LENGTH)
    assert parse_record(data).payload == SIGNED.payload
    assert parse_code(data + b" ") == ErrorCode.TOO_LARGE


def test_the_limit_holds_a_record_of_the_largest_payload() -> None:
    # The largest payload, the largest JWS and as much host evidence as payload.
    rec = {
        "schema": RECORD_SCHEMA,
        "host_evidence_b64": b64u_encode(bytes(65536)),
        "payload_b64": b64u_encode(bytes(65536)),
        "detached_jws": "a" * 16384,
    }
    data = json.dumps(rec, separators=(",", ":")).encode()
    assert len(data) <= MAX_RECORD_LENGTH
    assert parse_code(data) == "OK"


def padded(data: bytes, length: int) -> bytes:
    """``data`` (a JSON object) with spaces inserted before its closing brace."""
    assert data.endswith(b"}")
    return data[:-1] + b" " * (length - len(data)) + b"}"


# --- read_log --------------------------------------------------------------------------------


def log_of(data: bytes) -> list[LogLine]:
    return list(read_log(io.BytesIO(data)))


def summary(lines: list[LogLine]) -> list[tuple[int, str, bool]]:
    """(number, "OK" or code, torn) for each yielded line."""
    return [(ln.number, "OK" if ln.error is None else ln.error.code.value, ln.torn) for ln in lines]


def test_log_of_complete_lines() -> None:
    lines = log_of(line() + b"\n" + line(host_evidence_b64=DROP) + b"\n")
    assert summary(lines) == [(1, "OK", False), (2, "OK", False)]
    assert lines[0].evidence == Evidence(SIGNED.payload, SIGNED.detached_jws, HOST)
    assert lines[1].evidence is not None
    assert lines[1].evidence.host_evidence is None


def test_empty_log() -> None:
    assert log_of(b"") == []


def test_blank_lines_are_skipped_but_counted() -> None:
    data = b"\n" + line() + b"\n\n   \n\t\r\n" + line() + b"\n\n"
    assert summary(log_of(data)) == [(2, "OK", False), (6, "OK", False)]


def test_crlf_line_endings_are_accepted() -> None:
    data = line() + b"\r\n" + line() + b"\r\n"
    lines = log_of(data)
    assert summary(lines) == [(1, "OK", False), (2, "OK", False)]
    assert lines[1].evidence == lines[0].evidence


def test_crlf_final_line_without_newline() -> None:
    assert summary(log_of(line() + b"\r\n" + line())) == [(1, "OK", False), (2, "OK", False)]


def test_bad_middle_line_is_an_error_not_torn() -> None:
    data = line() + b"\n" + b"{not json\n" + line(schema="other") + b"\n" + line() + b"\n"
    lines = log_of(data)
    assert summary(lines) == [
        (1, "OK", False),
        (2, ErrorCode.MALFORMED_JSON.value, False),
        (3, ErrorCode.INVALID_RECORD.value, False),
        (4, "OK", False),
    ]
    assert lines[1].evidence is None
    assert lines[1].error is not None


def test_torn_last_line_is_reported_as_torn() -> None:
    full = line()
    for cut in (1, len(full) // 2, len(full) - 1):
        lines = log_of(full + b"\n" + full[:cut])
        assert summary(lines)[0] == (1, "OK", False)
        assert lines[1].number == 2
        assert lines[1].torn is True
        assert lines[1].evidence is None
        assert lines[1].error is not None


@pytest.mark.parametrize(
    ("last", "expected"),
    [
        (line(schema="ecpa-evidence-record/0.2"), ErrorCode.INVALID_RECORD),
        (line(payload_b64="YR"), ErrorCode.INVALID_RECORD),
        pytest.param(
            b"[1, 2]",
            ErrorCode.MALFORMED_JSON,
        ),
        (b'{"a": 1, "a": 2}', ErrorCode.DUPLICATE_KEY),
    ],
    ids=["wrong-schema", "bad-base64url", "array", "duplicate"],
)
def test_complete_but_wrong_last_line_without_newline_is_not_torn(
    last: bytes, expected: ErrorCode
) -> None:
    # Torn means cut short: a whole JSON value, however wrong, was written in full.
    lines = log_of(line() + b"\n" + last)
    assert summary(lines) == [(1, "OK", False), (2, expected.value, False)]


def test_bad_last_line_with_its_newline_is_not_torn() -> None:
    lines = log_of(line() + b"\n" + line()[:20] + b"\n")
    assert summary(lines) == [(1, "OK", False), (2, ErrorCode.MALFORMED_JSON.value, False)]


def test_last_line_without_newline_that_parses_is_a_normal_line() -> None:
    lines = log_of(line() + b"\n" + line())
    assert summary(lines) == [(1, "OK", False), (2, "OK", False)]
    assert lines[1].evidence == lines[0].evidence


def test_whole_log_of_one_line_without_newline() -> None:
    assert summary(log_of(line())) == [(1, "OK", False)]
    assert summary(log_of(line()[:-1])) == [(1, ErrorCode.MALFORMED_JSON.value, True)]


def test_over_long_line_is_skipped_and_the_next_one_read() -> None:
    long_line = b"x" * (3 * MAX_RECORD_LENGTH + 17)
    data = line() + b"\n" + long_line + b"\n" + line() + b"\n"
    assert summary(log_of(data)) == [
        (1, "OK", False),
        (2, ErrorCode.TOO_LARGE.value, False),
        (3, "OK", False),
    ]


def test_over_long_last_line_without_newline() -> None:
    data = line() + b"\n" + b"x" * (MAX_RECORD_LENGTH + 1)
    assert summary(log_of(data)) == [(1, "OK", False), (2, ErrorCode.TOO_LARGE.value, False)]


def test_line_of_exactly_the_limit_is_read() -> None:
    data = padded(line(), MAX_RECORD_LENGTH) + b"\n" + line() + b"\n"
    assert summary(log_of(data)) == [(1, "OK", False), (2, "OK", False)]


def test_line_of_exactly_the_limit_with_crlf_is_read() -> None:
    data = padded(line(), MAX_RECORD_LENGTH) + b"\r\n" + line() + b"\r\n"
    assert summary(log_of(data)) == [(1, "OK", False), (2, "OK", False)]


def test_log_from_a_real_file(tmp_path: Path) -> None:
    path = tmp_path / "launch-1.jsonl"
    path.write_bytes(line() + b"\n\n" + b"garbage\n" + line() + b"\n" + line()[:40])
    with path.open("rb") as fh:
        got = summary(list(read_log(fh)))
    assert got == [
        (1, "OK", False),
        (3, ErrorCode.MALFORMED_JSON.value, False),
        (4, "OK", False),
        (5, ErrorCode.MALFORMED_JSON.value, True),
    ]


class _GeneratedStream(io.RawIOBase):
    """A read-only stream whose bytes come from a generator as they are asked for."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending = b""
        self.delivered = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = chunk
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        self.delivered += size
        return size


def test_log_is_read_lazily_from_a_stream() -> None:
    # A log of a million lines (about half a gigabyte) that exists only as a generator:
    # read_log yields the first lines after reading a few kilobytes of it.
    one = line() + b"\n"
    raw = _GeneratedStream(one for _ in range(1_000_000))
    stream = io.BufferedReader(raw, buffer_size=8192)
    first = list(itertools.islice(read_log(cast(BinaryIO, stream)), 3))
    assert summary(first) == [(1, "OK", False), (2, "OK", False), (3, "OK", False)]
    assert raw.delivered < 10 * len(one) + 8192


def test_log_reads_an_endless_line_in_bounded_pieces() -> None:
    # One line of 20 record limits, then a good line: the reader never holds the long one.
    class Spy(io.BytesIO):
        largest = 0

        def readline(self, size: int | None = -1) -> bytes:
            got = super().readline(size)
            Spy.largest = max(Spy.largest, len(got))
            return got

    long_line = b"x" * (20 * MAX_RECORD_LENGTH)
    data = long_line + b"\n" + line() + b"\n"
    assert summary(list(read_log(Spy(data)))) == [
        (1, ErrorCode.TOO_LARGE.value, False),
        (2, "OK", False),
    ]
    # Pieces of a bounded size (the limit, then 1 MiB while skipping), never the whole line.
    assert Spy.largest <= max(MAX_RECORD_LENGTH + 1, 1 << 20) < len(long_line)


# --- verify_evidence -------------------------------------------------------------------------


def evidence(host: bytes | None = HOST, signed: ecpa.Signed = SIGNED) -> Evidence:
    return Evidence(signed.payload, signed.detached_jws, host)


def verify_code(ev: Evidence, **kwargs: Any) -> str:
    kwargs.setdefault("now", NOW)
    try:
        verify_evidence(ev, store(), **kwargs)
    except EcpaError as exc:
        return exc.code.value
    return "OK"


def test_valid_record_with_matching_host_evidence() -> None:
    verified = verify_evidence(parse_record(line()), store(), now=NOW)
    assert isinstance(verified, ecpa.Verified)
    assert verified.statement.evidence_digest == DIGEST
    assert verified.payload == SIGNED.payload


def test_valid_record_with_binding_and_fence() -> None:
    fence = MemoryReplayFence()
    verified = verify_evidence(evidence(), store(), now=NOW, binding=binding(), replay=fence)
    assert verified.statement.challenge_nonce in fence


def test_mismatching_host_evidence() -> None:
    assert verify_code(evidence(OTHER_HOST)) == ErrorCode.EVIDENCE_DIGEST_MISMATCH
    assert verify_code(evidence(b"")) == ErrorCode.EVIDENCE_DIGEST_MISMATCH
    assert verify_code(evidence(HOST + b"\n")) == ErrorCode.EVIDENCE_DIGEST_MISMATCH


def test_digest_mismatch_does_not_consume_the_nonce() -> None:
    fence = MemoryReplayFence()
    kwargs: dict[str, Any] = {"binding": binding(), "replay": fence}
    assert verify_code(evidence(OTHER_HOST), **kwargs) == ErrorCode.EVIDENCE_DIGEST_MISMATCH
    assert len(fence) == 0
    assert verify_code(evidence(HOST), **kwargs) == "OK"
    assert verify_code(evidence(HOST), **kwargs) == ErrorCode.REPLAYED_NONCE
    # A replay with wrong host evidence is refused for its digest: that check comes first.
    assert verify_code(evidence(OTHER_HOST), **kwargs) == ErrorCode.EVIDENCE_DIGEST_MISMATCH


def test_digest_mismatch_does_not_consume_the_nonce_of_a_durable_fence(tmp_path: Path) -> None:
    with SqliteReplayFence(tmp_path / "fence.db") as fence:
        assert verify_code(evidence(OTHER_HOST), replay=fence) == ErrorCode.EVIDENCE_DIGEST_MISMATCH
        assert len(fence) == 0
        assert verify_code(evidence(), replay=fence) == "OK"
    with SqliteReplayFence(tmp_path / "fence.db") as fence:
        assert verify_code(evidence(), replay=fence) == ErrorCode.REPLAYED_NONCE


def test_without_host_evidence_the_digest_is_not_checked() -> None:
    # The statement's evidence_digest is no hash of anything here, and that is fine.
    assert verify_code(evidence(None, ecpa.sign(statement(), KEY_1))) == "OK"
    assert verify_code(evidence(None)) == "OK"
    bundle = parse_record(line(schema=DROP, host_evidence_b64=DROP))
    assert verify_code(bundle) == "OK"


def test_binding_mismatch_does_not_consume_the_nonce() -> None:
    fence = MemoryReplayFence()
    wrong = binding(plan_id="plan:sha256:" + "9" * 64)
    assert verify_code(evidence(), binding=wrong, replay=fence) == ErrorCode.BINDING_MISMATCH
    assert "nonce-1" not in fence
    assert verify_code(evidence(), binding=binding(), replay=fence) == "OK"
    assert "nonce-1" in fence


@pytest.mark.parametrize(
    ("signed", "kwargs", "expected"),
    [
        # Each of these has the wrong host evidence too: PROFILE §3 speaks first.
        (
            ecpa.sign(statement(kid="test-key-2", evidence_digest=DIGEST), KEY_1),
            {},
            ErrorCode.INVALID_SIGNATURE,
        ),
        (SIGNED, {"now": NOW + 61}, ErrorCode.EXPIRED),
        (SIGNED, {"now": NOW - 10}, ErrorCode.NOT_YET_VALID),
        (SIGNED, {"policy": ecpa.Policy(max_ttl=10)}, ErrorCode.INVALID_TIME),
        (SIGNED, {"binding": binding(challenge_nonce="other")}, ErrorCode.BINDING_MISMATCH),
        (
            ecpa.sign(statement(subject="other", evidence_digest=DIGEST), KEY_1),
            {},
            ErrorCode.TRUST_POLICY,
        ),
        (
            ecpa.sign(statement(issuer="urn:other", evidence_digest=DIGEST), KEY_1),
            {},
            ErrorCode.UNKNOWN_KEY,
        ),
    ],
    ids=["signature", "expired", "not-yet-valid", "ttl", "binding", "subject", "unknown-key"],
)
def test_profile_checks_come_before_the_digest(
    signed: ecpa.Signed, kwargs: dict[str, Any], expected: ErrorCode
) -> None:
    fence = MemoryReplayFence()
    assert verify_code(evidence(OTHER_HOST, signed), replay=fence, **kwargs) == expected
    assert verify_code(evidence(HOST, signed), replay=fence, **kwargs) == expected
    assert len(fence) == 0


def test_signature_by_another_key_with_matching_digest() -> None:
    forged = ecpa.sign(statement(evidence_digest=DIGEST), KEY_2)  # kid test-key-1, key 2
    assert verify_code(evidence(HOST, forged)) == ErrorCode.INVALID_SIGNATURE


def test_records_of_a_log_verify_in_order() -> None:
    second_host = OTHER_HOST
    second = ecpa.sign(
        statement(
            challenge_nonce="nonce-2",
            evidence_digest="sha256:" + hashlib.sha256(second_host).hexdigest(),
        ),
        KEY_1,
    )
    data = b"\n".join(
        [
            line(),
            line(
                host_evidence_b64=b64u_encode(second_host),
                payload_b64=b64u_encode(second.payload),
                detached_jws=second.detached_jws,
            ),
            line(),  # the first record again: a replay
            line(host_evidence_b64=b64u_encode(second_host)),  # wrong host evidence
            line()[:50],  # torn
        ]
    )
    fence = MemoryReplayFence()
    got = []
    for ln in read_log(io.BytesIO(data)):
        if ln.evidence is None:
            got.append("torn" if ln.torn else "error")
            continue
        got.append(verify_code(ln.evidence, replay=fence))
    assert got == ["OK", "OK", ErrorCode.REPLAYED_NONCE, ErrorCode.EVIDENCE_DIGEST_MISMATCH, "torn"]
    assert len(fence) == 2


# --- parse_record's compact path against the strict reader ------------------------------------


def _either(parse: Any, data: bytes) -> tuple[str, Any]:
    try:
        return "ok", parse(data)
    except EcpaError as exc:
        return "err", (exc.code, exc.detail)


COMPACT = record_line(Evidence(SIGNED.payload, SIGNED.detached_jws, HOST)).rstrip(b"\n")
BUNDLE = json.dumps(
    {"payload_b64": b64u_encode(SIGNED.payload), "detached_jws": SIGNED.detached_jws},
    separators=(",", ":"),
).encode()


@settings(max_examples=1500, deadline=None)
@given(
    base=st.sampled_from([COMPACT, BUNDLE, COMPACT.replace(b'"schema":', b'"scheme":')]),
    edits=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=2000),
            st.integers(min_value=0, max_value=3),
            st.sampled_from(
                [b"", b'"', b"\\", b"=", b"A", b"Q", b".", b" ", b",", b"\x00", b"\xff", b"}"]
            ),
        ),
        max_size=3,
    ),
)
@example(base=COMPACT, edits=[])
@example(base=BUNDLE, edits=[])
def test_the_compact_path_gives_what_the_strict_reader_gives(
    base: bytes, edits: list[tuple[int, int, bytes]]
) -> None:
    """parse_record reads the line record_line writes (and a bundle) with one pattern; on
    any bytes near those, it returns the same evidence or the same error (code and detail)
    as the strict reader alone."""
    from ecpa.runtime.model.evidence import _parse_record_strictly

    data = base
    for at, cut, insert in edits:
        at %= len(data) + 1
        data = data[:at] + insert + data[at + cut :]
    assert _either(parse_record, data) == _either(_parse_record_strictly, data)
    kind, parsed = _either(parse_record, data)
    if kind == "ok" and "_payload_b64" in parsed.__dict__:  # kept: the one encoding
        kept_payload, kept_b64 = parsed.__dict__["_payload_b64"]
        assert kept_payload is parsed.payload
        assert kept_b64 == b64u_encode(parsed.payload).encode()


def test_the_encoded_payload_parse_record_keeps_is_the_payloads_one_encoding() -> None:
    """parse_record keeps a compact record's payload_b64 as it read it, and verify checks
    the signature over it instead of encoding the payload again. It is the payload's one
    strict encoding; evidence made any other way (a copy with another payload included)
    does not carry it, so a changed payload is verified as itself and refused."""
    import dataclasses

    from ecpa.runtime.model.evidence import _ENCODED

    parsed = parse_record(COMPACT)
    assert parsed.__dict__[_ENCODED] == (parsed.payload, b64u_encode(parsed.payload).encode())
    ok = verify_evidence(parsed, store(), now=NOW)
    plain = Evidence(parsed.payload, parsed.detached_jws, parsed.host_evidence)
    assert _ENCODED not in plain.__dict__
    assert verify_evidence(plain, store(), now=NOW) == ok
    changed = dataclasses.replace(parsed, payload=parsed.payload.replace(b"nonce-1", b"nonce-9"))
    assert _ENCODED not in changed.__dict__
    with pytest.raises(EcpaError) as refused:
        verify_evidence(changed, store(), now=NOW)
    assert refused.value.code is ErrorCode.INVALID_SIGNATURE
    # Even a frozen instance changed behind its back: the kept text is for that payload only.
    forced = parse_record(COMPACT)
    object.__setattr__(forced, "payload", changed.payload)
    with pytest.raises(EcpaError) as forged:
        verify_evidence(forced, store(), now=NOW)
    assert forged.value.code is ErrorCode.INVALID_SIGNATURE
    # Evidence of another shape (no __dict__) still verifies.
    from typing import NamedTuple

    class Plain(NamedTuple):
        payload: bytes
        detached_jws: str
        host_evidence: bytes | None

    duck = Plain(parsed.payload, parsed.detached_jws, parsed.host_evidence)
    assert verify_evidence(duck, store(), now=NOW).statement == ok.statement  # type: ignore[arg-type]
