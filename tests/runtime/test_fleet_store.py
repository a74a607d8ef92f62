"""The evidence store under a fleet's load (docs/scale.md): many shippers at once, lines
that claim another launch's nonce, a store that goes away mid-batch; on a real PostgreSQL
(``scripts/pg-up``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from bench.launchdir import Written, write_launch
from ecpa.runtime.stores.postgres import nonce_key
from ecpa.runtime.stores.store import EvidenceStore, Position, line_nonce

NOW = 1_800_000_000
AT = Position(1, 2, 0)


@pytest.fixture
def written(tmp_path: Path) -> Written:
    return write_launch(tmp_path, slots=2, records=20, now=NOW, launch_id="launch-a")


def _log_lines(w: Written) -> list[tuple[int, bytes]]:
    [log, *_] = sorted((w.directory / "evidence" / w.directory.name).glob("*.jsonl"))
    out, offset = [], 0
    for raw in log.read_bytes().splitlines(keepends=True):
        out.append((offset, raw[:-1]))
        offset += len(raw)
    return out


def _claim(dsn: str, *launch_ids: str) -> None:
    """Launch rows for ``launch_ids`` (a launch's lines are stored only after it), and
    today's partition (made as its owner does it)."""
    with EvidenceStore(dsn) as store:
        for launch_id in launch_ids:
            store.claim_launch(launch_id, "host", launch_id.encode())


def _shipping(
    dsn: str, lines: list[tuple[int, bytes]], result: list[int | None], errors: list[BaseException]
) -> threading.Thread:
    """A thread started that ships ``lines`` as launch-a's log ``a.jsonl`` from offset 0:
    what ``ship`` returned goes to ``result``, what it raised to ``errors``."""

    def run() -> None:
        try:
            with EvidenceStore(dsn) as store:
                end = lines[-1][0] + len(lines[-1][1]) + 1
                result.append(store.ship("launch-a", "a.jsonl", AT, lines, Position(1, 2, end)))
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _keys(dsn: str, launch_id: str) -> list[tuple[int, bytes | None, bytes | None]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT file_offset, nonce_sha256, claimed_sha256 FROM ecpa_evidence"
            " WHERE launch_id = %s ORDER BY file_offset",
            (launch_id,),
        ).fetchall()
    return [(int(o), None if n is None else bytes(n), None if c is None else bytes(c))
            for o, n, c in rows]  # fmt: skip


def test_a_nonce_claimed_by_a_batch_not_yet_committed_is_kept_as_a_replay(
    pg_dsn: str, written: Written
) -> None:
    """Two shippers store lines claiming one nonce at once (another launch's copy of a
    record): the second waits for the first's commit and keeps its line, without the nonce,
    instead of failing its batch."""
    import psycopg

    lines = _log_lines(written)
    first = lines[0][1]
    nonce = line_nonce(first)
    assert nonce is not None
    EvidenceStore(pg_dsn).close()
    _claim(pg_dsn, "launch-a", "launch-b")
    with psycopg.connect(pg_dsn) as other:  # the first shipper's batch, open
        other.execute(
            "INSERT INTO ecpa_evidence (launch_id, source, file_offset, line, nonce_sha256,"
            " claimed_sha256, launch_day) VALUES ('launch-b', 'x.jsonl', 0, %s, %s, %s,"
            " (SELECT day FROM ecpa_launch WHERE launch_id = 'launch-b'))",
            (first, nonce_key(nonce), nonce_key(nonce)),
        )
        result: list[int | None] = []
        errors: list[BaseException] = []
        thread = _shipping(pg_dsn, lines, result, errors)
        thread.join(1.0)
        assert thread.is_alive()  # waiting for the first's commit
        other.commit()
        thread.join(30)
    assert not errors, errors
    assert result == [len(lines)]
    got = _keys(pg_dsn, "launch-a")
    assert len(got) == len(lines)
    assert got[0] == (0, None, nonce_key(nonce))  # kept, claiming the nonce it does not hold
    assert all(n == c and n is not None for _, n, c in got[1:])


def test_two_batches_claiming_nonces_in_opposite_orders_both_land(
    pg_dsn: str, written: Written
) -> None:
    """A deadlock between two batches (nonces X, Y against Y, X): PostgreSQL rolls one back,
    and the shipper runs that batch again rather than failing it."""
    import psycopg

    lines = _log_lines(written)[:2]
    keys = []
    for _, line in lines:
        nonce = line_nonce(line)
        assert nonce is not None
        keys.append(nonce_key(nonce))
    EvidenceStore(pg_dsn).close()
    result: list[int | None] = []
    errors: list[BaseException] = []

    insert = (
        "INSERT INTO ecpa_evidence (launch_id, source, file_offset, line, nonce_sha256,"
        " claimed_sha256, launch_day) VALUES ('launch-b', 'x.jsonl', %s, %s, %s, %s,"
        " (SELECT day FROM ecpa_launch WHERE launch_id = 'launch-b'))"
    )
    _claim(pg_dsn, "launch-a", "launch-b")
    with psycopg.connect(pg_dsn) as other:
        other.execute("SET deadlock_timeout = '5s'")  # the shipper's side finds the cycle
        other.execute(insert, (1, lines[1][1], keys[1], keys[1]))  # Y first
        thread = _shipping(pg_dsn, lines, result, errors)  # claims X, then waits on Y
        thread.join(0.5)
        other.execute(insert, (0, lines[0][1], keys[0], keys[0]))  # then X: a cycle
        other.commit()
        thread.join(30)
    assert not errors, errors
    assert result == [2]
    assert [(n, c) for _, n, c in _keys(pg_dsn, "launch-a")] == [(None, k) for k in keys]


def test_a_batch_of_several_logs_skips_only_the_log_another_shipper_moved(
    pg_dsn: str, written: Written
) -> None:
    lines = _log_lines(written)[:3]
    end = lines[-1][0] + len(lines[-1][1]) + 1
    _claim(pg_dsn, "launch-a")
    with EvidenceStore(pg_dsn) as store:
        assert store.ship("launch-a", "b.jsonl", AT, lines[:1], Position(1, 2, 99)) == 1
        got = store.ship_logs(
            "launch-a",
            [
                ("a.jsonl", AT, lines, Position(1, 2, end)),
                ("b.jsonl", AT, lines[1:], Position(1, 2, end)),  # stored from 99, not 0
                ("c.jsonl", AT, [], Position(1, 2, 5)),  # blank lines only: it moves
            ],
        )
        assert got == [3, None, 0]
        positions = store.positions("launch-a", ["a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl"])
    assert {k: v.end for k, v in positions.items()} == {"a.jsonl": end, "b.jsonl": 99, "c.jsonl": 5}
    assert len(_keys(pg_dsn, "launch-a")) == 4  # a's three lines and b's first, nothing else


def test_a_10_mb_line_among_records_costs_no_record(pg_dsn: str, tmp_path: Path) -> None:
    """A 10 MB line in the middle of a log, between records and other logs' lines: stored
    once, cut; every record after it stored once; a second pass stores nothing."""
    from ecpa.runtime.stores.store import MAX_STORED_LINE
    from tests.runtime.test_ship import append, file_lines, line_of, ship, stored_lines

    w = write_launch(tmp_path, slots=3, records=10, now=NOW)
    record = line_of(w, 1, 3)
    append(w, 1, b"y" * (10 << 20) + b"\n" + record)  # then a replay of a record
    first = ship(pg_dsn, w)
    stored = stored_lines(pg_dsn, w.directory.name)
    assert len(stored) == len(set(stored)) == first.stored == len(file_lines(w))
    assert sorted(len(r[2]) for r in stored if r[2].startswith(b"yyy")) == [MAX_STORED_LINE]
    assert ship(pg_dsn, w).stored == 0


@pytest.mark.parametrize("refused", [4, 5, 30])
def test_refused_lines_at_a_logs_end_never_hide_its_newest_record(
    pg_dsn: str, tmp_path: Path, refused: int
) -> None:
    """The end of a log is read 4 lines first: when none of those is accepted, all 64 are
    (from the file and from the store alike), history not walked (a first status)."""
    from bench.launchdir import HOST
    from ecpa.runtime.host.status import status_from_launch_dir
    from ecpa.runtime.stores.remote import status_from_store
    from tests.runtime.test_ship import append, decision, ship

    w = write_launch(tmp_path, slots=2, records=10, now=NOW)
    append(w, 0, b"not a record\n" * refused)
    ship(pg_dsn, w)
    here = status_from_launch_dir(
        w.directory, now=NOW, proc_root=w.proc_root, host=HOST, history_budget_s=0.0
    )
    there = status_from_store(pg_dsn, w.directory.name, now=NOW, history_budget_s=0.0)
    assert [s.covered for s in here.slots] == [True, True]
    assert decision(here) == decision(there)


def _fleet_of(dsn: str, root: Path, count: int, **kw: object) -> list[Written]:
    from tests.runtime.test_ship import ship

    launches = []
    for i in range(count):
        w = write_launch(root / f"f{i}", slots=3, records=10, launch_id=f"launch-f{i}",
                         challenge=f"fleet{i}".ljust(43, "c"), **kw)  # type: ignore[arg-type]  # fmt: skip
        ship(dsn, w, at=kw.get("now", NOW))  # type: ignore[arg-type]
        launches.append(w)
    return launches


def test_the_fleet_verdict_judges_every_launch_not_ended_as_status_does(
    pg_dsn: str, tmp_path: Path
) -> None:
    import json as json_module

    from ecpa.errors import ErrorCode
    from ecpa.runtime.stores.fleet import fleet_status
    from ecpa.runtime.stores.remote import status_from_store
    from tests.runtime.test_ship import decision

    launches = _fleet_of(pg_dsn, tmp_path, 3, now=NOW)
    ended = launches[2]
    (ended.directory / "exit.json").write_text(
        json_module.dumps({"schema": "ecpa-launch-exit/0.1", "ended_at": NOW, "exit_status": 0})
    )
    from tests.runtime.test_ship import ship

    ship(pg_dsn, ended)
    with EvidenceStore(pg_dsn) as store:  # a launch whose stored launch.json is another's
        doc = (launches[0].directory / "launch.json").read_bytes()
        store.query(
            "INSERT INTO ecpa_launch (launch_id, host, launch_doc) VALUES ('launch-odd', 'h', %s)",
            (doc,),
        )
    entries, more = fleet_status(pg_dsn, now=NOW, history_budget_s=None)
    assert not more
    assert [e.launch_id for e in entries] == ["launch-f0", "launch-f1", "launch-odd"]
    for e in entries[:2]:
        assert e.status is not None
        assert e.status.effective
        alone = status_from_store(pg_dsn, e.launch_id, now=NOW, history_budget_s=None)
        assert decision(e.status) == decision(alone)
    odd = entries[2]
    assert odd.status is None
    assert odd.error is not None
    assert odd.error.code is ErrorCode.EVIDENCE_STORE
    assert "launch-f0" in odd.error.detail  # named: the launch.json is of another launch
    few, more = fleet_status(pg_dsn, now=NOW, limit=1)
    assert [e.launch_id for e in few] == ["launch-f0"]
    assert more


def test_cli_status_all(pg_dsn: str, tmp_path: Path) -> None:
    import json as json_module

    from tests.runtime.test_ship import ecpa

    _fleet_of(pg_dsn, tmp_path, 2, now=NOW)
    out = ecpa("status", "--db", pg_dsn, "--all", "--now", str(NOW), "--json")
    assert out.returncode == 0, out.stderr
    docs = [json_module.loads(line) for line in out.stdout.splitlines()]
    assert [(d["launch_id"], d["runtime_effective"]) for d in docs] == [
        ("launch-f0", True),
        ("launch-f1", True),
    ]
    assert docs[0]["coverage"] == {"covered": 3, "slots": 3}
    text = ecpa("status", "--db", pg_dsn, "--all", "--now", str(NOW + 3600))  # all stale
    assert text.returncode == 1
    assert text.stdout.splitlines() == [
        "launch-f0: false (0/3 slots)",
        "launch-f1: false (0/3 slots)",
    ]


@pytest.mark.parametrize(
    "args",
    [
        ("--all",),  # no store
        ("--db", "postgresql://x@127.0.0.1:1/y", "--all", "--launch-id", "launch-1"),
        ("--launch", ".", "--all"),
    ],
)
def test_cli_status_all_usage(args: tuple[str, ...]) -> None:
    from tests.runtime.test_ship import ecpa

    out = ecpa("status", *args)
    assert out.returncode == 2
    assert (
        "expected --launch-id ID or --all with --db DSN" in out.stderr
        or "exactly one" in out.stderr
    )


def test_two_readers_of_one_fleet_agree(pg_dsn: str, pg_server: object, tmp_path: Path) -> None:
    """Two replicas (two reader roles, each with its own checkpoints) judging one live fleet
    by the server's clock give the same verdicts, at each of three rounds."""
    import time as time_module

    import psycopg

    from ecpa.runtime.stores.fleet import fleet_status
    from tests.runtime.test_ship import decision

    _fleet_of(pg_dsn, tmp_path, 3, now=int(time_module.time()), interval=10)
    schema = pg_dsn.split("search_path%3D")[1]
    roles = [f"rep{i}_{schema}" for i in range(2)]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for role in roles:
            conn.execute(f"CREATE ROLE {role} LOGIN")
            conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
            conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
            conn.execute(f"GRANT INSERT, UPDATE ON ecpa_reader_checkpoint TO {role}")
    try:
        for _ in range(3):
            seen = []
            for role in roles:
                entries, _ = fleet_status(pg_dsn.replace("postgres@", f"{role}@"),
                                          history_budget_s=None)  # fmt: skip
                assert all(e.status is not None for e in entries)
                seen.append([(e.launch_id, decision(e.status)[0]) for e in entries if e.status])
            assert seen[0] == seen[1]
            assert [effective for _, effective in seen[0]] == [True, True, True]
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for role in roles:
                conn.execute(f"DROP OWNED BY {role}")
                conn.execute(f"DROP ROLE {role}")


def test_lines_of_a_launch_not_stored_are_refused_with_a_reason(
    pg_dsn: str, written: Written
) -> None:
    from ecpa.errors import EcpaError, ErrorCode

    lines = _log_lines(written)[:1]
    with EvidenceStore(pg_dsn) as store, pytest.raises(EcpaError) as err:
        store.ship("launch-a", "a.jsonl", AT, lines, Position(1, 2, len(lines[0][1]) + 1))
    assert err.value.code is ErrorCode.EVIDENCE_STORE
    assert "expected launch 'launch-a' stored before its lines" in err.value.detail
    with EvidenceStore(pg_dsn) as store:
        assert store.positions("launch-a", ["a.jsonl"]) == {}  # nothing of the batch kept


def test_cli_status_all_is_true_only_for_a_whole_fleet(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Launches left out (past the cap), none at all, or a signal before the end: never
    exit 0."""
    from ecpa.cli import main
    from ecpa.runtime.judge import history
    from ecpa.runtime.stores import fleet

    argv = ["status", "--db", pg_dsn, "--all", "--now", str(NOW)]
    EvidenceStore(pg_dsn).close()
    assert main(argv) == 1  # an empty store
    assert "no launch without an end" in capsys.readouterr().err
    _fleet_of(pg_dsn, tmp_path, 2, now=NOW)
    assert main(argv) == 0
    monkeypatch.setattr(fleet, "MAX_FLEET", 1)
    assert main(argv) == 1  # the first is true, the second not judged
    assert "judged the first 1 launches only" in capsys.readouterr().err
    monkeypatch.setattr(fleet, "MAX_FLEET", 10)
    judge = fleet.status_from_store

    def signalled(*args: Any, **kw: Any) -> Any:  # SIGTERM while the first launch is judged
        history.STOP.set()
        return judge(*args, **kw)

    monkeypatch.setattr(fleet, "status_from_store", signalled)
    try:
        assert main(argv) == 130  # not the first launch's verdict as the fleet's
        history.STOP.set()
        entries, _ = fleet.fleet_status(pg_dsn, now=NOW)
        assert entries == []  # no launch judged once the signal came
    finally:
        history.STOP.clear()


def test_the_store_reads_its_rows_in_binary_and_its_types_as_in_text(pg_dsn: str) -> None:
    """A store's reads come back in PostgreSQL's binary format (a stored line as its bytes,
    not as hex the server writes and the client decodes: most of a fleet verdict's bytes),
    each type its tables hold read as the text format reads it; a line's every byte kept.
    A type that reads otherwise (a bare regclass) is what the query's docstring says, and
    the store's tables hold none: a column of another type fails here first."""
    import psycopg

    line = bytes(range(256)) + b"\r"
    sql = (
        "SELECT %s::bytea, 'a'::text, 'b'::name, 7::bigint, 8::int, true, NULL::text,"
        " 'ecpa_launch'::regclass::text, current_user, now() IS NOT NULL, 1.5::numeric,"
        " '{\"k\": 1}'::text, '2026-12-06'::date, '2026-12-06 01:02:03+00'::timestamptz"
    )
    with EvidenceStore(pg_dsn) as store:
        formats: list[Any] = []
        execute = psycopg.Connection.execute

        def watched(self: Any, *args: Any, **kw: Any) -> Any:
            cur = execute(self, *args, **kw)
            formats.append(cur.pgresult.fformat(0) if cur.pgresult and cur.description else None)
            return cur

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(psycopg.Connection, "execute", watched)
            (row,) = store.query(sql, (line,))
        assert formats == [psycopg.pq.Format.BINARY]
        with psycopg.connect(pg_dsn) as conn:
            as_text = conn.execute(sql, (line,)).fetchone()
    assert row == as_text
    assert row[0] == line
    assert [type(v) for v in row] == [type(v) for v in as_text]

    with EvidenceStore(pg_dsn) as store:
        (bare,) = store.query("SELECT 'ecpa_launch'::regclass")
        assert isinstance(bare[0], bytes)  # as documented: cast such a type to text
        types = store.query(
            "SELECT DISTINCT data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name LIKE 'ecpa%%'"
        )
    read_as_in_text = {
        "text",
        "name",
        "bytea",
        "bigint",
        "integer",
        "boolean",
        "date",
        "timestamp with time zone",
    }
    assert {str(t) for (t,) in types} <= read_as_in_text, types


def test_a_launchs_row_is_read_at_its_turn_so_an_end_shipped_meanwhile_counts(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store's launches judged one after the other (a judging process's part) read each
    launch's row when its turn comes: ``ecpa ship`` changes a row (its end, its trust
    store, its supervisor), so a launch that ended while another was judged is judged
    ended (an adversarial review found rows read 64 at a time, before their launches'
    turn, judging such a launch effective)."""
    import json as json_module

    from ecpa.runtime.host import launches as module
    from ecpa.runtime.judge.reasons import ReasonCode
    from tests.runtime.test_ship import ship

    fleet = _fleet_of(pg_dsn, tmp_path, 2, now=NOW)
    real = module.status_from_store

    def judged(dsn: str, launch_id: str, **kw: Any) -> Any:
        status = real(dsn, launch_id, **kw)
        if launch_id == "launch-f0":  # launch-f1 ends while launch-f0 is judged
            w = fleet[1]
            (w.directory / "exit.json").write_text(json_module.dumps(
                {"schema": "ecpa-launch-exit/0.1", "ended_at": NOW, "exit_status": 0}))  # fmt: skip
            ship(pg_dsn, w, at=NOW)
        return status

    monkeypatch.setattr(module, "status_from_store", judged)
    found = module.judge_launches((), pg_dsn, now=NOW, names=("launch-f0", "launch-f1"))
    monkeypatch.undo()
    first, second = found.judged
    assert first.status.effective
    assert not second.status.effective
    assert second.status.reasons[0].code is ReasonCode.LAUNCH_ENDED
    assert second.summary.ended is not None


def test_a_launchs_start_is_read_once_per_launch_json(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Judged again (a judging process, every refresh), a launch's ``started_at`` is not
    parsed out of its whole ``launch.json`` again; another launch.json is read afresh."""
    from ecpa.runtime.host import launches as module
    from ecpa.runtime.judge.memo import forget

    (w,) = _fleet_of(pg_dsn, tmp_path, 1, now=NOW)
    forget()
    read: list[bytes] = []
    real = module.time_member

    def counted(data: bytes, name: str, what: str) -> int | None:
        read.append(data)
        return real(data, name, what)

    monkeypatch.setattr(module, "time_member", counted)
    first = module.judge_launches((), pg_dsn, now=NOW, names=("launch-f0",))
    again = module.judge_launches((), pg_dsn, now=NOW, names=("launch-f0",))
    doc = (w.directory / "launch.json").read_bytes()
    assert read == [doc]
    assert first.judged[0].summary.started_at == again.judged[0].summary.started_at
    assert again.judged[0].summary.started_at == real(doc, "started_at", "launch.json")
    assert module._started_at(doc + b" ") == again.judged[0].summary.started_at
    assert read == [doc, doc + b" "]
