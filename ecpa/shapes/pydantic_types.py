"""The pydantic side of the profile's types, for the documents that stay pydantic models
(the corpus formats, the HTTP service): the strict member types, and one line for a
pydantic error in the words of :mod:`ecpa.shapes.shape` (what was expected, what was
found)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, ValidationError

from ecpa.profile.json.strict_json import MAX_SAFE_INTEGER

__all__ = ["NonEmptyStr", "SafeInt", "Sha256Digest", "describe_validation"]

#: An integer in [0, 2**53-1]; booleans are refused (strict mode).
SafeInt = Annotated[int, Field(strict=True, ge=0, le=MAX_SAFE_INTEGER)]
#: A non-empty string, compared code point by code point (no Unicode normalization).
NonEmptyStr = Annotated[str, Field(strict=True, min_length=1)]
#: ``sha256:`` followed by 64 lowercase hexadecimal digits.
Sha256Digest = Annotated[str, Field(strict=True, pattern=r"^sha256:[0-9a-f]{64}$")]


def describe_validation(exc: ValidationError, whole: str, *, every: bool = False) -> str:
    """One line for the first problem pydantic found (``every``: all of them, joined by
    "; "): where, what was expected, what was found. ``whole`` names the document when a
    problem is at its top level."""
    errors = exc.errors(include_url=False)
    return "; ".join(_describe_one(err, whole) for err in (errors if every else errors[:1]))


def _describe_one(err: Any, whole: str) -> str:
    loc = ".".join(str(part) for part in err["loc"]) or whole
    if err["type"] == "missing":
        return f"expected member {loc!r}, found it missing"
    if err["type"] == "extra_forbidden":
        return f"expected only the specified members, found extra member {loc!r}"
    if err["type"] == "value_error" and not err["loc"]:
        return f"{whole}: {err['msg'].removeprefix('Value error, ')}"  # says what it found
    found = repr(err.get("input"))
    if len(found) > 60:
        found = found[:57] + "..."
    return f"member {loc!r}: {err['msg']}; found {found}"
