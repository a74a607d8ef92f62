"""The launches an evidence directory and an evidence store hold, each with its verdict
(``ecpa launches``): the directory names are checked (``launch-`` and 16 hex digits) before
any path is built from them, entries that are no launch or cannot be judged are skipped and
reported, and the work is bounded: at most ``max_entries`` directory entries are read and
at most ``limit`` launches judged per source, and the answer says when a cap was hit.

Each launch is judged by :func:`~ecpa.runtime.host.status.status_from_launch_dir` or
:func:`~ecpa.runtime.stores.remote.status_from_store`, exactly as ``ecpa status`` judges it.
"""

from __future__ import annotations

import os
import re
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecpa._files import read_bounded
from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.runtime.host.status import status_from_launch_dir
from ecpa.runtime.judge.reasons import ReasonCode
from ecpa.runtime.judge.verdict import RuntimeStatus
from ecpa.runtime.model.launch import MAX_LAUNCH_FILE_BYTES, time_member
from ecpa.runtime.model.process import PROC
from ecpa.runtime.stores.operator import OperatorTrust, operator_trust
from ecpa.runtime.stores.remote import status_from_store
from ecpa.runtime.stores.store import EvidenceStore

__all__ = [
    "LAUNCH_DIR_NAME",
    "MAX_ENTRIES",
    "MAX_LAUNCHES",
    "Judged",
    "JudgedList",
    "LaunchList",
    "LaunchSummary",
    "Skipped",
    "in_part",
    "judge_launches",
    "list_launches",
    "merge_parts",
]

#: The name ``ecpa run`` gives a launch directory (and its launch id).
LAUNCH_DIR_NAME = re.compile(r"launch-[0-9a-f]{16}")
#: Directory entries read at most per evidence directory.
MAX_ENTRIES = 10_000
#: Launches judged at most per source, by default.
MAX_LAUNCHES = 100


@dataclass(frozen=True)
class LaunchSummary:
    """One launch and its verdict now."""

    launch_id: str
    #: The evidence directory it is in, or the store (host, port, database).
    source: str
    effective: bool
    #: How it ended (the ``launch_ended`` reason's text); None: not ended.
    ended: str | None
    covered: int
    slots: int
    #: ``started_at`` of its ``launch.json`` (None: not there, or not an integer).
    started_at: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "launch_id": self.launch_id,
            "source": self.source,
            "runtime_effective": self.effective,
            "ended": self.ended is not None,
            "ended_how": self.ended,
            "coverage": {"covered": self.covered, "slots": self.slots},
            "started_at": self.started_at,
        }


@dataclass(frozen=True)
class Skipped:
    """An entry that is no launch, or a launch that could not be judged, and why."""

    source: str
    name: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "name": self.name, "detail": self.detail}


@dataclass(frozen=True)
class LaunchList:
    launches: tuple[LaunchSummary, ...]
    skipped: tuple[Skipped, ...]
    #: One note per cap that was hit (entries not read, launches not judged).
    truncated: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "launches": [launch.to_dict() for launch in self.launches],
            "skipped": [entry.to_dict() for entry in self.skipped],
            "truncated": list(self.truncated),
        }


@dataclass(frozen=True)
class Judged:
    """One launch as judged: its summary, the whole derivation, and its ``launch.json``
    bytes (empty: the store holds none), for those who show more than the summary."""

    summary: LaunchSummary
    status: RuntimeStatus
    launch_doc: bytes
    #: Seconds the derivation took (reading included).
    took_s: float = 0.0


@dataclass(frozen=True)
class JudgedList:
    """:func:`judge_launches`'s answer: every launch judged, and what was not."""

    judged: tuple[Judged, ...]
    skipped: tuple[Skipped, ...]
    truncated: tuple[str, ...]

    def summaries(self) -> LaunchList:
        return LaunchList(tuple(j.summary for j in self.judged), self.skipped, self.truncated)


def _judged(
    status: RuntimeStatus, launch_id: str, source: str, launch_doc: bytes, took_s: float
) -> Judged:
    ended = next((r.text for r in status.reasons if r.code is ReasonCode.LAUNCH_ENDED), None)
    summary = LaunchSummary(
        launch_id,
        source,
        status.effective,
        ended,
        sum(slot.covered for slot in status.slots),
        len(status.slots),
        time_member(launch_doc, "started_at", "launch.json"),
    )
    return Judged(summary, status, launch_doc, took_s)


def _names(directory: Path, max_entries: int) -> tuple[list[str], list[Skipped], list[str]]:
    """The launch directory names in ``directory`` (at most ``max_entries`` entries read),
    the entries skipped, and a note if the cap was hit."""
    source = str(directory)
    names: list[str] = []
    skipped: list[Skipped] = []
    notes: list[str] = []
    try:
        with os.scandir(directory) as entries:
            for count, entry in enumerate(entries):
                if count >= max_entries:
                    notes.append(
                        f"{source}: stopped after reading {max_entries:,} entries "
                        "(the rest not listed)"
                    )
                    break
                if not LAUNCH_DIR_NAME.fullmatch(entry.name):
                    skipped.append(Skipped(source, entry.name, "not a launch (launch-<16 hex>)"))
                elif not entry.is_dir(follow_symlinks=False):
                    skipped.append(Skipped(source, entry.name, "not a directory"))
                else:
                    names.append(entry.name)
    except OSError as exc:
        raise invalid_input(
            f"expected an evidence directory at {directory}, found {exc.strerror or exc}"
        ) from None
    return sorted(names), sorted(skipped, key=lambda entry: entry.name), notes


def _from_dir(
    directory: Path,
    *,
    now: int | None,
    clock: Callable[[], float],
    limit: int,
    max_entries: int,
    proc_root: Path,
    host: str | None,
    operator: OperatorTrust,
    part: tuple[int, int],
) -> tuple[list[Judged], list[Skipped], list[str]]:
    names, skipped, notes = _names(directory, max_entries)
    if len(names) > limit:
        notes.append(f"{directory}: judged the first {limit:,} of {len(names):,} launches")
    if part[0] != 0:
        skipped, notes = [], []  # said by part 0
    found: list[Judged] = []
    for name in names[:limit]:
        if not in_part(name, part):
            continue
        launch = directory / name  # the name is launch-<16 hex>: no separator, no "..".
        started = time.perf_counter()
        try:
            status = status_from_launch_dir(
                launch,
                now=int(clock()) if now is None else now,
                proc_root=proc_root,
                host=host,
                save_checkpoints=now is None,  # a time of the caller's: leave them alone
                operator=operator,
            )
            doc = read_bounded(
                launch / "launch.json", MAX_LAUNCH_FILE_BYTES, ErrorCode.INVALID_INPUT
            )
        except EcpaError as exc:
            skipped.append(Skipped(str(directory), name, f"{exc.code.value}: {exc.detail}"))
            continue
        found.append(_judged(status, name, str(directory), doc, time.perf_counter() - started))
    return found, sorted(skipped, key=lambda entry: entry.name), notes


def _from_store(
    dsn: str, *, now: int | None, limit: int, operator: OperatorTrust, part: tuple[int, int]
) -> tuple[list[Judged], list[Skipped], list[str]]:
    with EvidenceStore(dsn, create=False) as store:
        where = store.where
        ids = store.launch_ids(limit + 1)
        cut = len(ids) > limit and part[0] == 0
        notes = [f"{where}: judged the first {limit:,} launches"] if cut else []
        found: list[Judged] = []
        skipped: list[Skipped] = []
        for launch_id in ids[:limit]:
            if not in_part(launch_id, part):
                continue
            started = time.perf_counter()
            try:
                status = status_from_store(
                    dsn, launch_id, now=now, save_checkpoints=now is None, operator=operator
                )
                row = store.launch(launch_id)
            except EcpaError as exc:
                skipped.append(Skipped(where, launch_id, f"{exc.code.value}: {exc.detail}"))
                continue
            doc = b"" if row is None else row.launch_doc
            found.append(_judged(status, launch_id, where, doc, time.perf_counter() - started))
    return found, skipped, notes


def judge_launches(
    evidence_dirs: Sequence[Path] = (),
    dsn: str | None = None,
    *,
    now: int | None = None,
    clock: Callable[[], float] = time.time,
    limit: int = MAX_LAUNCHES,
    max_entries: int = MAX_ENTRIES,
    proc_root: Path = PROC,
    host: str | None = None,
    trust: Path | None = None,
    part: tuple[int, int] = (0, 1),
) -> JudgedList:
    """The launches in each of ``evidence_dirs`` and in the evidence store at ``dsn``, each
    with its whole derivation, and what was skipped and why; ``proc_root`` is where the
    directories' processes are looked up, ``host`` the name of this host (None: its own),
    ``trust`` the operator's trust store (None: :func:`operator_trust`'s), read once.

    With ``now`` None, each launch is judged when its turn comes: a directory's at
    ``clock()`` read then, the store's by the database server's clock, and the history
    checkpoints are saved as ``ecpa status`` saves them. With ``now``, every launch is
    judged at that time and no checkpoint is saved (a time that is not the present must
    not stand in for it: judged at a refresh's start, a launch reached seconds later saw its
    newest records as not yet valid, and the refusal was kept).

    ``part`` ``(i, n)``: judge only the launches :func:`in_part` puts in part ``i`` of ``n``
    (of the same ``limit`` first launches), and say what was skipped and cut only in part 0,
    so that ``n`` calls, one a part, together give one call's answer (:func:`merge_parts`).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for an evidence directory that cannot be listed,
            or a ``part`` that is not ``(i, n)`` with ``0 <= i < n``;
            ``ECPA_EVIDENCE_STORE`` for a store that cannot be used;
            ``ATTESTATION_TRUST_STORE_CONFIG`` for an operator's trust store named but unusable.
    """
    index, parts = part
    if not 0 <= index < parts:
        raise invalid_input(f"expected a part (i, n) with 0 <= i < n, found {part}")
    operator = operator_trust(trust)
    judged: list[Judged] = []
    skipped: list[Skipped] = []
    notes: list[str] = []
    for directory in evidence_dirs:
        found, passed, capped = _from_dir(
            directory,
            now=now,
            clock=clock,
            limit=limit,
            max_entries=max_entries,
            proc_root=proc_root,
            host=host,
            operator=operator,
            part=part,
        )
        judged += found
        skipped += passed
        notes += capped
    if dsn is not None:
        found, passed, capped = _from_store(dsn, now=now, limit=limit, operator=operator, part=part)
        judged += found
        skipped += passed
        notes += capped
    return JudgedList(tuple(judged), tuple(skipped), tuple(notes))


def in_part(launch_id: str, part: tuple[int, int]) -> bool:
    """Whether launch ``launch_id`` is in part ``i`` of ``n`` (``part``): by the CRC-32 of
    its name, so a launch stays in its part from one call to the next, whatever the others."""
    index, parts = part
    return parts == 1 or zlib.crc32(launch_id.encode()) % parts == index


def merge_parts(lists: Sequence[JudgedList]) -> JudgedList:
    """The answers of :func:`judge_launches` for parts ``(0, n)`` .. ``(n-1, n)`` of one
    source (one directory, or the store), in that order, as one call's: the launches and
    what was skipped each in name order (as one call lists them), what was cut as part 0
    said."""
    if len(lists) == 1:
        return lists[0]
    judged = sorted((j for found in lists for j in found.judged), key=lambda j: j.summary.launch_id)
    skipped = sorted((e for found in lists for e in found.skipped), key=lambda e: e.name)
    return JudgedList(tuple(judged), tuple(skipped), lists[0].truncated)


def list_launches(
    evidence_dirs: Sequence[Path] = (),
    dsn: str | None = None,
    *,
    now: int | None = None,
    limit: int = MAX_LAUNCHES,
    max_entries: int = MAX_ENTRIES,
    trust: Path | None = None,
) -> LaunchList:
    """The summaries of :func:`judge_launches` (same arguments, same errors)."""
    return judge_launches(
        evidence_dirs, dsn, now=now, limit=limit, max_entries=max_entries, trust=trust
    ).summaries()
