"""The PostgreSQL replay fence on a real server (``scripts/pg-up``): errors that name what
failed and never a traceback, its schema (version row, primary key), reconnection after a
restart, and the load and fault runs of docs/performance.md: 4 processes x 25,000 nonces with 50 %
overlap, accepted once; the same with the server stopped and restarted in the middle."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ecpa
from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime.stores.postgres import PostgresReplayFence, describe_dsn, nonce_key
from ecpa.runtime.stores.replay import SqliteReplayFence, open_replay_fence
from tests._cli_helpers import verify, write_pair, write_trust
from tests.conftest import PgServer
from tests.support import ROOT

WORKER = ROOT / "tests" / "_pg_worker.py"
PROCESSES, PER_PROCESS = 4, 25_000
STEP = PER_PROCESS // 2  # process i passes [i*STEP, i*STEP + PER_PROCESS): 50 % overlap


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends


def test_exported_and_chosen_by_the_dsn(pg_dsn: str, tmp_path: Path) -> None:
    assert ecpa.PostgresReplayFence is PostgresReplayFence
    with open_replay_fence(pg_dsn) as pg:
        assert isinstance(pg, PostgresReplayFence)
    with open_replay_fence(str(tmp_path / "f.db")) as lite:
        assert isinstance(lite, SqliteReplayFence)


def test_server_down_is_a_replay_store_error_naming_where() -> None:
    port = _closed_port()
    dsn = f"postgresql://ecpa:s3cret-pw@127.0.0.1:{port}/fence"
    with pytest.raises(EcpaError) as err:
        PostgresReplayFence(dsn)
    assert err.value.code is ErrorCode.REPLAY_STORE
    assert f"127.0.0.1:{port}" in err.value.detail
    assert "s3cret-pw" not in err.value.detail  # never the password


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://u:hunter2@host:notaport/db",
        "postgresql://u:hunter2@[::1/db",
        "postgresql://u:hunter2@h/d?x=1",
        "postgresql://u:hun%zzter2@h/d",
        "postgresql://u:hunter2@h/d\udcff",
    ],
)
def test_a_malformed_dsn_is_a_replay_store_error_without_the_password(dsn: str) -> None:
    with pytest.raises(EcpaError) as err:
        PostgresReplayFence(dsn)
    assert err.value.code is ErrorCode.REPLAY_STORE
    assert "hunter2" not in err.value.detail
    assert "hun%zzter2" not in err.value.detail


@pytest.mark.parametrize(
    "spec",
    [
        "host=127.0.0.1 port=1 user=postgres password=hunter2 dbname=postgres",
        "postgresq://u:hunter2@h/db",
        "mysql://u:hunter2@h/db",
    ],
)
def test_another_connection_string_is_never_taken_for_an_sqlite_path(
    spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EcpaError) as err:
        open_replay_fence(spec)
    assert err.value.code is ErrorCode.REPLAY_STORE
    assert "hunter2" not in err.value.detail
    assert list(tmp_path.iterdir()) == []  # no file named after it


def test_any_nonce_is_accepted_once_nul_and_long_ones_too(pg_dsn: str) -> None:
    with PostgresReplayFence(pg_dsn) as fence:
        for nonce in ("a\x00b", "x" * 100_000, "\u00e9\U0001f600"):
            fence.check_and_record(nonce, expires_at=9)
            assert nonce in fence
            with pytest.raises(EcpaError) as err:
                fence.check_and_record(nonce, expires_at=9)
            assert err.value.code is ErrorCode.REPLAYED_NONCE


def test_a_server_that_stops_answering_fails_the_call_in_bounded_time(
    pg_server: PgServer, pg_dsn: str
) -> None:
    if pg_server.directory is None:
        pytest.skip("the server given by ECPA_TEST_PG_DSN is not ours to freeze")
    with PostgresReplayFence(pg_dsn, timeout=2.0) as fence:
        fence.check_and_record("first", expires_at=9)
        backend = int(fence._one("SELECT pg_backend_pid()", ()))
        os.kill(backend, signal.SIGSTOP)  # the server's process for this connection, frozen
        try:
            began = time.monotonic()
            with pytest.raises(EcpaError) as err:
                fence.check_and_record("second", expires_at=9)
            took = time.monotonic() - began
        finally:
            os.kill(backend, signal.SIGCONT)
        assert err.value.code is ErrorCode.REPLAY_STORE
        assert took < 30
        fence.check_and_record("third", expires_at=9)  # connected again
        assert "third" in fence


def test_describe_dsn_never_shows_the_password() -> None:
    text = describe_dsn("postgresql://u:pw123@db.example:6543/evidence")
    assert text == "PostgreSQL at db.example:6543, database evidence"


def test_table_made_once_with_a_schema_version_row(pg_dsn: str) -> None:
    import psycopg

    with PostgresReplayFence(pg_dsn) as fence:
        fence.check_and_record("a", expires_at=10)
    with PostgresReplayFence(pg_dsn) as again:  # opening again keeps what is there
        assert "a" in again
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT component, version FROM ecpa_schema").fetchall()
    assert rows == [("replay_fence", 1)]


def test_another_schema_version_is_refused(pg_dsn: str) -> None:
    import psycopg

    PostgresReplayFence(pg_dsn).close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE ecpa_schema SET version = 2 WHERE component = 'replay_fence'")
    with pytest.raises(EcpaError) as err:
        PostgresReplayFence(pg_dsn)
    assert err.value.code is ErrorCode.REPLAY_STORE
    assert "found version 2" in err.value.detail


def test_a_table_without_the_nonce_primary_key_is_refused(pg_dsn: str) -> None:
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # made by hand, wrongly
        conn.execute("CREATE TABLE ecpa_accepted_nonce (nonce text, expires_at bigint)")
    with pytest.raises(EcpaError) as err:
        PostgresReplayFence(pg_dsn)
    assert err.value.code is ErrorCode.REPLAY_STORE
    assert "PRIMARY KEY" in err.value.detail


def test_purge_forgets_only_expired_nonces(pg_dsn: str) -> None:
    with PostgresReplayFence(pg_dsn) as fence:
        for i, exp in enumerate([90, 100, 110]):
            fence.check_and_record(f"n{i}", expires_at=exp)
        assert fence.purge(now=105, clock_skew=5) == 1  # 90 < 100; 100 is kept
        assert sorted(n for n in ("n0", "n1", "n2") if n in fence) == ["n1", "n2"]
        assert fence.purge(now=1000) == 2
        assert len(fence) == 0


def test_fingerprint_lets_the_same_record_through_again_only(pg_dsn: str) -> None:
    with PostgresReplayFence(pg_dsn) as fence:
        fence.check_and_record("n", expires_at=9, fingerprint="f1")
        fence.check_and_record("n", expires_at=9, fingerprint="f1")  # the same record again
        for other in ("f2", None):
            with pytest.raises(EcpaError) as err:
                fence.check_and_record("n", expires_at=9, fingerprint=other)
            assert err.value.code is ErrorCode.REPLAYED_NONCE


def test_processes_creating_the_tables_together(pg_server: PgServer, pg_dsn: str) -> None:
    code = (
        "import sys; from ecpa.runtime.stores.postgres import PostgresReplayFence as F; "
        "F(sys.argv[1])"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, pg_dsn]) for _ in range(4)]
    try:
        assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_fence_reconnects_after_a_server_restart(pg_server: PgServer, pg_dsn: str) -> None:
    if pg_server.directory is None:
        pytest.skip("the server given by ECPA_TEST_PG_DSN is not ours to restart")
    with PostgresReplayFence(pg_dsn) as fence:
        fence.check_and_record("before", expires_at=9)
        pg_server.stop()
        try:
            with pytest.raises(EcpaError) as err:
                fence.check_and_record("during", expires_at=9)
            assert err.value.code is ErrorCode.REPLAY_STORE
        finally:
            pg_server.start()
        fence.check_and_record("after", expires_at=9)
        assert "before" in fence
        assert "after" in fence
        with pytest.raises(EcpaError) as again:
            fence.check_and_record("before", expires_at=9)
        assert again.value.code is ErrorCode.REPLAYED_NONCE


def _run_clients(
    dsn: str, tmp_path: Path, during: Any = None, gate: Path | None = None
) -> list[dict[str, list[str]]]:
    outs = [tmp_path / f"client{i}.json" for i in range(PROCESSES)]
    extra = [] if gate is None else [str(gate)]
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, dsn, out, str(i * STEP), str(PER_PROCESS), str(i), *extra],
            cwd=ROOT,
        )
        for i, out in enumerate(outs)
    ]
    try:
        if during is not None:
            during(outs)
        for p in procs:
            assert p.wait(timeout=900) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [json.loads(out.read_text()) for out in outs]


def _table(dsn: str) -> list[bytes]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT nonce_sha256 FROM ecpa_accepted_nonce").fetchall()
    return [bytes(r[0]) for r in rows]


def _keys(nonces: set[str]) -> set[bytes]:
    return {nonce_key(n) for n in nonces}


def _distinct() -> set[str]:
    return {f"n-{i}" for i in range((PROCESSES - 1) * STEP + PER_PROCESS)}


def test_four_processes_with_overlapping_nonces_accept_each_once(
    pg_dsn: str, tmp_path: Path
) -> None:
    results = _run_clients(pg_dsn, tmp_path)
    accepted = [set(r["accepted"]) for r in results]
    assert all(not r["errors"] for r in results)
    for i, a in enumerate(accepted):  # disjoint
        for b in accepted[i + 1 :]:
            assert not a & b
    union = set().union(*accepted)
    assert union == _distinct()  # exactly the distinct nonces: none lost, none twice
    assert sum(len(a) for a in accepted) == len(union)
    assert sum(len(r["replayed"]) for r in results) == PROCESSES * PER_PROCESS - len(union)
    assert sorted(_table(pg_dsn)) == sorted(_keys(union))


def test_a_server_restart_in_the_middle_loses_and_doubles_nothing(
    pg_server: PgServer, pg_dsn: str, tmp_path: Path
) -> None:
    if pg_server.directory is None:
        pytest.skip("the server given by ECPA_TEST_PG_DSN is not ours to restart")

    gate = tmp_path / "server-stopped"

    def wait_until(what: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 600
        while not ready():
            assert time.monotonic() < deadline, f"clients did not get {what} within 600 s"
            time.sleep(0.02)

    def errors_seen(out: Path) -> int:
        progress = Path(f"{out}.progress")
        text = progress.read_text() if progress.exists() else ""
        return int(text.split()[1]) if len(text.split()) == 2 else 0

    def restart(outs: list[Path]) -> None:
        # Every client stops half-way (the worker's gate); the server goes down; the clients
        # go on, each until it has met the server down at least once; then it comes back.
        # Whatever the machine's load, no client can finish before the restart.
        wait_until("half-way", lambda: all(Path(f"{o}.waiting").exists() for o in outs))
        pg_server.stop()
        try:
            gate.touch()
            wait_until("an error", lambda: all(errors_seen(o) > 0 for o in outs))
        finally:
            pg_server.start()

    results = _run_clients(pg_dsn, tmp_path, during=restart, gate=gate)
    accepted = [set(r["accepted"]) for r in results]
    for i, a in enumerate(accepted):  # no nonce accepted twice, across clients
        assert len(a) == len(results[i]["accepted"])
        for b in accepted[i + 1 :]:
            assert not a & b
    table = set(_table(pg_dsn))
    union = set().union(*accepted)
    assert _keys(union) <= table  # none a client reported accepted is missing
    assert table <= _keys(_distinct())
    # Every nonce was either accepted, refused as a replay or reported as an error.
    for r in results:
        assert len(r["accepted"]) + len(r["replayed"]) + len(r["errors"]) == PER_PROCESS
    # The run really spanned the restart: every client met the server down (the gate held
    # each half-way), and clients accepted nonces after it came back.
    assert all(r["errors"] for r in results)
    assert any(r["after"] for r in results)
    # What was neither accepted nor replayed anywhere is exactly what only errored.
    errored = {n for r in results for n in r["errors"]}
    replayed = {n for r in results for n in r["replayed"]}
    assert _distinct() - union - replayed <= errored
    assert os.path.exists(pg_server.directory)


# --- the CLI: --replay-db takes a DSN -------------------------------------------------------


def test_verify_replay_db_dsn_accepts_a_nonce_once(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    trust = write_trust(tmp_path)
    write_pair(Path())
    assert verify("ev.jws", "--replay-db", pg_dsn, trust=trust).status == 0
    run = verify("ev.jws", "--replay-db", pg_dsn, trust=trust)
    assert run.status == 1
    assert run.lines[0].startswith("FAIL ev.jws REPLAYED_NONCE: ")
    # several workers, the fence still held by the main process, in input order
    run = verify("ev.jws", "ev.jws", "--jobs", "2", "--replay-db", pg_dsn, trust=trust)
    assert [line.split(" ")[2] for line in run.lines] == ["REPLAYED_NONCE:"] * 2


def test_verify_replay_db_dsn_server_down_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    trust = write_trust(tmp_path)
    write_pair(Path())
    dsn = f"postgresql://u:pw@127.0.0.1:{_closed_port()}/db"
    run = verify("ev.jws", "--replay-db", dsn, trust=trust)
    assert run.status == 2, run
    assert "ECPA_REPLAY_STORE" in run.err
    assert "Traceback" not in run.err
    assert "pw@" not in run.err
