"""Strict JSON reader for the header and the payload (PROFILE §4).

Accepted: UTF-8 JSON text whose top level is an object, holding only strings, integers in
``±(2**53-1)``, ``true``, ``false``, ``null``, arrays and objects, nested at most
:data:`MAX_DEPTH` deep, with unique member names and no lone surrogates.

When one text has several defects the code is chosen by class (PROFILE §4):

1. encoding, syntax, a top level that is not an object -> ``ATTESTATION_MALFORMED_JSON``;
2. a duplicate member name (met where its object closes) or an unsupported number or
   constant, whichever comes first reading left to right -> ``ATTESTATION_DUPLICATE_KEY`` /
   ``ATTESTATION_UNSUPPORTED_VALUE``;
3. nesting deeper than 32, a lone surrogate, whichever comes first ->
   ``ATTESTATION_UNSUPPORTED_VALUE``.

Two implementations give the same answer: a fast path on the standard library's C scanner
(its hooks *record* class-2 events instead of raising, so a later syntax error still wins),
and :func:`parse_reference`, an iterative parser used when the C scanner runs out of
recursion depth (a text nested thousands deep) and by the tests as an independent oracle.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ecpa.errors import EcpaError, ErrorCode

__all__ = ["MAX_DEPTH", "MAX_SAFE_INTEGER", "parse_object", "parse_reference"]

MAX_DEPTH = 32
MAX_SAFE_INTEGER = 2**53 - 1
_MAX_SAFE_DIGITS = len(str(MAX_SAFE_INTEGER))  # 16: longer digit strings are out of range

_BOM = b"\xef\xbb\xbf"
_SURROGATE = re.compile("[\ud800-\udfff]")
_Event = tuple[ErrorCode, str]


def _short(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _decode(data: bytes, what: str) -> str:
    """PROFILE §4: UTF-8 only; a BOM, UTF-16/32 (NUL bytes) or invalid UTF-8 is refused."""
    if data.startswith(_BOM):
        raise EcpaError(
            ErrorCode.MALFORMED_JSON, f"{what}: expected UTF-8 without a byte-order mark, found one"
        )
    if b"\x00" in data:
        raise EcpaError(
            ErrorCode.MALFORMED_JSON,
            f"{what}: expected UTF-8 JSON text, found a NUL byte at offset {data.index(0)} "
            "(UTF-16 or UTF-32 text?)",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EcpaError(
            ErrorCode.MALFORMED_JSON,
            f"{what}: expected UTF-8, found invalid byte sequence at offset {exc.start}",
        ) from None


def _int_event(literal: str) -> _Event | None:
    digits = len(literal) - (literal[0] == "-")
    if digits > _MAX_SAFE_DIGITS or abs(int(literal)) > MAX_SAFE_INTEGER:
        return (
            ErrorCode.UNSUPPORTED_VALUE,
            f"expected an integer within ±(2**53-1), found {_short(literal)}",
        )
    return None


def _float_event(literal: str) -> _Event:
    return (
        ErrorCode.UNSUPPORTED_VALUE,
        f"expected an integer, found number {_short(literal)} with a fraction or exponent",
    )


def _constant_event(literal: str) -> _Event:
    return (ErrorCode.UNSUPPORTED_VALUE, f"expected a JSON value, found constant {literal}")


def _duplicate_event(pairs: list[tuple[str, Any]]) -> _Event:
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            return (
                ErrorCode.DUPLICATE_KEY,
                f"expected unique member names, found {_short(name)!r} twice in one object",
            )
        seen.add(name)
    raise AssertionError("no duplicate")  # pragma: no cover - callers check first


def _surrogate_event(text: str) -> _Event:
    match = _SURROGATE.search(text)
    assert match is not None
    return (
        ErrorCode.UNSUPPORTED_VALUE,
        f"expected Unicode scalar values, found lone surrogate U+{ord(match.group()):04X}",
    )


def _depth_event() -> _Event:
    return (
        ErrorCode.UNSUPPORTED_VALUE,
        f"expected nesting at most {MAX_DEPTH} deep, found deeper nesting",
    )


class _Recorder:
    """Hooks for the C scanner: remember the first class-2 event, keep parsing."""

    __slots__ = ("first",)

    def __init__(self) -> None:
        self.first: _Event | None = None

    def pairs(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs) and self.first is None:
            self.first = _duplicate_event(pairs)
        return obj

    def parse_int(self, literal: str) -> int:
        event = _int_event(literal)
        if event is None:
            return int(literal)
        if self.first is None:
            self.first = event
        return 0

    def parse_float(self, literal: str) -> int:
        if self.first is None:
            self.first = _float_event(literal)
        return 0

    def parse_constant(self, literal: str) -> int:
        if self.first is None:
            self.first = _constant_event(literal)
        return 0


def _class3(value: Any, text: str) -> _Event | None:
    """First lone surrogate or too-deep container, in document order (pre-order walk)."""
    if "\\u" not in text and text.count("{") + text.count("[") <= MAX_DEPTH:
        return None  # neither defect can occur: skip the walk
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return _surrogate_event(node)
        elif isinstance(node, (dict, list)):
            if depth > MAX_DEPTH:
                return _depth_event()
            if isinstance(node, dict):
                children: list[Any] = []
                for key, item in node.items():
                    children.append(key)
                    children.append(item)
            else:
                children = node
            stack.extend((child, depth + 1) for child in reversed(children))
    return None


def _raise(what: str, event: _Event) -> None:
    raise EcpaError(event[0], f"{what}: {event[1]}")


def _require_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise EcpaError(
            ErrorCode.MALFORMED_JSON,
            f"{what}: expected a JSON object at the top level, found {_kind(value)}",
        )
    return value


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def parse_object(data: bytes, *, what: str) -> dict[str, Any]:
    """Parse ``data`` strictly (PROFILE §4) and return its top-level object.

    ``what`` names the input in error details ("header", "payload").

    Raises:
        EcpaError: ``ATTESTATION_MALFORMED_JSON``, ``ATTESTATION_DUPLICATE_KEY`` or
            ``ATTESTATION_UNSUPPORTED_VALUE``, chosen by the class order above.
    """
    text = _decode(data, what)
    recorder = _Recorder()
    decoder = json.JSONDecoder(
        object_pairs_hook=recorder.pairs,
        parse_int=recorder.parse_int,
        parse_float=recorder.parse_float,
        parse_constant=recorder.parse_constant,
    )
    try:
        value = decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise EcpaError(
            ErrorCode.MALFORMED_JSON, f"{what}: not JSON at character {exc.pos}: {exc.msg}"
        ) from None
    except RecursionError:
        return parse_reference(data, what=what)
    obj = _require_object(value, what)
    if recorder.first is not None:
        _raise(what, recorder.first)
    event = _class3(obj, text)
    if event is not None:
        _raise(what, event)
    return obj


# --- the reference parser ------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_CHUNK = re.compile(r'[^"\\\x00-\x1f]*')
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS: tuple[tuple[str, Any], ...] = (("null", None), ("true", True), ("false", False))


class _Syntax(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


class _Reference:
    """Iterative strict parser: no recursion, so any nesting depth is safe."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.ev2: _Event | None = None
        self.ev3: _Event | None = None

    def ws(self, i: int) -> int:
        match = _WS.match(self.s, i)
        assert match is not None
        return match.end()

    def expect(self, i: int, char: str, message: str) -> int:
        if i >= len(self.s) or self.s[i] != char:
            raise _Syntax(message, i)
        return i + 1

    def string(self, i: int) -> tuple[str, int]:
        """Parse the string whose opening quote is at ``i``."""
        s = self.s
        parts: list[str] = []
        i += 1
        while True:
            match = _CHUNK.match(s, i)
            assert match is not None
            parts.append(match.group())
            i = match.end()
            if i >= len(s):
                raise _Syntax("Unterminated string", i)
            char = s[i]
            if char == '"':
                break
            if char != "\\":
                raise _Syntax("Invalid control character", i)
            i += 1
            if i >= len(s):
                raise _Syntax("Unterminated string", i)
            esc = s[i]
            if esc in _ESCAPES:
                parts.append(_ESCAPES[esc])
                i += 1
                continue
            if esc != "u" or not _HEX4.fullmatch(s, i + 1, i + 5):
                raise _Syntax("Invalid escape", i)
            code = int(s[i + 1 : i + 5], 16)
            i += 5
            if (
                0xD800 <= code <= 0xDBFF
                and s.startswith("\\u", i)
                and _HEX4.fullmatch(s, i + 2, i + 6)
            ):
                low = int(s[i + 2 : i + 6], 16)
                if 0xDC00 <= low <= 0xDFFF:
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
            parts.append(chr(code))
        value = "".join(parts)
        if self.ev3 is None and _SURROGATE.search(value):
            self.ev3 = _surrogate_event(value)
        return value, i + 1

    def key(self, i: int) -> tuple[str, int]:
        i = self.ws(i)
        if i >= len(self.s) or self.s[i] != '"':
            raise _Syntax("Expecting property name enclosed in double quotes", i)
        name, i = self.string(i)
        i = self.expect(self.ws(i), ":", "Expecting ':' delimiter")
        return name, self.ws(i)

    def scalar(self, i: int) -> tuple[Any, int]:
        s = self.s
        char = s[i]
        if char == '"':
            return self.string(i)
        for word, value in _LITERALS:
            if s.startswith(word, i):
                return value, i + len(word)
        for word in ("NaN", "Infinity", "-Infinity"):
            if s.startswith(word, i):
                if self.ev2 is None:
                    self.ev2 = _constant_event(word)
                return 0, i + len(word)
        match = _NUMBER.match(s, i)
        if match is None:
            raise _Syntax("Expecting value", i)
        literal = match.group()
        if match.group(2) or match.group(3):
            event: _Event | None = _float_event(literal)
            number = 0
        else:
            event = _int_event(literal)
            number = 0 if event else int(literal)
        if event is not None and self.ev2 is None:
            self.ev2 = event
        return number, match.end()

    def close_object(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs) and self.ev2 is None:
            self.ev2 = _duplicate_event(pairs)
        return obj

    def open_container(self, depth: int) -> None:
        if depth > MAX_DEPTH and self.ev3 is None:
            self.ev3 = _depth_event()

    def parse(self) -> Any:
        s, n = self.s, len(self.s)
        # A frame is [pairs, pending key] for an object or [items] for an array.
        stack: list[list[Any]] = []
        i = self.ws(0)
        while True:
            # Here a value starts at i.
            if i >= n:
                raise _Syntax("Expecting value", i)
            char = s[i]
            if char in "{[":
                self.open_container(len(stack) + 1)
                j = self.ws(i + 1)
                if j < n and s[j] == ("}" if char == "{" else "]"):
                    value: Any = self.close_object([]) if char == "{" else []
                    i = j + 1
                elif char == "{":
                    name, i = self.key(j)
                    stack.append([[], name])
                    continue
                else:
                    stack.append([[]])
                    i = j
                    continue
            else:
                value, i = self.scalar(i)
            # A value ended just before i: hand it to the enclosing containers.
            while True:
                i = self.ws(i)
                if not stack:
                    if i != n:
                        raise _Syntax("Extra data", i)
                    return value
                frame = stack[-1]
                is_object = len(frame) == 2
                if is_object:
                    frame[0].append((frame[1], value))
                else:
                    frame[0].append(value)
                if i < n and s[i] == ",":
                    if is_object:
                        frame[1], i = self.key(i + 1)
                    else:
                        i = self.ws(i + 1)
                    break
                if i < n and s[i] == ("}" if is_object else "]"):
                    stack.pop()
                    value = self.close_object(frame[0]) if is_object else frame[0]
                    i += 1
                    continue
                raise _Syntax("Expecting ',' delimiter", i)


def parse_reference(data: bytes, *, what: str) -> dict[str, Any]:
    """The reference implementation of :func:`parse_object`: same result, same codes."""
    text = _decode(data, what)
    parser = _Reference(text)
    try:
        value = parser.parse()
    except _Syntax as exc:
        raise EcpaError(
            ErrorCode.MALFORMED_JSON, f"{what}: not JSON at character {exc.pos}: {exc.message}"
        ) from None
    obj = _require_object(value, what)
    for event in (parser.ev2, parser.ev3):
        if event is not None:
            _raise(what, event)
    return obj
