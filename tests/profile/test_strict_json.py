"""PROFILE §4: the strict JSON reader, for the header (step 4) and the payload (step 12).

Every case runs four ways: through the fast parser (``parse_object``), through the
reference parser (``parse_reference``, which ``verify`` uses for texts nested too deep for
the C scanner), and through ``verify`` as the payload and as the header, each time with a
valid signature so that the code can only come from the JSON step.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

import ecpa
from ecpa.errors import ErrorCode
from ecpa.profile.json.strict_json import parse_object, parse_reference
from tests.support import header_bytes, payload_of, sign_raw, statement, store

OK = "OK"
MALFORMED = ErrorCode.MALFORMED_JSON.value
DUPLICATE = ErrorCode.DUPLICATE_KEY.value
UNSUPPORTED = ErrorCode.UNSUPPORTED_VALUE.value

MAX_SAFE = 2**53 - 1
GOOD_PAYLOAD = payload_of(statement())
STORE = store()


def nest_arrays(depth: int, inner: str = "") -> str:
    """An object holding arrays: ``depth`` containers in all, the top object included."""
    return '{"a":' + "[" * (depth - 1) + inner + "]" * (depth - 1) + "}"


def nest_objects(depth: int) -> str:
    """``depth`` objects, each the only member of the one around it."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def _case(ident: str, text: str | bytes, expected: str) -> Any:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return pytest.param(data, expected, id=ident)


CASES = [
    # --- class 1: encoding -------------------------------------------------------------------
    _case("bom", b'\xef\xbb\xbf{"a":1}', MALFORMED),
    _case("utf16le", '{"a":1}'.encode("utf-16-le"), MALFORMED),
    _case("utf16be", '{"a":1}'.encode("utf-16-be"), MALFORMED),
    _case("utf16-with-bom", '{"a":1}'.encode("utf-16"), MALFORMED),
    _case("utf32le", '{"a":1}'.encode("utf-32-le"), MALFORMED),
    _case("utf32be", '{"a":1}'.encode("utf-32-be"), MALFORMED),
    _case("utf32-with-bom", '{"a":1}'.encode("utf-32"), MALFORMED),
    _case("invalid-utf8-ff", b'{"a":"\xff"}', MALFORMED),
    _case("invalid-utf8-overlong", b'{"a":"\xc0\xaf"}', MALFORMED),
    _case("invalid-utf8-encoded-surrogate", b'{"a":"\xed\xa0\x80"}', MALFORMED),
    _case("invalid-utf8-truncated", b'{"a":"\xe2\x82"}', MALFORMED),
    _case("invalid-utf8-in-name", b'{"\xfe":1}', MALFORMED),
    # --- class 1: syntax ---------------------------------------------------------------------
    _case("empty", b"", MALFORMED),
    _case("only-space", b"  ", MALFORMED),
    _case("trailing-comma", '{"a":1,}', MALFORMED),
    _case("single-quotes", "{'a':1}", MALFORMED),
    _case("leading-zero", '{"a":01}', MALFORMED),
    _case("plus-sign", '{"a":+1}', MALFORMED),
    _case("bare-fraction", '{"a":.5}', MALFORMED),
    _case("dot-without-digits", '{"a":1.}', MALFORMED),
    _case("minus-alone", '{"a":-}', MALFORMED),
    _case("extra-data", '{"a":1} x', MALFORMED),
    _case("two-objects", '{"a":1}{"b":2}', MALFORMED),
    _case("raw-control-char", '{"a":"\x01"}', MALFORMED),
    _case("raw-newline-in-string", '{"a":"x\ny"}', MALFORMED),
    _case("invalid-escape", '{"a":"\\x41"}', MALFORMED),
    _case("short-unicode-escape", '{"a":"\\u12"}', MALFORMED),
    _case("unterminated-string", '{"a":"abc', MALFORMED),
    _case("unterminated-object", '{"a":1', MALFORMED),
    _case("truncated-literal", '{"a":tru}', MALFORMED),
    _case("capital-literal", '{"a":True}', MALFORMED),
    _case("nan-lowercase", '{"a":nan}', MALFORMED),
    _case("missing-colon", '{"a" 1}', MALFORMED),
    _case("missing-comma", '{"a":1 "b":2}', MALFORMED),
    _case("unquoted-name", "{a:1}", MALFORMED),
    _case("nul-between-tokens", b'{"a":1,\x00"b":2}', MALFORMED),
    # --- class 1: top level not an object ----------------------------------------------------
    _case("top-array", "[]", MALFORMED),
    _case("top-array-of-object", '[{"a":1}]', MALFORMED),
    _case("top-string", '"x"', MALFORMED),
    _case("top-number", "1", MALFORMED),
    _case("top-null", "null", MALFORMED),
    _case("top-true", "true", MALFORMED),
    # --- class 2: duplicate names ------------------------------------------------------------
    _case("dup-depth-1", '{"a":1,"a":1}', DUPLICATE),
    _case("dup-depth-1-different-values", '{"a":1,"b":2,"a":"x"}', DUPLICATE),
    _case("dup-depth-3", '{"x":{"y":{"a":1,"a":2}}}', DUPLICATE),
    _case("dup-in-object-in-array", '{"x":[{"a":1,"a":2}]}', DUPLICATE),
    _case("dup-after-escape-decoding", '{"a":1,"\\u0061":2}', DUPLICATE),
    _case("no-dup-across-levels", '{"a":{"a":{"a":1}}}', OK),
    _case("no-dup-case-differs", '{"a":1,"A":1}', OK),
    _case("no-dup-nfc-vs-nfd", '{"\u00e9":1,"e\u0301":2}', OK),
    # --- class 2: numbers and constants -------------------------------------------------------
    _case("int-max-safe", f'{{"a":{MAX_SAFE}}}', OK),
    _case("int-min-safe", f'{{"a":-{MAX_SAFE}}}', OK),
    _case("int-2**53", f'{{"a":{MAX_SAFE + 1}}}', UNSUPPORTED),
    _case("int-minus-2**53", f'{{"a":-{MAX_SAFE + 1}}}', UNSUPPORTED),
    _case("int-17-digits", '{"a":10000000000000000}', UNSUPPORTED),
    _case("int-5000-digits", '{"a":' + "9" * 5000 + "}", UNSUPPORTED),
    _case("int-minus-5000-digits", '{"a":-' + "1" * 5000 + "}", UNSUPPORTED),
    _case("int-minus-zero", '{"a":-0}', OK),
    _case("float-1.0", '{"a":1.0}', UNSUPPORTED),
    _case("float-1.5", '{"a":1.5}', UNSUPPORTED),
    _case("float-minus-0.0", '{"a":-0.0}', UNSUPPORTED),
    _case("exp-1e3", '{"a":1e3}', UNSUPPORTED),
    _case("exp-1E+2", '{"a":1E+2}', UNSUPPORTED),
    _case("exp-1e-2", '{"a":1e-2}', UNSUPPORTED),
    _case("exp-0e0", '{"a":0e0}', UNSUPPORTED),
    _case("float-5000-digit-fraction", '{"a":0.' + "1" * 5000 + "}", UNSUPPORTED),
    _case("const-NaN", '{"a":NaN}', UNSUPPORTED),
    _case("const-Infinity", '{"a":Infinity}', UNSUPPORTED),
    _case("const-minus-Infinity", '{"a":-Infinity}', UNSUPPORTED),
    _case("const-NaN-in-array", '{"a":[1,NaN]}', UNSUPPORTED),
    _case("words-in-strings", '{"a":"NaN","b":"Infinity","c":"-Infinity"}', OK),
    _case("words-as-names", '{"NaN":1,"Infinity":2,"-Infinity":3}', OK),
    # --- class 3: depth ---------------------------------------------------------------------
    _case("depth-32-arrays", nest_arrays(32), OK),
    _case("depth-33-arrays", nest_arrays(33), UNSUPPORTED),
    _case("depth-32-objects", nest_objects(32), OK),
    _case("depth-33-objects", nest_objects(33), UNSUPPORTED),
    _case("depth-32-with-scalar-inside", nest_arrays(32, "1"), OK),
    # more than 32 brackets in all, or an escape, so the fast path walks the whole tree
    _case("depth-32-with-sibling", '{"b":[],' + nest_arrays(32)[1:], OK),
    _case("depth-32-with-escape", '{"e":"\\u0041",' + nest_arrays(32)[1:], OK),
    _case("depth-33-with-sibling", '{"b":[],' + nest_arrays(33)[1:], UNSUPPORTED),
    _case("brackets-in-strings-are-not-depth", '{"a":"' + "[{" * 40 + '"}', OK),
    _case("depth-5000", nest_arrays(5000), UNSUPPORTED),
    # --- class 3: lone surrogates -----------------------------------------------------------
    _case("lone-high", '{"a":"\\ud800"}', UNSUPPORTED),
    _case("lone-low", '{"a":"\\udc00"}', UNSUPPORTED),
    _case("high-then-letter", '{"a":"\\ud800\\u0041"}', UNSUPPORTED),
    _case("high-at-end-after-text", '{"a":"x\\ud83d"}', UNSUPPORTED),
    _case("pair-reversed", '{"a":"\\ude00\\ud83d"}', UNSUPPORTED),
    _case("lone-in-name", '{"\\ud800":1}', UNSUPPORTED),
    _case("lone-in-deep-array", nest_arrays(10, '"\\udfff"'), UNSUPPORTED),
    _case("valid-pair", '{"a":"\\ud83d\\ude00"}', OK),
    _case("valid-pair-uppercase-hex", '{"a":"\\uD83D\\uDE00"}', OK),
    _case("raw-astral-char", '{"a":"\U0001f600"}', OK),
    _case("escapes", '{"a":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9"}', OK),
    # --- which defect wins (PROFILE §4, last item) ------------------------------------------
    _case("syntax-beats-earlier-dup", '{"x":{"a":1,"a":2},"y":}', MALFORMED),
    _case("syntax-beats-earlier-float", '{"a":1.5,"b":}', MALFORMED),
    _case("syntax-beats-earlier-nan", '{"a":NaN,"b":}', MALFORMED),
    _case("syntax-beats-earlier-big-int", '{"a":' + "9" * 5000 + ',"b":}', MALFORMED),
    _case("syntax-beats-earlier-depth", nest_arrays(40)[:-1] + ",}", MALFORMED),
    _case("syntax-beats-earlier-surrogate", '{"a":"\\ud800",}', MALFORMED),
    _case("encoding-beats-earlier-float", b'{"a":1.5,"b":"\xff"}', MALFORMED),
    _case("encoding-beats-dup", b'\xef\xbb\xbf{"a":1,"a":2}', MALFORMED),
    _case("top-array-beats-float", "[1.5]", MALFORMED),
    _case("top-array-beats-dup", '[{"a":1,"a":2}]', MALFORMED),
    _case("top-array-beats-depth", "[" * 40 + "]" * 40, MALFORMED),
    _case("float-before-dup-closes", '{"a":1,"a":1.5}', UNSUPPORTED),
    _case("float-in-inner-before-outer-dup-closes", '{"a":1,"a":{"b":1.5}}', UNSUPPORTED),
    _case("nan-before-dup-closes", '{"x":{"b":1,"b":2,"c":NaN}}', UNSUPPORTED),
    _case("big-int-before-dup-closes", f'{{"a":1,"a":{MAX_SAFE + 1}}}', UNSUPPORTED),
    _case("inner-dup-closes-before-float", '{"x":{"a":1,"a":2},"y":1.5}', DUPLICATE),
    _case("inner-dup-closes-before-nan", '{"x":{"a":1,"a":2},"y":NaN}', DUPLICATE),
    _case(
        "inner-dup-closes-before-big-int", f'{{"x":{{"a":1,"a":2}},"y":{MAX_SAFE + 1}}}', DUPLICATE
    ),
    _case(
        "inner-dup-closes-before-5000-digits",
        '{"x":{"a":1,"a":2},"y":' + "9" * 5000 + "}",
        DUPLICATE,
    ),
    _case("dup-beats-earlier-depth", '{"d":' + nest_arrays(40)[5:-1] + ',"a":1,"a":2}', DUPLICATE),
    _case("dup-beats-later-depth", '{"a":1,"a":2,"d":' + nest_arrays(40)[5:-1] + "}", DUPLICATE),
    _case("dup-beats-earlier-surrogate", '{"s":"\\ud800","a":1,"a":2}', DUPLICATE),
    _case("dup-beats-surrogate-name", '{"\\udc00":1,"a":1,"a":2}', DUPLICATE),
    _case("dup-beats-depth-5000", '{"d":' + nest_arrays(5000)[5:-1] + ',"a":1,"a":2}', DUPLICATE),
    _case("syntax-beats-depth-5000", nest_arrays(5000)[:-1] + ",}", MALFORMED),
    _case("float-beats-depth-5000", '{"d":' + nest_arrays(5000)[5:-1] + ',"a":1.5}', UNSUPPORTED),
    _case("float-beats-surrogate-then-dup", '{"s":"\\ud800","f":1.5,"a":1,"a":2}', UNSUPPORTED),
]


def parse_code(parser: Callable[..., dict[str, Any]], data: bytes) -> str:
    try:
        parser(data, what="payload")
    except ecpa.EcpaError as exc:
        return exc.code.value
    return OK


@pytest.mark.parametrize("parser", [parse_object, parse_reference], ids=["fast", "reference"])
@pytest.mark.parametrize(("data", "expected"), CASES)
def test_parser_code(parser: Callable[..., dict[str, Any]], data: bytes, expected: str) -> None:
    assert parse_code(parser, data) == expected


@pytest.mark.parametrize(("data", "expected"), [c for c in CASES if c.values[1] != OK])
def test_verify_payload_code(data: bytes, expected: str) -> None:
    """Step 12: the payload is read strictly before anything else looks at it."""
    jws = sign_raw(header_bytes(), data)
    assert _verify_code(data, jws) == expected


@pytest.mark.parametrize(("data", "expected"), [c for c in CASES if c.values[1] != OK])
def test_verify_header_code(data: bytes, expected: str) -> None:
    """Step 4: the header is read by the same strict rules."""
    jws = sign_raw(data, GOOD_PAYLOAD)
    assert _verify_code(GOOD_PAYLOAD, jws) == expected


def _verify_code(payload: bytes, jws: str) -> str:
    try:
        ecpa.verify(payload, jws, STORE, now=1_800_000_000)
    except ecpa.EcpaError as exc:
        return exc.code.value
    return OK


@pytest.mark.parametrize(("data", "expected"), [c for c in CASES if c.values[1] == OK])
def test_accepted_values_are_read_exactly(data: bytes, expected: str) -> None:
    """What the JSON layer accepts, it reads as the standard library does, both parsers."""
    del expected
    fast = parse_object(data, what="payload")
    assert parse_reference(data, what="payload") == fast
    if data.count(b"[") < 500:
        assert fast == json.loads(data)


def test_safe_integer_bounds_values() -> None:
    assert parse_object(f'{{"a":{MAX_SAFE},"b":-{MAX_SAFE}}}'.encode(), what="x") == {
        "a": MAX_SAFE,
        "b": -MAX_SAFE,
    }


def test_surrogate_pair_decodes_to_one_character() -> None:
    for parser in (parse_object, parse_reference):
        assert parser(b'{"a":"\\ud83d\\ude00"}', what="x") == {"a": "\U0001f600"}


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        pytest.param(('{"a": ' + nest_arrays(33)[5:]).encode(), UNSUPPORTED, id="deep-with-space"),
        pytest.param(b'{ "a":"\\ud800"}', UNSUPPORTED, id="surrogate-with-space"),
        pytest.param(b'{"b":"\\ud800","a":1}', UNSUPPORTED, id="surrogate-reordered"),
        pytest.param(b'{"b":1, "a":1.5}', UNSUPPORTED, id="float-with-space"),
        pytest.param(b'{"b":1, "b":2}', DUPLICATE, id="dup-with-space"),
    ],
)
def test_parse_defects_beat_noncanonical_form(payload: bytes, expected: str) -> None:
    """PROFILE §4 class 3 (and 2) before class 4: step 12 comes before step 13."""
    assert _verify_code(payload, sign_raw(header_bytes(), payload)) == expected


def test_header_parse_defect_beats_noncanonical_header() -> None:
    """A header with exactly the five members, whitespace and a lone surrogate in ``kid``:
    the lone surrogate (step 4) wins over the non-canonical form (step 6)."""
    header = header_bytes().replace(b'"test-key-1"', b' "\\ud800"')
    assert _verify_code(GOOD_PAYLOAD, sign_raw(header, GOOD_PAYLOAD)) == UNSUPPORTED


def test_deep_nesting_beyond_recursion_limit_is_an_ecpa_error() -> None:
    """The C scanner runs out of recursion; the reference parser takes over, no crash."""
    data = nest_arrays(20_000).encode()
    assert len(data) < 64 * 1024
    assert parse_code(parse_object, data) == UNSUPPORTED
    assert _verify_code(data, sign_raw(header_bytes(), data)) == UNSUPPORTED


def test_arbitrary_bytes_raise_only_ecpa_errors() -> None:
    """PROFILE §4 last item: for any input bytes, only the library's own error type."""
    rng = random.Random(8785)
    seeds = [c.values[0] for c in CASES] + [GOOD_PAYLOAD, header_bytes()]
    jws = sign_raw(header_bytes(), GOOD_PAYLOAD)
    for _ in range(600):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            if data and rng.random() < 0.6:
                data[rng.randrange(len(data))] = rng.randrange(256)
            else:
                data.insert(rng.randint(0, len(data)), rng.choice(b'{}[]",:\\u0.eE-9 \xff\xed'))
        for parser in (parse_object, parse_reference):
            with contextlib.suppress(ecpa.EcpaError):
                parser(bytes(data), what="x")
        with contextlib.suppress(ecpa.EcpaError):
            ecpa.verify(bytes(data), jws, STORE, now=1_800_000_000)


def test_threads_parse_with_their_own_reader() -> None:
    """Each thread has its own recorder and decoder: an event seen in one thread never leaks
    into another's result."""
    import threading

    docs = [
        b'{"a": 1, "b": [1, 2, {"c": "x"}]}',
        b'{"a": 1, "a": 2}',
        b'{"n": 9007199254740992}',
        b'{"n": 999999999999999, "m": -9007199254740991}',
        b'{"f": 1.5}',
    ]

    def outcome(doc: bytes) -> object:
        try:
            return parse_object(doc, what="t")
        except ecpa.EcpaError as exc:
            return exc.code

    expected = [outcome(doc) for doc in docs]
    failures: list[object] = []

    def work(shift: int) -> None:
        for i in range(2000):
            k = (i + shift) % len(docs)
            got = outcome(docs[k])
            if got != expected[k]:
                failures.append((k, got))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert expected[1] is ErrorCode.DUPLICATE_KEY
    assert expected[2] is ErrorCode.UNSUPPORTED_VALUE
    assert expected[3] == {"n": 999999999999999, "m": -9007199254740991}
