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
import threading
from typing import Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.json._events import (
    _MAX_SAFE_DIGITS,
    _SURROGATE,
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
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
from ecpa.profile.json._ref import parse_reference

__all__ = ["MAX_DEPTH", "MAX_SAFE_INTEGER", "parse_object", "parse_reference"]


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
        if len(literal) < _MAX_SAFE_DIGITS:  # at most 15 digits: below 2**53, no check needed
            return int(literal)
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


_local = threading.local()


def _reader() -> tuple[_Recorder, json.JSONDecoder]:
    """This thread's recorder and the C-scanner decoder bound to its hooks, built once per
    thread (building a decoder costs more than parsing a header)."""
    reader: tuple[_Recorder, json.JSONDecoder] | None = getattr(_local, "reader", None)
    if reader is None:
        recorder = _Recorder()
        decoder = json.JSONDecoder(
            object_pairs_hook=recorder.pairs,
            parse_int=recorder.parse_int,
            parse_float=recorder.parse_float,
            parse_constant=recorder.parse_constant,
        )
        reader = _local.reader = (recorder, decoder)
    return reader


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


def parse_object(data: bytes, *, what: str) -> dict[str, Any]:
    """Parse ``data`` strictly (PROFILE §4) and return its top-level object.

    ``what`` names the input in error details ("header", "payload").

    Raises:
        EcpaError: ``ATTESTATION_MALFORMED_JSON``, ``ATTESTATION_DUPLICATE_KEY`` or
            ``ATTESTATION_UNSUPPORTED_VALUE``, chosen by the class order above.
    """
    text = _decode(data, what)
    recorder, decoder = _reader()
    recorder.first = None
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
