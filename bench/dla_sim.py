"""The DLA simulator's wall time (docs/dla-value.md): the whole ``--predictions all`` study on
the default workload (10,000 synthetic jobs, 3 seeds, every prediction model, the profiled
step time), target under 3 minutes on this machine (2 cores); and the replay of a 400-line
trace, target under 10 s.

Method: each command runs as users run it, ``python -m dla_plugin.sim ... --quiet``, in a
subprocess timed with ``time.perf_counter`` from start to exit (interpreter start-up
included); the 400-line trace is written first from the synthetic generator (seed 11) in
the trace-replay format, with a ``predicted_decode_tokens`` column (the true length plus 20%),
so ``--predictions all`` replays every model and ``trace``. The load average of the machine
is printed beside the figures: these machines are shared, and a wall time is only as quiet
as the machine was.

Run: ``python -m bench.dla_sim`` (``--quick``: 1,000 jobs and a 100-line trace, a smoke run).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.launchdir import hermetic_config
from dla_plugin.sim.workload import synthetic

STUDY_TARGET_S = 180.0
TRACE_TARGET_S = 10.0


def write_trace(path: Path, lines: int) -> None:
    """A trace of ``lines`` requests (the synthetic workload, seed 11), with predictions."""
    rows = ["arrived_at,num_prefill_tokens,num_decode_tokens,predicted_decode_tokens"]
    for job in synthetic(lines, 11):
        predicted = -(-job.output_tokens * 6 // 5)  # ceil(1.2 * length)
        rows.append(f"{job.arrival_s!r},{job.prompt_tokens},{job.output_tokens},{predicted}")
    path.write_text("\n".join(rows) + "\n")


def timed(args: list[str]) -> float:
    """Seconds ``python -m dla_plugin.sim ARGS --quiet`` takes, start to exit.

    Raises:
        subprocess.CalledProcessError: when the command fails.
    """
    start = time.perf_counter()
    subprocess.run(  # noqa: S603 - our own interpreter and module, our own arguments
        [sys.executable, "-m", "dla_plugin.sim", *args, "--quiet"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Run both timings and print them against their targets."""
    hermetic_config()  # the operator's trust: the bench's own, never the user's
    parser = argparse.ArgumentParser(prog="python -m bench.dla_sim", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run, small sizes")
    args = parser.parse_args(argv)
    jobs, lines = (1_000, 100) if args.quick else (10_000, 400)
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f} at the start")
    study = timed(["--requests", str(jobs), "--predictions", "all"])
    verdict = "meets" if study < STUDY_TARGET_S else "MISSES"
    print(
        f"--predictions all, {jobs} synthetic jobs, 3 seeds: {study:.1f} s "
        f"(target < {STUDY_TARGET_S:.0f} s: {verdict})"
    )
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.csv"
        write_trace(trace, lines)
        replay = timed(["--trace", str(trace), "--predictions", "all"])
    verdict = "meets" if replay < TRACE_TARGET_S else "MISSES"
    print(
        f"--trace of {lines} lines, --predictions all, 3 seeds: {replay:.1f} s "
        f"(target < {TRACE_TARGET_S:.0f} s: {verdict})"
    )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
