"""``ecpa store prune``: drop whole days of the evidence store, the partitions of launches
that are over (docs/scale.md "Partitions").

A day's partition (``ecpa_evidence_YYYYMMDD``) holds every line of the launches first
stored that day, so an audit of a launch finds all its lines or none. A day is dropped
only if it ends before ``before`` and each of its launches was over before ``before``: its
``exit.json`` stored with an ``ended_at`` before then, or its supervisor last seen gone by
``ecpa ship`` before then. Otherwise the day is kept, and the result names the launches
that keep it. A dropped day takes its launches' rows with it (the launch, the positions,
this role's checkpoints), in one transaction with the partition's ``DROP``.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.json.strict_json import parse_object
from ecpa.runtime.stores.store import EvidenceStore
from ecpa.runtime.stores.store_schema import (
    DEFAULT_PARTITION,
    PARTITION_PREFIX,
    make_partitions_ahead,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PrunedDay", "prune_store"]


@dataclass(frozen=True)
class PrunedDay:
    """One day of the store before ``before``: dropped (or, a dry run, to be), or kept and
    why; its launches and lines."""

    day: str
    partition: str
    dropped: bool
    launches: tuple[str, ...]
    lines: int
    reason: str


def prune_store(dsn: str, before: int, *, dry_run: bool = False) -> list[PrunedDay]:
    """Drop the days of the store at ``dsn`` that end before ``before`` (Unix seconds) and
    whose launches were all over before then (see the module's text); every day before
    ``before``, dropped or kept, in order.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a ``before`` after the database server's
            clock; ``ECPA_EVIDENCE_STORE`` when the store cannot be used, or the role may
            not drop its partitions (only their owner, ``ecpa store init``'s manager, may).
    """
    results = []
    with EvidenceStore(dsn, create=False) as store:
        now = store.server_now()
        if before > now:
            raise EcpaError(
                ErrorCode.INVALID_INPUT,
                f"expected --before at or before the database server's clock ({now}), found "
                f"{before}: a day still being written is never pruned",
            )
        for day, partition in _days(store):
            if _end(day) > before:
                continue
            with store.transaction() as conn:
                results.append(_prune_day(conn, partition, day, before, dry_run))
        if not dry_run:  # the days to come, made ahead (a shipper cannot make one)
            with store.transaction() as conn:
                make_partitions_ahead(conn)
    return results


def _end(day: datetime.date) -> int:
    """The Unix second the UTC day ``day`` ends."""
    start = datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.timezone.utc)
    return int((start + datetime.timedelta(days=1)).timestamp())


def _days(store: EvidenceStore) -> list[tuple[datetime.date, str | None]]:
    """Every day the store holds, with its partition (None: its lines, if any, are in the
    default partition), in order."""
    rows = store.query(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'ecpa_evidence'::regclass"
    )
    found: dict[datetime.date, str | None] = {}
    for (name,) in rows:
        try:
            day = datetime.datetime.strptime(
                str(name).removeprefix(PARTITION_PREFIX), "%Y%m%d"
            ).date()
        except ValueError:
            continue  # the default partition, or not one of ours: never dropped
        found[day] = str(name)
    others = store.query(  # DEFAULT_PARTITION, by name
        "SELECT day FROM ecpa_launch UNION SELECT launch_day FROM ecpa_evidence_default"
    )
    for (day,) in others:
        found.setdefault(day, None)
    return sorted(found.items())


def _over(exit_doc: bytes | None, alive: bool | None, checked: int | None, before: int) -> str:
    """Why a launch is not over before ``before``, or "" when it is."""
    if exit_doc is not None:
        try:
            ended = parse_object(bytes(exit_doc), what="exit.json").get("ended_at")
        except EcpaError:
            ended = None
        if type(ended) is int and ended < before:
            return ""
        return f"its exit.json says it ended at {ended!r}, not before {before}"
    if alive is False and checked is not None and checked < before:
        return ""
    return "it has not ended (no exit.json stored, its supervisor not seen gone)"


def _prune_day(
    conn: psycopg.Connection[Any], partition: str | None, day: datetime.date, before: int, dry: bool
) -> PrunedDay:
    from psycopg import sql

    rows = conn.execute(
        "SELECT launch_id, exit_doc, supervisor_alive, supervisor_checked_at FROM ecpa_launch"
        " WHERE day = %s ORDER BY launch_id FOR UPDATE",
        (day,),
    ).fetchall()
    stray = conn.execute(  # lines of no stored launch: nothing to audit
        "SELECT DISTINCT launch_id FROM ecpa_evidence WHERE launch_day = %s"
        " EXCEPT SELECT launch_id FROM ecpa_launch",
        (day,),
    ).fetchall()
    launches = tuple(sorted({str(r[0]) for r in rows} | {str(r[0]) for r in stray}))
    count = conn.execute(
        "SELECT count(*) FROM ecpa_evidence WHERE launch_day = %s", (day,)
    ).fetchone()
    lines = 0 if count is None else int(count[0])
    where = partition or DEFAULT_PARTITION
    keep = [(str(r[0]), why) for r in rows if (why := _over(r[1], r[2], r[3], before))]
    if keep:
        said = "; ".join(f"launch {lid}: {why}" for lid, why in keep[:5])
        more = f" (and {len(keep) - 5} more)" if len(keep) > 5 else ""
        reason = f"kept: an audit of a launch not over needs its lines: {said}{more}"
        return PrunedDay(day.isoformat(), where, False, launches, lines, reason)
    if not dry:
        ids = list(launches)
        for statement in (
            "DELETE FROM ecpa_ship_position WHERE launch_id = ANY(%s)",
            "DELETE FROM ecpa_reader_checkpoint WHERE launch_id = ANY(%s)",
            "DELETE FROM ecpa_status_checkpoint WHERE launch_id = ANY(%s)",
            "DELETE FROM ecpa_launch WHERE launch_id = ANY(%s)",
        ):
            conn.execute(statement, (ids,))
        if partition is not None:  # a catalog operation
            conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(partition)))
        else:  # a day without a partition of its own: its rows in the default one
            conn.execute("DELETE FROM ecpa_evidence WHERE launch_day = %s", (day,))
    how = "to be dropped (dry run)" if dry else "dropped"
    return PrunedDay(day.isoformat(), where, True, launches, lines, how)
