"""The benchmarks run and print their ratios (their figures are read, never asserted: noisy)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support import ROOT


def test_observer_bench_prints_its_ratio() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench.observer", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    ratio = re.search(r"ratio with/without (\d+\.\d+) .* target <= 1\.10: (meets|MISSES)", out)
    assert ratio, out
    assert float(ratio.group(1)) > 0
    counted = re.search(r"dispatches counted by the observer: (\d+)", out)
    assert counted, out
    assert int(counted.group(1)) > 3 * 2_000  # every observed call counted (and the warm-up)
