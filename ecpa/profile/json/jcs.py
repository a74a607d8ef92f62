"""RFC 8785 (JSON Canonicalization Scheme) canonical bytes.

``rfc8785`` is the reference; a fast path sits in front of it for the values the profile
uses, and this module maps every error onto :class:`~ecpa.EcpaError` so that nothing foreign
escapes the library.

The fast path is the standard library's C encoder,
``json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=True)`` in UTF-8, which
writes exactly the JCS bytes of a value ``v`` in this *subset*:

* containers are ``dict`` with ``str`` keys, ``list`` and ``tuple``; scalars are ``str``,
  ``int`` within ±(2**53-1), ``bool`` and ``None`` (exact types: no subclasses, no floats),
  nested at most a bounded depth (so a cyclic value is never in the subset);
* no member name holds a character above U+FFFF. Below it, a UTF-16 code unit *is* the code
  point, so JCS's UTF-16 member order (RFC 8785 §3.2.3) equals the code-point order that
  ``sort_keys`` uses. U+10000 sorts after U+FFFF by code point but before U+E000-U+FFFF by
  UTF-16 code unit (D800 DC00), the one place where the two orders part.

Within it the two agree on everything else: integers as plain decimals; ``"`` and ``\\``
escaped; U+0008, U+0009, U+000A, U+000C, U+000D as ``\\b \\t \\n \\f \\r``; other characters
below U+0020 as ``\\u00xx`` in lowercase hex; every other character, DEL and U+2028
included, written raw as UTF-8 (RFC 8785 §3.2.2.2). A lone surrogate cannot be encoded in
UTF-8: the fast path then gives way and ``rfc8785`` refuses the value as before. Anything
outside the subset goes to ``rfc8785``, so results and errors are unchanged.
``tests/profile/test_jcs_fast.py`` checks each of these claims against ``rfc8785.dumps``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import rfc8785

from ecpa.errors import EcpaError, ErrorCode

__all__ = ["canonicalize", "canonicalize_subset", "matches_canonical"]

_MAX_SAFE_INTEGER = 2**53 - 1
#: Values nested deeper than this take the reference path (which has no fixed bound).
_FAST_MAX_DEPTH = 32
_BMP_MAX = "\uffff"
#: In UTF-8, a character above U+FFFF, and only such a character, starts with F0-F4.
_FOUR_BYTE_LEAD = re.compile(rb"[\xf0-\xff]")

# No circular check: the subset walk bounds the depth, so a value containing itself never
# reaches the encoder, and a value parsed from bytes cannot contain itself.
_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, check_circular=False
)


def _make_c_encoder() -> Callable[[Any, int], Sequence[str]] | None:
    """The C encoder that ``_ENCODER.encode`` builds on every call, built once (its setup
    is a tenth of the cost for a statement). None when the accelerator is missing or does
    not give the expected text; ``_ENCODER.encode`` then does the same work."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        encoder: Callable[[Any, int], Sequence[str]] = make(
            None,  # markers: no circular check (see _ENCODER)
            _ENCODER.default,  # raises TypeError; never reached for a value of the subset
            json.encoder.encode_basestring,  # the C string escaper when there is one
            None,  # indent
            ":",  # key separator
            ",",  # item separator
            True,  # sort_keys
            False,  # skipkeys
            True,  # allow_nan (floats never reach it)
        )
        sample = "".join(encoder({"b": [1, "\u00e9\n"], "a": None, "": True}, 0))
    except Exception:  # any surprise from a private helper: do without it
        return None
    return encoder if sample == '{"":true,"a":null,"b":[1,"\u00e9\\n"]}' else None


_C_ENCODER = _make_c_encoder()


def _in_subset(value: Any, max_depth: int) -> bool:
    """True when ``value`` has the subset's types (module docstring): exact JSON types,
    string member names, safe integers, nested at most ``max_depth`` deep (a top-level
    container is depth 1). The member-name characters are left to :func:`_subset_bytes`."""
    kind = type(value)
    if kind is not dict and kind is not list and kind is not tuple:
        return _scalar_in_subset(value)
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > max_depth:
            return False  # too deep, or cyclic
        if type(node) is dict:
            for key in node:
                if type(key) is not str:
                    return False
            items: Any = node.values()
        else:
            items = node
        for item in items:
            kind = type(item)
            if kind is str or kind is bool or item is None:
                continue
            if kind is int:
                if -_MAX_SAFE_INTEGER <= item <= _MAX_SAFE_INTEGER:
                    continue
                return False
            if kind is dict or kind is list or kind is tuple:
                pending.append((item, depth + 1))
                continue
            return False
    return True


def _scalar_in_subset(value: Any) -> bool:
    kind = type(value)
    if kind is int:
        return bool(-_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER)
    return kind is str or kind is bool or value is None


def _names_in_bmp(value: Any) -> bool:
    """True when no member name in ``value`` (of the subset's types) is above U+FFFF."""
    pending = [value]
    while pending:
        node = pending.pop()
        if type(node) is dict:
            if any(not name.isascii() and max(name) > _BMP_MAX for name in node):
                return False
            pending.extend(node.values())
        elif type(node) is list or type(node) is tuple:
            pending.extend(node)
    return True


def _encode(value: Any) -> bytes | None:
    """The C encoder's UTF-8 bytes, or None when a lone surrogate makes UTF-8 impossible."""
    try:
        if _C_ENCODER is not None:
            return "".join(_C_ENCODER(value, 0)).encode("utf-8")
        return _ENCODER.encode(value).encode("utf-8")
    except UnicodeEncodeError:
        return None


def _subset_bytes(value: Any, max_depth: int) -> bytes | None:
    """The fast path: JCS bytes of ``value`` if it is in the subset, else None."""
    if not _in_subset(value, max_depth):
        return None
    data = _encode(value)
    # Output without a character above U+FFFF has no such member name; otherwise look.
    if data is None or _bmp_only(data) or _names_in_bmp(value):
        return data
    return None


def _bmp_only(data: bytes) -> bool:
    """True when the UTF-8 text ``data`` holds no raw character above U+FFFF."""
    return data.isascii() or _FOUR_BYTE_LEAD.search(data) is None


def _reference(value: Any) -> bytes:
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError, OverflowError) as exc:
        raise EcpaError(
            ErrorCode.UNSUPPORTED_VALUE,
            f"expected a value RFC 8785 can canonicalize, found one it cannot ({exc})",
        ) from None
    except RecursionError:  # rfc8785 recurses: a value nested too deep, or containing itself
        raise EcpaError(
            ErrorCode.UNSUPPORTED_VALUE,
            "expected a value RFC 8785 can canonicalize, found one nested too deep or cyclic",
        ) from None


def canonicalize(value: Any) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of a JSON value.

    ``value`` is made of ``dict`` (string keys), ``list``/``tuple``, ``str``, ``int``,
    ``float``, ``bool`` and ``None``.

    Raises:
        EcpaError: ``ATTESTATION_UNSUPPORTED_VALUE`` for what JCS cannot represent (an
            integer beyond ±(2**53-1), a non-finite float, a lone surrogate, a non-string
            key, a non-JSON type, or nesting too deep for it, a cycle included).
    """
    fast = _subset_bytes(value, _FAST_MAX_DEPTH)
    return fast if fast is not None else _reference(value)


def canonicalize_subset(value: Any, *, max_depth: int) -> bytes | None:
    """The JCS bytes of ``value`` when it is in the fast path's subset (no floats, integers
    within ±(2**53-1), no lone surrogates, exact JSON types, nested at most ``max_depth``
    deep), else None: the caller then decides what to refuse. Never raises."""
    return _subset_bytes(value, max_depth)


def matches_canonical(data: bytes, value: Any) -> bool:
    """Whether ``data == canonicalize(value)`` (PROFILE §3 steps 6 and 13), where ``value``
    is what the strict reader (``ecpa.profile.json.strict_json.parse_object``) returned for
    ``data``.

    The reader leaves only exact JSON types, safe integers and no lone surrogates, nested at
    most 32 deep: the subset, but for the member-name condition. That one is decided from
    the bytes first, without a walk: with no raw character above U+FFFF in ``data``, either
    no name holds one (the fast bytes are the JCS bytes) or one came from a ``\\uD8xx\\uDCxx``
    escape, which JCS and the fast path both write raw, so neither output equals ``data``.
    Otherwise the names are looked at; if one is above U+FFFF, ``rfc8785`` decides. Never
    raises: a value JCS cannot represent is not a match.

    ``value`` must come from the strict reader; its types are not checked again here.
    """
    try:
        fast = _encode(value) if _bmp_only(data) or _names_in_bmp(value) else None
    except (TypeError, ValueError, AttributeError, RecursionError):  # not from the reader
        fast = None
    if fast is not None:
        return fast == data
    try:
        return _reference(value) == data
    except EcpaError:
        return False
