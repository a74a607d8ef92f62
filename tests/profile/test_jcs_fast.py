"""The JCS fast path (ecpa/jcs.py) against ``rfc8785.dumps``, claim by claim.

The fast path is the standard library's C encoder (``sort_keys``, no ASCII escaping) behind a
walk that admits only a subset of values. Each claim the module docstring makes is checked
here against ``rfc8785`` itself, never against ecpa's own code:

1. escaping: every BMP character, the controls, DEL, U+2028/9, quote and backslash;
2. member order: equal to UTF-16 order unless a name holds a character above U+FFFF (the
   regression pair U+10000 / U+FFFF);
3. numbers, booleans, null, tuples: the same text; floats, unsafe integers, lone surrogates,
   foreign types, subclasses, non-string names, cycles and deep nesting leave the fast path
   and give rfc8785's bytes or the same ``ATTESTATION_UNSUPPORTED_VALUE``;
4. ``matches_canonical`` (PROFILE §3 steps 6 and 13) decides as rfc8785 does for any text
   the strict reader accepts, the four-byte-character shortcut included;
5. without the C accelerator the same bytes come out.

tests/profile/test_jcs_fast_verify.py compares verify and sign with the fast path and without it.
"""

from __future__ import annotations

import enum
import json
from typing import Any
from unittest import mock

import pytest
import rfc8785
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

import ecpa
from ecpa.profile.json import jcs
from ecpa.profile.json.strict_json import parse_object
from tests.profile.test_properties import CHARS, MAX_SAFE, same

E = ecpa.ErrorCode

#: Characters where the two encoders could part: the UTF-16 order boundary, controls,
#: characters JSON could escape but JCS does not, and the escapes themselves.
EDGE = '\U00010000\U0001f600\U0010ffff\uffff\ufffe\ue000\ud7ff\x7f\u2028\u2029\x00\x1f\x0b/"\\'
SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)
SUBSET_TEXT = st.text(st.one_of(CHARS, st.sampled_from(EDGE)), max_size=10)
ANY_TEXT = st.text(st.one_of(CHARS, st.sampled_from(EDGE), SURROGATES), max_size=6)


class Number(enum.IntEnum):
    SEVEN = 7


class Label(str, enum.Enum):
    A = "a"


class Text(str):
    pass


class Array(list):  # type: ignore[type-arg]
    pass


class Object(dict):  # type: ignore[type-arg]
    pass


def reference(value: Any) -> tuple[str, Any]:
    """What ``canonicalize`` promises, from rfc8785 directly: bytes, or the one code."""
    try:
        return ("ok", rfc8785.dumps(value))
    except (rfc8785.CanonicalizationError, TypeError, ValueError, OverflowError, RecursionError):
        return ("err", E.UNSUPPORTED_VALUE)


def outcome(value: Any) -> tuple[str, Any]:
    try:
        return ("ok", ecpa.canonicalize(value))
    except ecpa.EcpaError as exc:
        return ("err", exc.code)


def names_above_bmp(value: Any) -> bool:
    if isinstance(value, dict):
        return any(max(name, default="") > "\uffff" for name in value) or any(
            names_above_bmp(v) for v in value.values()
        )
    if isinstance(value, (list, tuple)):
        return any(names_above_bmp(v) for v in value)
    return False


def containers(children: st.SearchStrategy[Any], names: st.SearchStrategy[Any]) -> Any:
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(names, children, max_size=4),
    )


SUBSET_NAMES = st.one_of(SUBSET_TEXT, st.sampled_from(["\U00010000", "\uffff", "\ue000", ""]))
SUBSET_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-MAX_SAFE, MAX_SAFE),
        st.sampled_from([0, MAX_SAFE, -MAX_SAFE]),
        SUBSET_TEXT,
    ),
    lambda children: containers(children, SUBSET_NAMES),
    max_leaves=20,
)
ODD_SCALARS = st.one_of(
    st.floats(),
    st.sampled_from([1.0, -0.0, 1e21, 5e-324, 2.0**53, float("nan")]),
    st.sampled_from([MAX_SAFE + 1, -MAX_SAFE - 1, 2**64, 10**400]),
    st.sampled_from([Number.SEVEN, Label.A, E.EXPIRED, Text("t"), b"x", set(), object()]),
    st.builds(Array, st.lists(st.integers(0, 3), max_size=2)),
    st.builds(Object, st.dictionaries(st.text(max_size=2), st.integers(0, 3), max_size=2)),
    ANY_TEXT,
)
ANY_NAMES = st.one_of(
    SUBSET_NAMES,
    ANY_TEXT,
    st.sampled_from([1, 1.5, None, True, Text("k"), Label.A]),
)
ANY_VALUES = st.recursive(
    st.one_of(SUBSET_VALUES, ODD_SCALARS),
    lambda children: containers(children, ANY_NAMES),
    max_leaves=16,
)


# --- 1. escaping ---------------------------------------------------------------------------


def test_every_bmp_character_is_written_as_rfc8785_writes_it() -> None:
    scalars = "".join(chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF)
    value = {"all": scalars, "each": list(scalars), scalars: 1}
    assert jcs.canonicalize_subset(value, max_depth=32) == rfc8785.dumps(value)


def test_supplementary_characters_in_values_stay_on_the_fast_path() -> None:
    chars = [chr(c) for c in range(0x10000, 0x110000, 0x3FF)] + ["\U0010ffff"]
    value = {"v": "".join(chars), "list": chars}
    assert jcs.canonicalize_subset(value, max_depth=32) == rfc8785.dumps(value)


def test_escapes_are_the_jcs_ones_in_lowercase_hex() -> None:
    value = '"\\\b\f\n\r\t\x00\x01\x0b\x1f\x7f\u2028\u2029/\u00e9'
    expected = '"\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u0001\\u000b\\u001f\x7f\u2028\u2029/\u00e9"'
    assert jcs.canonicalize_subset(value, max_depth=32) == expected.encode("utf-8")
    assert rfc8785.dumps(value) == expected.encode("utf-8")


# --- 2. member order -----------------------------------------------------------------------


def test_u10000_sorts_before_uffff_as_utf16_says() -> None:
    """The one case where code-point order (sort_keys) and UTF-16 order (JCS) part."""
    value = {"\uffff": 1, "\U00010000": 2}
    expected = '{"\U00010000":2,"\uffff":1}'.encode()
    code_point_order = '{"\uffff":1,"\U00010000":2}'.encode()
    assert rfc8785.dumps(value) == expected
    assert (
        json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8")
        == code_point_order
    )  # why the fast path must not take this value
    assert jcs.canonicalize_subset(value, max_depth=32) is None
    assert ecpa.canonicalize(value) == expected
    assert ecpa.canonicalize({"x": [value]}) == b'{"x":[' + expected + b"]}"
    # A name above U+FFFF among names that all sort the same either way: still refused by
    # the fast path (the names are looked at, not the order), and still the same bytes.
    assert ecpa.canonicalize({"a": 1, "\U0001f600": 2}) == rfc8785.dumps({"a": 1, "\U0001f600": 2})


@pytest.mark.parametrize("name", ["\U00010000", "\U0001f600a", "\U0010ffff"])
def test_matches_canonical_on_the_regression_pair(name: str) -> None:
    value = {"\uffff": 1, name: 2}
    jcs_text = rfc8785.dumps(value)
    for data, canonical in [
        (jcs_text, True),
        (
            json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode(),
            False,
        ),
        # ASCII text whose name holds an escaped pair: no byte >= 0xF0, still not canonical.
        (json.dumps(value, separators=(",", ":"), sort_keys=False).encode(), False),
    ]:
        parsed = parse_object(data, what="x")
        assert jcs.matches_canonical(data, parsed) is canonical
        assert (rfc8785.dumps(parsed) == data) is canonical


# --- 3. everything else: same bytes, or the same refusal -----------------------------------


@settings(max_examples=1000, deadline=None)
@given(value=SUBSET_VALUES)
@example(value={"\uffff": [1], "\U00010000": True})
@example(value={"\ue000": 1, "\U0001f600": 2, "\uffff": 3})
@example(value=[MAX_SAFE, -MAX_SAFE, 0, True, False, None, (), [], {}])
@example(value={"": {"": ""}, "\x00": "\x7f\u2028"})
def test_subset_values_are_written_as_rfc8785_writes_them(value: Any) -> None:
    fast = jcs.canonicalize_subset(value, max_depth=32)
    # The fast path declines exactly when a member name is above U+FFFF.
    assert (fast is None) is names_above_bmp(value)
    if fast is not None:
        assert fast == rfc8785.dumps(value)
    assert ecpa.canonicalize(value) == rfc8785.dumps(value)


@settings(max_examples=1000, deadline=None)
@given(value=ANY_VALUES)
@example(value=1.0)
@example(value={"a": MAX_SAFE + 1})
@example(value={"a": "\ud800"})
@example(value={"\udc00": 1})
@example(value={1: "a"})
@example(value={True: 1, "a": 2})
@example(value={"n": Number.SEVEN, "s": Label.A})
@example(value=[float("inf")])
def test_any_value_gives_rfc8785_bytes_or_the_same_refusal(value: Any) -> None:
    fast = jcs.canonicalize_subset(value, max_depth=32)
    event("fast path" if fast is not None else "reference path")
    expected = reference(value)
    if fast is not None:
        assert ("ok", fast) == expected
    assert outcome(value) == expected


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("levels", [31, 32, 33, 200, 5000])
def test_deep_values_leave_the_fast_path_only_past_its_depth(levels: int) -> None:
    value = _nested(levels)
    fast = jcs.canonicalize_subset(value, max_depth=32)
    assert (fast is None) is (levels > 32)
    assert outcome(value) == reference(value)


def test_a_cycle_is_refused_as_before() -> None:
    loop: list[Any] = []
    loop.append(loop)
    cyclic: dict[str, Any] = {"a": 1}
    cyclic["self"] = cyclic
    for value in (loop, cyclic, {"x": [loop]}):
        assert jcs.canonicalize_subset(value, max_depth=32) is None
        assert outcome(value) == ("err", E.UNSUPPORTED_VALUE)


# --- 4. the canonical-form check of verify -------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(
    value=st.dictionaries(SUBSET_NAMES, SUBSET_VALUES, max_size=5),
    form=st.sampled_from(["jcs", "code-points", "ascii", "spaced", "reversed", "unsorted"]),
)
@example(value={"\uffff": 1, "\U00010000": 2}, form="code-points")
@example(value={"\uffff": 1, "\U00010000": 2}, form="ascii")
@example(value={"a": "\U0001f600"}, form="ascii")
def test_matches_canonical_decides_as_rfc8785(value: dict[str, Any], form: str) -> None:
    if form == "jcs":
        data = rfc8785.dumps(value)
    elif form == "reversed":
        data = json.dumps(dict(reversed(list(value.items()))), ensure_ascii=False).encode()
    else:  # code-point order, ASCII escapes (pairs for characters above U+FFFF), spaces
        data = json.dumps(
            value,
            sort_keys=form != "unsorted",
            ensure_ascii=form == "ascii",
            separators=(", ", ": ") if form == "spaced" else (",", ":"),
        ).encode()
    parsed = parse_object(data, what="x")
    expected = rfc8785.dumps(parsed) == data
    event(f"{form}: {'canonical' if expected else 'not canonical'}")
    assert jcs.matches_canonical(data, parsed) is expected
    with (  # rfc8785 every time
        mock.patch.object(jcs, "_bmp_only", return_value=False),
        mock.patch.object(jcs, "_names_in_bmp", return_value=False),
    ):
        assert jcs.matches_canonical(data, parsed) is expected


@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(SUBSET_NAMES, SUBSET_VALUES, max_size=6))
def test_fast_bytes_read_back_as_the_strict_reader_reads_them(value: dict[str, Any]) -> None:
    """What sign relies on to read its own fast-path bytes with the plain C reader."""
    data = jcs.canonicalize_subset(value, max_depth=32)
    if data is not None:
        assert same(parse_object(data, what="x"), json.loads(data.decode("utf-8")))


def test_matches_canonical_never_raises() -> None:
    # Not a value the strict reader returns; still an answer, never an exception.
    assert jcs.matches_canonical(b'"\\ud800"', "\ud800") is False
    assert jcs.matches_canonical(b"[1]", [{1, 2}]) is False


# --- 5. without the C accelerator ----------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(value=SUBSET_VALUES)
def test_the_pure_python_encoder_gives_the_same_bytes(value: Any) -> None:
    with_c = jcs.canonicalize_subset(value, max_depth=32)
    with mock.patch.object(jcs, "_C_ENCODER", None):  # JSONEncoder.encode, still in C
        assert jcs.canonicalize_subset(value, max_depth=32) == with_c
        # As on an interpreter without the accelerator: Python's encoder and escaper.
        with (
            mock.patch.object(json.encoder, "c_make_encoder", None),
            mock.patch.object(json.encoder, "encode_basestring", json.encoder.py_encode_basestring),
        ):
            assert jcs.canonicalize_subset(value, max_depth=32) == with_c


def test_the_c_encoder_is_used_only_when_it_gives_the_expected_text() -> None:
    assert jcs._C_ENCODER is not None  # CPython: the accelerator is there
    with mock.patch.object(json.encoder, "c_make_encoder", None):
        assert jcs._make_c_encoder() is None

    def broken(*args: Any) -> Any:
        return lambda value, indent: ["{}"]

    with mock.patch.object(json.encoder, "c_make_encoder", broken):
        assert jcs._make_c_encoder() is None
