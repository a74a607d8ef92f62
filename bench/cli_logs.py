"""Rows of the ``ecpa verify`` command, run as a subprocess on evidence logs made once per run
in a temporary directory: ``--jobs 2`` against ``--jobs 1`` (wall time), and the peak memory
of a 1 GB log against that of a one-record log.

Each run is its own ``python -m ecpa verify`` process, waited for with ``os.wait4``: its
resource usage is that of the process and of every worker it waited for, so ``ru_maxrss``
is the peak resident set of the largest of them (workers included), and nothing else the
benchmark ran counts in it.

Logs repeat a small set of signed records (distinct nonces): without ``--replay-db``
nothing remembers nonces, so every line verifies, and each line costs what a fresh record
would. The 1 GB log pads its records with 128 KiB of host evidence (which its statement's
``evidence_digest`` names): about 6,100 records of 176 KB, well under the longest line a
record may have, so that reading, parsing and hashing a gigabyte fits in the time budget.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import ecpa
from bench.paired import Row, summarize
from ecpa.runtime.model.evidence import Evidence, evidence_digest, record_line

TEST_SEED = bytes(range(32, 64))  # test-key-2 of the published corpus: TEST ONLY
ISSUER = "urn:ecpa:issuer:bench"
NOW = 1_800_000_000
JOBS_TARGET = 1 / 1.7  # --jobs 2 time / --jobs 1 time: at least 1.7 times faster
MEMORY_TARGET_MB = 200.0


def _statement(nonce: str, evidence_digest_value: str) -> dict[str, object]:
    return {
        "schema": ecpa.STATEMENT_SCHEMA,
        "profile": ecpa.PROFILE_ID,
        "issuer": ISSUER,
        "kid": "bench-key",
        "subject": "host-runtime",
        "plan_id": "plan:bench",
        "launch_id": "launch-bench",
        "plugin_id": "org.vllm-hust.dla/victim-selector",
        "obligation": "workers-invoked",
        "event": "invoked",
        "challenge_nonce": nonce,
        "artifact_digest": "sha256:" + "1" * 64,
        "evidence_digest": evidence_digest_value,
        "process": {
            "host": "bench",
            "role": "worker",
            "start_identity": "pid:1:boot:1",
            "ordinal": 0,
            "epoch": 1,
        },
        "observed_at": NOW - 2,
        "issued_at": NOW - 1,
        "expires_at": NOW + 60,
        "critical_claims": [],
    }


def _record(nonce: str, host: bytes) -> bytes:
    key = ecpa.SigningKey.from_seed(TEST_SEED)
    signed = ecpa.sign(_statement(nonce, evidence_digest(host)), key)
    return record_line(Evidence(signed.payload, signed.detached_jws, host))


class Workdir:
    """The trust store and the logs, made once in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.trust = directory / "trust.json"
        public = ecpa.SigningKey.from_seed(TEST_SEED).public_key.to_b64()
        entry = {
            "issuer": ISSUER,
            "kid": "bench-key",
            "public_key_b64": public,
            "subjects": ["host-runtime"],
            "enabled": True,
            "not_before": 0,
            "not_after": 2**53 - 1,
        }
        doc = {"schema": ecpa.TRUST_STORE_SCHEMA, "keys": [entry]}
        self.trust.write_text(json.dumps(doc), encoding="utf-8")

    def pair(self, stem: str) -> Path:
        """``STEM.jws`` beside its payload ``STEM.json``: one signed statement; the .jws."""
        key = ecpa.SigningKey.from_seed(TEST_SEED)
        signed = ecpa.sign(_statement(f"{stem}-nonce", evidence_digest(b"")), key)
        (self.directory / f"{stem}.json").write_bytes(signed.payload)
        jws = self.directory / f"{stem}.jws"
        jws.write_text(signed.detached_jws + "\n")
        return jws

    def log(self, name: str, records: int, *, distinct: int = 16) -> Path:
        """A log of ``records`` lines cycling through ``distinct`` signed small records."""
        lines = [_record(f"bench-{i}", b'{"seq":%d}' % i) for i in range(distinct)]
        block = b"".join(lines)
        path = self.directory / name
        with path.open("wb") as fh:
            for _ in range(records // distinct):
                fh.write(block)
            fh.write(b"".join(lines[: records % distinct]))
        return path

    def big_log(self, name: str, size: int) -> tuple[Path, int]:
        """A log of at least ``size`` bytes of one padded record (128 KiB host evidence)."""
        line = _record("bench-big", bytes(range(256)) * 512)
        count = -(-size // len(line))
        path = self.directory / name
        with path.open("wb") as fh:
            for _ in range(count // 64):
                fh.write(line * 64)
            fh.write(line * (count % 64))
        return path, count


@dataclass(frozen=True)
class Run:
    """One ``ecpa verify`` process: exit status, wall time, peak RSS and output digest."""

    status: int
    seconds: float
    peak_mb: float
    output: str


def run_verify(work: Workdir, log: Path, jobs: int, *, keep_output: bool = False) -> Run:
    """``python -m ecpa verify LOG --jobs JOBS``, timed, its peak RSS read by ``wait4``."""
    command = [sys.executable, "-m", "ecpa", "verify", str(log), "--trust", str(work.trust)]
    command += ["--now", str(NOW), "--jobs", str(jobs)]
    out_path = work.directory / "out.txt"
    with out_path.open("wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(  # noqa: S603 -- our own interpreter and arguments
            command, cwd=work.directory, stdout=out if keep_output else subprocess.DEVNULL
        )
        _, wait_status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(wait_status)  # reaped here, not by Popen
    digest = hashlib.sha256(out_path.read_bytes()).hexdigest() if keep_output else ""
    peak_kib = usage.ru_maxrss if sys.platform != "darwin" else usage.ru_maxrss / 1024
    return Run(proc.returncode, seconds, peak_kib / 1024, digest)


def jobs_row(work: Workdir, records: int, rounds: int) -> Row:
    """``--jobs 2`` against ``--jobs 1`` on a log of ``records`` records, paired rounds."""
    log = work.log(f"log-{records}.jsonl", records)
    one, two = (
        run_verify(work, log, 1, keep_output=True),
        run_verify(work, log, 2, keep_output=True),
    )
    assert one.status == two.status == 0, (one, two)
    assert one.output == two.output, "--jobs 2 printed something else than --jobs 1"
    base: list[float] = []
    ours: list[float] = []
    for r in range(rounds):
        pair = [(1, base), (2, ours)]
        for jobs, out in pair if r % 2 == 0 else pair[::-1]:
            out.append(run_verify(work, log, jobs).seconds)
    m = summarize(base, ours)
    return Row(
        "ecpa verify --jobs 2",
        "ecpa verify --jobs 1",
        m.base,
        m.ours,
        "s",
        m.ratio,
        m.spread,
        f"<= {JOBS_TARGET:.3f} (>= 1.7x faster)",
        m.ratio <= JOBS_TARGET,
        f"{records:,} records, {log.stat().st_size / 1e6:,.0f} MB, {os.cpu_count()} CPUs; "
        f"speed-up {1 / m.ratio:.2f}x; identical output checked",
    )


def memory_rows(work: Workdir, size: int, rounds: int) -> list[Row]:
    """Peak RSS of ``ecpa verify`` on a log of ``size`` bytes against a one-record log, for
    ``--jobs 1`` and ``--jobs 2``; the target is on the big log's peak itself."""
    big, count = work.big_log(f"big-{size}.jsonl", size)
    small = work.log("one.jsonl", 1, distinct=1)
    rows = []
    for jobs in (2, 1):
        base: list[float] = []
        ours: list[float] = []
        seconds: list[float] = []
        for r in range(rounds):
            pair = [(small, base), (big, ours)]
            for log, out in pair if r % 2 == 0 else pair[::-1]:
                run = run_verify(work, log, jobs)
                assert run.status == 0, run
                out.append(run.peak_mb)
                if log is big:
                    seconds.append(run.seconds)
        m = summarize(base, ours)
        mb = big.stat().st_size / 1e6
        rows.append(
            Row(
                f"peak RSS, {mb:,.0f} MB log, --jobs {jobs}",
                "the same on a 1-record log",
                m.base,
                m.ours,
                "MB",
                m.ratio,
                m.spread,
                f"<= {MEMORY_TARGET_MB:.0f} MB",
                m.ours <= MEMORY_TARGET_MB,
                f"{count:,} records of {big.stat().st_size // count:,} bytes; verified in "
                f"{min(seconds):.1f} s ({mb / min(seconds):,.0f} MB/s)",
            )
        )
    return rows
