"""RUNTIME.md "Writing" and "Reading": the evidence log appender (one ``write`` per line,
``fsync`` per batch, mode 0600, no symlinks) and crash safety with real child processes,
for the log and for the SQLite replay fence (a killed verifier keeps its nonces; two racing
verifiers accept each nonce once); ``SqliteReplayFence.purge``."""

from __future__ import annotations

import json
import os
import random
import select
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ecpa
from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime.host.evidence_log import EvidenceLog
from ecpa.runtime.model.evidence import (
    Evidence,
    LogLine,
    evidence_digest,
    parse_record,
    read_log,
    record_line,
    verify_evidence,
)
from ecpa.runtime.stores.replay import MemoryReplayFence, SqliteReplayFence
from tests.support import KEY_1, NOW, ROOT, statement, store

HOST = b'{"schema":"ecpa-dispatch-counters/0.1","seq":1}'


def ev(i: int, *, host: bool = False) -> Evidence:
    """Signed evidence with nonce ``n:<i>``, with host evidence when ``host``."""
    changes: dict[str, Any] = {"challenge_nonce": f"n:{i}"}
    if host:
        changes["evidence_digest"] = evidence_digest(HOST)
    signed = ecpa.sign(statement(**changes), KEY_1)
    return Evidence(signed.payload, signed.detached_jws, HOST if host else None)


def lines(path: Path) -> list[LogLine]:
    with path.open("rb") as fh:
        return list(read_log(fh))


def verified_nonces(path: Path) -> tuple[list[str], list[LogLine]]:
    """Verify every complete line (each nonce once); return the nonces and the bad lines."""
    fence = MemoryReplayFence()
    nonces, bad = [], []
    for line in lines(path):
        if line.evidence is None:
            bad.append(line)
            continue
        verified = verify_evidence(line.evidence, store(), now=NOW, replay=fence)
        nonces.append(verified.statement.challenge_nonce)
    return nonces, bad


def code(exc_info: pytest.ExceptionInfo[EcpaError]) -> ErrorCode:
    return exc_info.value.code


# --- the record line and the appender ------------------------------------------------------


@pytest.mark.parametrize("host", [False, True])
def test_record_line_round_trips_through_parse_record(host: bool) -> None:
    evidence = ev(1, host=host)
    line = record_line(evidence)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert b" " not in line
    keys = list(json.loads(line))
    expected = ["schema", "payload_b64", "detached_jws"]
    if host:
        expected.insert(1, "host_evidence_b64")
    assert keys == expected
    assert parse_record(line[:-1]) == evidence


def test_record_line_refuses_wrong_types() -> None:
    with pytest.raises(EcpaError) as exc_info:
        record_line(Evidence("text", "jws"))  # type: ignore[arg-type]
    assert code(exc_info) is ErrorCode.INVALID_INPUT


def test_append_read_verify_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with EvidenceLog(path) as log:
        log.append(ev(0))
        log.append(ev(1, host=True))
        assert log.append_batch([ev(2), ev(3, host=True)]) == 2
    with EvidenceLog(path) as log:  # reopening appends after what is there
        log.append(ev(4))
        log.flush()
    nonces, bad = verified_nonces(path)
    assert nonces == [f"n:{i}" for i in range(5)]
    assert bad == []


def test_new_log_has_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    old = os.umask(0)  # the mode must come from the open call, not from the umask
    try:
        EvidenceLog(path).close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("mode", [0o644, 0o660, 0o602])
def test_log_with_looser_mode_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"")
    path.chmod(mode)
    with pytest.raises(EcpaError) as exc_info:
        EvidenceLog(path)
    assert code(exc_info) is ErrorCode.INVALID_INPUT
    assert stat.S_IMODE(path.stat().st_mode) == mode  # refused, not changed


@pytest.mark.parametrize("dangling", [False, True])
def test_symlink_is_refused(tmp_path: Path, dangling: bool) -> None:
    target = tmp_path / "target.jsonl"
    if not dangling:
        EvidenceLog(target).close()
    link = tmp_path / "log.jsonl"
    link.symlink_to(target)
    with pytest.raises(EcpaError) as exc_info:
        EvidenceLog(link)
    assert code(exc_info) is ErrorCode.INVALID_INPUT
    if dangling:
        assert not target.exists()
    else:
        assert target.read_bytes() == b""


@pytest.mark.parametrize("reader", [False, True])
def test_fifo_is_refused_without_blocking(tmp_path: Path, reader: bool) -> None:
    path = tmp_path / "log.jsonl"
    os.mkfifo(path, 0o600)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK) if reader else None
    try:
        with pytest.raises(EcpaError) as exc_info:
            EvidenceLog(path)
    finally:
        if fd is not None:
            os.close(fd)
    assert code(exc_info) is ErrorCode.INVALID_INPUT


def test_directory_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.mkdir(mode=0o700)
    with pytest.raises(EcpaError) as exc_info:
        EvidenceLog(path)
    assert code(exc_info) is ErrorCode.INVALID_INPUT


def test_one_write_per_record_and_one_fsync_per_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[bytes] = []
    fsyncs: list[int] = []
    real_write, real_fsync = os.write, os.fsync

    def write(fd: int, data: Any) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    def fsync(fd: Any) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    items = [ev(i) for i in range(5)]
    with EvidenceLog(tmp_path / "log.jsonl") as log:
        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "fsync", fsync)
        log.append(items[0])
        assert (len(writes), len(fsyncs)) == (1, 0)
        log.append_batch(items[1:])
        assert (len(writes), len(fsyncs)) == (5, 1)
        log.flush()
        assert len(fsyncs) == 2
    assert writes == [record_line(item) for item in items]  # each a whole line


def test_short_write_is_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write

    def short(fd: int, data: Any) -> int:
        return real_write(fd, bytes(data[:7]))  # at most 7 bytes per call

    path = tmp_path / "log.jsonl"
    with EvidenceLog(path) as log:
        monkeypatch.setattr(os, "write", short)
        log.append(ev(0))
        monkeypatch.setattr(os, "write", real_write)
        log.append(ev(1))
    assert verified_nonces(path) == (["n:0", "n:1"], [])


def test_bad_item_in_batch_writes_nothing_and_closed_log_refuses(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    log = EvidenceLog(path)
    with pytest.raises(EcpaError) as exc_info:
        log.append_batch([ev(0), Evidence(b"x", 5)])  # type: ignore[arg-type]
    assert code(exc_info) is ErrorCode.INVALID_INPUT
    assert path.read_bytes() == b""
    log.close()
    log.close()  # harmless twice
    with pytest.raises(EcpaError) as exc_info:
        log.append(ev(0))
    assert code(exc_info) is ErrorCode.INVALID_INPUT


def test_reopening_after_a_torn_tail_keeps_the_next_record_whole(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    line = record_line(ev(0))
    path.write_bytes(record_line(ev(1)) + line[: len(line) // 2])
    path.chmod(0o600)
    assert lines(path)[-1].torn
    with EvidenceLog(path) as log:
        log.append(ev(2))
    nonces, bad = verified_nonces(path)
    assert nonces == ["n:1", "n:2"]
    # The fragment is now a complete line of its own: reported, not torn, not counted.
    assert [(b.number, b.torn) for b in bad] == [(2, False)]
    assert bad[0].error is not None
    assert bad[0].error.code is ErrorCode.MALFORMED_JSON


# --- crash safety with real child processes -------------------------------------------------

PRELUDE = """
import json, os, random, sys, time
import ecpa
from ecpa.runtime.model.evidence import Evidence
from ecpa.runtime.host.evidence_log import EvidenceLog
from ecpa.runtime.stores.replay import SqliteReplayFence
from tests.support import KEY_1, NOW, statement

def ev(i):
    signed = ecpa.sign(statement(challenge_nonce=f"n:{i}"), KEY_1)
    return Evidence(signed.payload, signed.detached_jws)
"""

HANG_MID_WRITE = """
log = EvidenceLog(sys.argv[1])
for i in range(5):
    log.append(ev(i))
log.flush()
real_write = os.write

def half_then_hang(fd, data):
    written = real_write(fd, bytes(data[: len(data) // 2]))
    os.fsync(fd)
    print("ready", flush=True)
    time.sleep(60)
    return written

os.write = half_then_hang
log.append(ev(5))
"""

BUSY_APPENDER = """
log = EvidenceLog(sys.argv[1])
i = 0
while True:
    if i % 3:
        log.append(ev(i))
        i += 1
    else:
        log.append_batch([ev(i), ev(i + 1)])
        i += 2
    if 20 <= i < 22:
        print("ready", flush=True)
"""

FENCE_THEN_HANG = """
fence = SqliteReplayFence(sys.argv[1])
for i in range(100):
    fence.check_and_record(f"n:{i}", expires_at=NOW + 60)
print("ready", flush=True)
time.sleep(60)
"""

FENCE_RACER = """
fence = SqliteReplayFence(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
accepted = []
order = list(range(1000))
random.Random(int(sys.argv[2])).shuffle(order)  # in one order, the first to start wins all
for i in order:
    time.sleep(0.001)  # a verifier's other work, so that neither process starves the other
    try:
        fence.check_and_record(f"n:{i}", expires_at=NOW + 60)
    except ecpa.EcpaError as exc:
        if exc.code is not ecpa.ErrorCode.REPLAYED_NONCE:
            raise
    else:
        accepted.append(i)
print(json.dumps(accepted), flush=True)
"""


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Started children; any still running at the end is killed (by its own pid)."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def start(procs: list[subprocess.Popen[bytes]], script: str, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", PRELUDE + script, *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    procs.append(proc)
    return proc


def read_line(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> bytes:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else b""
    if not line:
        proc.kill()
        assert proc.stderr is not None
        pytest.fail(f"child gave no line: {proc.stderr.read().decode(errors='replace')}")
    return line


def kill(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL


def test_child_killed_mid_write_leaves_a_torn_tail_that_is_not_counted(
    tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    path = tmp_path / "log.jsonl"
    proc = start(children, HANG_MID_WRITE, str(path))
    assert read_line(proc) == b"ready\n"
    kill(proc)
    nonces, bad = verified_nonces(path)
    assert nonces == [f"n:{i}" for i in range(5)]
    assert [(b.number, b.torn) for b in bad] == [(6, True)]
    # A new writer (the restarted observer) closes the torn line and goes on.
    with EvidenceLog(path) as log:
        log.append(ev(6))
    nonces, bad = verified_nonces(path)
    assert nonces == [*(f"n:{i}" for i in range(5)), "n:6"]
    assert [(b.number, b.torn) for b in bad] == [(6, False)]


@pytest.mark.parametrize("seed", [1, 2])
def test_child_killed_while_appending_leaves_only_whole_verifying_lines(
    tmp_path: Path, children: list[subprocess.Popen[bytes]], seed: int
) -> None:
    path = tmp_path / "log.jsonl"
    proc = start(children, BUSY_APPENDER, str(path))
    assert read_line(proc) == b"ready\n"
    time.sleep(random.Random(seed).uniform(0.0, 0.3))  # a different moment per seed
    kill(proc)
    nonces, bad = verified_nonces(path)
    assert len(nonces) >= 20
    assert nonces == [f"n:{i}" for i in range(len(nonces))]  # in order, no gap
    # Each line is one write, so a kill cannot cut one short; were it cut, only the
    # last line could be, and it would be reported as torn.
    assert all(b.torn and b.number == len(nonces) + 1 for b in bad)


def test_sqlite_fence_keeps_nonces_of_a_killed_verifier(
    tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    path = tmp_path / "replay.sqlite"
    proc = start(children, FENCE_THEN_HANG, str(path))
    assert read_line(proc) == b"ready\n"
    kill(proc)  # while it still holds its connection
    with SqliteReplayFence(path) as fence:
        assert len(fence) == 100
        for i in range(100):
            with pytest.raises(EcpaError) as exc_info:
                fence.check_and_record(f"n:{i}", expires_at=NOW + 60)
            assert code(exc_info) is ErrorCode.REPLAYED_NONCE
        fence.check_and_record("n:100", expires_at=NOW + 60)


def test_two_processes_racing_accept_each_nonce_exactly_once(
    tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    path = tmp_path / "replay.sqlite"
    procs = [start(children, FENCE_RACER, str(path), str(seed)) for seed in (1, 2)]
    for proc in procs:
        assert read_line(proc) == b"ready\n"
    for proc in procs:  # the barrier: both are open and waiting; release them together
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
    accepted = [set(json.loads(read_line(proc, timeout=60))) for proc in procs]
    for proc in procs:
        assert proc.wait(timeout=10) == 0
    assert accepted[0].isdisjoint(accepted[1])
    assert accepted[0] | accepted[1] == set(range(1000))


# --- purge ----------------------------------------------------------------------------------


def test_sqlite_purge_removes_exactly_the_expired(tmp_path: Path) -> None:
    path = tmp_path / "replay.sqlite"
    with SqliteReplayFence(path) as fence:
        for i in range(10):
            fence.check_and_record(f"n:{i}", expires_at=NOW + i)
        assert fence.purge(now=NOW + 5) == 5  # expires_at < now: n:0 .. n:4
        assert fence.purge(now=NOW + 5) == 0
        assert fence.purge(now=NOW + 8, clock_skew=2) == 1  # < NOW + 6: n:5
        assert sorted(n for n in (f"n:{i}" for i in range(10)) if n in fence) == [
            f"n:{i}" for i in range(6, 10)
        ]
    with SqliteReplayFence(path) as fence:  # the purge was committed
        assert len(fence) == 4
        fence.check_and_record("n:0", expires_at=NOW + 60)  # forgotten, so new again
        with pytest.raises(EcpaError) as exc_info:
            fence.check_and_record("n:6", expires_at=NOW + 60)
        assert code(exc_info) is ErrorCode.REPLAYED_NONCE
