"""The audit report of a launch (docs/audit.md): from its :func:`~ecpa.runtime.judge.timeline`
verdicts, when each slot and the launch were effective, for how long, the plugin's decisions
over the window, the gaps and their causes, and whether the launch was *exercised*.

Pure and deterministic: the same evidence and window give the same report, byte for byte
(:func:`report_bytes`, RFC 8785), whenever it is made; a launch that has not ended is judged
up to the ``now`` it is given, which the report then names.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ecpa._text import iso_utc, safe
from ecpa.profile.json.jcs import canonicalize
from ecpa.runtime.judge.host import SOURCE_HOST, source
from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.judge.timeline import Moment, ProcessRecords, Span, intervals, timeline
from ecpa.runtime.model.host_journal import JournalCheck
from ecpa.runtime.model.launch import ExpectedLaunch

__all__ = ["AUDIT_SCHEMA", "LaunchLife", "audit_report", "report_bytes", "report_lines"]

AUDIT_SCHEMA = "ecpa-audit-report/0.2"
_COUNTS = ("calls", "selections", "abstentions", "failures", "changed")
#: The host's counts of dispatches (docs/host-evidence.md), by outcome.
_HOST_COUNTS = ("selected", "abstained", "invalid", "exception")


@dataclass(frozen=True)
class LaunchLife:
    """When the launch started and ended (``launch.json``'s ``started_at``, ``exit.json``'s
    ``ended_at``; None: it has not ended) and how, as its files say."""

    started_at: int
    ended_at: int | None
    ended_how: str | None
    #: The supervisor is gone and recorded no end (``ecpa run`` killed): the life is then
    #: bounded by the processes' last evidence, and the launch is never ``exercised``.
    unrecorded_end: bool = False


def _clip(spans: Sequence[Span], start: int, end: int) -> list[Span]:
    out = []
    for span in spans:
        a, b = max(span.start, start), min(span.end, end)
        if a < b:
            out.append(Span(a, b))
    return out


def _seconds(spans: Sequence[Span]) -> int:
    return sum(span.end - span.start for span in spans)


def _fraction(part: int, whole: int) -> float:
    return round(part / whole, 6) if whole > 0 else 0.0


def _cause(codes: set[str], proc_after: bool, refused: bool, ended: bool) -> str:
    if ended or ReasonCode.LAUNCH_ENDED.value in codes:
        return "supervisor gone (the launch ended)"
    if refused:
        return "refused records"
    if ReasonCode.NO_EVIDENCE.value in codes:
        return "no evidence yet"
    if ReasonCode.CONFLICT.value in codes:
        return "conflict (two live processes claimed the slot)"
    if ReasonCode.HOST_POLICY_DISABLED.value in codes:
        return "the host disabled the policy"
    if ReasonCode.HOST_EVIDENCE_MISSING.value in codes:
        return "no host evidence"
    if ReasonCode.HOST_NO_SELECTIONS.value in codes:
        return "no selections witnessed by the host"
    if ReasonCode.ABSTAINING.value in codes:
        return "abstaining"
    if ReasonCode.NO_SELECTIONS.value in codes:
        return "no selections"
    if codes & {ReasonCode.STALE.value, ReasonCode.NOT_ALIVE.value}:
        return "evidence stale" if proc_after else "process died (its evidence stopped)"
    return "not covered"


def _gaps(
    slot: str,
    moments: Sequence[Moment],
    covered: Sequence[Span],
    life: Span,
    processes: Sequence[ProcessRecords],
    ended_at: int | None,
) -> list[dict[str, Any]]:
    holes = []
    cursor = life.start
    for span in covered:
        if span.start > cursor:
            holes.append(Span(cursor, span.start))
        cursor = max(cursor, span.end)
    if cursor < life.end:
        holes.append(Span(cursor, life.end))
    mine = [p for p in processes if p.slot is not None and p.slot.name == slot]
    times = [m.at for m in moments]  # in order: one bisect per hole, not a scan
    written = sorted(t for p in mine for t in p.known())
    refused_at = sorted(t for p in mine for t in p.refused_at)
    gaps: list[dict[str, Any]] = []
    for hole in holes:
        i = bisect.bisect_right(times, hole.start) - 1
        codes: set[str] = set()
        if i >= 0:
            codes = next(
                (
                    {r.code.value for r in s.reasons}
                    for s in moments[i].status.slots
                    if s.slot == slot
                ),
                set(),
            )
        after = bisect.bisect_left(written, hole.start) < len(written)
        j = bisect.bisect_left(refused_at, hole.start)
        refused = j < len(refused_at) and refused_at[j] < hole.end
        ended = ended_at is not None and hole.start >= ended_at
        gaps.append(
            {
                "from": hole.start,
                "to": hole.end,
                "seconds": hole.end - hole.start,
                "cause": _cause(codes, after, refused, ended),
            }
        )
    return gaps


def _counts(processes: Sequence[ProcessRecords], start: int, end: int) -> dict[str, int]:
    """The plugin's decisions within ``[start, end)``: per process, its newest counters in the
    window less its newest before it (a process's counters start at 0)."""
    totals = dict.fromkeys(_COUNTS, 0)
    for proc in processes:
        before = proc.upto(start - 1)
        within = proc.upto(end - 1)
        if within == 0 or within == before:  # no record of it within the window
            continue
        last = proc.accepted[within - 1].counters
        first = proc.accepted[before - 1].counters if before else None
        for name in _COUNTS:
            now_value = getattr(last, name) or 0
            then_value = (getattr(first, name) or 0) if first is not None else 0
            totals[name] += max(now_value - then_value, 0)
    return totals


def _host_counts(processes: Sequence[ProcessRecords], start: int, end: int) -> dict[str, int]:
    """The host's dispatches within ``[start, end)``, as :func:`_counts` counts the plugin's."""
    totals = dict.fromkeys(_HOST_COUNTS, 0)
    for proc in processes:
        before, within = proc.upto(start - 1), proc.upto(end - 1)
        if within == 0 or within == before:
            continue
        last = proc.accepted[within - 1].counters.host
        first = proc.accepted[before - 1].counters.host if before else None
        for name in _HOST_COUNTS:
            now_value = 0 if last is None else getattr(last, name)
            then_value = 0 if first is None else getattr(first, name)
            totals[name] += max(now_value - then_value, 0)
    return totals


def _journals(
    processes: Sequence[ProcessRecords], checks: dict[str, JournalCheck | str]
) -> dict[str, Any]:
    """The host journals' part of the report: each process's journal against its signed
    accounts, and the findings (``host_journal_mismatch``, ``host_journal_unaccounted``)."""
    entries: list[dict[str, Any]] = []
    mismatches: list[dict[str, str]] = []
    notes: list[dict[str, str]] = []
    for proc in processes:
        check = checks.get(proc.name)
        if check is None:
            continue
        if isinstance(check, str):
            entry: dict[str, Any] = {"log": proc.name, "problems": [check]}
        else:
            entry = {
                "log": proc.name,
                "lines": check.lines,
                "accounted": check.accounted,
                "unaccounted": check.unaccounted,
                "problems": list(check.mismatches),
            }
            if check.unaccounted:
                notes.append(
                    {
                        "code": ReasonCode.HOST_JOURNAL_UNACCOUNTED.value,
                        "log": proc.name,
                        "text": f"{check.unaccounted} line(s) after its newest account, "
                        "never counted (the process died before signing them)",
                    }
                )
        entries.append(entry)
        mismatches.extend(
            {"code": ReasonCode.HOST_JOURNAL_MISMATCH.value, "log": proc.name, "text": text}
            for text in entry["problems"]
        )
    return {"journals": entries, "mismatches": mismatches, "notes": notes}


def audit_report(
    processes: Sequence[ProcessRecords],
    expected: ExpectedLaunch,
    life: LaunchLife,
    *,
    now: int,
    window: tuple[int | None, int | None] = (None, None),
    refused: dict[str, int] | None = None,
    plan: dict[str, str] | None = None,
    journals: dict[str, JournalCheck | str] | None = None,
    keys: Sequence[Reason] = (),
) -> dict[str, Any]:
    """The report (see the module's text and docs/audit.md) of the launch over ``window``
    (default: its whole life; an unended launch's life ends at ``now``); ``journals``: the
    check of each process's host journal (None: not checked, as from a store); ``keys``:
    the reasons of :func:`~ecpa.runtime.judge.certified.launch_keys` (one failing: never
    exercised)."""
    end_of_life = life.ended_at if life.ended_at is not None else max(now, life.started_at)
    supervised_until = life.ended_at
    if life.ended_at is None and life.unrecorded_end:
        window_s = expected.heartbeat_window_s
        last = max((t for p in processes for t in p.known()), default=life.started_at)
        end_of_life = supervised_until = min(end_of_life, last + window_s + 1)
    start = window[0] if window[0] is not None else life.started_at
    end = window[1] if window[1] is not None else end_of_life
    start, end = max(start, life.started_at), min(end, end_of_life)
    end = max(end, start)
    moments = timeline(
        processes,
        expected,
        start=life.started_at,
        end=end_of_life,
        supervised_until=supervised_until,
    )
    launch_spans = intervals(((m.at, m.status.effective) for m in moments), end_of_life)
    whole = Span(life.started_at, end_of_life)
    slots = []
    for slot in expected.slots:
        states = [
            (m.at, next((s.covered for s in m.status.slots if s.slot == slot.name), False))
            for m in moments
        ]
        covered = intervals(states, end_of_life)
        in_window = _clip(covered, start, end)
        mine = [p for p in processes if p.slot == slot]
        gaps = [
            g
            for g in _gaps(slot.name, moments, covered, whole, processes, life.ended_at)
            if g["to"] > start and g["from"] < end
        ]
        slots.append(
            {
                "slot": slot.name,
                "effective_intervals": [s.to_list() for s in in_window],
                "effective_s": _seconds(in_window),
                "effective_fraction": _fraction(_seconds(in_window), end - start),
                **_counts(mine, start, end),
                "host": _host_counts(mine, start, end),
                "gaps": gaps,
                "processes": [
                    {
                        "log": p.name,
                        "pid": p.accepted[0].identity.pid if p.accepted else None,
                        "records": len(p.accepted),
                        "refused": len(p.refused_at),
                        "first_issued_at": p.accepted[0].statement.issued_at
                        if p.accepted
                        else None,
                        "last_issued_at": p.accepted[-1].statement.issued_at
                        if p.accepted
                        else None,
                    }
                    for p in mine
                ],
            }
        )
    in_window = _clip(launch_spans, start, end)
    first = launch_spans[0].start if launch_spans else None
    decisions = _counts(processes, start, end)
    witnessed = _host_counts(processes, start, end)
    by_host = source(expected) == SOURCE_HOST
    selected = witnessed["selected"] if by_host else decisions["selections"]
    exercised, why = _exercised(in_window, start, end, selected, by_host)
    if life.unrecorded_end:
        exercised = False
        why = (
            "the supervisor is gone and recorded no end (ecpa run was killed?): its "
            "liveness during the launch is unknown"
        )
    host = None if journals is None else _journals(processes, journals)
    if host is not None and host["mismatches"]:
        exercised = False
        why = f"a host journal disagrees with its signed accounts: {host['mismatches'][0]['text']}"
    untrusted = [r for r in keys if r.fails]
    if untrusted:
        exercised, why = False, f"a key of the launch is not backed: {untrusted[0].text}"
    report: dict[str, Any] = {
        "schema": AUDIT_SCHEMA,
        "launch_id": expected.launch_id,
        **(plan or {}),
        "started_at": life.started_at,
        "ended_at": life.ended_at,
        "ended_how": life.ended_how
        if not life.unrecorded_end
        else "supervisor gone without recording the end; life bounded by the last evidence",
        "judged_until": end_of_life,
        "heartbeat_window_s": expected.heartbeat_window_s,
        "window": {"from": start, "to": end},
        "effective_intervals": [s.to_list() for s in in_window],
        "effective_s": _seconds(in_window),
        "effective_fraction": _fraction(_seconds(in_window), end - start),
        "startup_s": None if first is None else first - life.started_at,
        "exercised": exercised,
        "exercised_detail": why,
        **decisions,
        "source": source(expected),
        "host": witnessed,
        "host_journals": host,
        "keys": {"certified": not untrusted, "reasons": [r.to_dict() for r in keys]},
        "records": {
            "accepted": sum(len(p.accepted) for p in processes),
            "refused": dict(sorted((refused or {}).items())),
        },
        "slots": slots,
    }
    return report


def _exercised(
    spans: list[Span], start: int, end: int, selections: int, by_host: bool = False
) -> tuple[bool, str]:
    if not spans:
        return False, f"never effective within [{start}, {end})"
    first = spans[0].start
    if len(spans) > 1 or spans[0].end < end:
        gap = spans[0].end
        return False, f"effective from {first}, then a gap from {gap} before the window's end {end}"
    if selections < 1:
        who = "the host witnessed no selection" if by_host else "the plugin selected no victim"
        return False, f"effective from {first} to {end}, but {who}"
    seen = " witnessed by the host" if by_host else ""
    return True, f"effective without a gap from {first} to {end}, {selections:,} selections{seen}"


def report_bytes(report: dict[str, Any]) -> bytes:
    """The report as it is written and signed: its RFC 8785 form."""
    return canonicalize(report)


def report_lines(report: dict[str, Any]) -> list[str]:
    """The report as ``ecpa audit`` prints it: the verdict, the window (ISO 8601 UTC and
    Unix seconds), the launch's intervals and decisions, then each slot and its gaps."""
    window = report["window"]
    lines = [
        f"launch {report['launch_id']}: exercised: {'true' if report['exercised'] else 'false'} "
        f"({report['exercised_detail']})",
        f"window: {iso_utc(window['from'])} to {iso_utc(window['to'])} "
        f"({window['to'] - window['from']} s; {window['from']} to {window['to']})",
        f"effective: {report['effective_s']} s ({100 * report['effective_fraction']:.1f}%), "
        f"intervals {report['effective_intervals']}",
        f"startup_s: {report['startup_s']}; selections {report['selections']:,}, "
        f"abstentions {report['abstentions']:,}, failures {report['failures']:,}, "
        f"changed {report['changed']:,}",
    ]
    if report["ended_how"]:
        lines.append(f"ended: {report['ended_how']}")
    host = report["host"]
    lines.append(
        f"source: {report['source']}; host witnessed: selected {host['selected']:,}, abstained "
        f"{host['abstained']:,}, invalid {host['invalid']:,}, exception {host['exception']:,}"
    )
    keys = report["keys"]
    lines.append(f"keys: {'certified' if keys['certified'] else 'NOT certified'}")
    lines.extend(f"  {r['code']}: {r['text']}" for r in keys["reasons"])
    journals = report["host_journals"]
    if journals is None:
        lines.append("host journals: not checked")
    else:
        checked = len(journals["journals"])
        lines.append(
            f"host journals: {checked} checked, {len(journals['mismatches'])} mismatch(es)"
        )
        lines.extend(
            f"  {item['code']}: {item['log']}: {item['text']}"
            for item in (*journals["mismatches"], *journals["notes"])
        )
    for slot in report["slots"]:
        lines.append(
            f"slot {slot['slot']}: effective {slot['effective_s']} s "
            f"({100 * slot['effective_fraction']:.1f}%), intervals {slot['effective_intervals']}, "
            f"selections {slot['selections']:,}"
        )
        lines.extend(
            f"  gap {gap['from']} to {gap['to']} ({gap['seconds']} s): {gap['cause']}"
            for gap in slot["gaps"]
        )
    return [safe(line) for line in lines]
