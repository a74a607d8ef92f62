"""The dispatch counters record (RUNTIME.md "Evidence record"; "Round 3"): the raw host
evidence an observer signs beside each statement, defined once. The observer builds a
:class:`Counters` and writes :meth:`Counters.to_bytes`; a reader gets the same class back from
:func:`parse_counters`, which checks it strictly.

Schemas: ``ecpa-dispatch-counters/0.3`` (written) carries ``last_dispatch_at``,
``last_selection_at`` (each an integer or null) and ``changed`` (an integer); 0.2 only
``last_dispatch_at``; 0.1 none of the three. A record holds exactly its schema's members.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.jcs import canonicalize
from ecpa.profile.statement import NonEmptyStr, SafeInt, describe_validation
from ecpa.profile.strict_json import parse_object

__all__ = [
    "COUNTERS_SCHEMA",
    "COUNTERS_SCHEMA_01",
    "COUNTERS_SCHEMA_02",
    "Counters",
    "CountersProcess",
    "parse_counters",
]

COUNTERS_SCHEMA = "ecpa-dispatch-counters/0.3"
COUNTERS_SCHEMA_02 = "ecpa-dispatch-counters/0.2"
COUNTERS_SCHEMA_01 = "ecpa-dispatch-counters/0.1"
#: The members each schema has beyond the 0.1 ones.
_ADDED = {
    COUNTERS_SCHEMA_01: (),
    COUNTERS_SCHEMA_02: ("last_dispatch_at",),
    COUNTERS_SCHEMA: ("last_dispatch_at", "changed", "last_selection_at"),
}
_VERSIONED = ("last_dispatch_at", "changed", "last_selection_at")
_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True)


def _invalid(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.INVALID_RECORD, detail)


class CountersProcess(BaseModel):
    """The process the counts are of."""

    model_config = _STRICT
    host: NonEmptyStr
    pid: SafeInt
    start_ticks: SafeInt
    boot_id: NonEmptyStr


class Counters(BaseModel):
    """One counters record: the dispatches of one process's plugin over a window, with the
    newest times (RUNTIME.md "Evidence record"). ``schema`` says which members it has."""

    model_config = _STRICT
    schema_: str = Field(alias="schema")  # "schema" shadows a pydantic attribute
    plugin_id: NonEmptyStr
    seq: SafeInt
    process: CountersProcess
    calls: SafeInt
    selections: SafeInt
    abstentions: SafeInt
    failures: SafeInt
    dropped: SafeInt
    window_start: SafeInt
    window_end: SafeInt
    last_dispatch_at: SafeInt | None = None
    changed: SafeInt | None = None
    last_selection_at: SafeInt | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as its JSON members: exactly those of its schema."""
        doc = self.model_dump(by_alias=True)
        for member in _VERSIONED:
            if member not in _ADDED.get(self.schema_, ()):
                del doc[member]
        return doc

    def to_bytes(self) -> bytes:
        """The record as it is signed and written: its RFC 8785 form."""
        return canonicalize(self.to_dict())


def parse_counters(data: bytes) -> Counters:
    """The counters record in ``data``, strictly: strict JSON, its own RFC 8785 form, a known
    schema with exactly its members, each of its type, and (0.3) counts that add up.

    Raises:
        EcpaError: the strict-JSON codes, or ``ECPA_INVALID_RECORD`` naming what is wrong.
    """
    obj = parse_object(data, what="host evidence")
    if canonicalize(obj) != data:
        raise _invalid("expected host evidence in its RFC 8785 canonical form, found other bytes")
    schema = obj.get("schema")
    if type(schema) is not str or schema not in _ADDED:
        raise _invalid(
            f"expected host evidence schema {COUNTERS_SCHEMA!r} (or {COUNTERS_SCHEMA_02!r}, "
            f"{COUNTERS_SCHEMA_01!r}), found {schema!r}"
        )
    added = _ADDED[schema]
    for member in _VERSIONED:
        if (member in added) != (member in obj):
            want = "with" if member in added else "without"
            raise _invalid(f"expected a {schema} record {want} member {member!r}")
    if "changed" in obj and obj["changed"] is None:
        raise _invalid("expected member 'changed' to be an integer, found null")
    try:
        counters = Counters.model_validate(obj)
    except ValidationError as exc:
        raise _invalid(f"counters record: {describe_validation(exc, 'counters')}") from None
    if schema == COUNTERS_SCHEMA:
        _check_consistent(counters)
    return counters


def _check_consistent(c: Counters) -> None:
    """0.3: the counts add up as the observer counts them (each call exactly one outcome; a
    changed decision is a selection; a newest time exactly when there was one, the newest
    selection no later than the newest dispatch). Older records are taken as they are."""
    problems = []
    if c.selections + c.abstentions + c.failures != c.calls:
        problems.append(
            f"selections + abstentions + failures = "
            f"{c.selections + c.abstentions + c.failures}, calls = {c.calls}"
        )
    if c.changed is not None and c.changed > c.selections:
        problems.append(f"changed {c.changed} > selections {c.selections}")
    if (c.last_dispatch_at is None) != (c.calls == 0):
        problems.append(f"last_dispatch_at {c.last_dispatch_at} with {c.calls} calls")
    if (c.last_selection_at is None) != (c.selections == 0):
        problems.append(f"last_selection_at {c.last_selection_at} with {c.selections} selections")
    if (
        c.last_selection_at is not None
        and c.last_dispatch_at is not None
        and c.last_selection_at > c.last_dispatch_at
    ):
        problems.append(
            f"last_selection_at {c.last_selection_at} after last_dispatch_at {c.last_dispatch_at}"
        )
    if problems:
        raise _invalid(f"expected consistent {COUNTERS_SCHEMA} counts, found {'; '.join(problems)}")
