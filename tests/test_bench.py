"""The benchmarks run and print their ratios (their figures are read, never asserted: noisy)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT


def bench(module: str, *args: str, timeout: float = 300) -> str:
    """What ``python -m MODULE ARGS`` prints; a non-zero exit fails the test."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    ).stdout


def test_host_sink_bench_prints_its_ratios_and_the_record_volume() -> None:
    out = bench("bench.host_sink", "--quick", timeout=120)
    paced = re.search(r"ratio (\d+\.\d+) .* target <= 1\.10: (meets|MISSES)", out)
    assert paced, out
    assert float(paced.group(1)) > 0
    assert re.search(r"ratio \d+\.\d+ .* target <= 1\.10: info", out), out
    volumes = re.findall(
        r"journal ([\d,]+) lines for ([\d,]+) dispatches; .*; (\d+) signed records in ([\d.]+) s",
        out,
    )
    assert len(volumes) == 2, out
    for lines, dispatches, records, seconds in volumes:
        assert int(lines.replace(",", "")) == int(dispatches.replace(",", "")) + 1
        # One record per emit interval (1 s) whatever the dispatch rate, and one at the
        # close: a rate per second misled when a fast round took 0.2 s (one record, 5/s).
        assert 1 <= int(records) <= float(seconds) / 1.0 + 2, out


def test_observer_bench_prints_its_ratio() -> None:
    out = bench("bench.observer", "--quick", timeout=120)
    ratio = re.search(r"ratio with/without (\d+\.\d+) .* target <= 1\.10: (meets|MISSES)", out)
    assert ratio, out
    assert float(ratio.group(1)) > 0
    counted = re.search(r"dispatches counted by the observer: (\d+)", out)
    assert counted, out
    assert int(counted.group(1)) > 3 * 2_000  # every observed call counted (and the warm-up)


#: Every row ``python -m bench`` prints: (benchmark, baseline) as they start in the table.
BENCH_ROWS = [
    ("ecpa.verify", "cryptography Ed25519 verify"),
    ("ecpa.verify", "libsodium verify"),
    ("ecpa.sign", "cryptography Ed25519 sign"),
    ("ecpa.canonicalize", "rfc8785.dumps"),
    ("ecpa verify --jobs 2", "ecpa verify --jobs 1"),
    ("peak RSS, ", "the same on a 1-record log"),
    ("DLA dispatch with observer", "the same without observer"),
    ("host select_victim, ecpa sink", "the same, a no-op sink"),
    ("the same, back to back", "the same, a no-op sink"),
    ("ecpa status, 2 GiB last line", "the same launch without it"),
    ("ecpa --version", "python -c pass"),
    ("ecpa --help", "python -c pass"),
    ("ecpa verify one.jws", "python -c pass"),
    ("ecpa status --launch", "python -c pass"),
    ("floor: typer, Ed25519 libs", "python -c pass"),
    ("not paid: pydantic, one model", "python -c pass"),
]
#: The PostgreSQL rows (bench.shared), where a server can be started; else one row says so.
SHARED_ROWS = [
    ("PostgreSQL fence, 1 process", "SQLite fence, 1 process"),
    ("PostgreSQL fence, 1 process", "memory fence"),
    ("PostgreSQL fence, 4 processes", "SQLite fence, 4 processes"),
    ("ecpa status --db, 4 slots", "ecpa status --launch, same launch"),
    ("ecpa ship --once", "(no baseline)"),
    ("ecpa ship, 16 shippers x 8 logs", "bare COPY of the same bytes"),
    ("ecpa ship, 16 shippers x 64 logs", "bare COPY of the same bytes"),
    ("fleet verdict from the store", "the same launches from their directories"),
    ("fleet verdict from the store, 4 x 10 slots, status --all again", "status --all (a command"),
    ("serve's judging processes over the store, 4 x 10 slots", "--judges 1"),
    ("serve's judging processes over a live store, 4 x 10 slots", "the same refresh, nothing"),
]
#: Without a server, one row says so for bench.shared and one for bench.fleet.
NOT_MEASURED = [("PostgreSQL rows", "(not"), ("fleet rows", "(not")]


def test_bench_table_prints_every_row(tmp_path: Path) -> None:
    """``python -m bench --quick`` runs and prints each row with its medians, ratio, target
    and verdict. Figures are read, never asserted."""
    out = bench("bench", "--quick", "--tmp", str(tmp_path), timeout=600)
    value = r"[\d,]+(?:\.\d+)? (?:us|s|MB)"
    row = re.compile(
        rf"^(?P<name>\S.*?)\s{{2,}}(?P<baseline>\S.*?)\s{{2,}}(?P<base>{value})\s+"
        rf"(?P<ours>{value})\s+(?P<ratio>\d+\.\d+) \(\d+\.\d+\.\.\d+\.\d+\)\s+"
        r"(?P<target>\S.*?)\s+(?P<verdict>meets|MISSES|info)$",
        re.MULTILINE,
    )
    rows = [m.groupdict() for m in row.finditer(out)]
    found = [(r["name"], r["baseline"]) for r in rows]
    shared = SHARED_ROWS if "(not measured here)" not in out else NOT_MEASURED
    for name, baseline in BENCH_ROWS + shared:
        assert any(n.startswith(name) and b.startswith(baseline) for n, b in found), (
            name,
            baseline,
            out,
        )
    expected = len(BENCH_ROWS) + 1 + len(shared)  # peak RSS twice: --jobs 2 and --jobs 1
    assert len(rows) == expected, out
    for r in rows:
        if r["verdict"] != "info":  # an info row may be skipped (no PyNaCl): no figures
            assert float(r["ratio"]) > 0, r
            assert "<=" in r["target"], r
    assert re.search(rf"^{expected} rows in \d+ s", out, re.MULTILINE), out
    assert list(tmp_path.iterdir()) == []  # the logs were removed


def test_status_bench_prints_its_rows_and_the_same_answer() -> None:
    out = bench("bench.status", "--slots", "2", "--hours", "0.5", "--rounds", "1")
    for row in ("status, 2 slots x 0.5 h (warm)", "status, 2 slots x 0.5 h (cold)"):
        assert row in out, out
    # the figures are not asserted; the answer check is: status equals the full re-verification
    assert re.search(r"status, 2 slots x 10 min, caught up .* same answer\s+meets", out), out


def test_instruction_bench_names_its_rows_and_times_each_side(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``python -m bench.instructions`` (callgrind: minutes, so not run whole here): its
    four rows against their baselines and targets; without valgrind it says how to
    install it; the wall-clock side it prints beside the counts runs and is positive."""
    from bench import instructions

    assert [(s.name, s.baseline, s.target) for s in instructions.SPECS] == [
        ("ecpa.verify", "libsodium verify", 1.20),
        ("ecpa.sign", "libsodium sign", 1.30),
        ("ecpa.canonicalize", "rfc8785.dumps", 0.25),
        ("ecpa verify, a log record", "libsodium verify", 1 / 0.75),
    ]
    monkeypatch.setattr(instructions.shutil, "which", lambda name: None)
    assert instructions.rows(10) == ["(not measured: no valgrind; Debian: apt install valgrind)"]
    for side in ("verify", "nacl_verify", "log_record"):
        assert instructions.wall_per_call(side, 20) > 0


def test_dla_sim_bench_times_the_study_and_the_trace() -> None:
    out = bench("bench.dla_sim", "--quick", timeout=600)
    study = re.search(r"--predictions all, 1000 synthetic jobs, 3 seeds: (\d+\.\d) s", out)
    replay = re.search(r"--trace of 100 lines, --predictions all, 3 seeds: (\d+\.\d) s", out)
    assert study, out
    assert replay, out
    assert float(study.group(1)) > 0
    assert float(replay.group(1)) > 0
    assert "load average" in out


def test_serve_bench_loads_the_endpoints_and_prints_its_rows() -> None:
    out = bench("bench.serve", "--launches", "2", "--slots", "2", "--seconds", "0.5")
    # the figures are not asserted; every request was answered 200 with a body, or it fails
    for name in ("/metrics", "the page", "one launch"):
        assert re.search(rf"^{re.escape(name)}\s+2 x 2\s+[\d,]+ req/s\s+p50 .* p99 ", out, re.M), (
            out
        )


@pytest.mark.skipif(
    shutil.which("initdb") is None and not any(Path("/usr/lib/postgresql").glob("*/bin/initdb")),
    reason="no PostgreSQL server binaries",
)
def test_serve_bench_serves_a_store() -> None:
    """``--db``: the launches shipped into a throw-away PostgreSQL and served from it, every
    answer checked as over directories, the launches judged effective from the store."""
    out = bench(
        "bench.serve",
        "--db",
        "--gzip",
        "--judges",
        "2",
        "--launches",
        "2",
        "--slots",
        "2",
        "--seconds",
        "0.5",
    )
    for name in ("/metrics", "the page", "one launch"):
        assert re.search(rf"^{re.escape(name)}\s+2 x 2\s+[\d,]+ req/s\s+p50 .* p99 ", out, re.M), (
            out
        )
    assert re.search(r"from the store \(\d+ lines shipped .*; 2 of 2 launches effective", out), out


def test_startup_bench_prints_its_rows() -> None:
    out = bench("bench.startup", "--rounds", "1")
    names = ("ecpa --version", "ecpa verify one.jws", "ecpa status --launch", "floor:", "not paid:")
    for name in names:
        assert re.search(rf"^{re.escape(name)}.*python -c pass", out, re.MULTILINE), out


@pytest.mark.skipif(
    shutil.which("initdb") is None and not any(Path("/usr/lib/postgresql").glob("*/bin/initdb")),
    reason="no PostgreSQL server binaries",
)
def test_fleet_history_bench_walks_and_judges_a_small_fleet() -> None:
    """The whole-history row at a small size: every line shipped, every launch effective
    after the cold walk and when judged warm, both teams agreeing."""
    out = bench(
        "bench.fleet_history", "--count", "3", "--slots", "2", "--records", "5", "--rounds", "1"
    )
    assert "over 5 records a process (30 lines), 3 x 2 slots, --judges 2" in out, out
    assert "3 of 3 effective; the same verdicts" in out, out
    assert re.search(r"shipped 39 lines in ", out), out  # 30 records, 6 + 3 certificates
    assert "(3 of 3 effective, " in out, out
