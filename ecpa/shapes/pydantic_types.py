"""The pydantic side of the profile's types, for the documents that stay pydantic models
(the corpus formats): the strict member types."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ecpa.profile.json.strict_json import MAX_SAFE_INTEGER

__all__ = ["NonEmptyStr", "SafeInt"]

#: An integer in [0, 2**53-1]; booleans are refused (strict mode).
SafeInt = Annotated[int, Field(strict=True, ge=0, le=MAX_SAFE_INTEGER)]
#: A non-empty string, compared code point by code point (no Unicode normalization).
NonEmptyStr = Annotated[str, Field(strict=True, min_length=1)]
