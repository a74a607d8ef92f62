"""``python -m bench.fleet_history``: the fleet verdict over the issue's whole history
(docs/scale.md "Ten minutes of history"): 100 launches x 100 scheduler processes, one
signed record a second each for ten minutes (600 records a process, 6,000,000 lines),
written, shipped 16 shippers at a time, each log's history walked once (two processes, as
``ecpa serve --judges 2`` walks it at its first refresh), then the store judged warm as a
refresh of ``ecpa serve --db`` judges it, ``--judges 2`` against ``--judges 1`` (the rows
of ``python -m bench.fleet`` hold 3 records a process). Not part of ``python -m bench``: it
takes about half an hour and 30 GB of disk on this project's machine. Figures are
printed, never enforced.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import time
from pathlib import Path

from bench.fleet import (
    _MP,
    NOW,
    SHIPPERS,
    _all_at_once,
    _bytes_per_line,
    _drop,
    _fresh_schema,
    _judges_rounds,
    _ship,
    judges_row,
)
from bench.launchdir import Written, hermetic_config, write_launch
from bench.paired import Row, table
from bench.shared import server
from ecpa.runtime.stores.remote import status_from_store
from ecpa.runtime.stores.store import EvidenceStore
from ecpa.serve.server import usable_cpus

__all__ = ["history_rows"]


def _write(root: Path, index: int, name: str, slots: int, records: int) -> Written:
    """Launch ``name``: ``slots`` processes, ``records`` records each, a second apart up to
    the bench's time, a challenge of its own (a forked writer's part)."""
    return write_launch(
        root / f"l{index}",
        slots=slots,
        records=records,
        now=NOW,
        interval=1,
        launch_id=name,
        challenge=secrets.token_urlsafe(32),
    )


def _walk(where: str, ids: list[str]) -> int:
    """Each launch of ``ids`` judged once from the store at the bench's time, its whole
    history walked and its checkpoints saved; the launches effective."""
    return sum(
        status_from_store(where, launch_id, now=NOW, history_budget_s=None).effective
        for launch_id in ids
    )


def history_rows(
    dsn: str, tmp: Path, *, count: int, slots: int, records: int, rounds: int
) -> list[Row]:
    """The fleet of ``count`` x ``slots`` processes, ``records`` a process, through the
    store: written, shipped, walked cold, then judged warm by one and by two judging
    processes (``rounds`` each, alternating)."""
    names = [f"launch-h{i:04d}" for i in range(count)]
    made: list[str] = []
    began = time.perf_counter()
    with _MP.Pool(2) as pool:
        launches = pool.starmap(
            _write, [(tmp, i, name, slots, records) for i, name in enumerate(names)]
        )
    wrote = time.perf_counter() - began
    try:
        where = _fresh_schema(dsn, made)
        EvidenceStore(where).close()
        shipped = stored = 0.0
        for start in range(0, len(launches), SHIPPERS):
            took, lines = _all_at_once(_ship, where, launches[start : start + SHIPPERS])
            shipped, stored = shipped + took, stored + lines
        per_line = _bytes_per_line(where)
        began = time.perf_counter()
        with _MP.Pool(2) as pool:
            effective = sum(pool.starmap(_walk, [(where, names[0::2]), (where, names[1::2])]))
        walked = time.perf_counter() - began
        took_judges, same = _judges_rounds(where, rounds)
    finally:
        _drop(dsn, made)
    lines = count * slots * records
    return [
        judges_row(
            f"serve's judging processes over {records} records a process ({lines:,} lines), "
            f"{count} x {slots} slots, --judges 2",
            took_judges,
            f"{rounds} rounds, each warm, at a time given, as bench.fleet's judging row; "
            f"{same}; written in {wrote:.0f} s (2 processes); shipped {stored:,.0f} lines in "
            f"{shipped:.0f} s ({stored / shipped:,.0f} lines/s, {SHIPPERS} shippers at a "
            f"time), {per_line:,.0f} bytes a line on disk; every history walked cold in "
            f"{walked:.0f} s by 2 processes ({effective} of {count} effective, "
            f"{lines / walked:,.0f} records/s); {usable_cpus()} CPUs",
        )
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet_history", description=__doc__)
    parser.add_argument("--count", type=int, default=100, help="launches (default 100)")
    parser.add_argument("--slots", type=int, default=100, help="processes a launch (100)")
    parser.add_argument("--records", type=int, default=600, help="records a process (600)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each side (5)")
    parser.add_argument("--pg-dsn", help="a server to use (default: a throw-away cluster)")
    args = parser.parse_args(argv)
    hermetic_config()  # the operator's trust: the bench's own, never the user's
    with server(args.pg_dsn) as where, tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        if where is None:
            print("not measured here: no psycopg or no PostgreSQL server binaries")
            return 0
        base = where.rsplit("options=", 1)[0].rstrip("?&")
        rows = history_rows(
            base,
            Path(tmp),
            count=args.count,
            slots=args.slots,
            records=args.records,
            rounds=args.rounds,
        )
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
