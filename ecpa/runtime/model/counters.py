"""The dispatch counters record (RUNTIME.md "Evidence record"; "Round 3"): the raw host
evidence an observer signs beside each statement, defined once. The observer builds a
:class:`Counters` and writes :meth:`Counters.to_bytes`; a reader gets the same class back from
:func:`parse_counters`, which checks it strictly.

Schemas: ``ecpa-dispatch-counters/0.4`` (written) adds ``host``: what the vLLM-HUST host
witnessed in the process (:class:`HostCounts`, docs/host-evidence.md), or null when its
evidence sink got nothing; ``0.3`` carries ``last_dispatch_at``, ``last_selection_at`` (each
an integer or null) and ``changed`` (an integer); 0.2 only ``last_dispatch_at``; 0.1 none of
them. A record holds exactly its schema's members.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.json.jcs import canonicalize
from ecpa.profile.json.strict_json import parse_object
from ecpa.shapes.rules import COUNT, TEXT, Flag, Text
from ecpa.shapes.shape import Nested, Shaped, ShapeError, member

__all__ = [
    "COUNTERS_SCHEMA",
    "COUNTERS_SCHEMA_01",
    "COUNTERS_SCHEMA_02",
    "COUNTERS_SCHEMA_03",
    "DIGEST_PATTERN",
    "Counters",
    "CountersProcess",
    "HostCounts",
    "parse_counters",
]

COUNTERS_SCHEMA = "ecpa-dispatch-counters/0.4"
COUNTERS_SCHEMA_03 = "ecpa-dispatch-counters/0.3"
COUNTERS_SCHEMA_02 = "ecpa-dispatch-counters/0.2"
COUNTERS_SCHEMA_01 = "ecpa-dispatch-counters/0.1"
_ROUND3 = ("last_dispatch_at", "changed", "last_selection_at")
#: The members each schema has beyond the 0.1 ones.
_ADDED = {
    COUNTERS_SCHEMA_01: (),
    COUNTERS_SCHEMA_02: ("last_dispatch_at",),
    COUNTERS_SCHEMA_03: _ROUND3,
    COUNTERS_SCHEMA: (*_ROUND3, "host"),
}
_VERSIONED = (*_ROUND3, "host")
#: ``sha256:`` and 64 lowercase hex digits.
DIGEST_PATTERN = "^sha256:[0-9a-f]{64}$"
_DIGEST = Text(pattern=DIGEST_PATTERN)


def _invalid(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.INVALID_RECORD, detail)


class CountersProcess(Shaped):
    """The process the counts are of."""

    host: str = member(TEXT)
    pid: int = member(COUNT)
    start_ticks: int = member(COUNT)
    boot_id: str = member(TEXT)


class HostCounts(Shaped):
    """What the host witnessed in the process, as its journal accounts for it
    (docs/host-evidence.md): the journal's lines and the chain over their exact bytes, the
    policy its controller resolved, the dispatches by outcome, and what the sink refused
    or could not take."""

    #: Lines of the process's host journal this record accounts for, and the chain over
    #: them (``sha256:`` of 32 zero bytes for none; see ``ecpa.runtime.model.host_journal``).
    journal_lines: int = member(COUNT)
    journal_chain: str = member(_DIGEST)
    #: ``sha256:`` of the newest line accounted for (its bytes without the newline).
    newest_event_digest: str | None = member(_DIGEST, nullable=True)
    #: The policy the host's controller resolved (``module.Class``), or null.
    policy: str | None = member(TEXT, nullable=True)
    resolutions: int = member(COUNT)
    selected: int = member(COUNT)
    abstained: int = member(COUNT)
    invalid: int = member(COUNT)
    exception: int = member(COUNT)
    #: Loader lifecycle events of this process (journaled, not dispatches).
    lifecycle: int = member(COUNT)
    #: The Unix second of the newest dispatch and of the newest selected one (host clock).
    last_dispatch_at: int | None = member(COUNT, nullable=True)
    last_selection_at: int | None = member(COUNT, nullable=True)
    #: Events refused (recorded with their code, never counted), and of them those that said
    #: they were a resolution or a dispatch.
    refused: int = member(COUNT)
    refused_scheduler: int = member(COUNT)
    #: Events the sink could not take (it raised: a strict host then delivers no more).
    lost: int = member(COUNT)
    #: The process's last record: nothing may follow these lines in its journal.
    final: bool = member(Flag())

    @property
    def dispatches(self) -> int:
        """Every dispatch witnessed, whatever its outcome."""
        return self.selected + self.abstained + self.invalid + self.exception

    def check_whole(self) -> str | None:
        problems = []
        accounted = self.resolutions + self.dispatches + self.lifecycle
        if accounted != self.journal_lines:
            problems.append(f"journal_lines {self.journal_lines}, events counted {accounted}")
        if (self.newest_event_digest is None) != (self.journal_lines == 0):
            problems.append(f"newest_event_digest with {self.journal_lines} lines")
        if (self.policy is None) != (self.resolutions == 0):
            problems.append(f"policy {self.policy!r} with {self.resolutions} resolutions")
        if (self.last_dispatch_at is None) != (self.dispatches == 0):
            problems.append(f"last_dispatch_at with {self.dispatches} dispatches")
        if (self.last_selection_at is None) != (self.selected == 0):
            problems.append(f"last_selection_at with {self.selected} selected")
        if self.refused_scheduler > self.refused:
            problems.append(f"refused_scheduler {self.refused_scheduler} > refused {self.refused}")
        last, selection = self.last_dispatch_at, self.last_selection_at
        if last is not None and selection is not None and selection > last:
            problems.append(f"last_selection_at {selection} after last_dispatch_at {last}")
        return "; ".join(problems) or None


class Counters(Shaped):
    """One counters record: the dispatches of one process's plugin over a window, with the
    newest times (RUNTIME.md "Evidence record"). ``schema`` says which members it has."""

    schema_: str = member(TEXT, wire="schema")
    plugin_id: str = member(TEXT)
    seq: int = member(COUNT)
    process: CountersProcess = member(Nested(CountersProcess))
    calls: int = member(COUNT)
    selections: int = member(COUNT)
    abstentions: int = member(COUNT)
    failures: int = member(COUNT)
    dropped: int = member(COUNT)
    window_start: int = member(COUNT)
    window_end: int = member(COUNT)
    last_dispatch_at: int | None = member(COUNT, default=None, nullable=True)
    changed: int | None = member(COUNT, default=None, nullable=True)
    last_selection_at: int | None = member(COUNT, default=None, nullable=True)
    host: HostCounts | None = member(Nested(HostCounts), default=None, nullable=True)

    def to_dict(self, *, omit_none: bool = False) -> dict[str, Any]:
        """The record as its JSON members: exactly those of its schema (null where a
        member of its schema is None; ``omit_none`` is for the shapes' signature only)."""
        doc = super().to_dict()
        for name in _VERSIONED:
            if name not in _ADDED.get(self.schema_, ()):
                del doc[name]
        return doc

    @cached_property
    def document(self) -> dict[str, Any]:
        """:meth:`to_dict`, made once (read only: a status and its slots report it, and a
        remembered record is reported again every refresh of ``ecpa serve``)."""
        return self.to_dict()

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
            f"expected host evidence schema {COUNTERS_SCHEMA!r} (or {COUNTERS_SCHEMA_03!r}, "
            f"{COUNTERS_SCHEMA_02!r}, {COUNTERS_SCHEMA_01!r}), found {schema!r}"
        )
    added = _ADDED[schema]
    for name in _VERSIONED:
        if (name in added) != (name in obj):
            want = "with" if name in added else "without"
            raise _invalid(f"expected a {schema} record {want} member {name!r}")
    if "changed" in obj and obj["changed"] is None:
        raise _invalid("expected member 'changed' to be an integer, found null")
    try:
        counters = Counters.from_dict(obj, "counters")
    except ShapeError as exc:
        raise _invalid(f"counters record: {exc}") from None
    if schema in (COUNTERS_SCHEMA, COUNTERS_SCHEMA_03):
        _check_consistent(counters)
    return counters


def _check_consistent(c: Counters) -> None:
    """0.3 and 0.4: the counts add up as the observer counts them (each call exactly one outcome; a
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
        raise _invalid(f"expected consistent {c.schema_} counts, found {'; '.join(problems)}")
