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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecpa._files import read_bounded
from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.runtime.host.status import status_from_launch_dir
from ecpa.runtime.judge.certified import MEMO_KEYS
from ecpa.runtime.judge.memo import Memo, digest
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
    "Listing",
    "Skipped",
    "judge_launches",
    "list_launches",
    "list_source",
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
        _started_at(launch_doc),
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


@dataclass(frozen=True)
class Listing:
    """One source's launches as listed (:func:`list_source`): the first ``limit`` names (a
    directory's in name order, the store's in its order), the entries that are not launches,
    and the notes of what was cut."""

    names: tuple[str, ...]
    skipped: tuple[Skipped, ...]
    notes: tuple[str, ...]


def list_source(
    directory: Path | None,
    dsn: str | None,
    *,
    limit: int = MAX_LAUNCHES,
    max_entries: int = MAX_ENTRIES,
) -> Listing:
    """The launches of one source, ``directory`` or else the store at ``dsn``, as
    :func:`judge_launches` lists them before judging them.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a directory that cannot be listed or not
            exactly one source; ``ECPA_EVIDENCE_STORE`` for a store that cannot be used.
    """
    if (directory is None) == (dsn is None):
        raise invalid_input("expected one source: an evidence directory or a store")
    if directory is not None:
        names, skipped, notes = _names(directory, max_entries)
        if len(names) > limit:
            notes.append(f"{directory}: judged the first {limit:,} of {len(names):,} launches")
        return Listing(tuple(names[:limit]), tuple(skipped), tuple(notes))
    assert dsn is not None
    with EvidenceStore(dsn, create=False) as store:
        ids = store.launch_ids(limit + 1)
        cut = [f"{store.where}: judged the first {limit:,} launches"] if len(ids) > limit else []
    return Listing(tuple(ids[:limit]), (), tuple(cut))


def _from_dir(
    directory: Path,
    names: Sequence[str],
    *,
    now: int | None,
    clock: Callable[[], float],
    proc_root: Path,
    host: str | None,
    operator: OperatorTrust,
) -> tuple[list[Judged], list[Skipped]]:
    found: list[Judged] = []
    skipped: list[Skipped] = []
    for name in names:
        if not LAUNCH_DIR_NAME.fullmatch(name):  # names given: never a path
            raise invalid_input(f"expected a launch name launch-<16 hex>, found {name!r}")
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
    return found, skipped


#: Each ``launch.json``'s ``started_at`` by its SHA-256 (a judging process of ``ecpa serve``
#: lists the same launches every refresh; the whole file is parsed to read it).
_STARTED: Memo[bytes, tuple[int | None]] = Memo("launch start times", MEMO_KEYS)


def _started_at(launch_doc: bytes) -> int | None:
    key = digest(launch_doc)
    found = _STARTED.get(key)
    if found is None:
        found = _STARTED.put(key, (time_member(launch_doc, "started_at", "launch.json"),))
    return found[0]


def _from_store(
    dsn: str, ids: Sequence[str], *, now: int | None, operator: OperatorTrust
) -> tuple[list[Judged], list[Skipped]]:
    with EvidenceStore(dsn, create=False) as store:
        where = store.where
        found: list[Judged] = []
        skipped: list[Skipped] = []
        for launch_id in ids:
            started = time.perf_counter()
            try:
                # Read once, at its turn (ecpa ship changes its end, trust and supervisor):
                # its launch.json is the one judged.
                row = store.launch(launch_id)
                status = status_from_store(
                    dsn,
                    launch_id,
                    now=now,
                    save_checkpoints=now is None,
                    operator=operator,
                    store=store,  # one connection for the source, as status --all
                    row=row,
                )
            except EcpaError as exc:
                if store.transient:  # the store itself failed: no other launch can be judged
                    raise
                skipped.append(Skipped(where, launch_id, f"{exc.code.value}: {exc.detail}"))
                continue
            doc = b"" if row is None else row.launch_doc
            found.append(_judged(status, launch_id, where, doc, time.perf_counter() - started))
    return found, skipped


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
    names: Sequence[str] | None = None,
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

    ``names``: judge exactly these launches of the one source given, in this order, without
    listing it (a part of a :func:`list_source` listing; :func:`merge_parts`).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for an evidence directory that cannot be listed,
            or ``names`` with other than one source or a name that is not a launch's;
            ``ECPA_EVIDENCE_STORE`` for a store that cannot be used;
            ``ATTESTATION_TRUST_STORE_CONFIG`` for an operator's trust store named but unusable.
    """
    if names is not None and len(evidence_dirs) + (dsn is not None) != 1:
        raise invalid_input("expected one source for the launches named, found another number")
    operator = operator_trust(trust)
    judged: list[Judged] = []
    skipped: list[Skipped] = []
    notes: list[str] = []
    for directory in evidence_dirs:
        listing = (
            Listing(tuple(names), (), ())
            if names is not None
            else list_source(directory, None, limit=limit, max_entries=max_entries)
        )
        found, failed = _from_dir(
            directory,
            listing.names,
            now=now,
            clock=clock,
            proc_root=proc_root,
            host=host,
            operator=operator,
        )
        judged += found
        skipped += [*listing.skipped, *failed]
        notes += listing.notes
    if dsn is not None:
        listing = (
            Listing(tuple(names), (), ())
            if names is not None
            else list_source(None, dsn, limit=limit)
        )
        found, failed = _from_store(dsn, listing.names, now=now, operator=operator)
        judged += found
        skipped += failed
        notes += listing.notes
    return JudgedList(tuple(judged), tuple(skipped), tuple(notes))


def merge_parts(listing: Listing, lists: Sequence[JudgedList]) -> JudgedList:
    """One source's answer from its ``listing`` and the answers of :func:`judge_launches`
    for parts of its names (``names=``, each name in one part): what one call gives, the
    launches and those that could not be judged in the listing's order, after the entries
    the listing skipped, and its notes."""
    order = {name: position for position, name in enumerate(listing.names)}
    judged = sorted(
        (j for found in lists for j in found.judged), key=lambda j: order[j.summary.launch_id]
    )
    failed = sorted((e for found in lists for e in found.skipped), key=lambda e: order[e.name])
    return JudgedList(tuple(judged), (*listing.skipped, *failed), listing.notes)


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
