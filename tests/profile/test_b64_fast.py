"""Strict base64url (ecpa/profile/b64.py) against the standard library's codec, which it
no longer calls: encoding by b2a_base64 and two replaces, the alphabet by one translate,
the trailing bits by the last character, and b64u_decode_ascii for text already checked."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from ecpa.errors import EcpaError
from ecpa.profile.b64 import b64u_decode, b64u_decode_ascii, b64u_encode, b64u_encode_ascii

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def reference_decode(text: str) -> bytes | None:
    """Strict base64url by the standard library: None where it is not the one encoding."""
    if not text.isascii() or any(c not in ALPHABET for c in text) or len(text) % 4 == 1:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error:
        return None
    return raw if base64.urlsafe_b64encode(raw).decode().rstrip("=") == text else None


@settings(max_examples=1000, deadline=None)
@given(raw=st.binary(max_size=200))
def test_encoding_is_the_standard_librarys(raw: bytes) -> None:
    expected = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    assert b64u_encode(raw) == expected
    assert b64u_encode_ascii(raw) == expected.encode("ascii")


@settings(max_examples=1500, deadline=None)
@given(
    text=st.one_of(
        st.text(ALPHABET, max_size=30),
        st.text(ALPHABET + "=+/ .\n\x00", max_size=30),
        st.text(max_size=12),
    )
)
def test_decoding_accepts_exactly_the_one_encoding(text: str) -> None:
    expected = reference_decode(text)
    try:
        found: bytes | None = b64u_decode(text, what="x")
    except EcpaError:
        found = None
    assert found == expected
    if text.isascii() and all(c in ALPHABET for c in text):  # what the ascii form takes
        assert outcome(lambda: b64u_decode_ascii(text.encode("ascii"), what="x")) == outcome(
            lambda: b64u_decode(text, what="x")
        )


def outcome(call: Callable[[], bytes]) -> tuple[str, object]:
    """The bytes, or the code and detail of the EcpaError."""
    try:
        return "ok", call()
    except EcpaError as exc:
        return "err", (exc.code, exc.detail)
