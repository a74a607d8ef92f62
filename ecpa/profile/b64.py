"""Strict base64url without padding (PROFILE §3 step 3).

Strict means: ASCII ``[A-Za-z0-9_-]`` only, no ``=``, no whitespace, length mod 4 != 1,
and re-encoding the decoded bytes gives the same text (no non-zero trailing bits). Only one
text decodes to given bytes, so a signature or header cannot be varied without detection.
"""

from __future__ import annotations

import binascii

from ecpa.errors import EcpaError, ErrorCode

_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_ALPHABET = _DIGITS.encode("ascii")
#: The characters that may end a text of length 4k+2 (4 bits used: the low 4 zero) and of
#: length 4k+3 (2 bits used: the low 2 zero), by ``len % 4``.
_LAST = {2: frozenset(_DIGITS[::16]), 3: frozenset(_DIGITS[::4])}
_PAD_BYTES = (b"", b"", b"==", b"=")


def b64u_encode(data: bytes) -> str:
    """Encode ``data`` as base64url without padding."""
    return b64u_encode_ascii(data).decode("ascii")


def b64u_encode_ascii(data: bytes) -> bytes:
    """:func:`b64u_encode` as ASCII bytes (two ``replace`` calls cost a fraction of a
    ``translate``, which looks every byte up in a table)."""
    standard = binascii.b2a_base64(data, newline=False).rstrip(b"=")
    return standard.replace(b"+", b"-").replace(b"/", b"_")


def b64u_decode(text: str, *, what: str, code: ErrorCode = ErrorCode.MALFORMED_JWS) -> bytes:
    """Decode strict base64url ``text``; raise ``EcpaError(code)`` naming ``what`` otherwise."""
    # ASCII, then nothing left once the alphabet is deleted: two passes in C over the bytes.
    ascii_text = text.encode("ascii") if text.isascii() else None
    if ascii_text is None or ascii_text.translate(None, _ALPHABET):
        bad = next(c for c in text if not (c.isascii() and (c.isalnum() or c in "-_")))
        raise EcpaError(
            code,
            f"{what}: expected base64url characters [A-Za-z0-9_-] without padding, "
            f"found {bad!r} at position {text.index(bad)}",
        )
    return _decode_alphabet(ascii_text, what, code)


def b64u_decode_ascii(
    ascii_text: bytes, *, what: str, code: ErrorCode = ErrorCode.MALFORMED_JWS
) -> bytes:
    """:func:`b64u_decode` of ASCII bytes already known to hold only ``[A-Za-z0-9_-]``
    (the caller checked them): the same result or the same error, one pass fewer."""
    return _decode_alphabet(ascii_text, what, code)


def _decode_alphabet(ascii_text: bytes, what: str, code: ErrorCode) -> bytes:
    rem = len(ascii_text) % 4
    if rem == 1:
        raise EcpaError(
            code,
            f"{what}: expected a base64url length not of the form 4k+1, found {len(ascii_text)}",
        )
    try:  # only [A-Za-z0-9_-] is left, which the standard alphabet takes after translation
        standard = ascii_text.replace(b"-", b"+").replace(b"_", b"/")
        raw = binascii.a2b_base64(standard + _PAD_BYTES[rem])
    except binascii.Error as exc:  # unreachable after the checks above; kept as a guard
        raise EcpaError(code, f"{what}: not base64url ({exc})") from None
    if rem and chr(ascii_text[-1]) not in _LAST[rem]:
        raise EcpaError(
            code,
            f"{what}: expected zero trailing bits in the last character, "
            f"found {chr(ascii_text[-1])!r} (canonical form ends {b64u_encode(raw)[-1]!r})",
        )
    return raw
