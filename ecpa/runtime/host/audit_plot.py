"""``ecpa audit --plot FILE.png`` (the ``plot`` extra, matplotlib): one row per slot on one
time axis (seconds since the launch started): the covered intervals as green bars, the gaps
as bars coloured by their cause, and the plugin's selections per second (from each record's
signed counters) as a line; a last row for the launch. Readable at a glance."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ecpa._files import write_file
from ecpa.runtime.judge.timeline import ProcessRecords

__all__ = ["CAUSE_COLOURS", "plot_audit"]

#: Where the bars are drawn on each row (y from, height): its lower half.
_BAR = (0.0, 0.45)

#: The colour of each gap cause (and of coverage).
CAUSE_COLOURS = {
    "covered": "#2e7d32",
    "no evidence yet": "#bdbdbd",
    "process died (its evidence stopped)": "#c62828",
    "evidence stale": "#ef6c00",
    "refused records": "#6a1b9a",
    "supervisor gone (the launch ended)": "#424242",
    "abstaining": "#f9a825",
    "no selections": "#fdd835",
    "conflict (two live processes claimed the slot)": "#1565c0",
    "not covered": "#8d6e63",
}


def _rates(processes: Sequence[ProcessRecords], origin: int) -> tuple[list[float], list[float]]:
    """Selections per second between consecutive records of each process, at the later."""
    xs: list[float] = []
    ys: list[float] = []
    for proc in processes:
        for before, after in zip(proc.accepted, proc.accepted[1:], strict=False):
            dt = after.statement.issued_at - before.statement.issued_at
            if dt > 0:
                xs.append(after.statement.issued_at - origin)
                ys.append(max(after.counters.selections - before.counters.selections, 0) / dt)
    order = sorted(range(len(xs)), key=xs.__getitem__)
    return [xs[i] for i in order], [ys[i] for i in order]


def plot_audit(report: dict[str, Any], processes: Sequence[ProcessRecords], path: Path) -> None:
    """Write the timeline of ``report`` to ``path`` (PNG).

    Raises:
        ImportError: when matplotlib is not installed (``pip install 'ecpa[plot]'``).
    """
    import matplotlib  # the optional plot extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    origin = int(report["started_at"])
    slots = report["slots"]
    rows = len(slots) + 1
    fig, axes = plt.subplots(rows, 1, figsize=(11, 1.6 * rows + 0.8), sharex=True, squeeze=False)
    used: set[str] = set()
    for ax, slot in zip(axes[:, 0], slots, strict=False):
        bars = [(a - origin, b - a) for a, b in slot["effective_intervals"]]
        ax.broken_barh(bars, _BAR, facecolors=CAUSE_COLOURS["covered"])
        used.add("covered")
        for gap in slot["gaps"]:
            colour = CAUSE_COLOURS.get(gap["cause"], CAUSE_COLOURS["not covered"])
            ax.broken_barh([(gap["from"] - origin, gap["seconds"])], _BAR, facecolors=colour)
            used.add(gap["cause"] if gap["cause"] in CAUSE_COLOURS else "not covered")
        ax.set_ylim(0, 1)
        ax.set_yticks([])
        ax.set_ylabel(slot["slot"], rotation=0, ha="right", va="center")
        mine = [p for p in processes if p.slot is not None and p.slot.name == slot["slot"]]
        xs, ys = _rates(mine, origin)
        if xs:
            rate = ax.twinx()  # the line in the upper half, above the bars
            rate.plot(xs, ys, color="#0d47a1", linewidth=1.2, marker=".", markersize=3)
            rate.set_ylabel("selections/s", fontsize=8, color="#0d47a1")
            top = max(ys) or 1.0
            rate.set_ylim(-1.0 * top, 1.2 * top)  # 0 at the middle, above the bars
            rate.set_yticks([0, top])
        ax.set_title(
            f"{slot['slot']}: effective {slot['effective_s']} s "
            f"({100 * slot['effective_fraction']:.0f}%), {slot['selections']:,} selections",
            fontsize=9,
            loc="left",
        )
    launch = axes[-1, 0]
    bars = [(a - origin, b - a) for a, b in report["effective_intervals"]]
    launch.broken_barh(bars, _BAR, facecolors=CAUSE_COLOURS["covered"])
    launch.set_ylim(0, 1)
    launch.set_yticks([])
    launch.set_ylabel("launch", rotation=0, ha="right", va="center")
    verdict = "exercised" if report["exercised"] else "not exercised"
    launch.set_title(
        f"launch: effective {report['effective_s']} s "
        f"({100 * report['effective_fraction']:.0f}% of the window), {verdict}",
        fontsize=9,
        loc="left",
    )
    launch.set_xlabel(f"seconds since the launch started ({report['launch_id']})")
    end = int(report["judged_until"]) - origin
    launch.set_xlim(0, max(end, 1))
    handles = [
        Patch(color=CAUSE_COLOURS[name], label=name) for name in CAUSE_COLOURS if name in used
    ]
    fig.legend(handles=handles, loc="upper right", fontsize=7, ncol=min(len(handles), 4))
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    write_file(path, out.getvalue(), mode=0o644)  # whole or not at all, never via a symlink
