"""``ecpa verify --jobs N`` (docs/cli.md "ecpa verify"): the same output, exit status and
``--json`` lines as one process, for logs (valid, invalid, replayed, torn, non-JSON, over-long,
blank and CRLF lines, cut at every chunk boundary), several files, standard input and inputs
that are not evidence; the replay fence applied in input order; bad ``--jobs`` values; bounded
memory on a large log; no worker left behind when the main process dies.
"""

from __future__ import annotations

import json
import multiprocessing
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import ecpa
from ecpa.runtime.model.evidence import MAX_RECORD_LENGTH, Evidence, evidence_digest, record_line
from ecpa.verify_jobs import _parallel, _units
from tests._cli_helpers import (
    Run,
    bundle,
    ecpa_main,
    json_results,
    record,
    signed,
    write_json,
    write_pair,
    write_trust,
)
from tests.support import KEY_1, NOW, payload_of, statement, store

SCRIPT = Path(sys.executable).parent / "ecpa"
forking = pytest.mark.skipif(
    multiprocessing.get_start_method() != "fork",
    reason="workers see the test's monkeypatches only when forked",
)


@pytest.fixture
def trust(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ECPA_TRUST_STORE", raising=False)
    return write_trust(tmp_path)


def _nonce(nonce: str, **changes: Any) -> str:
    return record(signed(statement(challenge_nonce=nonce, **changes)))


def _mixed_lines() -> list[str]:
    """One of each kind of line a log can hold; nonce-1 appears valid three times."""
    tampered = (payload_of(statement()).replace(b"launch-1", b"launch-9"), signed()[1])
    return [
        record(),  # valid, nonce-1
        _nonce("nonce-2"),
        record(tampered),  # bad signature (nonce-1: must not consume it)
        "",  # blank: numbered, no item
        "not json at all",
        '{"payload":"e30"}',  # a record of the wrong shape
        _nonce("nonce-3", expires_at=NOW - 1),  # expired: never consumes nonce-3
        record() + "\r",  # CRLF line, nonce-1 again: a replay with a fence
        _nonce("nonce-3"),  # valid now
        "   ",
        _nonce("nonce-2"),  # replay of line 2 with a fence
    ]


def _write_log(path: Path, repeat: int = 1, torn: bool = True) -> Path:
    lines = _mixed_lines() * repeat
    text = "\n".join(lines) + "\n"
    if torn:
        text += record()[:45]  # a write cut short by a crash: no newline, not JSON
    path.write_text(text)
    return path


def _run(*args: str | Path, jobs: int, stdin: bytes | None = None) -> Run:
    return ecpa_main("verify", *args, "--now", NOW, "--jobs", jobs, stdin=stdin)


def _same_for_every_jobs(*args: str | Path, stdin: bytes | None = None) -> Run:
    """Run with --jobs 1, 2 and 3; assert the three runs are identical; return the first."""
    runs = [_run(*args, jobs=jobs, stdin=stdin) for jobs in (1, 2, 3)]
    assert runs[1] == runs[0], (runs[0], runs[1])
    assert runs[2] == runs[0], (runs[0], runs[2])
    return runs[0]


# --- the same output ----------------------------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_mixed_log_same_output(trust: Path, as_json: bool) -> None:
    log = _write_log(Path("run.jsonl"), repeat=150)  # 1650 lines: several chunks
    flags = ["--json"] if as_json else []
    run = _same_for_every_jobs(log, "--trust", trust, *flags)
    assert run.status == 1
    assert "run.jsonl:1651: skipped a torn last line" in run.err
    if as_json:
        results = json_results(run.out)
        assert len(results) == 150 * 9
        assert [r["line"] for r in results[:3]] == [1, 2, 3]
        assert sum(r["ok"] for r in results) == 150 * 5  # no fence: repeats are accepted
    else:
        assert run.lines[0].startswith("OK run.jsonl:1 ")
        assert run.lines[4].startswith("FAIL run.jsonl:6 ECPA_INVALID_RECORD: ")


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_replay_fence_in_input_order(trust: Path, as_json: bool) -> None:
    log = _write_log(Path("run.jsonl"))
    flags = ["--json"] if as_json else []
    runs = [
        _run(log, "--trust", trust, "--replay-db", f"seen-{jobs}.db", *flags, jobs=jobs)
        for jobs in (1, 2, 3)
    ]
    assert runs[1] == runs[0] == runs[2]
    text = runs[0].out
    codes = [r["code"] for r in json_results(text)] if as_json else None
    if codes is not None:
        assert codes == [
            None,
            None,
            "ATTESTATION_INVALID_SIGNATURE",
            "ATTESTATION_MALFORMED_JSON",
            "ECPA_INVALID_RECORD",
            "ATTESTATION_EXPIRED",
            "REPLAYED_NONCE",  # line 8: nonce-1 was accepted at line 1
            None,  # line 9: nonce-3, refused at line 7 as expired, so still unused
            "REPLAYED_NONCE",  # line 11: nonce-2 of line 2
        ]
    # A second run against the same database: every nonce already accepted.
    again = [
        _run(log, "--trust", trust, "--replay-db", f"seen-{jobs}.db", *flags, jobs=jobs)
        for jobs in (1, 2)
    ]
    assert again[0] == again[1]
    assert "OK " not in again[0].out
    assert '"ok":true' not in again[0].out


def test_chunk_boundaries_everywhere(trust: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny chunks put a boundary between every pair of lines, blank and torn ones too."""
    log = _write_log(Path("run.jsonl"), repeat=3)
    expected = _run(log, "--trust", trust, "--replay-db", "one.db", jobs=1)
    for lines, size in [(1, 1 << 20), (2, 1 << 20), (3, 1 << 20), (512, 1)]:
        monkeypatch.setattr(_parallel, "CHUNK_LINES", lines)
        monkeypatch.setattr(_parallel, "CHUNK_BYTES", size)
        for path in Path().glob("many.db*"):
            path.unlink()
        assert _run(log, "--trust", trust, "--replay-db", "many.db", jobs=2) == expected


def test_over_long_line_same_output(trust: Path) -> None:
    long_line = '{"payload_b64":"' + "A" * (MAX_RECORD_LENGTH + 5000) + '"}'
    exact = "x" * (MAX_RECORD_LENGTH + 1)  # with "\n", exactly what read_log reads at once
    for name, tail in [("run.jsonl", "\n"), ("end.jsonl", "")]:
        Path(name).write_text("\n".join([record(), long_line, exact, record(), long_line]) + tail)
        run = _same_for_every_jobs(name, "--trust", trust, "--json")
        codes = [r["code"] for r in json_results(run.out)]
        assert codes == [None, "ATTESTATION_TOO_LARGE", "ATTESTATION_TOO_LARGE", None, codes[4]]
        assert codes[4] == "ATTESTATION_TOO_LARGE"


def test_several_files_same_output(trust: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parallel, "FILES_PER_UNIT", 2)
    specs: list[str] = []
    for i in range(5):
        write_pair(Path(), f"ev{i}", signed(statement(challenge_nonce=f"f-{i}")))
        write_json(Path(f"b{i}.json"), bundle(signed(statement(challenge_nonce=f"b-{i}"))))
        specs += [f"ev{i}.jws", f"b{i}.json"]
    write_json(Path("bad.json"), {"payload_b64": "e30"})
    _write_log(Path("run.jsonl"))
    Path("empty.jsonl").write_text("\n\n")
    Path("only-torn.jsonl").write_text(record()[:30])
    args = [*specs[:3], "run.jsonl", "bad.json", "empty.jsonl", *specs[3:], "only-torn.jsonl"]
    for fence in ([], ["--replay-db", "x.db"]):
        for extra in ([], ["--json"]):
            for path in Path().glob("x.db*"):
                path.unlink()
            runs = []
            for jobs in (1, 2, 3):
                runs.append(_run(*args, "--trust", trust, *fence, *extra, jobs=jobs))
                for path in Path().glob("x.db*"):
                    path.unlink()
            assert runs[0].status == 1
            assert runs[1] == runs[0] == runs[2]
    text = _run(*args, "--trust", trust, jobs=2)
    assert any(line.startswith("FAIL empty.jsonl ECPA_INVALID_RECORD") for line in text.lines)
    assert any(line.startswith("FAIL only-torn.jsonl ECPA_INVALID_RECORD") for line in text.lines)


@pytest.mark.parametrize("missing", ["gone.jws", "gone.json", "gone.jsonl"])
def test_unreadable_input_stops_after_the_same_lines(trust: Path, missing: str) -> None:
    write_pair(Path())
    _write_log(Path("run.jsonl"), repeat=60)
    run = _same_for_every_jobs("run.jsonl", "ev.jws", missing, "ev.jws", "--trust", trust)
    assert run.status == 2
    *_, torn, stop = run.err.splitlines()
    assert torn.startswith("ecpa: run.jsonl:661: skipped a torn last line")
    assert stop.startswith("ecpa: ECPA_INVALID_INPUT: ")
    assert missing in stop
    assert run.lines[-1].startswith("OK ev.jws ")


def test_missing_sibling_payload_in_a_worker(trust: Path) -> None:
    write_pair(Path(), "a")
    write_pair(Path(), "b")
    Path("b.json").unlink()
    run = _same_for_every_jobs("a.jws", "b.jws", "a.jws", "--trust", trust)
    assert run.status == 2
    assert run.lines == [run.lines[0]]
    assert "b.json" in run.err


def test_stdin_same_output(trust: Path) -> None:
    log = _write_log(Path("run.jsonl"), repeat=40).read_bytes()
    run = _same_for_every_jobs("-", "--trust", trust, stdin=log)
    assert run.lines[0].startswith("OK -:1 ")
    pretty = json.dumps(bundle(), indent=2).encode()
    run = _same_for_every_jobs("run.jsonl", "-", "--trust", trust, "--json", stdin=pretty)
    assert json_results(run.out)[-1]["input"] == "-"


def test_host_evidence_digest_same_output(trust: Path) -> None:
    host = b'{"schema":"ecpa-dispatch-counters/0.1","seq":1}'
    good = signed(statement(evidence_digest=evidence_digest(host)))
    Path("run.jsonl").write_text(record(good, host=host) + "\n" + record(good, host=b"x") + "\n")
    run = _same_for_every_jobs("run.jsonl", "--trust", trust, "--json")
    codes = [r["code"] for r in json_results(run.out)]
    assert codes == [None, "ATTESTATION_EVIDENCE_DIGEST_MISMATCH"]


@forking
def test_internal_error_in_a_worker_is_reported_in_order(
    trust: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ecpa.verify_jobs import _serial

    real = _parallel.verify_evidence

    def flaky(evidence: Evidence, *args: Any, **kwargs: Any) -> ecpa.Verified:
        if b"nonce-3" in evidence.payload:
            raise RuntimeError("boom")
        return real(evidence, *args, **kwargs)

    monkeypatch.setattr(_parallel, "verify_evidence", flaky)
    monkeypatch.setattr(_serial, "verify_evidence", flaky)
    _write_log(Path("run.jsonl"))
    run = _same_for_every_jobs("run.jsonl", "--trust", trust)
    assert run.status == 3
    assert run.err == "ecpa: internal error: RuntimeError: boom\n"
    assert len(run.lines) == 5  # the items before line 7


# --- options ------------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", ["-1", "-8", "257", "many"])
def test_bad_jobs_is_a_usage_error(trust: Path, jobs: str) -> None:
    write_pair(Path())
    run = ecpa_main("verify", "ev.jws", "--trust", trust, "--now", NOW, "--jobs", jobs)
    assert run.status == 2, run
    assert run.out == ""


def test_jobs_zero_means_one_per_cpu(trust: Path) -> None:
    _write_log(Path("run.jsonl"))
    assert _run("run.jsonl", "--trust", trust, jobs=0) == _run(
        "run.jsonl", "--trust", trust, jobs=1
    )


def test_config_is_picklable_for_any_start_method() -> None:
    """Workers started by spawn or forkserver get the configuration pickled."""
    config = _parallel.VerifyConfig(store().document, NOW, ecpa.Policy(), None, False, True)
    copy = pickle.loads(pickle.dumps(config))
    verifier = _parallel._Verifier(copy)
    line = (record() + "\n").encode()
    batch = verifier.run(_units.LogChunk("x.jsonl", 7, line))
    assert batch.items == 1
    assert not batch.failed
    assert [(f.nonce, f.line) for f in batch.fenced] == [("nonce-1", 7)]


# --- real processes: memory and clean-up --------------------------------------------------

_MEASURE = textwrap.dedent(
    """
    import resource, subprocess, sys
    proc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=False)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    print(proc.returncode, peak)
    """
)


def _big_record() -> bytes:
    host = bytes(range(256)) * 512  # 128 KiB of host evidence: a line of about 172 KB
    st = statement(evidence_digest=evidence_digest(host))
    sig = ecpa.sign(st, KEY_1)
    return record_line(Evidence(sig.payload, sig.detached_jws, host))


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in KiB on Linux")
def test_large_log_streams_in_bounded_memory(trust: Path) -> None:
    """A 160 MB log: peak RSS of the verifier and its workers stays far below the log size."""
    line = _big_record()
    count = 160_000_000 // len(line)
    with Path("big.jsonl").open("wb") as fh:
        for _ in range(count // 50):
            fh.write(line * 50)
        fh.write(line * (count % 50))
    size = Path("big.jsonl").stat().st_size
    command = [str(SCRIPT), "verify", "big.jsonl", "--trust", str(trust), "--now", str(NOW)]
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command, "--jobs", "2"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    status, peak_kib = map(int, out.split())
    assert status == 0
    assert peak_kib * 1024 < 150_000_000 < size, (peak_kib, size)
    assert time.monotonic() - start < 60


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_workers_end_when_the_main_process_is_killed(trust: Path) -> None:
    Path("run.jsonl").write_text((record() + "\n") * 50_000)
    command = [str(SCRIPT), "verify", "run.jsonl", "--trust", str(trust), "--now", str(NOW)]
    proc = subprocess.Popen(
        [*command, "--jobs", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        workers: list[int] = []
        while len(workers) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            workers = _children(proc.pid)
        assert len(workers) >= 2, workers
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if _alive(pid)]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
