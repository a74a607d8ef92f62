"""The benchmark table: ``python -m bench`` (``--quick`` for a smoke run).

Rows (each a median over paired rounds, ours against a baseline measured in the same run;
docs/performance.md says what each ratio means):

* ``ecpa.verify`` of a corpus positive against a bare Ed25519 verify of the same signing
  input (``cryptography``; libsodium too when PyNaCl is importable);
* ``ecpa.sign`` against a bare ``cryptography`` Ed25519 sign;
* ``ecpa.canonicalize`` against ``rfc8785.dumps`` (same bytes, checked);
* ``ecpa verify --jobs 2`` against ``--jobs 1`` on a 100,000-record log (subprocesses);
* peak memory of ``ecpa verify`` on a 1 GB log against a one-record log;
* the observer's cost per DLA dispatch (``bench.observer``);
* a status of a launch whose log ends in one huge line (``bench.huge_line``), 10 GiB of
  NULs, against the same launch without it;
* the host's cost of ecpa as its evidence sink (``bench.host_sink``): the host controller's
  ``select_victim`` with ecpa's sink against a no-op sink, paced, and back to back;
* start-up of the ``ecpa`` script against ``python -c pass`` (``bench.startup``): ``--version``,
  ``--help``, ``verify one.jws``, ``status --launch`` of a small real launch, and the floor of
  the libraries alone;
* shared state on PostgreSQL (``bench.shared``): fence acceptances against SQLite and memory,
  one process and four; ``ecpa status --db`` of 64 slots x 10 minutes against ``--launch``;
* a fleet's ingest (``bench.fleet``): 16 shippers at once into one PostgreSQL against a bare
  ``COPY`` of the same bytes from 16 processes.

Targets are printed with ``meets`` or ``MISSES``, never enforced: the exit status is 0
whatever the figures (machines are noisy), and 1 only if a benchmark could not run.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import ecpa
from bench import host_sink, huge_line, observer
from bench.cli_logs import Workdir, jobs_row, memory_rows
from bench.fleet import fleet_rows
from bench.launchdir import hermetic_config
from bench.micro import micro_rows
from bench.paired import Row, table
from bench.shared import shared_rows
from bench.startup import startup_rows

OBSERVER_TARGET = observer.TARGET


def observer_row(rounds: int, calls: int) -> Row:
    """``bench.observer.measure``: a DLA dispatch with the observer over one without."""
    result = observer.measure(rounds, calls, 1.0)
    return Row(
        "DLA dispatch with observer",
        "the same without observer",
        result["without_ns"] / 1000,
        result["with_ns"] / 1000,
        "us",
        result["ratio"],
        (result["ratio_min"], result["ratio_max"]),
        f"<= {OBSERVER_TARGET:.2f}",
        result["ratio"] <= OBSERVER_TARGET,
        f"{rounds} rounds x {calls:,} calls each way, 64 candidates",
    )


def host_sink_rows(rounds: int, calls: int) -> list[Row]:
    """``bench.host_sink.measure``: the host controller's ``select_victim`` with ecpa's
    evidence sink over the same with a no-op sink, paced at 1,000 dispatches a second (the
    target row), and back to back in blocks (information: the journal's thread too)."""
    rows = []
    for rate, name in ((1000.0, "host select_victim, ecpa sink"), (0.0, "the same, back to back")):
        result = host_sink.measure(rounds, calls, rate)
        rows.append(
            Row(
                name,
                "the same, a no-op sink",
                result["without_ns"] / 1000,
                result["with_ns"] / 1000,
                "us",
                result["ratio"],
                (result["ratio_min"], result["ratio_max"]),
                f"<= {host_sink.TARGET:.2f}" if rate else "info",
                result["ratio"] <= host_sink.TARGET if rate else None,
                f"{rounds} rounds x {calls:,} calls each way; "
                f"{result['records_per_s']:.2f} signed records/s, "
                f"{result['lines_per_s']:,.0f} journal lines/s",
            )
        )
    return rows


def huge_line_row(gib: int, rounds: int) -> Row:
    """``bench.huge_line.measure``: a status of a launch whose log ends in ``gib`` GiB of
    NULs, against the same launch without them; the target is the worst status's time."""
    result = huge_line.measure(gib, rounds)
    return Row(
        f"ecpa status, {gib} GiB last line",
        "the same launch without it",
        result["without_s"],
        result["with_s"],
        "s",
        result["ratio"],
        (result["ratio"], result["ratio"]),
        f"<= {huge_line.TARGET_S:g} s worst",
        result["worst_s"] <= huge_line.TARGET_S,
        f"{rounds} rounds; worst {result['worst_s']:.3f} s (before the bound: 8.9 s at 2 GiB)",
    )


def _load() -> str:
    """The load averages: other work on the machine makes every figure noisier."""
    try:
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    parser.add_argument("--rounds", type=int, help="paired rounds of the in-process rows")
    parser.add_argument("--records", type=int, help="records of the --jobs log (100,000)")
    parser.add_argument("--cli-rounds", type=int, help="paired rounds of the --jobs row")
    parser.add_argument("--big-mb", type=int, help="size of the memory row's log (1024 MiB)")
    parser.add_argument("--tmp", type=Path, help="where the logs are made (default: $TMPDIR)")
    parser.add_argument(
        "--pg-dsn", help="PostgreSQL for the shared-state rows (default: a scripts/pg-up cluster)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run every row and print the table."""
    hermetic_config()  # the operator's trust: the bench's own, never the user's
    args = _parser().parse_args(argv)
    quick = args.quick
    rounds = args.rounds or (3 if quick else 15)
    seconds = 0.01 if quick else 0.1
    records = args.records or (2_000 if quick else 100_000)
    cli_rounds = args.cli_rounds or (1 if quick else 3)
    big = (args.big_mb or (16 if quick else 1024)) << 20
    obs_rounds, obs_calls = (3, 2_000) if quick else (21, 20_000)
    started = time.monotonic()
    print(
        f"ecpa benchmarks, {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}: "
        f"Python {platform.python_version()}, {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load {_load()}"
        f"{' (--quick: smoke run, figures mean little)' if quick else ''}",
        flush=True,
    )
    print(f"  ecpa from {Path(ecpa.__file__).parent}", flush=True)
    rows: list[Row] = []
    rows += micro_rows(rounds, seconds)
    print(f"  in-process rows done ({time.monotonic() - started:.0f} s)", flush=True)
    with tempfile.TemporaryDirectory(prefix="ecpa-bench-", dir=args.tmp) as tmp:
        work = Workdir(Path(tmp))
        rows.append(jobs_row(work, records, cli_rounds))
        print(f"  --jobs row done ({time.monotonic() - started:.0f} s)", flush=True)
        rows += memory_rows(work, big, 1 if quick else 2)
        print(f"  memory rows done ({time.monotonic() - started:.0f} s)", flush=True)
        rows += startup_rows(3 if quick else 21, Path(tmp), launch_seconds=2 if quick else 4)
        print(f"  start-up rows done ({time.monotonic() - started:.0f} s)", flush=True)
        rows += shared_rows(quick=quick, tmp=Path(tmp), dsn=args.pg_dsn)
        print(f"  PostgreSQL rows done ({time.monotonic() - started:.0f} s)", flush=True)
        rows += fleet_rows(quick=quick, tmp=Path(tmp), dsn=args.pg_dsn)
        print(f"  fleet rows done ({time.monotonic() - started:.0f} s)", flush=True)
    rows.append(observer_row(obs_rounds, obs_calls))
    rows += host_sink_rows(3 if quick else 21, 300 if quick else 2_000)
    rows.append(huge_line_row(2 if quick else 10, 3 if quick else 7))
    print()
    print(table(rows))
    print(f"\n{len(rows)} rows in {time.monotonic() - started:.0f} s; load {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
