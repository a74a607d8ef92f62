"""``python -m bench.fleet``: ingest into one PostgreSQL from concurrent shippers
(docs/scale.md).

Rows, paired round by round (the order alternating): 16 shipper processes, each ``ecpa ship
--once`` of a launch of its own (scheduler processes x signed records each: 8 x 300, a
catch-up; 64 x 10, a follower's few lines a log; 625 x 1, one second of 10,000 processes),
all at once into one store, against a bare ``COPY`` of the same bytes (launch, log, offset,
line) from 16 processes into an unindexed table of those four columns. Each round ships
into a fresh schema. Lines per second are the lines stored (the managers' certificates
too) over the wall time from the start signal to the last process's end.

And the fleet's verdict: 100 launches x 100 scheduler processes (3 records each over ten
minutes), shipped, then every launch judged from the store, warm (each log's history
walked at an earlier status), against the same launches judged from their directories,
warm; target 1 s. Each of these starts with nothing remembered, as a command does; a
third row judges the store again as ``ecpa serve``'s judging process does, remembering the
launches' keys from the pass before (ecpa.runtime.judge.memo), and a fourth judges them as
``ecpa serve --db``'s judging processes do (``ecpa.serve.judges``), two against one; and
the same judging while every process writes a record a refresh (``bench.fleet_live``).
Ten minutes of history a process (600 records) is ``bench.fleet_history``, run by hand.
Figures are printed, never enforced.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import secrets
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.fleet_live import live_row
from bench.launchdir import HOST, Written, hermetic_config, write_launch
from bench.paired import Row, summarize, table
from bench.shared import server
from ecpa.runtime.host.ship import ship_launch
from ecpa.runtime.host.status import status_from_launch_dir
from ecpa.runtime.judge.memo import forget, memory_sizes
from ecpa.runtime.model.process import PROC, check_alive
from ecpa.runtime.stores.fleet import fleet_status
from ecpa.runtime.stores.remote import status_from_store
from ecpa.runtime.stores.store import EvidenceStore
from ecpa.serve.judges import Judges
from ecpa.serve.server import usable_cpus

NOW = 1_800_000_000
SHIPPERS = 16
_MP = multiprocessing.get_context("fork")


def _lines(w: Written) -> list[tuple[str, str, int, bytes]]:
    """Every non-blank line of the launch's logs as (launch, log, offset, line)."""
    rows = []
    for log in sorted((w.directory / "evidence").rglob("*.jsonl")):
        data = log.read_bytes()
        offset = 0
        for line in data.splitlines(keepends=True):
            if line.strip():
                rows.append((w.directory.name, log.name, offset, line.rstrip(b"\n")))
            offset += len(line)
    return rows


def _ship(dsn: str, w: Written, start: Any, out: Any, *, by_clock: bool = False) -> None:
    """``ecpa ship --once`` of ``w`` (a forked child of :func:`_all_at_once`): its
    supervisor seen at the bench's fixed time, or ``by_clock`` at the server's."""
    start.wait()
    with EvidenceStore(dsn) as store:
        report = ship_launch(
            w.directory,
            store,
            once=True,
            liveness=lambda who: check_alive(who, proc_root=w.proc_root, host=HOST),
            clock=None if by_clock else lambda: NOW,
        )
    out.put(report.stored)


def _copy(dsn: str, w: Written, start: Any, out: Any) -> None:
    import psycopg

    rows = _lines(w)
    with psycopg.connect(dsn) as conn:
        start.wait()
        with (
            conn.cursor() as cur,
            cur.copy("COPY bare (launch_id, source, file_offset, line) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
    out.put(len(rows))


def _all_at_once(target: Any, dsn: str, launches: list[Written]) -> tuple[float, int]:
    """Wall seconds for one process per launch running ``target`` at once, and the lines
    they say they stored."""
    start, out = _MP.Event(), _MP.Queue()
    children = [_MP.Process(target=target, args=(dsn, w, start, out)) for w in launches]
    for child in children:
        child.start()
    time.sleep(1.0)  # every child forked and waiting (the COPY ones connected)
    began = time.perf_counter()
    start.set()
    stored = sum(out.get(timeout=600) for _ in children)
    took = time.perf_counter() - began
    for child in children:
        child.join()
        if child.exitcode != 0:
            raise RuntimeError(f"a shipper failed (exit {child.exitcode})")
    return took, stored


def _fresh_schema(dsn: str, made: list[str]) -> str:
    """A DSN on a new schema (named in ``made``) holding the baseline's table."""
    import psycopg

    schema = f"fleet_{secrets.token_hex(4)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(
            f"CREATE TABLE {schema}.bare (launch_id text, source text, file_offset bigint,"
            " line bytea)"
        )
    made.append(schema)
    sep = "&" if "?" in dsn else "?"
    return f"{dsn}{sep}options=-csearch_path%3D{schema}"


def _drop(dsn: str, made: list[str]) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema in made:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _bytes_per_line(dsn: str) -> float:
    """The evidence table's bytes on disk (rows, TOAST and indexes) per stored line."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(  # the partitions' sizes: the partitioned table itself holds none
            "SELECT (SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits"
            " WHERE inhparent = 'ecpa_evidence'::regclass)::float8"
            " / greatest((SELECT count(*) FROM ecpa_evidence), 1)"
        ).fetchone()
    assert row is not None
    return float(row[0])


def _rounds(
    dsn: str,
    launches: list[Written],
    rounds: int,
    made: list[str],
    base_t: list[float],
    ours_t: list[float],
    counts: set[tuple[str, int]],
    disk: list[float],
) -> None:
    """Seconds per line of each side, round by round, the order alternating."""
    for r in range(rounds):
        order = [(_copy, base_t), (_ship, ours_t)]
        for target, into in order if r % 2 == 0 else order[::-1]:
            where = _fresh_schema(dsn, made)
            if target is _ship:
                EvidenceStore(where).close()  # the tables made, outside the timing
            took, stored = _all_at_once(target, where, launches)
            counts.add((target.__name__, stored))
            into.append(took / max(stored, 1))
            if target is _ship:
                disk.append(_bytes_per_line(where))


def ingest_row(dsn: str, tmp: Path, rounds: int, slots: int, records: int) -> Row:
    names = [f"launch-fleet{i:04d}" for i in range(SHIPPERS)]
    launches = write_fleet(tmp / f"s{slots}", names, slots, records, now=NOW, interval=1)
    base_t: list[float] = []
    ours_t: list[float] = []
    counts = set()
    made: list[str] = []
    disk: list[float] = []
    try:
        _rounds(dsn, launches, rounds, made, base_t, ours_t, counts, disk)
    finally:
        _drop(dsn, made)
    # Lines per second: higher is better, so the ratio is baseline over ours in time terms.
    p = summarize(base_t, ours_t)
    return Row(
        f"ecpa ship, {SHIPPERS} shippers x {slots} logs x {records} lines at once",
        f"bare COPY of the same bytes, {SHIPPERS} processes",
        p.base * 1e6,
        p.ours * 1e6,
        "us",
        p.ratio,
        p.spread,
        "info",
        None,
        f"{rounds} rounds; {1 / p.ours:,.0f} lines/s ours, {1 / p.base:,.0f} lines/s "
        f"baseline; stored {sorted(counts)}; {statistics.median(disk):,.0f} bytes on disk"
        " per stored line (rows, TOAST, indexes)",
    )


def _verdicts(dsn: str, launch_ids: list[str]) -> list[bool]:
    """Every stored launch's verdict from the store, one status each, in this process, one
    connection each: the cold pass, saving each log's checkpoint."""
    return [
        status_from_store(dsn, launch_id, now=NOW, history_budget_s=None).effective
        for launch_id in launch_ids
    ]


def _fleet(dsn: str, launch_ids: list[str]) -> list[bool]:
    """The fleet's verdicts as ``ecpa status --db DSN --all`` judges them: every live
    launch over one connection (the checkpoints the cold pass saved, read)."""
    entries, more = fleet_status(dsn, now=NOW, history_budget_s=None)
    found = [e.launch_id for e in entries]
    if more or found != launch_ids or any(e.status is None for e in entries):
        raise RuntimeError(f"expected the fleet {launch_ids[:3]}..., judged, found {found[:3]}...")
    return [e.status.effective for e in entries if e.status is not None]


def _from_files(launches: list[Written]) -> list[bool]:
    return [
        status_from_launch_dir(
            w.directory, now=NOW, proc_root=w.proc_root, host=HOST, history_budget_s=None
        ).effective
        for w in launches
    ]


def write_fleet(
    root: Path, names: list[str], slots: int, records: int, *, now: int, interval: int
) -> list[Written]:
    """A launch of ``slots`` processes, ``records`` each ``interval`` s apart up to ``now``,
    for each of ``names`` (its launch id), in ``root``; each with a challenge of its own, as
    ``ecpa run`` makes them (so its own nonces)."""
    return [
        write_launch(
            root / f"l{i}",
            slots=slots,
            records=records,
            now=now,
            interval=interval,
            launch_id=name,
            challenge=secrets.token_urlsafe(32),
        )
        for i, name in enumerate(names)
    ]


def ship_fleet(ship: Any, where: str, launches: list[Written]) -> None:
    """Every launch shipped into the store at ``where`` by ``ship``, :data:`SHIPPERS` at once."""
    for start in range(0, len(launches), SHIPPERS):
        _all_at_once(ship, where, launches[start : start + SHIPPERS])


def verdict_rows(
    dsn: str, tmp: Path, rounds: int, count: int, slots: int, records: int
) -> list[Row]:
    """The fleet's verdict: every launch of ``count`` x ``slots`` judged from the store,
    warm (each log's history walked at an earlier status), against the same launches from
    their directories, warm."""
    interval = 600 // records  # ten minutes of history, whatever the number of records
    names = [f"launch-v{i:04d}" for i in range(count)]
    launches = write_fleet(tmp / "verdict", names, slots, records, now=NOW, interval=interval)
    made: list[str] = []
    try:
        where = _fresh_schema(dsn, made)
        EvidenceStore(where).close()
        ship_fleet(_ship, where, launches)
        ids = [w.directory.name for w in launches]
        began = time.perf_counter()
        first = _verdicts(where, ids)  # cold: each history walked, the checkpoints saved
        cold = time.perf_counter() - began
        _from_files(launches)  # the files' checkpoints too
        base_t: list[float] = []
        ours_t: list[float] = []
        kept_t: list[float] = []
        answers = set()
        sides: list[tuple[Callable[[], list[bool]], list[float], bool]] = [
            (lambda: _from_files(launches), base_t, True),
            (lambda: _fleet(where, ids), ours_t, True),  # as a command starts: nothing kept
            (lambda: _fleet(where, ids), kept_t, False),  # serve's judging process, again
        ]
        for r in range(rounds):
            for judge, into, cold_memory in sides if r % 2 == 0 else sides[::-1]:
                if cold_memory:
                    forget()
                else:
                    judge()  # what the refresh before it judged
                began = time.perf_counter()
                answers.add(tuple(judge()))
                into.append(time.perf_counter() - began)
        remembered = memory_sizes()
        per_launch = _memory_per_launch(where, ids[:10])
        took_judges, same_judges = _judges_rounds(where, rounds)
    finally:
        _drop(dsn, made)
    p = summarize(base_t, ours_t)
    same = "the same verdicts" if len(answers) == 1 else f"DIFFERENT verdicts {answers}"
    command = Row(
        f"fleet verdict from the store (status --all), {count} x {slots} slots, warm",
        "the same launches from their directories, warm",
        p.base,
        p.ours,
        "s",
        p.ratio,
        p.spread,
        "<= 1 s",
        p.ours <= 1.0,
        f"{rounds} rounds; {sum(first)} of {count} effective; cold (histories walked) "
        f"{cold:.1f} s; {same}; {records} records a process over 10 minutes",
    )
    k = summarize(ours_t, kept_t)
    again = Row(
        f"fleet verdict from the store, {count} x {slots} slots, status --all again in one "
        "process (the launches' keys remembered)",
        "status --all (a command: nothing remembered)",
        k.base,
        k.ours,
        "s",
        k.ratio,
        k.spread,
        "<= 1 s",
        k.ours <= 1.0,
        f"{rounds} rounds; {same}; remembered: {remembered}; {per_launch / 1e3:,.0f} kB a "
        f"launch of {slots} keys remembered (tracemalloc, 10 launches)",
    )
    judges = judges_row(
        f"serve's judging processes over the store, {count} x {slots} slots, --judges 2",
        took_judges,
        f"{rounds} rounds, each warm (keys remembered), listed once and merged, as a refresh "
        f"judges (documents not rendered, no checkpoint saved: a time given); {same_judges}; "
        f"{usable_cpus()} CPUs",
    )
    return [command, again, judges]


def judges_row(name: str, took: tuple[list[float], list[float]], note: str) -> Row:
    """The row of :func:`_judges_rounds`' seconds: two judging processes against one,
    target 1 s."""
    j = summarize(*took)
    return Row(name, "--judges 1", j.base, j.ours, "s", j.ratio, j.spread, "<= 1 s",
               j.ours <= 1.0, note)  # fmt: skip


def _memory_per_launch(where: str, ids: list[str]) -> float:
    """Bytes the launches ``ids`` leave remembered (tracemalloc: held after, minus held
    once forgotten), per launch."""
    forget()
    gc.collect()
    tracemalloc.start()
    try:
        for launch_id in ids:
            status_from_store(where, launch_id, now=NOW, history_budget_s=None)
        gc.collect()
        full = tracemalloc.get_traced_memory()[0]
        forget()
        gc.collect()
        empty = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return (full - empty) / max(1, len(ids))


def _judges_rounds(where: str, rounds: int) -> tuple[tuple[list[float], list[float]], str]:
    """The store's launches judged as ``ecpa serve --db``'s refresh judges them (listed
    once, each judging process its part, merged), by one and by two judging processes, at
    ``NOW``; each warm (two passes before), the order alternating."""
    teams = [Judges(1), Judges(2)]
    took: tuple[list[float], list[float]] = ([], [])
    answers = set()

    def judge(team: Judges) -> tuple[tuple[str, bool], ...]:
        found = team.judge((), where, limit=1000, proc_root=PROC, host=None, trust=None, now=NOW)
        return tuple((j.summary.launch_id, j.status.effective) for j in found.judged)

    try:
        for team in teams:
            judge(team)
            judge(team)
        for r in range(rounds):
            for side in (0, 1) if r % 2 == 0 else (1, 0):
                began = time.perf_counter()
                answers.add(judge(teams[side]))
                took[side].append(time.perf_counter() - began)
    finally:
        for team in teams:
            team.stop()
    effective = sum(ok for _, ok in next(iter(answers)))
    same = "the same verdicts" if len(answers) == 1 else f"DIFFERENT verdicts ({len(answers)})"
    return took, f"{effective} of {len(next(iter(answers)))} effective; {same}"


def fleet_rows(*, quick: bool, tmp: Path, dsn: str | None = None) -> list[Row]:
    """The rows of this module (one "not measured here" row without PostgreSQL)."""
    with server(dsn) as where:
        if where is None:
            why = "no psycopg or no PostgreSQL server binaries: pip install -e '.[postgres]'"
            return [Row("fleet rows", "(not measured here)", 0.0, 0.0, "s", 0.0, (0.0, 0.0),
                        "info", None, why)]  # fmt: skip
        base = where.rsplit("options=", 1)[0].rstrip("?&")
        rounds = 2 if quick else 5
        return [
            ingest_row(base, tmp, rounds, 8, 60 if quick else 300),  # a catch-up
            ingest_row(base, tmp, rounds, 64, 2 if quick else 10),  # following: few lines a log
            # One second of a fleet of 10,000 processes, one statement a second each.
            *([] if quick else [ingest_row(base, tmp, rounds, 625, 1)]),
            *verdict_rows(
                base, tmp, 2 if quick else 3, 4 if quick else 100, 10 if quick else 100, 3
            ),
            live_row(base, tmp, 2 if quick else 3, 4 if quick else 100, 10 if quick else 100),
        ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pg-dsn")
    args = parser.parse_args(argv)
    hermetic_config()  # the operator's trust: the bench's own, never the user's
    with tempfile.TemporaryDirectory() as tmp:
        print(table(fleet_rows(quick=args.quick, tmp=Path(tmp), dsn=args.pg_dsn)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
