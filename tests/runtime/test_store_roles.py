"""The evidence store's least-privilege roles (``ecpa store init``, docs/scale.md "Roles"),
each connected as on a real PostgreSQL: what a role must not do is refused by the server,
not by ecpa."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.launchdir import HOST, Written, write_launch
from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime.stores.store import EvidenceStore
from ecpa.runtime.stores.store_prune import prune_store
from ecpa.runtime.stores.store_roles import init_store
from tests.runtime.test_ship import decision, ecpa, local, remote, ship, stored_lines

NOW = 1_800_000_000


@dataclass(frozen=True)
class Logins:
    """Login roles, one per group role (two shippers), and their DSNs."""

    prefix: str
    admin: str
    dsn: dict[str, str]


@pytest.fixture
def logins(pg_dsn: str) -> Iterator[Logins]:
    import psycopg

    prefix = f"r{secrets.token_hex(4)}"
    roles = init_store(pg_dsn, prefix)
    assert roles.created == (f"{prefix}_shipper", f"{prefix}_reader", f"{prefix}_manager")
    groups = {"host1": "shipper", "host2": "shipper", "ro": "reader", "boss": "manager"}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for login, group in groups.items():
            conn.execute(f"CREATE ROLE {prefix}_{login} LOGIN IN ROLE {prefix}_{group}")
    try:
        yield Logins(
            prefix,
            pg_dsn,
            {login: pg_dsn.replace("postgres@", f"{prefix}_{login}@") for login in groups},
        )
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for role in [*(f"{prefix}_{x}" for x in groups), *roles.created]:
                conn.execute(f"DROP OWNED BY {role} CASCADE")
                conn.execute(f"DROP ROLE {role}")


def _launch(root: Path, name: str) -> Written:
    return write_launch(
        root / name, slots=2, records=20, now=NOW, launch_id=name, challenge=name.ljust(43, "c")
    )


def _refused(dsn: str, sql: str, params: tuple[Any, ...] = ()) -> str:
    """What PostgreSQL said refusing ``sql`` run as ``dsn``'s role."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn, pytest.raises(psycopg.Error) as err:
        conn.execute(sql, params)
    return str(err.value)


def _rows(dsn: str, sql: str, params: tuple[Any, ...] = ()) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, params).rowcount


def test_each_role_does_its_work(logins: Logins, tmp_path: Path) -> None:
    w = _launch(tmp_path, "launch-one")
    report = ship(logins.dsn["host1"], w)  # no right to create: the tables are there
    assert report.stored == len(stored_lines(logins.admin, "launch-one")) > 0
    status = remote(logins.dsn["ro"], w, history_budget_s=None)
    assert decision(status) == decision(local(w))
    assert "checkpoint_not_saved" not in {r.code.value for r in status.reasons}
    assert _rows(logins.dsn["boss"], "DELETE FROM ecpa_evidence WHERE launch_id = 'launch-one'")


def test_a_shipper_cannot_touch_another_shippers_launch(logins: Logins, tmp_path: Path) -> None:
    w = _launch(tmp_path, "launch-one")
    ship(logins.dsn["host1"], w)
    with pytest.raises(EcpaError) as err:  # the same launch from another shipper's role
        ship(logins.dsn["host2"], w)
    assert err.value.code is ErrorCode.EVIDENCE_STORE
    assert "row-level security" in err.value.detail
    line = (b'{"forged": 1}', b"\x01" * 32)
    said = _refused(
        logins.dsn["host2"],
        "INSERT INTO ecpa_evidence (launch_id, source, file_offset, line, claimed_sha256,"
        " launch_day) VALUES ('launch-one', 'x.jsonl', 999999, %s, %s, current_date)",
        line,
    )
    assert "row-level security" in said
    # Positions and launch rows of another shipper are out of reach: nothing is changed.
    moved = "UPDATE ecpa_ship_position SET end_offset = 0 WHERE launch_id = 'launch-one'"
    assert _rows(logins.dsn["host2"], moved) == 0
    ended = "UPDATE ecpa_launch SET exit_doc = 'x' WHERE launch_id = 'launch-one'"
    assert _rows(logins.dsn["host2"], ended) == 0
    assert ship(logins.dsn["host1"], w).stored == 0  # its own shipper: all still in place
    w2 = _launch(tmp_path, "launch-two")  # and the other ships its own
    assert ship(logins.dsn["host2"], w2).stored > 0


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT line FROM ecpa_evidence",  # reads no line
        "UPDATE ecpa_evidence SET line = 'x'",
        "DELETE FROM ecpa_evidence",
        "DELETE FROM ecpa_launch",
        "UPDATE ecpa_launch SET launch_doc = 'x'",  # the launch stored stays that launch
        "DELETE FROM ecpa_ship_position",
        "TRUNCATE ecpa_evidence",
        "DROP TABLE ecpa_evidence",
        "INSERT INTO ecpa_schema VALUES ('x', 1)",
    ],
)
def test_a_shipper_may_not(logins: Logins, tmp_path: Path, sql: str) -> None:
    ship(logins.dsn["host1"], _launch(tmp_path, "launch-one"))
    said = _refused(logins.dsn["host1"], sql)
    assert "permission denied" in said or "must be owner" in said


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO ecpa_evidence (launch_id, source, file_offset, line, launch_day)"
        " VALUES ('launch-one', 'x', 1, 'x', current_date)",
        "UPDATE ecpa_evidence SET line = 'x'",
        "DELETE FROM ecpa_evidence",
        "UPDATE ecpa_launch SET exit_doc = 'x'",
        "INSERT INTO ecpa_ship_position VALUES ('launch-one', 'x', 1, 1, 0, 'x')",
        "UPDATE ecpa_ship_position SET end_offset = 0",
        "DROP TABLE ecpa_launch",
    ],
)
def test_a_reader_may_not(logins: Logins, tmp_path: Path, sql: str) -> None:
    ship(logins.dsn["host1"], _launch(tmp_path, "launch-one"))
    said = _refused(logins.dsn["ro"], sql)
    assert "permission denied" in said or "must be owner" in said
    with pytest.raises(EcpaError) as err:  # nor ship
        ship(logins.dsn["ro"], _launch(tmp_path / "b", "launch-one"))
    assert err.value.code is ErrorCode.EVIDENCE_STORE


def test_init_again_repairs_revoked_rights(logins: Logins, tmp_path: Path) -> None:
    import psycopg

    with psycopg.connect(logins.admin, autocommit=True) as conn:
        conn.execute(f"REVOKE ALL ON ecpa_evidence FROM {logins.prefix}_shipper")
    with pytest.raises(EcpaError):
        ship(logins.dsn["host1"], _launch(tmp_path, "launch-one"))
    again = init_store(logins.admin, logins.prefix)
    assert again.created == ()
    assert ship(logins.dsn["host1"], _launch(tmp_path / "b", "launch-one")).stored > 0


def test_cli_store_init(pg_dsn: str) -> None:
    import psycopg

    prefix = f"c{secrets.token_hex(4)}"
    out = ecpa("store", "init", "--db", pg_dsn, "--prefix", prefix, "--json")
    try:
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout.splitlines()[-1])
        assert doc["shipper"] == f"{prefix}_shipper"
        assert doc["created"] == [f"{prefix}_shipper", f"{prefix}_reader", f"{prefix}_manager"]
        again = ecpa("store", "init", "--db", pg_dsn, "--prefix", prefix)
        assert again.returncode == 0, again.stderr
        assert "created now: none" in again.stdout
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for role in ("shipper", "reader", "manager"):
                conn.execute(f"DROP OWNED BY {prefix}_{role} CASCADE")
                conn.execute(f"DROP ROLE IF EXISTS {prefix}_{role}")


@pytest.mark.parametrize(
    "args", [("--prefix", "Bad-Name"), ("--prefix", "x" * 60), ("--prefix", "1abc")]
)
def test_cli_store_init_refuses_a_bad_prefix(args: tuple[str, ...]) -> None:
    out = ecpa("store", "init", "--db", "postgresql://nobody@127.0.0.1:1/none", *args)
    assert out.returncode == 2
    assert "expected a role prefix" in out.stderr


def test_cli_store_init_needs_a_dsn() -> None:
    out = ecpa("store", "init", "--db", "store.db")
    assert out.returncode == 2
    assert "expected --db postgresql://" in out.stderr


def test_a_store_without_roles_is_unchanged(pg_dsn: str, tmp_path: Path) -> None:
    """Without ``ecpa store init``, one role does everything, as before."""
    w = _launch(tmp_path, "launch-one")
    assert ship(pg_dsn, w).stored > 0
    with EvidenceStore(pg_dsn) as store:
        assert store.query("SELECT shipper FROM ecpa_launch") == [("postgres",)]


def test_only_the_manager_prunes(logins: Logins, tmp_path: Path) -> None:
    import psycopg

    ship(logins.dsn["host1"], _launch(tmp_path, "launch-one"))
    with psycopg.connect(logins.admin, autocommit=True) as conn:  # ended, on a past day
        conn.execute(
            "UPDATE ecpa_launch SET supervisor_alive = false, supervisor_checked_at = 1,"
            " day = '2026-01-01'"
        )
        conn.execute(
            "WITH moved AS (DELETE FROM ecpa_evidence RETURNING *) INSERT INTO ecpa_evidence"
            " SELECT launch_id, source, file_offset, line, nonce_sha256, claimed_sha256,"
            " stored_at, '2026-01-01' FROM moved"
        )
    before = int(time.time()) - 60
    for role in ("host1", "ro"):
        with pytest.raises(EcpaError) as err:
            prune_store(logins.dsn[role], before)
        assert err.value.code is ErrorCode.EVIDENCE_STORE
        assert "must be owner" in err.value.detail or "permission denied" in err.value.detail
    assert stored_lines(logins.admin, "launch-one")  # nothing dropped
    [day] = [d for d in prune_store(logins.dsn["boss"], before) if d.day == "2026-01-01"]
    assert day.dropped
    assert day.partition == "ecpa_evidence_default"  # a day without its own: rows deleted
    assert stored_lines(logins.admin, "launch-one") == []


def test_a_shipper_files_its_lines_only_under_its_launchs_day(
    logins: Logins, tmp_path: Path
) -> None:
    ship(logins.dsn["host1"], _launch(tmp_path, "launch-one"))
    said = _refused(
        logins.dsn["host1"],
        "INSERT INTO ecpa_evidence (launch_id, source, file_offset, line, launch_day)"
        " VALUES ('launch-one', 'x.jsonl', 999999, 'x', '2020-01-01')",
    )
    assert "row-level security" in said


def test_the_days_ahead_are_made_and_a_name_taken_costs_no_line(
    logins: Logins, tmp_path: Path
) -> None:
    """store init makes the next days' partitions (a shipper cannot); a relation squatting
    on a day's name is reported, and that day's lines go to the default partition."""
    import datetime

    import psycopg

    from ecpa.runtime.stores.store_schema import DAYS_AHEAD, make_partition

    with psycopg.connect(logins.admin, autocommit=True) as conn:
        today = conn.execute("SELECT (now() AT TIME ZONE 'UTC')::date").fetchone()[0]  # type: ignore[index]
        names = {r[0] for r in conn.execute("SELECT relname FROM pg_class").fetchall()}
        for ahead in range(DAYS_AHEAD):
            assert f"ecpa_evidence_{today + datetime.timedelta(days=ahead):%Y%m%d}" in names
        conn.execute("CREATE TABLE ecpa_evidence_20300101 (x int)")  # not a partition
        with conn.transaction():
            note = make_partition(conn, datetime.date(2030, 1, 1))
    assert note is not None
    assert "not a partition of ecpa_evidence" in note
    w = _launch(tmp_path, "launch-one")
    with psycopg.connect(logins.admin, autocommit=True) as conn:  # a launch of that day
        conn.execute(
            "INSERT INTO ecpa_launch (launch_id, host, launch_doc, day, shipper)"
            " VALUES ('launch-one', %s, %s, '2030-01-01', %s)",
            (HOST, (w.directory / "launch.json").read_bytes(), f"{logins.prefix}_host1"),
        )
    report = ship(logins.dsn["host1"], w)
    assert report.stored == len(stored_lines(logins.admin, "launch-one")) > 0
    with psycopg.connect(logins.admin, autocommit=True) as conn:
        there = conn.execute("SELECT count(*) FROM ecpa_evidence_default").fetchone()
    assert there is not None
    assert there[0] == report.stored
