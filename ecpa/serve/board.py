"""What ``ecpa serve`` serves: one refresher thread judges every launch of its sources once
per interval (:meth:`Board.refresh`) and publishes a :class:`Snapshot`; requests only read
the newest snapshot, never derive. So there is one derivation per launch per refresh,
whatever the number of clients, and each derivation is the incremental one ``ecpa status``
makes (its history checkpoints beside the logs).

With ``apart`` (``ecpa serve`` does), the judging runs in processes of their own
(:mod:`ecpa.serve.judges`: ``judges`` of them, each judging its part of the launches,
started on the first refresh, started again if one dies): the refresher thread only
waits for them and publishes, so requests, which read prerendered bytes, do not share one
interpreter lock with thousands of signature checks a refresh (docs/scale.md "The fleet
verdict": 10,000 slots).

A snapshot never outlives its truth: once it is older than ``stale_after`` seconds (with
``adaptive``, or the interval and twice the newest refresh's duration, if more: the
refresher stuck on a slow store, say), every launch is served as not effective, with a
reason saying the last judgement is too old (:meth:`Board.view`). A source that cannot be
read keeps its launches listed, not effective, with the error as their reason.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ecpa._text import safe
from ecpa.errors import EcpaError
from ecpa.launcher.lifecycle import Manifest, once, status_document
from ecpa.launcher.plan import bundle_manifest
from ecpa.profile.json.strict_json import parse_object
from ecpa.runtime import (
    PROC,
    Judged,
    JudgedList,
    RuntimeStatus,
    describe_dsn,
    judge_launches,
    scrub_dsn,
)
from ecpa.serve.judges import Judges, collector_paused

__all__ = ["VERSION", "Board", "Entry", "Snapshot", "Sources"]


def _version() -> str:
    try:
        return importlib.metadata.version("ecpa")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
        return "unknown"


#: The installed ecpa's version (the package's own facade is the command line's).
VERSION = _version()

_UNREADABLE = "evidence_unreadable"


@dataclass(frozen=True)
class Sources:
    """Where launches are read: evidence directories (``ecpa run --evidence-dir``) and the
    evidence store (a ``postgresql://`` DSN), judged at most ``limit`` launches each."""

    evidence_dirs: tuple[Path, ...] = ()
    dsn: str | None = None
    limit: int = 100
    #: Where the directories' processes are looked up, and this host's name (None: its own).
    proc_root: Path = PROC
    host: str | None = None
    #: The operator's trust store (None: ``$ECPA_TRUST_STORE`` or the default file).
    trust: Path | None = None

    def names(self) -> list[str]:
        """Each source as it may be shown (a DSN by host, port and database only)."""
        found = [str(d) for d in self.evidence_dirs]
        if self.dsn is not None:
            found.append(describe_dsn(self.dsn))
        return found


@dataclass(frozen=True)
class Entry:
    """One launch as last judged."""

    launch_id: str
    source: str
    effective: bool
    ended: bool
    #: ``GET /v1/launches``'s item and ``GET /v1/launches/{id}``'s document.
    summary: dict[str, Any]
    document: dict[str, Any]
    status: RuntimeStatus | None
    #: Monotonic time this board first saw the launch ended (None: it runs).
    ended_seen: float | None = None
    #: Served as not effective whatever ``status`` says (source unreadable, snapshot stale).
    withdrawn: bool = False


@dataclass(frozen=True)
class Snapshot:
    """Every launch as judged by one refresh (in source order), and what was not judged."""

    entries: dict[str, Entry]
    skipped: tuple[dict[str, str], ...]
    truncated: tuple[str, ...]
    #: One per source: its name, and the error that kept it from being read (or None).
    sources: tuple[tuple[str, str | None], ...]
    #: Wall-clock and monotonic time of the refresh's end, and how long it took.
    refreshed_at: float
    refreshed_mono: float
    took_s: float
    generation: int
    #: Monotonic time the refresh started: its oldest judgement is no older.
    started_mono: float
    #: Derivation seconds of each launch judged (for the histogram).
    derivations: tuple[float, ...] = ()
    #: Cached renderings, filled once by the publisher (``name`` -> bytes).
    rendered: dict[str, bytes] = field(default_factory=dict)


def _document(judged: Judged, manifest: Manifest) -> dict[str, Any]:
    binding: dict[str, Any] | None
    try:
        binding = parse_object(judged.launch_doc, what="launch.json") if judged.launch_doc else None
    except EcpaError:
        binding = None
    doc = status_document(judged.status, binding, manifest=manifest)
    summary = judged.summary
    return {"launch_id": summary.launch_id, "source": summary.source, **doc}


def _entry(judged: Judged, previous: Entry | None, mono: float, manifest: Manifest) -> Entry:
    summary = judged.summary
    ended = summary.ended is not None
    seen = previous.ended_seen if previous is not None and previous.ended_seen else None
    return Entry(
        summary.launch_id,
        summary.source,
        summary.effective,
        ended,
        summary.to_dict(),
        _document(judged, manifest),
        judged.status,
        (seen or mono) if ended else None,
    )


def _withdrawn(entry: Entry, text: str) -> Entry:
    """``entry`` served as not effective because of ``text`` (its source unreadable, or the
    snapshot too old), the reason first (replacing the reason of an earlier withdrawal)."""
    if entry.withdrawn:
        entry = replace(
            entry, document={**entry.document, "reasons": entry.document["reasons"][1:]}
        )
    reason = {"code": _UNREADABLE, "text": text}
    slots = [{**slot, "covered": False} for slot in entry.document.get("slots", [])]
    document = {
        **entry.document,
        "runtime_effective": False,
        "effective": False,
        "coverage": {"covered": 0, "slots": len(slots)},
        "slots": slots,
        "reasons": [reason, *entry.document.get("reasons", [])],
    }
    lifecycle = document.get("lifecycle")
    if isinstance(lifecycle, dict) and "runtime_effective" in lifecycle:
        document["lifecycle"] = {
            **lifecycle,
            "runtime_effective": {"state": False, "detail": text},
        }
    summary = {**entry.summary, "runtime_effective": False, "coverage": document["coverage"]}
    return replace(entry, effective=False, summary=summary, document=document, withdrawn=True)


class Board:
    """The launches of ``sources``, judged by :meth:`refresh` (by the refresher thread
    :meth:`start` runs, every ``interval`` seconds) and read by :meth:`view`.

    ``publish`` is called with each new snapshot before it is served (the metrics and the
    page render it once there).
    """

    def __init__(
        self,
        sources: Sources,
        *,
        interval: float = 1.0,
        stale_after: float = 10.0,
        adaptive: bool = False,
        publish: Callable[[Snapshot], None] | None = None,
        clock: Callable[[], float] = time.time,
        apart: bool = False,
        judges: int = 1,
    ) -> None:
        if apart and clock is not time.time:
            raise ValueError("expected the system clock for judging apart, found another")
        if judges != 1 and not apart:
            raise ValueError(f"expected one judge when not judging apart, found {judges}")
        self.sources = sources
        self.interval = interval
        self.stale_after = stale_after
        #: Also allow an interval and twice the newest refresh's duration (a board of many
        #: launches whose refresh takes longer than ``stale_after`` is slow, not stuck).
        self.adaptive = adaptive
        self._publish = publish
        self._clock = clock
        self._snapshot: Snapshot | None = None
        self._stale: tuple[int, Snapshot] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._generation = 0
        self._apart = apart
        self._judges = Judges(judges) if apart else None
        #: The refreshes that failed as a whole (never expected; counted, not raised).
        self.failures = 0

    # -- judging ------------------------------------------------------------------------------

    def _judge(self) -> tuple[list[tuple[str, Sequence[Judged] | str]], list[JudgedList]]:
        """Each source's launches judged, each when its turn comes (its own clock reading),
        or the error that kept the source from being read."""
        results: list[tuple[str, Sequence[Judged] | str]] = []
        extra: list[JudgedList] = []
        src = self.sources
        jobs: list[tuple[str, Sequence[Path], str | None]] = [
            (str(d), (d,), None) for d in src.evidence_dirs
        ]
        if src.dsn is not None:
            jobs.append((describe_dsn(src.dsn), (), src.dsn))
        for name, dirs, dsn in jobs:
            try:
                found = self._judge_one(dirs, dsn)
            except EcpaError as exc:
                results.append((name, f"{exc.code.value}: {exc.detail}"))
                continue
            results.append((name, found.judged))
            extra.append(found)
        return results, extra

    def _judge_one(self, dirs: Sequence[Path], dsn: str | None) -> JudgedList:
        """One source's launches, judged here or, ``apart``, in the judging process (the
        same call, its answer pickled back; a worker that died is replaced next time)."""
        src = self.sources
        if not self._apart:
            return judge_launches(
                dirs,
                dsn,
                clock=self._clock,
                limit=src.limit,
                proc_root=src.proc_root,
                host=src.host,
                trust=src.trust,
            )
        assert self._judges is not None
        return self._judges.judge(
            dirs, dsn, limit=src.limit, proc_root=src.proc_root, host=src.host, trust=src.trust
        )

    def refresh(self) -> Snapshot:
        """Judge every launch now and publish the snapshot (also returned)."""
        started = time.perf_counter()
        mono = time.monotonic()
        previous = self._snapshot
        old = previous.entries if previous is not None else {}
        results, lists = self._judge()
        entries: dict[str, Entry] = {}
        skipped: list[dict[str, str]] = [e.to_dict() for found in lists for e in found.skipped]
        truncated = [note for found in lists for note in found.truncated]
        sources: list[tuple[str, str | None]] = []
        derivations: list[float] = []
        manifest = once(bundle_manifest)  # the installed bundle, read once a refresh
        with collector_paused():  # entries and renderings: none garbage (docs/serve.md)
            for name, outcome in results:
                if isinstance(outcome, str):
                    sources.append((name, outcome))
                    for launch_id, entry in old.items():  # keep them listed, not effective
                        if entry.source == name and launch_id not in entries:
                            text = (
                                f"evidence unreadable: source {name} could not be read: {outcome}"
                            )
                            entries[launch_id] = _withdrawn(entry, text)
                    continue
                sources.append((name, None))
                for judged in outcome:
                    launch_id = judged.summary.launch_id
                    derivations.append(judged.took_s)
                    if launch_id in entries:
                        detail = f"the same launch id is served from {entries[launch_id].source}"
                        skipped.append({"source": name, "name": launch_id, "detail": detail})
                        continue
                    entries[launch_id] = _entry(judged, old.get(launch_id), mono, manifest)
            self._generation += 1
            snapshot = Snapshot(
                entries,
                tuple(skipped),
                tuple(truncated),
                tuple(sources),
                self._clock(),
                time.monotonic(),
                time.perf_counter() - started,
                self._generation,
                mono,
                tuple(derivations),
            )
            if self._publish is not None:
                self._publish(snapshot)
        self._snapshot = snapshot  # one reference swap: readers see the old or the new
        return snapshot

    # -- serving ------------------------------------------------------------------------------

    def age(self, snapshot: Snapshot) -> float:
        """Seconds since ``snapshot``'s oldest judgement: since its refresh started."""
        return time.monotonic() - snapshot.started_mono

    def limit(self, snapshot: Snapshot) -> float:
        """The age beyond which ``snapshot`` is stale: ``stale_after``; with ``adaptive``,
        or what a board whose refreshes take as long as this one's reaches in its steady
        state (its own refresh, the interval, the next refresh), if more."""
        if self.adaptive:
            return max(self.stale_after, self.interval + 2 * snapshot.took_s)
        return self.stale_after

    def view(self) -> tuple[Snapshot, bool]:
        """The newest snapshot, and whether it is stale; a stale one has every launch
        withdrawn (not effective, saying why) and no cached renderings."""
        snapshot = self._snapshot
        if snapshot is None:
            raise RuntimeError("the board was never refreshed")
        age = self.age(snapshot)
        limit = self.limit(snapshot)
        if age <= limit:
            return snapshot, False
        cached = self._stale
        if cached is not None and cached[0] == snapshot.generation:
            return cached[1], True
        text = (
            f"evidence unreadable: ecpa serve's last judgement is more than {limit:.0f} s "
            "old: its refresher is behind or stuck"
        )
        entries = {k: _withdrawn(e, text) for k, e in snapshot.entries.items()}
        stale = replace(snapshot, entries=entries, rendered={})
        self._stale = (snapshot.generation, stale)  # rendered once, not per request
        return stale, True

    def start(self) -> None:
        """Refresh every ``interval`` seconds in a daemon thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self._run, name="ecpa-serve-refresh", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.refresh()
            except Exception as exc:  # the last snapshot stays, and goes stale
                self.failures += 1
                text = f"{type(exc).__name__}: {exc}"
                if self.sources.dsn is not None:
                    text = scrub_dsn(text, self.sources.dsn)
                print(f"ecpa serve: a refresh failed: {safe(text)}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        """End the refresher thread and the judging process (waiting for both)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._judges is not None:
            self._judges.stop()


def dumps(doc: Any) -> bytes:
    """``doc`` as the API's JSON bytes (UTF-8, no NaN)."""
    return json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
