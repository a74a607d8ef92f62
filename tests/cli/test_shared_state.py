"""Replay databases and trust stores that several processes use at once (RUNTIME.md "Replay
fence"; PROFILE.md §5): store trouble stops the command (exit 2) instead of failing item after
item, a fence that cannot enforce uniqueness is refused, re-reading is not a replay, and no
trust store update is lost in a race."""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest

from ecpa.profile.b64 import b64u_encode
from ecpa.profile.keys import SigningKey
from tests._cli_helpers import RECORD_SCHEMA, signed
from tests._launch_helpers import (
    DRIVE,
    ECPA,
    Launches,
    clean_env,
    ecpa_cmd,
    launches,
    status,
    wait_status,
)
from tests.support import NOW, statement, trust_doc

__all__ = ["launches"]  # the fixture, used by name


@pytest.fixture
def log_and_trust(tmp_path: Path) -> tuple[Path, Path]:
    """Three valid records (distinct nonces) in one log, and their trust store."""
    lines = []
    for n in range(3):
        payload, jws = signed(statement(challenge_nonce=f"nonce-{n}"))
        record = {"schema": RECORD_SCHEMA, "payload_b64": b64u_encode(payload), "detached_jws": jws}
        lines.append(json.dumps(record))
    log = tmp_path / "three.jsonl"
    log.write_text("\n".join(lines) + "\n")
    trust = tmp_path / "trust.json"
    trust.write_text(json.dumps(trust_doc()))
    return log, trust


def test_a_locked_replay_db_stops_the_command_fast(
    tmp_path: Path, log_and_trust: tuple[Path, Path]
) -> None:
    """A locked database stops the command (exit 2) within seconds, instead of a per-item
    FAIL with exit 1 after 30 s per item."""
    log, trust = log_and_trust
    db = tmp_path / "fence.db"
    assert (
        ecpa_cmd("verify", log, "--trust", trust, "--now", NOW, "--replay-db", db).returncode == 0
    )
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        out = ecpa_cmd("verify", log, "--trust", trust, "--now", NOW + 1, "--replay-db", db)
        took = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert out.returncode == 2, out.stdout + out.stderr
    assert "ECPA_REPLAY_STORE" in out.stderr
    assert "FAIL" not in out.stdout  # no item was judged by a fence that failed
    assert took < 15  # one bounded wait, not one per item


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_fence_table_without_a_primary_key_is_refused(
    tmp_path: Path, log_and_trust: tuple[Path, Path], jobs: str
) -> None:
    """An accepted_nonce table without a primary key is refused, never a fence silently
    turned off."""
    log, trust = log_and_trust
    db = tmp_path / "fence.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE accepted_nonce (nonce TEXT, expires_at INTEGER)")
    twice = [log, log]
    out = ecpa_cmd(
        "verify", *twice, "--trust", trust, "--now", NOW, "--replay-db", db, "--jobs", jobs
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert "ECPA_REPLAY_STORE" in out.stderr
    assert "PRIMARY KEY" in out.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM accepted_nonce").fetchone() == (0,)


def test_status_twice_with_one_replay_db_stays_true(tmp_path: Path, launches: Launches) -> None:
    """With a durable fence, a second `status` within one emit interval still says true for
    a healthy launch: re-reading an accepted record is not a replay."""
    _, directory = launches.start(*DRIVE)
    wait_status(directory, True)
    launches.logs(directory)
    db = tmp_path / "status.db"
    first = status(directory, "--replay-db", str(db))
    second = status(directory, "--replay-db", str(db))
    assert (first[0], second[0]) == (0, 0), (first[1]["reasons"], second[1]["reasons"])
    assert second[1]["refused"] == {}


def test_twenty_concurrent_trust_adds_all_land(tmp_path: Path) -> None:
    """20 concurrent `ecpa trust add`: every one exits 0 and the store holds all 20 keys."""
    store = tmp_path / "trust.json"
    store.write_text(json.dumps({"schema": "ecpa-trust-store/0.1", "keys": []}))
    store.chmod(0o600)
    procs = []
    for n in range(20):
        key = SigningKey.from_seed(bytes([n + 1]) * 32).public_key.to_b64()
        args = ["trust", "add", str(store), "--issuer", "urn:i", "--kid", f"k{n}"]
        procs.append(
            subprocess.Popen(
                [str(ECPA), *args, "--public-key-b64", key],
                env=clean_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        )
    codes = [p.wait(timeout=60) for p in procs]
    for p in procs:
        assert p.stderr is not None
        p.stderr.close()
    assert codes == [0] * 20
    keys = json.loads(store.read_text())["keys"]
    assert sorted(k["kid"] for k in keys) == sorted(f"k{n}" for n in range(20))
    assert stat.S_IMODE(store.stat().st_mode) == 0o600  # was reset to 0644
    assert [p.name for p in tmp_path.iterdir()] == ["trust.json"]  # no temporary left


def test_a_disable_racing_an_add_is_never_lost(tmp_path: Path) -> None:
    """A `trust disable` racing a `trust add` is never lost. Twenty trials, each its own
    store, all racing at once: every disable and every add lands."""
    a = SigningKey.from_seed(b"a" * 32).public_key.to_b64()
    b = SigningKey.from_seed(b"b" * 32).public_key.to_b64()
    procs = []
    for trial in range(20):
        directory = tmp_path / f"t{trial}"
        directory.mkdir()
        store = directory / "trust.json"
        entry = {
            "issuer": "urn:i",
            "kid": "a",
            "public_key_b64": a,
            "subjects": ["host-runtime"],
            "enabled": True,
            "not_before": 0,
            "not_after": 2**40,
        }
        store.write_text(json.dumps({"schema": "ecpa-trust-store/0.1", "keys": [entry]}))
        base = ["trust", "add", str(store), "--issuer", "urn:i"]
        for args in (
            [*base, "--kid", "b", "--public-key-b64", b],
            ["trust", "disable", str(store), "--issuer", "urn:i", "--kid", "a"],
        ):
            procs.append(
                subprocess.Popen([str(ECPA), *args], env=clean_env(), stdout=subprocess.DEVNULL)
            )
    assert [p.wait(timeout=120) for p in procs] == [0] * 40
    for trial in range(20):
        keys = {
            k["kid"]: k
            for k in json.loads((tmp_path / f"t{trial}" / "trust.json").read_text())["keys"]
        }
        assert sorted(keys) == ["a", "b"], trial
        assert keys["a"]["enabled"] is False, f"trial {trial}: the disable was lost"
