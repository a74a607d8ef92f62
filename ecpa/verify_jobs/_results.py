"""The result line of ``ecpa verify``, made by one function wherever the item was verified
(in this process, or in a worker of ``--jobs``), so that both give the same bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from ecpa._text import json_line, safe, show
from ecpa.errors import EcpaError
from ecpa.profile.statement import Statement

__all__ = ["Advance", "Echo", "Tally", "ok_fields", "render_result"]


class Tally(NamedTuple):
    """How many items passed every check, and how many failed one."""

    verified: int
    failed: int

    @property
    def items(self) -> int:
        """Every item: ``verified + failed``."""
        return self.verified + self.failed

    def summary(self) -> str:
        """The line said after several items: ``2000 verified, 0 failed``."""
        return f"{self.verified} verified, {self.failed} failed"


#: Told how many more items are done (a progress bar; nothing when not a terminal).
Advance = Callable[[int], object]


class Echo(Protocol):
    """Prints one line, to standard error with ``err`` (the command line's ``typer.echo``)."""

    def __call__(self, message: str, *, err: bool = False) -> object: ...


def ok_fields(statement: Statement) -> dict[str, Any]:
    """The members of a verified statement that its text result line shows."""
    return {
        "issuer": statement.issuer,
        "kid": statement.kid,
        "subject": statement.subject,
        "challenge_nonce": statement.challenge_nonce,
    }


def render_result(
    source: str,
    line: int | None,
    error: EcpaError | None,
    statement: dict[str, Any] | None,
    as_json: bool,
    verified_at: int | None = None,
) -> str | None:
    """One item's output line: ``OK ...``, ``FAIL ...`` or, with ``as_json``, a JSON object.

    ``source`` is the EVIDENCE argument and ``line`` the line in a log (else ``None``);
    ``statement`` is the verified statement when ``error`` is ``None``. ``None`` when there
    is nothing to print (no error and no statement, which a verified item never is).
    ``verified_at``: the item was verified as of this time, its own ``issued_at``
    (``--at-issue``), said on the line (``at_issue=T``, JSON ``verified_at``).
    """
    if as_json:
        doc = {
            "input": source,
            "line": line,
            "ok": error is None,
            "code": error.code.value if error else None,
            "detail": error.detail if error else None,
            "statement": statement,
        }
        if verified_at is not None:
            doc["verified_at"] = verified_at
        return json_line(doc)
    text = _text_line(source, line, error, statement)
    if text is not None and verified_at is not None:
        text += f" at_issue={verified_at}"
    return text


def _text_line(
    source: str, line: int | None, error: EcpaError | None, statement: dict[str, Any] | None
) -> str | None:
    name = source if line is None else f"{source}:{line}"
    if error is None and statement is not None:
        return (
            f"OK {show(name)} issuer={show(statement['issuer'])} kid={show(statement['kid'])} "
            f"subject={show(statement['subject'])} nonce={show(statement['challenge_nonce'])}"
        )
    if error is not None:
        return f"FAIL {show(name)} {error.code.value}: {safe(error.detail)}"
    return None
