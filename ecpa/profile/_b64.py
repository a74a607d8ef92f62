"""Strict base64url without padding (PROFILE §3 step 3).

Strict means: ASCII ``[A-Za-z0-9_-]`` only, no ``=``, no whitespace, length mod 4 != 1,
and re-encoding the decoded bytes gives the same text (no non-zero trailing bits). Only one
text decodes to given bytes, so a signature or header cannot be varied without detection.
"""

from __future__ import annotations

import base64
import binascii
import re

from ecpa.errors import EcpaError, ErrorCode

_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")
_PAD = ("", "", "==", "=")


def b64u_encode(data: bytes) -> str:
    """Encode ``data`` as base64url without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64u_decode(text: str, *, what: str, code: ErrorCode = ErrorCode.MALFORMED_JWS) -> bytes:
    """Decode strict base64url ``text``; raise ``EcpaError(code)`` naming ``what`` otherwise."""
    if _ALPHABET.fullmatch(text) is None:
        bad = next(c for c in text if not (c.isascii() and (c.isalnum() or c in "-_")))
        raise EcpaError(
            code,
            f"{what}: expected base64url characters [A-Za-z0-9_-] without padding, "
            f"found {bad!r} at position {text.index(bad)}",
        )
    rem = len(text) % 4
    if rem == 1:
        raise EcpaError(
            code, f"{what}: expected a base64url length not of the form 4k+1, found {len(text)}"
        )
    try:
        raw = base64.urlsafe_b64decode(text + _PAD[rem])
    except binascii.Error as exc:  # unreachable after the checks above; kept as a guard
        raise EcpaError(code, f"{what}: not base64url ({exc})") from None
    if rem and b64u_encode(raw)[-1] != text[-1]:
        raise EcpaError(
            code,
            f"{what}: expected zero trailing bits in the last character, "
            f"found {text[-1]!r} (canonical form ends {b64u_encode(raw)[-1]!r})",
        )
    return raw
