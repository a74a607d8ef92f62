"""The reference strict JSON parser: iterative, so any nesting depth is safe (PROFILE §4).

:func:`ecpa.profile.json.strict_json.parse_object` falls back to it when the C scanner runs out of
recursion depth, and the tests use it as an independent oracle: same result, same codes.
"""

from __future__ import annotations

import re
from typing import Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.json._events import (
    _SURROGATE,
    MAX_DEPTH,
    _constant_event,
    _decode,
    _depth_event,
    _duplicate_event,
    _Event,
    _float_event,
    _int_event,
    _raise,
    _require_object,
    _surrogate_event,
)

__all__ = ["parse_reference"]

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
