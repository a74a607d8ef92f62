"""``ecpa ship`` and ``ecpa status --db`` on a real PostgreSQL server (``scripts/pg-up``):
every complete line stored once, byte for byte, resumed after SIGKILL; the same decisions
as a status from the files, with liveness from signed heartbeats only, said so."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.launchdir import HOST, Written, append_records, write_launch
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.keys import SigningKey
from ecpa.runtime.host import ship as ship_module
from ecpa.runtime.host.audit import audit_store
from ecpa.runtime.host.ship import BATCH_LINES, ShipReport, ship_launch
from ecpa.runtime.host.status import status_from_launch_dir
from ecpa.runtime.judge.reasons import ReasonCode
from ecpa.runtime.judge.verdict import RuntimeStatus
from ecpa.runtime.model.enrollment import ENROLLMENTS_FILE
from ecpa.runtime.model.process import Liveness, ProcessIdentity, check_alive, read_identity
from ecpa.runtime.stores.postgres import nonce_key
from ecpa.runtime.stores.remote import REMOTE_NOTE, status_from_store
from ecpa.runtime.stores.store import EvidenceStore, line_nonce
from ecpa.runtime.stores.stored_log import WALK_LINES
from tests._launch_helpers import DRIVE, ECPA, PLAN, Launches, clean_env, launches
from tests.support import check_reasons, codes, texts

__all__ = ["launches"]  # the fixture, used by name

NOW = 1_800_000_000


def logs_of(w: Written) -> list[Path]:
    return sorted((w.directory / "evidence" / w.directory.name).glob("*.jsonl"))


def append(w: Written, slot: int, data: bytes) -> None:
    [log] = [p for p in logs_of(w) if p.name.startswith(f"scheduler.{slot}-")]
    with log.open("ab") as out:
        out.write(data)


def line_of(w: Written, slot: int, index: int) -> bytes:
    [log] = [p for p in logs_of(w) if p.name.startswith(f"scheduler.{slot}-")]
    return log.read_bytes().splitlines(keepends=True)[index]


def file_lines(w: Written) -> set[tuple[str, int, bytes]]:
    """(log, offset, line) of every non-blank complete line of every log, and of the
    manager's certificates (``enrollments.jsonl``, shipped as a log of that name)."""
    found = set()
    for log in [*logs_of(w), w.directory / ENROLLMENTS_FILE]:
        data = log.read_bytes()
        offset = 0
        for raw in data.splitlines(keepends=True):
            if raw.endswith(b"\n") and raw.strip():
                found.add((log.name, offset, raw[:-1]))
            offset += len(raw)
    return found


def stored_lines(dsn: str, launch_id: str) -> list[tuple[str, int, bytes]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT source, file_offset, line FROM ecpa_evidence WHERE launch_id = %s",
            (launch_id,),
        ).fetchall()
    return [(s, int(o), bytes(line)) for s, o, line in rows]


def seen_by(w: Written) -> Callable[[ProcessIdentity], Liveness]:
    """Liveness as a shipper on the launch's (fake) host sees it."""
    return lambda who: check_alive(who, proc_root=w.proc_root, host=HOST)


def ship(dsn: str, w: Written, *, at: int = NOW, **kw: Any) -> ShipReport:
    with EvidenceStore(dsn) as store:
        return ship_launch(
            w.directory, store, once=True, liveness=seen_by(w), clock=lambda: at, **kw
        )


def live_launch(root: Path, **kw: Any) -> Written:
    """A launch written now whose supervisor is this test process (alive on this host), for
    `ecpa ship` run as a command."""
    # One record every 10 s, a 30 s heartbeat window: room for slow process starts here.
    return write_launch(root, now=int(time.time()), interval=10, supervisor=read_identity(), **kw)


def local(w: Written, now: int = NOW) -> RuntimeStatus:
    """The status from the files, its history walked to the end (no budget)."""
    status = status_from_launch_dir(
        w.directory, now=now, proc_root=w.proc_root, host=HOST, history_budget_s=None
    )
    check_reasons(status)
    return status


def remote(dsn: str, w: Written, now: int = NOW, **kw: Any) -> RuntimeStatus:
    """The status from the store, its history walked to the end unless a test gives a
    budget (on a loaded machine the default 0.05 s stops a first walk early: false, and
    right, but not what these tests are about)."""
    kw.setdefault("history_budget_s", None)
    status = status_from_store(dsn, w.directory.name, now=now, **kw)
    check_reasons(status)
    return status


def decision(s: RuntimeStatus) -> Any:
    slots = [(x.slot, x.covered, x.process, x.kid, x.newest_seq, x.counters) for x in s.slots]
    return (s.effective, slots, s.accepted, s.refused, s.gaps, s.torn)


@pytest.fixture
def written(tmp_path: Path) -> Written:
    w = write_launch(tmp_path, slots=3, records=40, now=NOW)
    append(w, 1, b"not json at all\n")  # refused
    append(w, 2, line_of(w, 2, 10))  # an old record copied to the end: a replay
    return w


def test_every_complete_line_is_stored_once_byte_for_byte(pg_dsn: str, written: Written) -> None:
    report = ship(pg_dsn, written)
    lines = file_lines(written)
    assert (
        report.stored == len(lines) == 3 * 40 + 2 + 4
    )  # and the launch's seal, a certificate per process
    stored = stored_lines(pg_dsn, written.directory.name)
    assert len(stored) == len(set(stored))
    assert set(stored) == lines
    again = ship(pg_dsn, written)  # nothing new: nothing stored twice
    assert again.stored == 0
    assert len(stored_lines(pg_dsn, written.directory.name)) == len(lines)


def test_a_replayed_line_keeps_its_bytes_but_not_the_nonce(pg_dsn: str, written: Written) -> None:
    import psycopg

    ship(pg_dsn, written)
    copy = line_of(written, 2, 10)[:-1]
    nonce = line_nonce(copy)
    assert nonce is not None
    key = nonce_key(nonce)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT nonce_sha256, claimed_sha256 FROM ecpa_evidence WHERE line = %s"
            " ORDER BY file_offset",
            (copy,),
        ).fetchall()
    got = [tuple(None if v is None else bytes(v) for v in r) for r in rows]
    assert got == [(key, key), (None, key)]  # the first keeps the key; the copy claims it


def test_status_from_the_store_decides_as_the_files_do(pg_dsn: str, written: Written) -> None:
    ship(pg_dsn, written)
    here = local(written)
    there = remote(pg_dsn, written, history_budget_s=None)
    assert here.effective is True
    assert decision(there) == decision(here)
    assert REMOTE_NOTE in texts(there.reasons)
    assert "from_store" in codes(there.reasons)
    assert any(r.code is ReasonCode.ALIVE and "/proc not read" in r.text for r in there.reasons)
    assert there.refused["REPLAYED_NONCE"] == 1
    assert sum(there.refused.values()) == 2  # the junk line and the replay


def test_only_new_lines_are_shipped_and_a_line_being_written_waits(
    pg_dsn: str, written: Written
) -> None:
    ship(pg_dsn, written)
    before = len(file_lines(written))
    record = line_of(written, 0, 39)
    append(written, 0, b"junk line\n" + record[:20])  # one complete line, one being written
    assert ship(pg_dsn, written).stored == 1
    append(written, 0, record[20:])  # now complete (a replay of the newest record)
    assert ship(pg_dsn, written).stored == 1
    assert set(stored_lines(pg_dsn, written.directory.name)) == file_lines(written)
    assert len(file_lines(written)) == before + 2


def test_the_history_is_walked_in_budgets_and_catches_up(pg_dsn: str, written: Written) -> None:
    ship(pg_dsn, written)
    full = remote(pg_dsn, written, history_budget_s=None)
    for _ in range(50):  # a zero budget walks at least one line a status
        st = remote(pg_dsn, written, history_budget_s=0.0)
        assert decision(st)[:2] == decision(full)[:2]
        if "history_partial" not in codes(st.reasons):
            break
    assert decision(remote(pg_dsn, written)) == decision(full)


def test_stale_heartbeats_withdraw_it_and_say_why(pg_dsn: str, written: Written) -> None:
    ship(pg_dsn, written)
    later = remote(pg_dsn, written, now=NOW + 60)
    assert later.effective is False
    assert all(not s.covered for s in later.slots)
    assert any(  # says how old, and that /proc was not read
        r.code is ReasonCode.NOT_ALIVE and "newest signed heartbeat 60 s old" in r.text
        for r in later.reasons
    )


def test_a_shipped_end_makes_it_false(pg_dsn: str, written: Written) -> None:
    (written.directory / "exit.json").write_text(
        '{"schema":"ecpa-exit/0.2","ended_at":1800000001,"exit_status":0}'
    )
    report = ship(pg_dsn, written)
    assert report.ended
    st = remote(pg_dsn, written)
    assert st.effective is False
    assert st.reasons[0].code is ReasonCode.LAUNCH_ENDED


def test_an_unknown_launch_is_an_evidence_store_error(pg_dsn: str, written: Written) -> None:
    with pytest.raises(EcpaError) as err:
        status_from_store(pg_dsn, "no-such-launch", now=NOW)
    assert err.value.code is ErrorCode.EVIDENCE_STORE


def test_another_launch_under_the_same_id_is_refused(
    pg_dsn: str, written: Written, tmp_path: Path
) -> None:
    ship(pg_dsn, written)
    other = write_launch(tmp_path / "other", slots=1, records=2, now=NOW + 5)
    assert other.directory.name == written.directory.name
    with pytest.raises(EcpaError) as err:
        ship(pg_dsn, other)
    assert err.value.code is ErrorCode.EVIDENCE_STORE


def test_a_replaced_log_is_reported_not_shipped_again(pg_dsn: str, written: Written) -> None:
    ship(pg_dsn, written)
    log = logs_of(written)[0]
    data = log.read_bytes()
    fresh = log.with_name("replacement.tmp")  # made while the old one exists: another inode
    fresh.write_bytes(data + b"more\n")
    fresh.chmod(0o600)
    os.replace(fresh, log)
    report = ship(pg_dsn, written)
    assert report.stored == 0
    assert any("found another" in n for n in report.notes)


def test_an_over_long_line_is_stored_cut_and_refused_as_too_large(
    pg_dsn: str, written: Written
) -> None:
    from ecpa.runtime.stores.store import MAX_STORED_LINE

    append(written, 0, b"x" * (MAX_STORED_LINE + 5000) + b"\n")
    ship(pg_dsn, written)
    cut = [r for r in stored_lines(pg_dsn, written.directory.name) if r[2].startswith(b"xxx")]
    assert [len(r[2]) for r in cut] == [MAX_STORED_LINE]
    st = remote(pg_dsn, written, history_budget_s=None)
    assert st.refused[ErrorCode.TOO_LARGE.value] == 1
    assert decision(st) == decision(local(written))


def test_an_over_long_line_ending_in_cr_is_refused_as_in_the_file(
    pg_dsn: str, tmp_path: Path
) -> None:
    from ecpa.runtime.model.evidence import MAX_RECORD_LENGTH, parse_record

    w = write_launch(tmp_path, slots=1, records=10, now=NOW)
    [log] = logs_of(w)
    lines = log.read_bytes().splitlines(keepends=True)
    last = lines[-1].rstrip(b"\n")
    padded = b"{" + b" " * (MAX_RECORD_LENGTH - len(last)) + last[1:]
    parse_record(padded)  # a valid record line, exactly the longest allowed
    log.write_bytes(b"".join(lines[:-1]) + padded + b"\r" + b"tail junk\n")
    ship(pg_dsn, w)
    for now in (NOW, NOW + 3):
        assert decision(remote(pg_dsn, w, now=now, history_budget_s=None)) == decision(
            local(w, now)
        )


def _record_claiming(nonce: str) -> bytes:
    import base64
    import json

    payload = json.dumps({"challenge_nonce": nonce}).encode()
    b64 = base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
    return json.dumps({"payload_b64": b64, "detached_jws": "e30..AAAA"}).encode() + b"\n"


@pytest.mark.parametrize("nonce", ["a\u0000b", "n" * 20_000])
def test_a_line_claiming_any_nonce_never_stops_shipping(
    pg_dsn: str, written: Written, nonce: str
) -> None:
    append(written, 0, _record_claiming(nonce) + _record_claiming(nonce))
    report = ship(pg_dsn, written)
    assert set(stored_lines(pg_dsn, written.directory.name)) == file_lines(written)
    assert report.stored == len(file_lines(written))


def test_two_shippers_at_once_store_each_line_once(pg_dsn: str, tmp_path: Path) -> None:
    import threading

    w = write_launch(tmp_path, slots=2, records=1500, now=NOW)
    EvidenceStore(pg_dsn).close()
    reports: list[ShipReport] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            reports.append(ship(pg_dsn, w))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    total = len(file_lines(w))
    assert sum(r.stored for r in reports) == total  # counted once, by whoever stored it
    assert len(stored_lines(pg_dsn, w.directory.name)) == total
    with EvidenceStore(pg_dsn) as store:
        for log in logs_of(w):
            position = store.position(w.directory.name, log.name)
            assert position is not None
            assert position.end == log.stat().st_size


def test_a_log_rewritten_in_place_is_noted_not_mixed(pg_dsn: str, written: Written) -> None:
    ship(pg_dsn, written)
    log = logs_of(written)[0]
    data = bytearray(log.read_bytes())
    # The same inode, other bytes where the shipped end's anchor (its last 4 KiB) lies, and
    # more of them after.
    data[-100:-90] = b"X" * 10
    with log.open("r+b") as out:
        out.write(bytes(data) + b"more\n")
    report = ship(pg_dsn, written)
    assert report.stored == 0
    assert any("rewritten in place" in n for n in report.notes)


# --- the command line, as processes ----------------------------------------------------------


def ecpa(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ECPA), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(),
        check=False,
    )


def test_cli_ship_once_then_status_db_json(pg_dsn: str, tmp_path: Path) -> None:
    import json

    written = live_launch(tmp_path, slots=3, records=40)
    out = ecpa("ship", "--launch", written.directory, "--db", pg_dsn, "--once")
    assert out.returncode == 0, out.stderr
    assert f"{3 * 40 + 4} line(s) stored" in out.stdout  # records and certificates
    st = ecpa("status", "--db", pg_dsn, "--launch-id", written.directory.name, "--json")
    assert st.returncode == 0, st.stdout + st.stderr
    doc = json.loads(st.stdout)
    assert doc["runtime_effective"] is True
    assert doc["coverage"] == {"covered": 3, "slots": 3}
    assert {"code": "from_store", "text": REMOTE_NOTE} in doc["reasons"]
    again = ecpa("ship", "--launch", written.directory, "--db", pg_dsn, "--once", "--json")
    assert again.returncode == 0, again.stderr
    (line,) = again.stdout.splitlines()
    assert json.loads(line) == {
        "launch_id": written.directory.name,
        "stored": 0,  # everything was stored by the first run: exactly once
        "logs": 3,
        "passes": 1,
        "outcome": "done",
        "notes": [],
    }


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("status", "--db", "postgresql://x/y"), 2),  # no --launch-id
        (("status", "--db", "sqlite.db", "--launch-id", "a"), 2),  # not a DSN
        (("status", "--launch-id", "a"), 2),  # no --db
        (("ship", "--launch", ".", "--db", "file.db"), 2),
        (("ship", "--launch", ".", "--db", "postgresql://x/y", "--interval", "0"), 2),
    ],
)
def test_cli_usage_errors(args: tuple[str, ...], code: int) -> None:
    out = ecpa(*args)
    assert out.returncode == code, out.stdout + out.stderr
    assert "Traceback" not in out.stderr


def test_cli_store_down_exits_2_without_the_password(written: Written) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dsn = f"postgresql://u:hunter2@127.0.0.1:{port}/db"
    for args in (
        ("ship", "--launch", written.directory, "--db", dsn, "--once"),
        ("status", "--db", dsn, "--launch-id", written.directory.name),
    ):
        out = ecpa(*args)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "ECPA_EVIDENCE_STORE" in out.stderr
        assert "hunter2" not in out.stderr
        assert "Traceback" not in out.stderr


def test_ship_killed_mid_copy_and_restarted_stores_every_line_once(
    pg_dsn: str, tmp_path: Path
) -> None:
    w = write_launch(tmp_path, slots=4, records=2500, now=NOW)
    total = len(file_lines(w))
    assert total > 5 * BATCH_LINES
    launch_id = w.directory.name
    EvidenceStore(pg_dsn).close()  # the tables, for the polling below
    kills = 0
    for _ in range(3):  # kill it with SIGKILL in the middle of the copy, three times
        have = len(stored_lines(pg_dsn, launch_id))
        proc = subprocess.Popen(
            [str(ECPA), "ship", "--launch", str(w.directory), "--db", pg_dsn, "--once"],
            env=clean_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                if len(stored_lines(pg_dsn, launch_id)) > have:
                    break
                time.sleep(0.01)
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    assert kills >= 1
    partial = len(stored_lines(pg_dsn, launch_id))
    assert 0 < partial < total
    out = ecpa("ship", "--launch", w.directory, "--db", pg_dsn, "--once")
    assert out.returncode == 0, out.stderr
    stored = stored_lines(pg_dsn, launch_id)
    assert len(stored) == total  # none twice
    assert set(stored) == file_lines(w)  # none lost, byte for byte


def test_following_ships_new_lines_and_exits_after_the_end(pg_dsn: str, tmp_path: Path) -> None:
    written = live_launch(tmp_path, slots=2, records=20)
    EvidenceStore(pg_dsn).close()  # the tables, for the polling below
    proc = subprocess.Popen(
        [str(ECPA), "ship", "--launch", str(written.directory), "--db", pg_dsn],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        launch_id = written.directory.name
        deadline = time.monotonic() + 60
        while len(stored_lines(pg_dsn, launch_id)) < len(file_lines(written)):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        append(written, 0, b"one more line\n")
        (written.directory / "exit.json").write_text(
            '{"schema":"ecpa-exit/0.2","ended_at":1800000001,"exit_status":0}'
        )
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "launch ended, all stored" in out
        assert set(stored_lines(pg_dsn, launch_id)) == file_lines(written)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_stops_following_cleanly(pg_dsn: str, tmp_path: Path) -> None:
    written = live_launch(tmp_path, slots=2, records=20)
    EvidenceStore(pg_dsn).close()  # the tables, for the polling below
    proc = subprocess.Popen(
        [str(ECPA), "ship", "--launch", str(written.directory), "--db", pg_dsn],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not stored_lines(pg_dsn, written.directory.name):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "stopped" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- end to end: a real launch on "another host" ---------------------------------------------


WINDOW = 10


def db_status(dsn: str, launch_id: str) -> dict[str, Any]:
    import json

    out = ecpa("status", "--db", dsn, "--launch-id", launch_id, "--json", timeout=60)
    assert out.returncode in (0, 1), out.stdout + out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def test_a_real_launch_shipped_and_judged_from_the_store(
    pg_dsn: str, tmp_path: Path, launches: Launches
) -> None:
    """`ecpa run` of two DLA ranks, `ecpa ship` following it, `ecpa status --db` true with
    2/2 slots; rank 1 killed: false within the heartbeat window plus shipping, naming the
    slot; the launch stopped: `ship` exits by itself with every line stored, status false
    with the end first."""
    # A 10 s heartbeat window: shipping and a status command's start (seconds on a busy
    # machine) fit in it; the withdrawal below is waited for within that window.
    plan = {
        **PLAN,
        "heartbeat_window_s": WINDOW,
        "slots": [{"role": "scheduler", "ordinal": i} for i in range(2)],
    }
    run, directory = launches.start(*DRIVE, "--processes", "2", plan=plan)
    launch_id = directory.name
    shipper = subprocess.Popen(
        [str(ECPA), "ship", "--launch", str(directory), "--db", pg_dsn, "--interval", "0.2"],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            doc = None
            with contextlib.suppress(AssertionError, ValueError):
                doc = db_status(pg_dsn, launch_id)
            if doc is not None and doc["runtime_effective"]:
                break
            assert time.monotonic() < deadline, doc
            time.sleep(0.3)
        assert doc["coverage"] == {"covered": 2, "slots": 2}
        assert "from_store" in codes(doc["reasons"])
        assert doc["refused"] == {}
        [victim] = [int(p.name.split("-")[1]) for p in launches.logs(directory) if ".1-" in p.name]
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + WINDOW + 20
        while db_status(pg_dsn, launch_id)["runtime_effective"]:
            assert time.monotonic() < deadline
            time.sleep(0.3)
        after = db_status(pg_dsn, launch_id)
        assert {
            "code": "not_covered",
            "text": "slot scheduler.1: not covered",
            "slot": "scheduler.1",
        } in after["reasons"]
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=60)
        out, err = shipper.communicate(timeout=60)
        assert shipper.returncode == 0, err
        assert "launch ended, all stored" in out
        final = db_status(pg_dsn, launch_id)
        assert final["runtime_effective"] is False
        assert codes(final["reasons"])[0] == "launch_ended"
        files = set()
        for log in [*launches.logs(directory), directory / ENROLLMENTS_FILE]:
            files |= {line for line in log.read_bytes().split(b"\n") if line.strip()}
        assert {line for _, _, line in stored_lines(pg_dsn, launch_id)} == files
    finally:
        if shipper.poll() is None:
            shipper.kill()
            shipper.wait()


# --- readers: each its own checkpoints, a read-only role, the store's version, passwords -----


def test_a_status_under_its_own_trust_or_time_leaves_shared_checkpoints_alone(
    pg_dsn: str, written: Written, tmp_path: Path
) -> None:
    import json

    ship(pg_dsn, written)
    doc = json.loads((written.directory / "trust.json").read_text())
    for key in doc["keys"]:
        key["enabled"] = False
    other = tmp_path / "disabled.json"
    other.write_text(json.dumps(doc))
    assert remote(pg_dsn, written, trust=other, history_budget_s=None).effective is False
    early = remote(pg_dsn, written, now=NOW - 3600, history_budget_s=None, save_checkpoints=False)
    assert early.effective is False
    # Neither saved what it walked: the next status walks the history afresh, and decides
    # as the files do.
    assert decision(remote(pg_dsn, written, history_budget_s=None)) == decision(local(written))


def test_a_reader_role_needs_only_to_read(pg_dsn: str, pg_server: Any, written: Written) -> None:
    import psycopg

    ship(pg_dsn, written)
    schema = pg_dsn.split("search_path%3D")[1]
    role = f"ro_{schema}"
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
    try:
        reader = pg_dsn.replace("postgres@", f"{role}@")
        st = remote(reader, written, history_budget_s=None)
        assert decision(st) == decision(local(written))
        unsaved = [r.text for r in st.reasons if r.code is ReasonCode.CHECKPOINT_NOT_SAVED]
        assert len(unsaved) == len(logs_of(written))  # one line a log, each naming it
        assert {t.split()[2] for t in unsaved} == {log.name for log in logs_of(written)}
        with pytest.raises(EcpaError) as err:  # it cannot ship
            ship(reader, written)
        assert err.value.code is ErrorCode.EVIDENCE_STORE
    finally:
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def _counting(sent: list[str]) -> Callable[..., Any]:
    """EvidenceStore.query, each statement it sends listed in ``sent``."""
    query = EvidenceStore.query

    def counted(self: EvidenceStore, sql: str, params: tuple[Any, ...] = ()) -> Any:
        sent.append(sql)
        return query(self, sql, params)

    return counted


@pytest.mark.parametrize("new", [0, 3, WALK_LINES, WALK_LINES + 1])
def test_a_status_from_the_store_costs_a_few_queries_a_launch_not_a_few_a_log(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, new: int
) -> None:
    """Every log's newest lines, its checkpoint, the line it is anchored to and the first
    lines past it are read together, and every checkpoint walked is saved in one
    statement: a launch of 8 logs costs the store as many queries as one of 2 while fewer
    than WALK_LINES lines are new (past them, a log's walk reads on), and decides as its
    files do."""
    asked: dict[int, list[str]] = {}
    for slots in (2, 8):
        w = write_launch(
            tmp_path / str(slots),
            slots=slots,
            records=20,
            now=NOW,
            launch_id=f"launch-{slots}",
            challenge=secrets.token_urlsafe(32),
        )
        ship(pg_dsn, w)
        remote(pg_dsn, w)  # walks every log, saves every checkpoint
        for seq in range(21, 21 + new):
            append_records(w, seq, NOW + seq - 20, interval=1)
        ship(pg_dsn, w, at=NOW + new)
        sent = asked[slots] = []
        monkeypatch.setattr(EvidenceStore, "query", _counting(sent))
        status = remote(pg_dsn, w, now=NOW + new)
        monkeypatch.undo()
        assert decision(status) == decision(local(w, NOW + new))
        assert status.effective
    if new < WALK_LINES:
        # The launch's row, its logs with their ends, certificates, checkpoints, lines; the
        # save when something was walked.
        assert len(asked[8]) == len(asked[2]) == (6 if new else 5), asked[8]
    else:  # the walk read on: a query more a log
        assert len(asked[8]) > len(asked[2])
    saves = [q for q in asked[8] if q.startswith("INSERT INTO ecpa_reader_checkpoint")]
    assert len(saves) == (1 if new else 0)  # nothing walked, nothing saved


def test_a_launch_judged_from_the_store_reads_its_row_once(
    pg_dsn: str, written: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store's launches judged (``ecpa serve --db``, ``ecpa launches --db``) read each
    launch's row once: the launch.json judged is the one the answer carries, and a status
    given the row it read asks for no other; a row of another launch is refused."""
    from ecpa.runtime.host.launches import judge_launches

    ship(pg_dsn, written)
    remote(pg_dsn, written)  # walked, checkpoints saved
    sent: list[str] = []
    monkeypatch.setattr(EvidenceStore, "query", _counting(sent))
    found = judge_launches((), pg_dsn, now=NOW, names=(written.directory.name,))
    monkeypatch.undo()
    (judged,) = found.judged
    assert judged.status.effective
    assert judged.launch_doc == (written.directory / "launch.json").read_bytes()
    rows = [q for q in sent if "FROM ecpa_launch" in q and "launch_doc" in q]
    assert len(rows) == 1, sent
    with EvidenceStore(pg_dsn, create=False) as store:
        row = store.launch(written.directory.name)
        assert row is not None
        with pytest.raises(ValueError, match="expected the row of launch 'other'"):
            status_from_store(pg_dsn, "other", now=NOW, store=store, row=row)
    # A launch the store does not hold (no row): skipped, saying so; the others judged.
    found = judge_launches((), pg_dsn, now=NOW, names=("launch-gone", written.directory.name))
    assert [j.summary.launch_id for j in found.judged] == [written.directory.name]
    (gone,) = found.skipped
    assert gone.name == "launch-gone"
    assert "ECPA_EVIDENCE_STORE" in gone.detail
    assert "found none" in gone.detail


def test_a_readers_forged_checkpoint_harms_no_other_replica(pg_dsn: str, written: Written) -> None:
    """docs/runtime.md "Several hosts": history checkpoints are each reader's own (row level
    security), so a role allowed to write status checkpoints (which manager replicas need)
    that stores one with a huge last_seq makes a slot undecided for no other replica."""
    import psycopg

    ship(pg_dsn, written)
    roles = [f"r_{secrets.token_hex(4)}" for _ in range(2)]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]  # type: ignore[index]
        for role in roles:
            conn.execute(f"CREATE ROLE {role} LOGIN")
            conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
            conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
            conn.execute(f"GRANT INSERT, UPDATE ON {schema}.ecpa_reader_checkpoint TO {role}")
    mallory, replica = (pg_dsn.replace("postgres@", f"{role}@", 1) for role in roles)
    try:
        assert remote(mallory, written).effective  # and its own checkpoints are saved
        with psycopg.connect(mallory, autocommit=True) as conn:
            rows = conn.execute("SELECT source, doc FROM ecpa_reader_checkpoint").fetchall()
            assert rows
            for source, doc in rows:
                forged = {**json.loads(doc), "last_seq": 10**9}
                conn.execute(
                    "UPDATE ecpa_reader_checkpoint SET doc = %s WHERE source = %s",
                    (json.dumps(forged), source),
                )
            with pytest.raises(psycopg.Error):  # another reader's row: refused by the policy
                conn.execute(
                    "INSERT INTO ecpa_reader_checkpoint (reader, launch_id, source, doc)"
                    " VALUES (%s, %s, %s, %s)",
                    (roles[1], written.directory.name, rows[0][0], rows[0][1]),
                )
        assert not remote(mallory, written).effective  # it can harm only itself
        assert remote(replica, written).effective
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for role in roles:
                conn.execute(f"DROP OWNED BY {role}")
                conn.execute(f"DROP ROLE {role}")


def test_a_version_1_store_is_brought_up_to_date_by_a_writer(pg_dsn: str, written: Written) -> None:
    import psycopg

    ship(pg_dsn, written)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE ecpa_reader_checkpoint")
        conn.execute("UPDATE ecpa_schema SET version = 1 WHERE component = 'evidence_store'")
    with pytest.raises(EcpaError) as refused:
        remote(pg_dsn, written)  # a reader does not change the store
    assert refused.value.code is ErrorCode.EVIDENCE_STORE
    assert "found version 1" in refused.value.detail
    ship(pg_dsn, written)  # a writer upgrades it
    assert remote(pg_dsn, written).effective


PW_ROLE, PW = "ecpa_pw", "pw-" + secrets.token_hex(8)


def _password_role(pg_server: Any) -> str:
    """A role that must give a password (scram-sha-256 in pg_hba.conf, reloaded), a schema
    of its own; a DSN naming it without any password."""
    import psycopg

    if pg_server.directory is None:
        pytest.skip("an outside server (ECPA_TEST_PG_DSN): its pg_hba.conf is not ours")
    hba = pg_server.directory / "data" / "pg_hba.conf"
    line = f"local all {PW_ROLE} scram-sha-256\n"
    if line not in hba.read_text():
        hba.write_text(line + hba.read_text())
    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (PW_ROLE,)).fetchone():
            conn.execute(f"CREATE ROLE {PW_ROLE} LOGIN PASSWORD '{PW}'")
        conn.execute(f"CREATE SCHEMA {schema} AUTHORIZATION {PW_ROLE}")
        conn.execute("SELECT pg_reload_conf()")
    dsn = pg_server.dsn.replace("postgresql://postgres@", f"postgresql://{PW_ROLE}@", 1)
    return f"{dsn}&options=-csearch_path%3D{schema}"


def test_libpq_password_file_and_variables_keep_the_password_off_the_command_line(
    pg_server: Any, tmp_path: Path
) -> None:
    """A store that needs a password is reached with none in any argument: libpq's
    own password file (PGPASSFILE, ~/.pgpass) and variables (PGPASSWORD) are honoured; with
    neither, exit 2, and the refusal names the store, not a password."""
    dsn = _password_role(pg_server)
    assert PW not in dsn
    written = live_launch(tmp_path, slots=1, records=5)
    home = tmp_path / "home"
    home.mkdir()
    base = {**clean_env(), "HOME": str(home)}
    base = {k: v for k, v in base.items() if not k.startswith("PG")}

    def ship(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        args = ["ship", "--launch", str(written.directory), "--db", dsn, "--once"]
        return subprocess.run(
            [str(ECPA), *args], capture_output=True, text=True, env=env, timeout=60, check=False
        )

    refused = ship(base)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "ECPA_EVIDENCE_STORE" in refused.stderr
    assert PW not in refused.stderr
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"*:*:*:{PW_ROLE}:{PW}\n")
    passfile.chmod(0o600)
    stored = ship({**base, "PGPASSFILE": str(passfile)})
    assert stored.returncode == 0, stored.stderr
    assert "7 line(s) stored" in stored.stdout  # 5 records, 2 certificates
    (home / ".pgpass").write_text(passfile.read_text())
    (home / ".pgpass").chmod(0o600)
    again = ship(base)  # ~/.pgpass, by libpq's own default
    assert again.returncode == 0, again.stderr
    assert "0 line(s) stored" in again.stdout
    (home / ".pgpass").unlink()
    by_variable = ship({**base, "PGPASSWORD": PW})
    assert by_variable.returncode == 0, by_variable.stderr


# --- the supervisor's liveness and the clocks, as the store records them ---------------------


def test_a_supervisor_gone_without_an_end_makes_it_false(pg_dsn: str, written: Written) -> None:
    with EvidenceStore(pg_dsn) as store:
        report = ship_launch(
            written.directory,
            store,
            liveness=lambda who: Liveness(False, "process not alive: killed"),
            clock=lambda: NOW,
        )
    assert report.supervisor_gone  # following ended by itself: nothing more will come
    st = remote(pg_dsn, written)
    assert st.effective is False
    assert st.reasons[0].code is ReasonCode.SUPERVISOR_NOT_ALIVE
    assert st.reasons[0].text.startswith("supervisor not alive: process not alive: killed")


def test_a_supervisor_not_seen_lately_makes_it_false(pg_dsn: str, written: Written) -> None:
    ship(pg_dsn, written, at=NOW - 60)  # the shipper last looked a minute ago
    st = remote(pg_dsn, written)
    assert st.effective is False
    assert any(
        r.code is ReasonCode.SUPERVISOR_NOT_ALIVE and "not seen lately" in r.text
        for r in st.reasons
    )
    ship(pg_dsn, written, at=NOW)
    assert remote(pg_dsn, written, history_budget_s=None).effective is True


def test_following_waits_for_a_store_that_went_away(
    pg_server: Any, pg_dsn: str, written: Written
) -> None:
    if pg_server.directory is None:
        pytest.skip("the server given by ECPA_TEST_PG_DSN is not ours to restart")
    ship(pg_dsn, written)
    report = ShipReport()
    calls = 0
    restarted = False
    deadline = time.monotonic() + 120

    def stop() -> bool:
        nonlocal calls, restarted
        calls += 1
        if not restarted and "store unavailable" in " ".join(report.notes) and calls > 5:
            pg_server.start()  # it was away for a few passes
            restarted = True
        if restarted and set(stored_lines(pg_dsn, written.directory.name)) == file_lines(written):
            return True
        return time.monotonic() > deadline

    with EvidenceStore(pg_dsn) as store:
        pg_server.stop()
        try:
            append(written, 0, b"written while the store was away\n")
            ship_launch(
                written.directory,
                store,
                interval=0.05,
                stop=stop,
                report=report,
                liveness=seen_by(written),
                clock=lambda: NOW,
            )
        finally:
            if not restarted:  # the session's other tests need their server
                pg_server.start()
    assert restarted
    assert any("store unavailable, retrying" in n for n in report.notes)
    assert set(stored_lines(pg_dsn, written.directory.name)) == file_lines(written)


def test_a_supervisor_check_from_the_future_is_no_evidence_of_life(
    pg_dsn: str, written: Written
) -> None:
    """RUNTIME.md "Clocks": a check dated after the reader's now (the serving
    host's clock 20 s ahead) is never evidence of life, nor "seen alive" with a negative
    age."""
    ship(pg_dsn, written, at=NOW + 20)
    status = remote(pg_dsn, written)
    assert not status.effective
    assert any(
        r.code is ReasonCode.SUPERVISOR_NOT_ALIVE and "check dated 20 s after now" in r.text
        for r in status.reasons
    ), status.reasons
    ship(pg_dsn, written, at=NOW + 2)  # the same second's race is not a clock ahead
    assert remote(pg_dsn, written).effective


def test_status_from_the_store_judges_by_the_servers_clock(pg_dsn: str, tmp_path: Path) -> None:
    """Without --now, status --db takes the database server's now(), the clock that timed
    the supervisor checks (ship writes them with now() too): this host's clock is not read."""
    w = live_launch(tmp_path, slots=1, records=5)
    with EvidenceStore(pg_dsn) as store:
        ship_launch(w.directory, store, once=True)  # the check timed by the server
        server = store.server_now()
    assert abs(server - time.time()) < 5  # the same machine here
    status = status_from_store(pg_dsn, w.directory.name)
    assert status.now is not None
    assert abs(status.now - server) <= 2
    assert any(
        r.code is ReasonCode.CLOCK and r.text.endswith("the database server's clock")
        for r in status.reasons
    )
    assert "supervisor_alive" in codes(status.reasons), status.reasons


@pytest.mark.parametrize("budget", [0.0, None])
def test_a_following_pass_records_the_supervisor_on_time_whatever_the_logs_hold(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: float | None
) -> None:
    """RUNTIME.md "Bounded work": 16 MiB of newlines in a log never keep ship from
    writing the supervisor check (status --db would turn false): a pass ships for at most
    PASS_BUDGET_S, then records the supervisor all the same."""
    if budget is not None:  # a pass out of time at once: one batch, then the check
        monkeypatch.setattr(ship_module, "PASS_BUDGET_S", budget)
    w = live_launch(tmp_path, slots=1, records=3)
    [log] = logs_of(w)
    with log.open("ab") as out:
        out.write(b"\n" * (64 << 20))
    report = ShipReport()
    with EvidenceStore(pg_dsn) as store:
        give_up = time.monotonic() + 60
        ship_launch(
            w.directory,
            store,
            report=report,
            stop=lambda: report.passes >= 1 or time.monotonic() > give_up,
        )
        row = store.launch(w.directory.name)
        position = store.position(w.directory.name, log.name)
    assert report.passes == 1, report.notes
    assert row is not None
    assert row.supervisor_checked_at is not None
    assert row.supervisor_alive is True
    assert position is not None
    if budget is not None:
        assert position.end < log.stat().st_size  # the rest waits for the next pass


def test_from_the_store_a_record_of_the_next_second_waits_for_the_next_status(
    tmp_path: Path, pg_dsn: str
) -> None:
    """As from the files: a record dated just after ``now`` is neither refused nor kept
    refused in the shared history; the next status accepts it."""
    w = write_launch(tmp_path, slots=1, records=3, now=NOW + 1)
    ship(pg_dsn, w)
    first = remote(pg_dsn, w, now=NOW)
    assert (first.refused, first.accepted) == ({}, 2)
    second = remote(pg_dsn, w, now=NOW + 1)
    assert (second.refused, second.accepted, second.last_seq) == ({}, 3, 3)
    assert decision(first)[:1] == decision(local(w, NOW))[:1]


# --- the store is untrusted storage: keys only through the manager's certificates ------------


def _execute(dsn: str, sql: str, params: tuple[Any, ...]) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, params).rowcount


def test_a_key_changed_in_the_store_gives_false(pg_dsn: str, written: Written) -> None:
    """Whoever can write the store replaced a process's key in the stored trust.json: the
    shipped certificates say otherwise, and status --db and the audit say so."""
    ship(pg_dsn, written)
    assert remote(pg_dsn, written).effective
    doc = json.loads((written.directory / "trust.json").read_text())
    doc["keys"][0]["public_key_b64"] = SigningKey.from_seed(b"f" * 32).public_key.to_b64()
    changed = _execute(
        pg_dsn,
        "UPDATE ecpa_launch SET trust_doc = %s WHERE launch_id = %s",
        (json.dumps(doc).encode(), written.directory.name),
    )
    assert changed == 1
    status = remote(pg_dsn, written)
    assert not status.effective
    assert status.reasons[0].code is ReasonCode.UNCERTIFIED_KEY
    audit = audit_store(pg_dsn, written.directory.name, now=NOW)
    assert audit.untrusted
    assert audit.report["exercised"] is False


def test_a_certificate_removed_from_the_store_gives_false(pg_dsn: str, written: Written) -> None:
    ship(pg_dsn, written)
    removed = _execute(
        pg_dsn,
        "DELETE FROM ecpa_evidence WHERE launch_id = %s AND source = %s AND file_offset = ("
        "SELECT max(file_offset) FROM ecpa_evidence WHERE launch_id = %s AND source = %s)",
        (written.directory.name, ENROLLMENTS_FILE) * 2,
    )
    assert removed == 1
    status = remote(pg_dsn, written)
    assert not status.effective
    assert status.reasons[0].code is ReasonCode.UNCERTIFIED_KEY


def test_status_db_judges_by_the_operator_store_it_is_given(
    pg_dsn: str, written: Written, tmp_path: Path
) -> None:
    ship(pg_dsn, written)
    empty = tmp_path / "operator.json"
    empty.write_text(json.dumps({"schema": "ecpa-trust-store/0.1", "keys": []}))
    status = remote(pg_dsn, written, trust=empty)
    assert not status.effective
    assert status.reasons[0].code is ReasonCode.ENROLLMENT_REFUSED


def test_a_checkpoint_nested_past_the_stack_is_a_fresh_walk(pg_dsn: str, written: Written) -> None:
    ship(pg_dsn, written)
    assert remote(pg_dsn, written).effective  # saves this role's checkpoints
    changed = _execute(
        pg_dsn,
        "UPDATE ecpa_reader_checkpoint SET doc = %s WHERE launch_id = %s",
        ("[" * 100_000, written.directory.name),
    )
    assert changed > 0
    status = remote(pg_dsn, written)
    assert status.effective  # walked again from the start, not an error


@pytest.mark.parametrize("offset", [2**62, 2**63, 2**64 + 1, 10**30])
def test_a_checkpoint_offset_past_any_log_is_a_fresh_walk(
    pg_dsn: str, written: Written, offset: int
) -> None:
    """A checkpoint (forged by a reader allowed to write its own, or corrupt) whose offset
    is past the end, even past what the database's integers hold, is only a fresh walk:
    the status decides as the files do, and saves checkpoints that hold again."""
    ship(pg_dsn, written)
    remote(pg_dsn, written)
    with_offset = "jsonb_set(doc::jsonb, '{offset}', to_jsonb(%s::numeric))::text"
    changed = _execute(
        pg_dsn,
        f"UPDATE ecpa_reader_checkpoint SET doc = {with_offset} WHERE launch_id = %s",
        (str(offset), written.directory.name),
    )
    assert changed == len(logs_of(written))
    for _ in range(2):
        assert decision(remote(pg_dsn, written)) == decision(local(written))
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        docs = [json.loads(d) for (d,) in conn.execute("SELECT doc FROM ecpa_reader_checkpoint")]
    assert len(docs) == len(logs_of(written))
    assert all(0 < d["offset"] < 2**20 for d in docs)


def test_a_log_held_twice_for_saving_is_saved_once_its_newest(
    pg_dsn: str, written: Written
) -> None:
    """One statement cannot update a row twice (PostgreSQL refuses it): a log's checkpoint
    held twice before the launch's save is saved once, as last held."""
    from ecpa.runtime.stores.stored_log import Prefetched

    ship(pg_dsn, written)
    name = logs_of(written)[0].name
    with EvidenceStore(pg_dsn) as store:
        ends = {n: p.end for n, p in store.positions(written.directory.name).items()}
        pre = Prefetched(store, written.directory.name, [name], ends)
        pre.pending += [(name, '{"first":1}'), (name, '{"newest":2}')]
        assert pre.save_all() == []
        rows = store.query("SELECT source, doc FROM ecpa_reader_checkpoint")
    assert rows == [(name, '{"newest":2}')]


def test_checkpoints_walked_before_a_status_failed_are_kept(
    pg_dsn: str, written: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A status that fails partway (the store or the replay fence gone) keeps the
    checkpoints of the logs it had walked: the next walks only the rest."""
    from ecpa.runtime.stores.stored_log import StoredLog

    ship(pg_dsn, written)
    advance, calls = StoredLog.advance, []

    def failing(self: StoredLog, *args: Any, **kw: Any) -> bool:
        calls.append(self.name)
        if len(calls) == 2:
            raise EcpaError(ErrorCode.EVIDENCE_STORE, "the store went away")
        return advance(self, *args, **kw)

    monkeypatch.setattr(StoredLog, "advance", failing)
    with pytest.raises(EcpaError, match="went away"):
        remote(pg_dsn, written)
    monkeypatch.undo()
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        saved = [s for (s,) in conn.execute("SELECT source FROM ecpa_reader_checkpoint")]
    assert saved == calls[:1]
    assert decision(remote(pg_dsn, written)) == decision(local(written))


def test_a_launch_json_of_another_launch_in_the_store_is_refused(
    pg_dsn: str, written: Written
) -> None:
    ship(pg_dsn, written)
    doc = json.loads((written.directory / "launch.json").read_text())
    doc["launch_id"] = "another-launch"
    changed = _execute(
        pg_dsn,
        "UPDATE ecpa_launch SET launch_doc = %s WHERE launch_id = %s",
        (json.dumps(doc).encode(), written.directory.name),
    )
    assert changed == 1
    with pytest.raises(EcpaError) as refused:
        remote(pg_dsn, written)
    assert refused.value.code is ErrorCode.EVIDENCE_STORE
    assert "another-launch" in refused.value.detail
