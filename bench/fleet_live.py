"""The fleet's verdict while the fleet writes (docs/scale.md "The fleet verdict"): what a
refresh of ``ecpa serve --db --judges 2`` judges when every scheduler process has written
one new record since the refresh before (the issue's one statement a second), against the
same refresh with nothing new. Each refresh judges by the clock and saves its checkpoints,
as ``ecpa serve`` does: a new record is walked (verified) once, then decides (remembered).
Figures are printed, never enforced."""

from __future__ import annotations

import functools
import secrets
import time
from pathlib import Path

from bench.launchdir import append_records
from bench.paired import Row, summarize
from ecpa.runtime.model.process import PROC
from ecpa.runtime.stores.store import EvidenceStore
from ecpa.serve.judges import Judges

__all__ = ["live_row"]

#: Seconds between a process's records in the launches written (their history).
_INTERVAL = 200


def live_row(dsn: str, tmp: Path, rounds: int, count: int, slots: int) -> Row:
    """``count`` launches of ``slots`` processes (3 records each, the newest now), shipped;
    then ``rounds`` pairs of refreshes by two judging processes, warm: one after every
    process wrote a record more (shipped before the refresh, not timed), one after nothing
    new, the order alternating."""
    from bench.fleet import _drop, _fresh_schema, _ship, ship_fleet, write_fleet

    ship_live = functools.partial(_ship, by_clock=True)

    names = [f"launch-{secrets.token_hex(8)}" for _ in range(count)]
    now = int(time.time())
    launches = write_fleet(tmp / "live", names, slots, 3, now=now, interval=_INTERVAL)
    made: list[str] = []
    team = Judges(2)
    quiet: list[float] = []
    live: list[float] = []
    effective: list[int] = []
    seq = 3

    def ship() -> None:
        ship_fleet(ship_live, where, launches)

    def refresh(into: list[float]) -> None:
        began = time.perf_counter()
        found = team.judge((), where, limit=1000, proc_root=PROC, host=None, trust=None)
        into.append(time.perf_counter() - began)
        effective.append(sum(j.status.effective for j in found.judged))

    try:
        where = _fresh_schema(dsn, made)
        EvidenceStore(where).close()
        ship()
        refresh([])  # cold: every history walked
        refresh([])  # warm, and the records remembered
        for r in range(rounds):
            for new in (True, False) if r % 2 == 0 else (False, True):
                if new:
                    seq += 1
                    at = int(time.time())
                    for w in launches:
                        append_records(w, seq, at, interval=_INTERVAL)
                    ship()
                refresh(live if new else quiet)
    finally:
        team.stop()
        _drop(dsn, made)
    p = summarize(quiet, live)
    return Row(
        f"serve's judging processes over a live store, {count} x {slots} slots, --judges 2: "
        "every process one record more since the refresh before",
        "the same refresh, nothing new",
        p.base,
        p.ours,
        "s",
        p.ratio,
        p.spread,
        "<= 1 s",
        p.ours <= 1.0,
        f"{rounds} rounds of each; by the clock, checkpoints saved, as a refresh judges; "
        f"effective launches per refresh: {sorted(set(effective))} of {count}",
    )
