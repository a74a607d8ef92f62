"""The shipping transaction of the evidence store (:meth:`EvidenceStore.ship_logs
<ecpa.runtime.stores.store.EvidenceStore.ship_logs>`): the new lines of several logs of a
launch stored, and their positions moved, in one transaction of six statements whatever
the number of logs or lines (a fleet's shipper follows hundreds of logs, each a line or two
a pass: docs/scale.md)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ecpa.errors import EcpaError, ErrorCode

if TYPE_CHECKING:
    import psycopg

__all__ = ["Part", "Position", "ship_parts"]


@dataclass(frozen=True)
class Position:
    """How far a log is shipped: the file (device, inode), the offset after its last
    stored line, and the SHA-256 of the bytes before that offset
    (:data:`~ecpa.runtime.stores.store.ANCHOR_BYTES` of them at most)."""

    dev: int
    ino: int
    end: int
    anchor: bytes = hashlib.sha256(b"").digest()


@dataclass(frozen=True)
class Part:
    """One log's share of a batch: its lines (offset, bytes, and the SHA-256 of the nonce
    each claims, or None), shipped from ``at`` to ``to``."""

    source: str
    at: Position
    lines: list[tuple[int, bytes, bytes | None]]
    to: Position


# Arrays go in binary (``%b``): text arrays in text form cost a regular expression per
# element to escape, most of a batch's time in this process.
_CLAIM_POSITIONS = (
    "INSERT INTO ecpa_ship_position (launch_id, source, dev, ino, end_offset, anchor)"
    " SELECT %s, s, d, i, 0, %s FROM unnest(%b::text[], %b::bigint[], %b::bigint[])"
    " AS t(s, d, i) ORDER BY s ON CONFLICT (launch_id, source) DO NOTHING"
)
_LOCK_POSITIONS = (
    "SELECT source, dev, ino, end_offset, anchor FROM ecpa_ship_position"
    " WHERE launch_id = %s AND source = ANY(%s) ORDER BY source FOR UPDATE"
)
#: The lines in order (the first line of a nonce claims it), each stored with its nonce
#: unless that nonce is stored already, by any launch, committed or (waited for) about to
#: be: no conflict target, so that a nonce taken is a row not stored, never an error.
_INSERT_LINES = (
    "INSERT INTO ecpa_evidence"
    " (launch_day, launch_id, source, file_offset, line, nonce_sha256, claimed_sha256)"
    " SELECT %s, %s, s, o, l, k, k FROM unnest(%b::text[], %b::bigint[], %b::bytea[],"
    " %b::bytea[])"
    " WITH ORDINALITY AS t(s, o, l, k, n) ORDER BY n"
    " ON CONFLICT DO NOTHING RETURNING source, file_offset"
)
#: The lines not stored for their nonce: kept without it (a replay's bytes are still the
#: log's), skipped when their offset is stored already.
_INSERT_REPLAYS = (
    "INSERT INTO ecpa_evidence"
    " (launch_day, launch_id, source, file_offset, line, nonce_sha256, claimed_sha256)"
    " SELECT %s, %s, s, o, l, NULL, k FROM unnest(%b::text[], %b::bigint[], %b::bytea[],"
    " %b::bytea[]) AS t(s, o, l, k)"
    " ON CONFLICT (launch_id, source, file_offset, launch_day) DO NOTHING RETURNING source"
)
_MOVE_POSITIONS = (
    "UPDATE ecpa_ship_position p SET dev = t.d, ino = t.i, end_offset = t.e, anchor = t.a"
    " FROM unnest(%b::text[], %b::bigint[], %b::bigint[], %b::bigint[], %b::bytea[])"
    " AS t(s, d, i, e, a) WHERE p.launch_id = %s AND p.source = t.s"
)


def _columns(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    return [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]


def ship_parts(
    conn: psycopg.Connection[Any], launch_id: str, parts: list[Part]
) -> list[int | None]:
    """Inside the caller's transaction: store ``parts`` of ``launch_id``; per part, how many
    lines were stored, or None when its position was no longer its ``at`` (another shipper
    moved it: nothing of that part is stored)."""
    first = Position(0, 0, 0).anchor
    claim = _columns([(p.source, p.at.dev, p.at.ino) for p in parts], 3)
    # The rows first (a second shipper waits here for the first's commit), then locked in
    # one order (never a cycle between two shippers of one launch): two shippers never both
    # start from one position.
    conn.execute(_CLAIM_POSITIONS, (launch_id, first, *claim))
    found = {
        str(r[0]): Position(int(r[1]), int(r[2]), int(r[3]), bytes(r[4]))
        for r in conn.execute(_LOCK_POSITIONS, (launch_id, claim[0])).fetchall()
    }
    fresh = [p for p in parts if found.get(p.source) == p.at]
    fresh_sources = {p.source for p in fresh}
    counts: dict[str, int] = {p.source: 0 for p in fresh}
    rows = [(p.source, *line) for p in fresh for line in p.lines]
    if rows:
        # The launch's day, its partition: a launch's lines only after the launch itself
        # (claimed by this shipper: row level security shows it no other).
        day = conn.execute(
            "SELECT day FROM ecpa_launch WHERE launch_id = %s", (launch_id,)
        ).fetchone()
        if day is None:
            raise EcpaError(
                ErrorCode.EVIDENCE_STORE,
                f"expected launch {launch_id!r} stored before its lines, found none",
            )
        done = {
            (str(r[0]), int(r[1]))
            for r in conn.execute(_INSERT_LINES, (day[0], launch_id, *_columns(rows, 4))).fetchall()
        }
        for source, _ in done:
            counts[source] += 1
        replays = [r for r in rows if r[3] is not None and (r[0], r[1]) not in done]
        if replays:
            again = conn.execute(_INSERT_REPLAYS, (day[0], launch_id, *_columns(replays, 4)))
            for r in again.fetchall():
                counts[str(r[0])] += 1
    if fresh:
        moved = [(p.source, p.to.dev, p.to.ino, p.to.end, p.to.anchor) for p in fresh]
        conn.execute(_MOVE_POSITIONS, (*_columns(moved, 5), launch_id))
    return [counts[p.source] if p.source in fresh_sources else None for p in parts]
