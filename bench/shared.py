"""``python -m bench.shared``: what shared state on PostgreSQL costs (docs/performance.md).

Rows, paired round by round (ours and the baseline back to back, the order alternating):

* fence acceptances through :class:`ecpa.PostgresReplayFence` against the SQLite fence and
  against the memory fence, one process; and PostgreSQL against SQLite with four processes
  at once (each with its own fence on the one database). Both durable fences commit each
  acceptance to disk (SQLite ``synchronous=FULL``, PostgreSQL ``synchronous_commit=on`` on a
  cluster with ``fsync`` on): the figures are mostly the disk's flush, as in production;
* ``ecpa status --db`` (the derivation from the store, in process) of a launch of 64 slots
  x 10 minutes of records (one a second: 38,400 signed records), warm (its history walked
  at earlier calls), against ``ecpa status --launch`` of the same launch from its files;
  and the time ``ecpa ship --once`` took to store it (reported, no baseline).

The server is a throw-away cluster made by ``scripts/pg-up`` (removed at the end), or the
one ``--dsn`` names (tables go to a fresh schema there). Without PostgreSQL the rows say
"not measured here". Figures are printed, never enforced.
"""

from __future__ import annotations

import argparse
import multiprocessing
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.launchdir import HOST, hermetic_config, write_launch
from bench.paired import Row, summarize, table
from ecpa.runtime.host.ship import ship_launch
from ecpa.runtime.host.status import HISTORY_BUDGET_S, status_from_launch_dir
from ecpa.runtime.model.process import check_alive
from ecpa.runtime.stores.remote import status_from_store
from ecpa.runtime.stores.replay import MemoryReplayFence, SqliteReplayFence
from ecpa.runtime.stores.store import EvidenceStore

ROOT = Path(__file__).resolve().parent.parent
NOW = 1_800_000_000
_MP = multiprocessing.get_context("fork")


@contextmanager
def server(dsn: str | None) -> Iterator[str | None]:
    """A DSN with a fresh schema of its own: on ``dsn``, or on a cluster made here."""
    try:
        import psycopg
    except ImportError:
        yield None
        return
    made: Path | None = None
    if dsn is None:
        if not (shutil.which("initdb") or any(Path("/usr/lib/postgresql").glob("*/bin/initdb"))):
            yield None
            return
        made = Path(tempfile.mkdtemp(prefix="ecpa-bpg-", dir="/tmp"))
        out = subprocess.run(  # noqa: S603 - our own script, by absolute path
            [sys.executable, ROOT / "scripts/pg-up", made],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            shutil.rmtree(made, ignore_errors=True)
            raise RuntimeError(f"scripts/pg-up failed: {out.stderr.strip()}")
        dsn = out.stdout.strip()
    schema = f"bench_{secrets.token_hex(4)}"
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        sep = "&" if "?" in dsn else "?"
        yield f"{dsn}{sep}options=-csearch_path%3D{schema}"
    finally:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        finally:
            if made is not None:
                subprocess.run(  # noqa: S603 - our own script, by absolute path
                    [sys.executable, ROOT / "scripts/pg-down", made], capture_output=True
                )
                shutil.rmtree(made, ignore_errors=True)


def _accept(open_fence: Callable[[], Any], prefix: str, count: int) -> float:
    """Seconds for ``count`` acceptances of fresh nonces through a fence just opened."""
    fence = open_fence()
    try:
        fence.check_and_record(f"{prefix}-warm", expires_at=NOW)  # connect, prepare
        started = time.perf_counter()
        for i in range(count):
            fence.check_and_record(f"{prefix}-{i}", expires_at=NOW)
        return time.perf_counter() - started
    finally:
        close = getattr(fence, "close", None)
        if close is not None:
            close()


def _child(open_fence: Callable[[], Any], prefix: str, count: int, start: Any) -> None:
    start.wait()
    _accept(open_fence, prefix, count)


def _accept_parallel(open_fence: Callable[[], Any], prefix: str, count: int, procs: int) -> float:
    """Seconds for ``procs`` processes to accept ``count`` nonces each, all at once."""
    start = _MP.Event()
    children = [
        _MP.Process(target=_child, args=(open_fence, f"{prefix}.{p}", count, start))
        for p in range(procs)
    ]
    for child in children:
        child.start()
    time.sleep(0.5)  # every child connected and waiting
    began = time.perf_counter()
    start.set()
    for child in children:
        child.join()
        if child.exitcode != 0:
            raise RuntimeError(f"a fence process failed (exit {child.exitcode})")
    return time.perf_counter() - began


def fence_rows(dsn: str, tmp: Path, rounds: int, count: int) -> list[Row]:
    from ecpa.runtime.stores.postgres import PostgresReplayFence

    lite = tmp / "fence.db"

    def pg() -> PostgresReplayFence:
        return PostgresReplayFence(dsn)

    def sqlite() -> SqliteReplayFence:
        return SqliteReplayFence(lite, timeout=30)

    rows = []
    specs: list[tuple[str, str, Callable[[], Any], Callable[[], Any], int]] = [
        ("PostgreSQL fence, 1 process", "SQLite fence, 1 process", sqlite, pg, 1),
        ("PostgreSQL fence, 1 process", "memory fence", MemoryReplayFence, pg, 1),
        ("PostgreSQL fence, 4 processes", "SQLite fence, 4 processes", sqlite, pg, 4),
    ]
    for name, baseline, base_fn, ours_fn, procs in specs:
        base_t, ours_t = [], []
        for r in range(rounds):
            tag = secrets.token_hex(3)
            order = [(base_fn, base_t, "b"), (ours_fn, ours_t, "o")]
            for fn, into, side in order if r % 2 == 0 else order[::-1]:
                prefix = f"{tag}{side}"
                took = (
                    _accept(fn, prefix, count)
                    if procs == 1
                    else _accept_parallel(fn, prefix, count, procs)
                )
                into.append(took / (count * procs) * 1e6)  # us per acceptance
        p = summarize(base_t, ours_t)
        rows.append(
            Row(
                name,
                baseline,
                p.base,
                p.ours,
                "us",
                p.ratio,
                p.spread,
                "info",
                None,
                f"{rounds} rounds x {count:,} acceptances x {procs} process(es); "
                f"{1e6 / p.ours:,.0f}/s ours, {1e6 / p.base:,.0f}/s baseline",
            )
        )
    return rows


def status_rows(dsn: str, tmp: Path, rounds: int, slots: int, records: int) -> list[Row]:
    w = write_launch(tmp, slots=slots, records=records, now=NOW)
    launch_id = w.directory.name
    with EvidenceStore(dsn) as store:
        began = time.perf_counter()
        report = ship_launch(
            w.directory,
            store,
            once=True,
            liveness=lambda who: check_alive(who, proc_root=w.proc_root, host=HOST),
            clock=lambda: NOW,
        )
        shipped = time.perf_counter() - began

    def there(budget: float | None = HISTORY_BUDGET_S) -> object:
        return status_from_store(dsn, launch_id, now=NOW, history_budget_s=budget)

    def here(budget: float | None = HISTORY_BUDGET_S) -> object:
        return status_from_launch_dir(
            w.directory, now=NOW, proc_root=w.proc_root, host=HOST, history_budget_s=budget
        )

    began = time.perf_counter()
    cold = there()
    cold_s = time.perf_counter() - began
    began = time.perf_counter()
    there(None)  # the whole history walked at once (the checkpoints then kept): warm rows
    full_s = time.perf_counter() - began
    here(None)
    base_t, ours_t = [], []
    answers = set()
    for r in range(rounds):
        order = [(here, base_t), (there, ours_t)]
        for fn, into in order if r % 2 == 0 else order[::-1]:
            began = time.perf_counter()
            st: Any = fn()
            into.append(time.perf_counter() - began)
            answers.add((st.effective, tuple(s.covered for s in st.slots)))
    p = summarize(base_t, ours_t)
    total = slots * records
    return [
        Row(
            f"ecpa status --db, {slots} slots x {records // 60} min, warm",
            "ecpa status --launch, same launch",
            p.base,
            p.ours,
            "s",
            p.ratio,
            p.spread,
            "info",
            None,
            f"{rounds} rounds; {total:,} records; cold (first call) {cold_s:.2f} s; "
            f"whole history walked once {full_s:.1f} s; "
            f"same answer both ways: {len(answers) == 1}; "
            f"runtime_effective {sorted(answers)[0][0] if answers else None} "
            f"(cold: {getattr(cold, 'effective', None)})",
        ),
        Row(
            f"ecpa ship --once, {total:,} lines",
            "(no baseline)",
            shipped,
            shipped,
            "s",
            1.0,
            (1.0, 1.0),
            "info",
            None,
            f"{report.stored:,} lines stored, {report.stored / shipped:,.0f} lines/s",
        ),
    ]


def shared_rows(
    *, quick: bool, tmp: Path, dsn: str | None = None, rounds: int | None = None
) -> list[Row]:
    """Every row of this module (or one "not measured here" row without PostgreSQL)."""
    with server(dsn) as where:
        if where is None:
            return [
                Row(
                    "PostgreSQL rows",
                    "(not measured here)",
                    0.0,
                    0.0,
                    "s",
                    0.0,
                    (0.0, 0.0),
                    "info",
                    None,
                    "no psycopg or no PostgreSQL server binaries: pip install -e '.[postgres]'",
                )
            ]
        n = rounds or (1 if quick else 5)
        rows = fence_rows(where, tmp, n, 50 if quick else 500)
        slots, records = (4, 60) if quick else (64, 600)
        rows += status_rows(where, tmp, 3 if quick else 9, slots, records)
        return rows


def main(argv: list[str] | None = None) -> int:
    hermetic_config()  # the operator's trust: the bench's own, never the user's
    parser = argparse.ArgumentParser(prog="python -m bench.shared", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--dsn", help="a PostgreSQL server of your own (default: pg-up)")
    parser.add_argument("--rounds", type=int, help="paired rounds of the fence rows")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ecpa-bench-shared-") as tmp:
        rows = shared_rows(quick=args.quick, tmp=Path(tmp), dsn=args.dsn, rounds=args.rounds)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
