"""Paired, repeated measurements and the table they end up in.

Every figure is a median over rounds. In each round the baseline and ours run back to back,
in alternating order (baseline first in even rounds, ours first in odd ones), and the
round's ratio is ours / baseline; the row's ratio is the median of those per-round ratios,
so a machine that drifts between rounds (frequency scaling, a noisy neighbour) moves both
sides of a ratio together and cancels out.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    """One line of the table. ``ratio`` is ours / baseline (time or memory); ``meets`` is
    ``None`` for a row reported for information (no target) or not measured here."""

    name: str
    baseline: str
    base: float
    ours: float
    unit: str  # "us" (per call), "s" (per run) or "MB" (peak RSS)
    ratio: float
    spread: tuple[float, float]  # smallest and largest per-round ratio
    target: str
    meets: bool | None
    note: str = ""


@dataclass(frozen=True)
class Paired:
    """Medians of a paired measurement: baseline and ours per unit, and their ratio."""

    base: float
    ours: float
    ratio: float
    spread: tuple[float, float]
    rounds: int


def summarize(base: list[float], ours: list[float]) -> Paired:
    """Per-round values of both sides, as medians and the median per-round ratio."""
    ratios = [o / b for o, b in zip(ours, base, strict=True)]
    return Paired(
        statistics.median(base),
        statistics.median(ours),
        statistics.median(ratios),
        (min(ratios), max(ratios)),
        len(ratios),
    )


def _time_calls(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - start) / calls / 1000.0  # microseconds per call


def calls_for(fn: Callable[[], object], seconds: float) -> int:
    """How many calls of ``fn`` take about ``seconds`` (at least 10)."""
    probe = 10
    while True:
        start = time.perf_counter()
        for _ in range(probe):
            fn()
        took = time.perf_counter() - start
        if took > 0.02 or probe >= 1_000_000:
            return max(10, int(probe * seconds / max(took, 1e-9)))
        probe *= 4


def paired_calls(
    baseline: Callable[[], object],
    ours: Callable[[], object],
    *,
    rounds: int,
    seconds: float,
) -> Paired:
    """Microseconds per call of each side, ``rounds`` paired rounds of about ``seconds``
    each way (the same number of calls on both sides), after one warm-up round."""
    calls = calls_for(baseline, seconds), calls_for(ours, seconds)
    n = max(10, min(calls))
    _time_calls(baseline, n)
    _time_calls(ours, n)
    base: list[float] = []
    mine: list[float] = []
    for r in range(rounds):
        if r % 2 == 0:
            base.append(_time_calls(baseline, n))
            mine.append(_time_calls(ours, n))
        else:
            mine.append(_time_calls(ours, n))
            base.append(_time_calls(baseline, n))
    return summarize(base, mine)


def _value(value: float, unit: str) -> str:
    if unit == "us":
        return f"{value:,.2f} us"
    if unit == "s":
        return f"{value:,.2f} s"
    return f"{value:,.0f} MB"


def table(rows: list[Row]) -> str:
    """The rows as one aligned text table, notes below it."""
    head = ("benchmark", "baseline", "baseline median", "ours median", "ratio", "target", "verdict")
    cells = [head]
    for row in rows:
        verdict = "info" if row.meets is None else ("meets" if row.meets else "MISSES")
        lo, hi = row.spread
        cells.append(
            (
                row.name,
                row.baseline,
                _value(row.base, row.unit),
                _value(row.ours, row.unit),
                f"{row.ratio:.3f} ({lo:.2f}..{hi:.2f})",
                row.target,
                verdict,
            )
        )
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = []
    for index, cell in enumerate(cells):
        text = "  ".join(
            c.rjust(w) if 2 <= i <= 4 else c.ljust(w)
            for i, (c, w) in enumerate(zip(cell, widths, strict=True))
        )
        lines.append(text.rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    notes = [f"  [{row.name}] {row.note}" for row in rows if row.note]
    return "\n".join(lines + (["", *notes] if notes else []))
