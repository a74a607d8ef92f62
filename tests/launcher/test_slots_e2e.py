"""Launches with several scheduler processes, end to end (RUNTIME.md "Slots"):
real `ecpa run` of `python -m dla_plugin.drive --processes N`, ranks killed, restarted and
forked, every pid killed at the end."""

from __future__ import annotations

import io
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from ecpa.profile.trust import TrustStore
from ecpa.runtime.judge.derive import derive_launch
from ecpa.runtime.model.evidence import read_log
from ecpa.runtime.model.launch import launch_from_file
from ecpa.runtime.model.process import Liveness
from tests._launch_helpers import DRIVE, PLAN, Launches, launches, status, wait_status, wait_until
from tests.support import codes

pytestmark = pytest.mark.e2e  # real processes throughout

__all__ = ["launches"]  # the fixture, used by name

TWO_SLOTS = {
    **PLAN,
    "slots": [{"role": "scheduler", "ordinal": 0}, {"role": "scheduler", "ordinal": 1}],
}
HEARTBEAT_S = 3  # 3 emit intervals of 1 s


def rank_pid(launches: Launches, directory: Path, ordinal: int) -> list[int]:
    """Pids of the processes that wrote a log for slot scheduler.<ordinal>, oldest first."""
    logs = [p for p in launches.logs(directory) if p.name.startswith(f"scheduler.{ordinal}-")]
    return sorted((int(p.name.split("-")[1]) for p in logs), key=lambda pid: pid)


def test_two_ranks_cover_two_slots_and_a_killed_rank_is_named(
    tmp_path: Path, launches: Launches
) -> None:
    _, directory = launches.start(*DRIVE, "--processes", "2", plan=TWO_SLOTS)
    doc = wait_status(directory, True)
    assert doc["coverage"] == {"covered": 2, "slots": 2}
    assert doc["refused"] == {}
    assert [s["slot"] for s in doc["slots"]] == ["scheduler.0", "scheduler.1"]
    assert all(s["covered"] and s["counters"]["selections"] > 0 for s in doc["slots"])
    [victim] = rank_pid(launches, directory, 1)
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    after = wait_status(directory, False, timeout=HEARTBEAT_S + 5)
    assert time.monotonic() - killed_at <= HEARTBEAT_S + 5
    assert {
        "code": "not_covered",
        "text": "slot scheduler.1: not covered",
        "slot": "scheduler.1",
    } in after["reasons"]
    s0, s1 = after["slots"]
    assert s0["covered"] is True
    assert s1["covered"] is False
    assert "not_alive" in codes(s1["reasons"]), s1["reasons"]
    # Every complete line of both ranks still verifies (judged at the kill).
    expected = launch_from_file(directory / "launch.json")
    store = TrustStore.load(directory / "trust.json")
    logs = {p.name: read_log(io.BytesIO(p.read_bytes())) for p in launches.logs(directory)}
    result = derive_launch(
        logs,
        store,
        expected,
        now=int(time.time()),
        liveness=lambda who: Liveness(False, "judged at the kill"),
    )
    assert result.refused == {}
    assert result.accepted > 0


def test_a_plan_with_two_slots_and_one_process(tmp_path: Path, launches: Launches) -> None:
    _, directory = launches.start(*DRIVE, plan=TWO_SLOTS)
    assert wait_until(lambda: bool(launches.logs(directory)))
    time.sleep(1.5)
    code, doc = status(directory)
    assert code == 1
    reasons = [(r["code"], r.get("slot")) for r in doc["reasons"]]
    assert ("no_evidence", "scheduler.1") in reasons
    assert doc["coverage"] == {"covered": 1, "slots": 2}


def test_a_restarted_rank_covers_its_slot_again(tmp_path: Path, launches: Launches) -> None:
    """A rank killed and restarted as a new process (vLLM restarts a crashed engine core):
    true again within one heartbeat window of the new process's first record, and the dead
    one is superseded, not a conflict."""
    _, directory = launches.start(*DRIVE, "--processes", "2", "--restart", plan=TWO_SLOTS)
    wait_status(directory, True)
    [first] = rank_pid(launches, directory, 1)
    os.kill(first, signal.SIGKILL)
    assert wait_until(lambda: len(rank_pid(launches, directory, 1)) == 2)
    new_log = [
        p
        for p in launches.logs(directory)
        if p.name.startswith("scheduler.1-") and int(p.name.split("-")[1]) != first
    ]
    assert wait_until(lambda: new_log[0].stat().st_size > 0)
    first_record = time.monotonic()
    doc = wait_status(directory, True, timeout=HEARTBEAT_S + 2)
    assert time.monotonic() - first_record <= HEARTBEAT_S + 2
    s1 = doc["slots"][1]
    assert s1["process"]["pid"] != first
    assert any(
        r["code"] == "superseded" and r["text"].startswith(f"superseded: pid {first}")
        for r in s1["reasons"]
    ), s1["reasons"]


#: One call of the plugin, then a fork: the child is the real scheduler from then on; the
#: parent exits (as a launcher process would), the child works and reports.
FORK = """
import os, sys, time
from dla_plugin import DlaVictimSelector
from dla_plugin.contract import Candidate, PreemptionContext
sel = DlaVictimSelector()
ctx = PreemptionContext(
    candidates=[Candidate("a", 0, 1.0, 10, 5, 15, 0, 100, predicted_length=50),
                Candidate("b", 0, 2.0, 10, 5, 15, 0, 100, predicted_length=20)],
    scheduling_policy="fcfs", requesting_request_id="c", kv_cache_usage=1.0, now=3.0)
assert sel.select_victim(ctx) == "a"
pid = os.fork()
if pid:
    open(sys.argv[1], "w").write(str(pid))
    os._exit(0)
for _ in range(7):
    sel.select_victim(ctx)
time.sleep(60)
"""


def test_a_forked_child_reports_under_its_own_identity(tmp_path: Path, launches: Launches) -> None:
    marker = tmp_path / "child"
    script = f"{sys.executable} -c '{FORK}' {marker}; sleep 60"
    _, directory = launches.start("sh", "-c", script)
    assert wait_until(lambda: marker.exists() and marker.read_text() != "")
    child = int(marker.read_text())
    launches.pids.add(child)
    doc = wait_status(directory, True)
    [slot] = doc["slots"]
    assert slot["process"]["pid"] == child  # the child's own identity, its own key
    assert slot["kid"].startswith(f"scheduler.0-{child}-")
    assert slot["counters"]["selections"] == 7  # the child's work, not the parent's one call
    names = [p.name for p in launches.logs(directory)]
    # The child's own stream; the parent's (if its one record was written before it left)
    # is another file, under the parent's identity.
    assert any(name.startswith(f"scheduler.0-{child}-") for name in names)
    assert all(name.startswith(f"scheduler.0-{child}-") or str(child) not in name for name in names)
