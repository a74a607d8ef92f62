"""``ecpa serve`` end to end: a two-rank launch under ``ecpa run``, shipped to PostgreSQL by
``ecpa ship``, served from its evidence directory and from the store by two ``ecpa serve``
processes; a rank SIGKILLed; the page rendered by headless Chromium. Every process started
is killed by pid at the end."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ecpa.runtime import children_now, proc_table
from tests._launch_helpers import DRIVE, ECPA, PLAN, Launches, clean_env, launches
from tests.serve._served import render_dom, sample, write_runs

pytestmark = pytest.mark.e2e

__all__ = ["launches"]  # the fixture, used by name

TWO_SLOTS = {
    **PLAN,
    "slots": [{"role": "scheduler", "ordinal": 0}, {"role": "scheduler", "ordinal": 1}],
}
HEARTBEAT_S = 3  # 3 emit intervals of 1 s
TOKEN = "tok-" + "9f8e7d6c5b4a3210" * 2
PASSWORD = "pw-never-in-a-log-41"


class Server:
    """One ``ecpa serve`` process, and where it listens."""

    def __init__(self, proc: subprocess.Popen[str], url: str, token: str | None) -> None:
        self.proc, self.url, self.token = proc, url, token

    def get(self, path: str) -> tuple[int, bytes]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        request = urllib.request.Request(self.url + path, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def doc(self, launch_id: str) -> dict[str, Any]:
        status, body = self.get(f"/v1/launches/{launch_id}")
        assert status == 200, (status, body)
        found: dict[str, Any] = json.loads(body)
        return found

    def metrics(self) -> str:
        status, body = self.get("/metrics")
        assert status == 200, body
        return body.decode()


@contextlib.contextmanager
def serving(
    *args: str | Path, token: str | None = None, env: dict[str, str] | None = None
) -> Iterator[Server]:
    proc = subprocess.Popen(
        [str(ECPA), "serve", "--listen", "127.0.0.1:0", "--interval", "0.5", *map(str, args)],
        env={**clean_env(), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.match(r"ecpa serve: listening on (http://\S+) ", line)
        assert match, line + proc.stderr.read()
        server = Server(proc, match.group(1), token)
        server.said = line  # type: ignore[attr-defined]
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


def wait_for(what: Callable[[], bool], timeout: float, step: float = 0.1) -> float:
    """Seconds until ``what()`` held (failing after ``timeout``)."""
    started = time.monotonic()
    while not what():
        assert time.monotonic() - started < timeout, f"not within {timeout} s"
        time.sleep(step)
    return time.monotonic() - started


def slots(doc: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(s["slot"], s["covered"]) for s in doc["slots"]]


def test_serve_a_two_rank_launch_from_its_directory_and_from_the_store(
    tmp_path: Path, launches: Launches, pg_dsn: str
) -> None:
    runs = tmp_path / "runs"
    _, directory = launches.start(*DRIVE, "--processes", "2", plan=TWO_SLOTS, evidence_dir=runs)
    launch_id = directory.name
    dsn = re.sub(r"^postgresql://([^@:/]+)@", rf"postgresql://\1:{PASSWORD}@", pg_dsn)
    assert PASSWORD in dsn  # the test cluster trusts local connections: the password is decor
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    shipper = subprocess.Popen(
        [str(ECPA), "ship", "--launch", str(directory), "--db", dsn, "--interval", "0.2"],
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    launches.pids.add(shipper.pid)
    try:
        with (
            serving("--evidence-dir", runs, "--token-file", token_file, token=TOKEN) as by_dir,
            serving(env={"ECPA_DB": dsn}) as by_db,
        ):
            # Both say true, 2/2, within the heartbeat window of the ranks' first records.
            wait_for(lambda: by_dir.doc(launch_id)["runtime_effective"] is True, 30)
            text = by_dir.metrics()
            assert sample(text, "ecpa_runtime_effective", launch_id=launch_id) == 1.0
            for slot in ("scheduler.0", "scheduler.1"):
                assert sample(text, "ecpa_slot_covered", launch_id=launch_id, slot=slot) == 1.0
                assert sample(text, "ecpa_slot_selections_total", launch_id=launch_id, slot=slot)
            listing = json.loads(by_dir.get("/v1/launches")[1])
            [item] = listing["launches"]
            assert (item["launch_id"], item["runtime_effective"]) == (launch_id, True)
            assert item["coverage"] == {"covered": 2, "slots": 2}
            wait_for(lambda: by_db.doc(launch_id)["runtime_effective"] is True, 30)
            assert slots(by_db.doc(launch_id)) == [("scheduler.0", True), ("scheduler.1", True)]
            assert by_dir.doc(launch_id)["lifecycle"]["enabled"]["state"] is True
            assert by_dir.get("/v1/launches")[0] == 200
            assert Server(by_dir.proc, by_dir.url, None).get("/v1/launches")[0] == 401

            # The page, as headless Chromium renders it.
            dom = render_dom(by_db.url + "/")
            assert launch_id in dom
            assert "ecpa serve: 1 of 1 launches runtime_effective" in dom
            assert "scheduler.1" in dom

            # SIGKILL rank 1: the launch and that slot go to 0 within the heartbeat window.
            logs = sorted((directory / "evidence" / launch_id).glob("scheduler.1-*.jsonl"))
            launches.logs(directory)  # every pid is remembered for the cleanup
            victim = int(logs[0].name.split("-")[1])
            os.kill(victim, signal.SIGKILL)

            def dir_says_0() -> bool:
                text = by_dir.metrics()
                return (
                    sample(text, "ecpa_runtime_effective", launch_id=launch_id) == 0.0
                    and sample(text, "ecpa_slot_covered", launch_id=launch_id, slot="scheduler.1")
                    == 0.0
                )

            took = wait_for(dir_says_0, HEARTBEAT_S + 10)
            assert took <= HEARTBEAT_S + 1, took
            text = by_dir.metrics()
            assert sample(text, "ecpa_slot_covered", launch_id=launch_id, slot="scheduler.0") == 1.0
            # The store judges liveness from signed heartbeats: false once rank 1's are stale.
            took_db = wait_for(lambda: by_db.doc(launch_id)["runtime_effective"] is False, 30)
            assert took_db <= HEARTBEAT_S + 3, took_db
            from_dir, from_db = by_dir.doc(launch_id), by_db.doc(launch_id)
            assert from_dir["runtime_effective"] is from_db["runtime_effective"] is False
            assert (
                slots(from_dir) == slots(from_db) == [("scheduler.0", True), ("scheduler.1", False)]
            )
            assert from_dir["coverage"] == from_db["coverage"] == {"covered": 1, "slots": 2}
            assert "not_covered" in {r["code"] for r in from_db["reasons"]}
        said = [by_dir.proc.stderr.read(), by_db.proc.stderr.read()]  # type: ignore[union-attr]
        for server in (by_dir, by_db):
            assert server.proc.returncode == 0  # SIGTERM: a clean stop
    finally:
        if shipper.poll() is None:
            shipper.kill()
        shipper.wait(timeout=15)
    # No secret in any line either server wrote.
    lines = "".join(said) + by_dir.said + by_db.said  # type: ignore[attr-defined]
    assert TOKEN not in lines
    assert PASSWORD not in lines
    assert "bearer token required" in by_dir.said  # type: ignore[attr-defined]


def test_a_sigkilled_server_leaves_no_judging_process_behind(tmp_path: Path) -> None:
    """``ecpa serve`` judges in spawned processes (and multiprocessing starts a resource
    tracker): SIGKILL, which the server cannot handle, must still end them all, as their
    parent's death (they were orphaned before: reparented, running on)."""
    runs = tmp_path / "runs"
    write_runs(runs)
    left: set[tuple[int, int]] = set()
    try:
        with serving("--evidence-dir", runs, "--judges", "2") as server:
            status, _ = server.get("/v1/launches")
            assert status == 200
            # The judges start on the first refresh; the resource tracker with them.
            wait_for(lambda: len(children_now(server.proc.pid)) >= 3, 30)
            left = set(children_now(server.proc.pid))
            server.proc.kill()
            assert server.proc.wait(timeout=15) == -signal.SIGKILL
            took = wait_for(lambda: not alive(left), 15)
        assert took < 5, took  # at once with a pidfd; within a second or two by polling
    finally:
        for pid, _ticks in alive(left):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def alive(processes: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Those of ``processes`` (pid, start ticks) still running: the same pid and start."""
    table = proc_table()
    return {
        (pid, ticks)
        for pid, ticks in processes
        if pid in table and table[pid].start_ticks == ticks and table[pid].live
    }
