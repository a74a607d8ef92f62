"""Text for people and programs, from values that may come from evidence: shown so that no
control character, space or bidi override in a value can forge a line of output. Shared by
the command line and the verification of many inputs, whose result lines it builds."""

from __future__ import annotations

import json
import time
from typing import Any

__all__ = ["iso_utc", "json_line", "safe", "show", "when"]


def show(value: Any) -> str:
    """A value for a ``key=value`` line: bare when harmless, else JSON-escaped (so control
    characters, spaces and bidi overrides from evidence can never forge output)."""
    text = str(value)
    if (
        text
        and text.isascii()
        and text.isprintable()
        and " " not in text
        and "=" not in text
        and '"' not in text
        and "\\" not in text
    ):
        return text
    return json.dumps(text)


def safe(text: str) -> str:
    """Free text from evidence, with every non-printable character escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def json_line(obj: dict[str, Any]) -> str:
    """One compact JSON object for JSON Lines output (ASCII, so it is terminal-safe)."""
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def iso_utc(epoch: int) -> str:
    """``epoch`` (Unix seconds) as ISO 8601 UTC, ``2026-12-02T09:36:20Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def when(epoch: int | None) -> str:
    """``epoch`` for a person and a program at once: ``1796200846 (2026-12-02T08:40:46Z)``;
    ``-`` when unknown."""
    return "-" if epoch is None else f"{epoch} ({iso_utc(epoch)})"
