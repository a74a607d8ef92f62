"""When was a launch effective (docs/audit.md): the verdict ``ecpa status`` would have given
at each instant of the launch's life, judged from the evidence as it stood then.

Pure, like :mod:`~ecpa.runtime.judge.derive`: each process's accepted records (each verified
as of its own ``issued_at``, within its key's window: :mod:`ecpa.runtime.host.audit`) and the
launch's start and end are the inputs. At an instant ``t`` a process's stream holds its
records issued at or before ``t``; liveness is judged in hindsight (alive while its newest
record is within the heartbeat window, as the store's derivation judges it, and never after
the supervisor recorded the launch's end); membership was checked when each key was
enrolled. The same :class:`~ecpa.runtime.judge.verdict.Judge` then decides.

The verdict can change only where a record is issued, leaves the heartbeat window or
expires, or the launch ends: it is computed at those instants (and the second after each),
and holds between them. Intervals are half-open, ``[from, to)`` in Unix seconds.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ecpa.runtime.judge.records import Accepted
from ecpa.runtime.judge.stream import Stream
from ecpa.runtime.judge.verdict import Judge, RuntimeStatus
from ecpa.runtime.model.launch import ExpectedLaunch, Slot
from ecpa.runtime.model.process import Liveness, ProcessIdentity

__all__ = ["Moment", "ProcessRecords", "Span", "intervals", "timeline"]


@dataclass
class ProcessRecords:
    """One process log's accepted records, in order, and the times of its refused ones."""

    name: str
    slot: Slot | None
    accepted: list[Accepted] = field(default_factory=list)
    #: ``issued_at`` of each refused record whose payload said one.
    refused_at: list[int] = field(default_factory=list)
    _known: list[int] = field(default_factory=list, init=False, repr=False)

    def known(self) -> list[int]:
        """When each record can have been written at the earliest: its ``issued_at``, or
        the latest ``issued_at`` before it in the log if later (a writer's clock stepped
        back: a record written after one dated T was not there before T)."""
        if len(self._known) != len(self.accepted):  # records are appended as they are read
            times, latest = [], None
            for rec in self.accepted:
                at = rec.statement.issued_at
                latest = at if latest is None else max(latest, at)
                times.append(latest)
            self._known = times
        return self._known

    def upto(self, t: int) -> int:
        """How many of its records were there at ``t`` (see :meth:`known`)."""
        return bisect.bisect_right(self.known(), t)


@dataclass(frozen=True)
class Moment:
    """The verdict from instant ``at`` until the next moment."""

    at: int
    status: RuntimeStatus


@dataclass(frozen=True)
class Span:
    start: int
    end: int

    def to_list(self) -> list[int]:
        return [self.start, self.end]


def _events(processes: Sequence[ProcessRecords], window: int, start: int, end: int) -> list[int]:
    times = {start}
    for proc in processes:
        for rec, known in zip(proc.accepted, proc.known(), strict=True):
            st = rec.statement
            times.add(known)
            times.update((st.issued_at + window, st.issued_at + window + 1))
            times.update((st.expires_at, st.expires_at + 1))
    return sorted(t for t in times if start <= t < end)


def timeline(
    processes: Sequence[ProcessRecords],
    expected: ExpectedLaunch,
    *,
    start: int,
    end: int,
    supervised_until: int | None,
) -> list[Moment]:
    """The verdict at each instant of ``[start, end)`` where it may change (see the module's
    text); ``supervised_until`` is when the supervisor recorded the launch's end (None: it
    recorded none, and its liveness is taken from the processes' evidence)."""
    window = expected.heartbeat_window_s
    moments: list[Moment] = []
    for t in _events(processes, window, start, end):
        streams: list[Stream] = []
        newest: dict[ProcessIdentity, int] = {}
        for proc in processes:
            n = proc.upto(t)
            if n == 0:
                continue
            rec = proc.accepted[n - 1]
            stream = Stream(name=proc.name, slot=proc.slot, accepted=n, last_seq=rec.seq)
            stream.newest = rec
            streams.append(stream)
            issued = rec.statement.issued_at
            newest[rec.identity] = max(issued, newest.get(rec.identity, issued))
        ended = supervised_until is not None and t >= supervised_until

        def alive(
            who: ProcessIdentity,
            t: int = t,
            ended: bool = ended,
            newest: dict[ProcessIdentity, int] = newest,
        ) -> Liveness:
            last = newest.get(who)
            if ended:
                return Liveness(False, "the launch had ended (the supervisor's record)")
            if last is None or t - last > window:
                return Liveness(False, f"no signed heartbeat within {window} s (in hindsight)")
            return Liveness(True, f"signed heartbeat {t - last} s before (in hindsight)")

        if ended:
            boss = Liveness(False, "the launch had ended (the supervisor's record)")
        else:
            boss = Liveness(True, "supervising (the launch had not ended)")
        judge = Judge(expected, t, alive, descends=lambda who: True)
        moments.append(Moment(t, judge.launch(streams, supervisor=boss, skipped=[])))
    return moments


def intervals(points: Iterable[tuple[int, bool]], end: int) -> list[Span]:
    """The half-open spans in which a verdict was true, from ``(instant, verdict)`` pairs in
    time order, each verdict holding until the next instant (the last until ``end``)."""
    spans: list[Span] = []
    opened: int | None = None
    for at, state in points:
        if state and opened is None:
            opened = at
        elif not state and opened is not None:
            spans.append(Span(opened, at))
            opened = None
    if opened is not None and opened < end:
        spans.append(Span(opened, end))
    return spans
