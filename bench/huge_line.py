"""A status of a launch whose log ends in one huge line (RUNTIME.md "Bounded work"): a sparse
file of NULs made with ``truncate`` at the end of a process's log, against the same launch
without it, one status each, in one run.

Before the bound, a status read all of the line to get past it: 8.9 s at 2 GiB and over 60 s
at 10 GiB, and an ``ecpa serve`` board waited as long, its every launch shown not effective
meanwhile. Now a status reads a bounded piece of it (its history's budget, 0.05 s) and the
next status goes on from there. Target: a status of the launch with the huge line costs at
most 2 s (0.05 s of history, the end of each log, and the rest as without it).

Run: ``python -m bench.huge_line`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.launchdir import HOST, hermetic_config, write_launch
from ecpa.runtime.host.status import status_from_launch_dir

TARGET_S = 2.0


def _status_s(directory: Path, proc: Path, now: int) -> float:
    start = time.perf_counter()
    status_from_launch_dir(directory, now=now, proc_root=proc, host=HOST)
    return time.perf_counter() - start


def measure(gib: int, rounds: int) -> dict[str, float]:
    """Median seconds of a status with and without a last line of ``gib`` GiB of NULs."""
    now = int(time.time())
    with tempfile.TemporaryDirectory(prefix="ecpa-bench-huge-") as tmp:
        plain = write_launch(Path(tmp) / "a", slots=4, records=60, now=now)
        huge = write_launch(Path(tmp) / "b", slots=4, records=60, now=now)
        logs = huge.directory / "evidence" / huge.directory.name
        log = sorted(logs.glob("scheduler.0-*.jsonl"))[0]
        os.truncate(log, log.stat().st_size + (gib << 30))
        base: list[float] = []
        ours: list[float] = []
        for r in range(rounds):
            pair = [(plain, base), (huge, ours)]
            for written, out in pair if r % 2 == 0 else pair[::-1]:
                out.append(_status_s(written.directory, written.proc_root, now))
    return {
        "without_s": statistics.median(base),
        "with_s": statistics.median(ours),
        "worst_s": max(ours),
        "ratio": statistics.median(o / b for o, b in zip(ours, base, strict=True)),
    }


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit 0 (the target is reported, not enforced)."""
    hermetic_config()  # the operator's trust: the bench's own, never the user's
    parser = argparse.ArgumentParser(prog="python -m bench.huge_line", description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 rounds, 2 GiB only")
    args = parser.parse_args(argv)
    sizes = (2,) if args.quick else (2, 10)
    rounds = 3 if args.quick else args.rounds
    print("ecpa status of a launch (4 slots x 60 records) whose log ends in one huge line")
    for gib in sizes:
        result = measure(gib, rounds)
        verdict = "meets" if result["worst_s"] <= TARGET_S else "MISSES"
        print(
            f"  {gib:>2} GiB of NULs: {result['with_s']:.3f} s (worst {result['worst_s']:.3f} s) "
            f"against {result['without_s']:.3f} s without it, ratio {result['ratio']:.2f}; "
            f"target <= {TARGET_S:g} s: {verdict}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
