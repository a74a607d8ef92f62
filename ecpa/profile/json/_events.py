"""The rules of the strict JSON reader (PROFILE §4) that both of its implementations share:
limits, the UTF-8 decoding step, and the class-2/class-3 events with their details.

The fast path (:mod:`ecpa.profile.json.strict_json`) and the reference parser
(:mod:`ecpa.profile.json._ref`) both import this module and never each other's internals.
"""

from __future__ import annotations

import re
from typing import Any

from ecpa.errors import EcpaError, ErrorCode

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
