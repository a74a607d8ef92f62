"""``python -m bench.status``: what one ``ecpa status`` of a long-running launch costs.

Two launch directories are written directly (``bench.launchdir``), each with ``--slots``
scheduler processes emitting one record a second, the newest now:

* *short*: 10 minutes of records per process (600 real, signed records);
* *long*: the same 600 records after ``--hours`` hours' worth of earlier lines (one line a
  second). Signing hundreds of millions of records would take this machine hours, so the
  earlier lines are short filler lines (each refused as not JSON, as a full re-verification
  would refuse it): what matters is their number and where they are, since status reads a
  log's end and walks its history within its budget.

For each, the derivation (``ecpa.runtime.host.status.status_from_launch_dir``: read, verify,
decide; not the interpreter's start) is timed cold (no checkpoint yet) and warm (the next
calls), paired round by round: the row's ratio is long / short, 1.0 when the cost does not
grow with the launch's age. The target is an absolute 0.3 s for the long launch, warm. A
full re-verification of the short launch (every line, ``derive_launch``) is timed too, and
its answer compared with status's.
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.launchdir import HOST, Written, hermetic_config, write_launch
from bench.paired import Row, summarize, table
from ecpa.profile.trust import TrustStore
from ecpa.runtime.host.status import status_from_launch_dir
from ecpa.runtime.judge.derive import derive_launch
from ecpa.runtime.model.evidence import read_log
from ecpa.runtime.model.launch import launch_from_file
from ecpa.runtime.model.process import check_alive, descends_from

TARGET_S = 0.3
NOW = 1_800_000_000


def _status(w: Written) -> float:
    start = time.perf_counter()
    result = status_from_launch_dir(w.directory, now=NOW, proc_root=w.proc_root, host=HOST)
    took = time.perf_counter() - start
    assert result.effective, result.reasons
    return took


def _full(w: Written) -> tuple[float, object]:
    start = time.perf_counter()
    expected = launch_from_file(w.directory / "launch.json")
    store = TrustStore.load(w.directory / "trust.json")
    logs = w.directory / "evidence" / w.directory.name
    streams = {p.name: read_log(io.BytesIO(p.read_bytes())) for p in logs.glob("*.jsonl")}
    result = derive_launch(
        streams,
        store,
        expected,
        now=NOW,
        liveness=lambda who: check_alive(who, proc_root=w.proc_root, host=HOST),
        descends=lambda who: descends_from(who.pid, 100, proc_root=w.proc_root),
        supervisor=check_alive(expected.supervisor, proc_root=w.proc_root, host=HOST),  # type: ignore[arg-type]
    )
    return time.perf_counter() - start, result


def _decision(result: object) -> object:
    slots = result.slots
    return (result.effective, [(s.slot, s.covered, s.newest_seq) for s in slots])


def status_rows(slots: int, hours: float, rounds: int, tmp: Path) -> list[Row]:
    """The bench's rows; see the module's text."""
    records = 600
    filler = max(0, int(hours * 3600) - records)
    t0 = time.monotonic()
    short = write_launch(tmp / "short", slots=slots, records=records, now=NOW)
    long = write_launch(tmp / "long", slots=slots, records=records, now=NOW, filler=filler)
    made = time.monotonic() - t0
    cold_short, cold_long = _status(short), _status(long)
    base: list[float] = []
    ours: list[float] = []
    for i in range(rounds):
        pair = (short, long) if i % 2 == 0 else (long, short)
        took = {id(w): _status(w) for w in pair}
        base.append(took[id(short)])
        ours.append(took[id(long)])
    warm = summarize(base, ours)
    full_s, full_result = _full(short)
    same = _decision(full_result) == _decision(
        status_from_launch_dir(short.directory, now=NOW, proc_root=short.proc_root, host=HOST)
    )
    # Caught up: the history walked to the end once (no budget), then calls as a poller's.
    status_from_launch_dir(
        short.directory, now=NOW, proc_root=short.proc_root, host=HOST, history_budget_s=None
    )
    caught = statistics.median(_status(short) for _ in range(rounds))
    size = sum(p.stat().st_size for p in (long.directory / "evidence").rglob("*.jsonl"))
    return [
        Row(
            f"status, {slots} slots x {hours:g} h (warm)",
            f"the same, {slots} slots x 10 min",
            warm.base,
            warm.ours,
            "s",
            warm.ratio,
            warm.spread,
            f"<= {TARGET_S} s",
            warm.ours <= TARGET_S,
            f"{rounds} paired rounds; logs {size / 1e6:.0f} MB; written in {made:.0f} s",
        ),
        Row(
            f"status, {slots} slots x {hours:g} h (cold)",
            f"the same, {slots} slots x 10 min",
            cold_short,
            cold_long,
            "s",
            cold_long / cold_short,
            (cold_long / cold_short, cold_long / cold_short),
            "info",
            None,
            "first call: no checkpoint yet; history walked at most 0.05 s per call",
        ),
        Row(
            f"status, {slots} slots x 10 min, caught up",
            "full re-verification of every line",
            full_s,
            caught,
            "s",
            caught / full_s,
            (caught / full_s, caught / full_s),
            "same answer",
            same,
            f"{slots * records:,} records verified by the full re-verification",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the status rows and print them."""
    hermetic_config()  # the operator's trust: the bench's own, never the user's
    parser = argparse.ArgumentParser(prog="python -m bench.status", description=__doc__)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--hours", type=float, default=28.0)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tmp", type=Path, help="where the launches are written")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="ecpa-bench-status-", dir=args.tmp))
    try:
        print(table(status_rows(args.slots, args.hours, args.rounds, tmp)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
