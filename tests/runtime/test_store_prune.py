"""The evidence store by day (store version 4, docs/scale.md "Partitions"): each launch's
lines in the partition of the day it was first stored, and ``ecpa store prune`` dropping
whole days of launches that are over, keeping a day any launch not over still needs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from bench.launchdir import HOST, Written, write_launch
from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime.model.launch import EXIT_SCHEMA
from ecpa.runtime.stores.store import EvidenceStore
from ecpa.runtime.stores.store_prune import prune_store
from tests.runtime.test_ship import decision, ecpa, file_lines, local, remote, ship, stored_lines

NOW = 1_800_000_000  # the records' time (the store's judgement is given it)
NOV_1, NOV_2 = "2026-11-01", "2026-11-02"
END_NOV_2 = 1_793_664_000  # 2026-11-03T00:00:00Z
#: The prune's time: past, by the database server's clock, and after both days.
BEFORE = int(time.time()) - 60


def _sql(dsn: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description is not None else []


def _launch_on(dsn: str, root: Path, name: str, day: str, ended_at: int | None) -> Written:
    """A launch first stored on ``day`` (its row made by hand with that day), shipped;
    ended at ``ended_at`` (its exit.json) unless None."""
    w = write_launch(root / name, slots=2, records=10, now=NOW, launch_id=name,
                     challenge=name.ljust(43, "c"))  # fmt: skip
    if ended_at is not None:
        doc = {"schema": EXIT_SCHEMA, "ended_at": ended_at, "exit_status": 0}
        (w.directory / "exit.json").write_text(json.dumps(doc))
    EvidenceStore(dsn).close()
    _sql(
        dsn,
        "INSERT INTO ecpa_launch (launch_id, host, launch_doc, day) VALUES (%s, %s, %s, %s)",
        (name, HOST, (w.directory / "launch.json").read_bytes(), day),
    )
    ship(dsn, w)
    return w


def _partitions(dsn: str) -> list[str]:
    rows = _sql(
        dsn,
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'ecpa_evidence'::regclass ORDER BY 1",
    )
    return [r[0] for r in rows]


def test_a_launchs_lines_are_in_its_days_partition(pg_dsn: str, tmp_path: Path) -> None:
    w = _launch_on(pg_dsn, tmp_path, "launch-a", NOV_1, None)
    assert "ecpa_evidence_20261101" in _partitions(pg_dsn)
    rows = _sql(pg_dsn, "SELECT count(*) FROM ecpa_evidence_20261101")
    assert rows[0][0] == len(file_lines(w)) == len(stored_lines(pg_dsn, "launch-a"))


def test_prune_drops_days_of_ended_launches_and_keeps_a_day_a_live_one_needs(
    pg_dsn: str, tmp_path: Path
) -> None:
    a = _launch_on(pg_dsn, tmp_path, "launch-a", NOV_1, BEFORE - 100)
    b = _launch_on(pg_dsn, tmp_path, "launch-b", NOV_1, BEFORE - 50)
    live = _launch_on(pg_dsn, tmp_path, "launch-live", NOV_2, None)
    before = decision(remote(pg_dsn, live))
    dry = prune_store(pg_dsn, BEFORE, dry_run=True)
    assert [(d.day, d.dropped) for d in dry] == [(NOV_1, True), (NOV_2, False)]
    assert len(stored_lines(pg_dsn, "launch-a")) > 0  # a dry run drops nothing
    days = prune_store(pg_dsn, BEFORE)
    assert [(d.day, d.dropped, d.launches) for d in days] == [
        (NOV_1, True, ("launch-a", "launch-b")),
        (NOV_2, False, ("launch-live",)),
    ]
    assert days[0].lines == len(file_lines(a)) + len(file_lines(b))
    assert "launch launch-live: it has not ended" in days[1].reason
    assert "ecpa_evidence_20261101" not in _partitions(pg_dsn)
    assert stored_lines(pg_dsn, "launch-a") == []
    assert _sql(pg_dsn, "SELECT launch_id FROM ecpa_launch") == [("launch-live",)]
    assert _sql(pg_dsn, "SELECT DISTINCT launch_id FROM ecpa_ship_position") == [("launch-live",)]
    with pytest.raises(EcpaError) as refused:
        remote(pg_dsn, a)
    assert refused.value.code is ErrorCode.EVIDENCE_STORE
    assert "expected launch 'launch-a'" in refused.value.detail  # pruned with its day
    assert "found none" in refused.value.detail
    assert decision(remote(pg_dsn, live)) == before  # what stays is untouched


def test_a_launch_that_ended_after_before_keeps_its_day(pg_dsn: str, tmp_path: Path) -> None:
    _launch_on(pg_dsn, tmp_path, "launch-a", NOV_1, BEFORE + 10)
    [day] = prune_store(pg_dsn, BEFORE)
    assert not day.dropped
    assert f"not before {BEFORE}" in day.reason
    assert "ecpa_evidence_20261101" in _partitions(pg_dsn)


def test_a_launch_whose_supervisor_was_seen_gone_is_over(pg_dsn: str, tmp_path: Path) -> None:
    _launch_on(pg_dsn, tmp_path, "launch-a", NOV_1, None)
    _sql(pg_dsn, "UPDATE ecpa_launch SET supervisor_alive = false, supervisor_checked_at = %s",
         (BEFORE - 5,))  # fmt: skip
    [day] = prune_store(pg_dsn, BEFORE)
    assert day.dropped


def test_days_ending_after_before_are_not_considered(pg_dsn: str, tmp_path: Path) -> None:
    _launch_on(pg_dsn, tmp_path, "launch-a", NOV_2, END_NOV_2 - 100)
    assert prune_store(pg_dsn, END_NOV_2 - 1) == []  # 2 Nov ends at END_NOV_2
    assert [d.dropped for d in prune_store(pg_dsn, END_NOV_2)] == [True]


def test_prune_refuses_a_time_after_the_servers_clock(pg_dsn: str) -> None:
    EvidenceStore(pg_dsn).close()
    with pytest.raises(EcpaError) as err:
        prune_store(pg_dsn, int(time.time()) + 3600)
    assert err.value.code is ErrorCode.INVALID_INPUT
    assert "never pruned" in err.value.detail


def test_a_version_3_store_is_partitioned_by_a_writer_its_lines_kept(
    pg_dsn: str, tmp_path: Path
) -> None:
    """A version 3 store (one evidence table) turned into version 4: every line kept, in the
    day of its launch, and the same decision from the store."""
    w = write_launch(tmp_path, slots=2, records=10, now=NOW)
    ship(pg_dsn, w)
    lines = sorted(stored_lines(pg_dsn, w.directory.name))
    for statement in (  # the version 3 layout, by hand
        "CREATE TABLE old AS SELECT launch_id, source, file_offset, line, nonce_sha256,"
        " claimed_sha256, stored_at FROM ecpa_evidence",
        "DROP TABLE ecpa_evidence",
        "ALTER TABLE old RENAME TO ecpa_evidence",
        "ALTER TABLE ecpa_evidence ADD PRIMARY KEY (launch_id, source, file_offset)",
        "ALTER TABLE ecpa_evidence ADD UNIQUE (nonce_sha256)",
        "ALTER TABLE ecpa_launch DROP COLUMN day",
        "UPDATE ecpa_schema SET version = 3 WHERE component = 'evidence_store'",
    ):
        _sql(pg_dsn, statement)
    with pytest.raises(EcpaError) as refused:
        remote(pg_dsn, w)  # a reader does not change the store
    assert refused.value.code is ErrorCode.EVIDENCE_STORE
    assert "found version 3" in refused.value.detail
    ship(pg_dsn, w)  # a writer upgrades it
    assert sorted(stored_lines(pg_dsn, w.directory.name)) == lines
    day = _sql(pg_dsn, "SELECT day FROM ecpa_launch")[0][0]
    assert _partitions(pg_dsn) == sorted([f"ecpa_evidence_{day:%Y%m%d}", "ecpa_evidence_default"])
    assert decision(remote(pg_dsn, w)) == decision(local(w))


def test_cli_store_prune(pg_dsn: str, tmp_path: Path) -> None:
    _launch_on(pg_dsn, tmp_path, "launch-a", NOV_1, END_NOV_2 - 100)
    _launch_on(pg_dsn, tmp_path, "launch-live", NOV_2, None)
    out = ecpa("store", "prune", "--db", pg_dsn, "--before", str(BEFORE), "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    docs = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(d["day"], d["dropped"], d["launches"]) for d in docs] == [
        (NOV_1, True, ["launch-a"]),
        (NOV_2, False, ["launch-live"]),
    ]
    out = ecpa("store", "prune", "--db", pg_dsn, "--before", "2026-11-03T00:00:00Z")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith(f"{NOV_1} (1 launch(es), ")
    assert "dropped" in out.stdout.splitlines()[0]
    assert "kept: an audit of a launch not over needs its lines" in out.stdout


@pytest.mark.parametrize("when", ["yesterday", "2026-13-01", "-5"])
def test_cli_store_prune_refuses_a_bad_time(when: str) -> None:
    out = ecpa("store", "prune", "--db", "postgresql://x@127.0.0.1:1/y", "--before", when)
    assert out.returncode == 2
    assert "expected --before as Unix seconds or an ISO 8601" in out.stderr
