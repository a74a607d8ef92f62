"""The demo's last act: the whole loop with real processes.

``ecpa run`` launches the DLA driver (a scheduler process with the plugin and its observer
inside, ``python -m dla_plugin.drive``) with the default plan of the installed bundle;
``ecpa status --launch`` turns true once the plugin has chosen victims and its signed
evidence is fresh; the driver is stopped; status turns false, naming the dead process.
The driver runs as a child process: ecpa never imports dla_plugin.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from ecpa.demo._hosts import hosts_steps
from ecpa.demo._serve import serving
from ecpa.demo._tour import Tour, launched, spawn_ecpa, stop_ecpa
from ecpa.profile.keys import SigningKey

__all__ = ["launch_loop", "slots_loop"]


def _quiet_status(tour: Tour, launch_dir: Path) -> int:
    status, _printed = tour.ecpa(["status", "--launch", str(launch_dir)])
    return status


def launch_loop(d: Path, tour: Tour, *, timeout: float = 30.0) -> None:
    """Launch, watch status turn true, stop, watch it turn false; one check per step."""
    command = [sys.executable, "-m", "dla_plugin.drive", "--seconds", "120", "--step-ms", "1"]
    args = ["run", "--evidence-dir", str(d / "runs"), "--grace", "5", "--", *command]
    tour.act("launch")
    proc = spawn_ecpa(args, cwd=d, tour=tour)
    try:
        launch_dir = launched(proc, d, tour)
        if launch_dir is None:
            return
        deadline = time.monotonic() + timeout
        while _quiet_status(tour, launch_dir) != 0 and time.monotonic() < deadline:
            time.sleep(0.3)
        status = ["status", "--launch", str(launch_dir)]
        tour.step(status, 0, "runtime_effective: true", "is the plugin really working, right now?")
        _key_replaced(launch_dir, tour, status)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=timeout)
        tour.say("\n# stop the launch (SIGTERM, forwarded to the driver)")
        tour.say(proc.stderr.read().rstrip("\n") if proc.stderr else "")
        tour.checks.append(code == 0)
        tour.step(status, 1, "the command exited with status 0", "after the launch has ended")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def _key_replaced(launch_dir: Path, tour: Tour, status: list[str]) -> None:
    """Whoever can write the launch directory replaces the live process's key in trust.json:
    false, the manager's certificate says otherwise; put back, true again."""
    trust = launch_dir / "trust.json"
    original = trust.read_bytes()
    doc = json.loads(original)
    doc["keys"][0]["public_key_b64"] = SigningKey.generate().public_key.to_b64()
    trust.write_text(json.dumps(doc, indent=2) + "\n")
    tour.say("\n# someone who can write the launch directory puts a key of theirs in trust.json")
    why = "trust.json is not trusted: only keys the manager certified count"
    tour.step(status, 1, "another public key in the certificate", why)
    trust.write_bytes(original)
    tour.step(status, 0, "runtime_effective: true", "trust.json as ecpa run wrote it: true again")


def _rank_pid(launch_dir: Path, ordinal: int) -> int | None:
    logs = sorted((launch_dir / "evidence" / launch_dir.name).glob(f"scheduler.{ordinal}-*.jsonl"))
    return int(logs[-1].name.split("-")[1]) if logs else None


def slots_loop(d: Path, tour: Tour, *, timeout: float = 30.0) -> None:
    """Two scheduler processes (ranks) in one launch: true with 2/2 slots covered; one rank
    killed: false, naming its slot; after the launch, its audit names the gap; one check
    per step."""
    launch_dir = _slots_launch(d, tour, timeout=timeout)
    if launch_dir is not None:
        tour.act("audit")
        audit = ["audit", "--launch", str(launch_dir)]
        why = "its intervals, and the gap the killed rank left, with its cause"
        tour.step(audit, 0, "process died (its evidence stopped)", why)


def _slots_launch(d: Path, tour: Tour, *, timeout: float) -> Path | None:
    """The two-rank launch, run and stopped; its directory (None: it did not start)."""
    command = [sys.executable, "-m", "dla_plugin.drive", "--processes", "2", "--seconds", "120"]
    command += ["--step-ms", "1"]
    args = ["run", "--evidence-dir", str(d / "runs2"), "--slots", "scheduler.0,scheduler.1"]
    args += ["--grace", "5", "--", *command]
    tour.act("slots")
    proc = spawn_ecpa(args, cwd=d, tour=tour)
    try:
        launch_dir = launched(proc, d, tour)
        if launch_dir is None:
            return None
        deadline = time.monotonic() + timeout
        while _quiet_status(tour, launch_dir) != 0 and time.monotonic() < deadline:
            time.sleep(0.3)
        status = ["status", "--launch", str(launch_dir)]
        tour.step(status, 0, "coverage: 2/2 slots", "both slots covered, each by its own process")
        hosts_steps(launch_dir, tour)
        with serving(d / "runs2", tour) as served:
            if served is not None:
                served.listing(launch_dir.name)
                served.gauges(launch_dir.name, 1, 1)
            victim = _rank_pid(launch_dir, 1)
            tour.say(f"\n# kill rank 1 (pid {victim}) with SIGKILL, as a crash would")
            if victim is not None:
                os.kill(victim, signal.SIGKILL)
            killed = time.monotonic()
            deadline = time.monotonic() + timeout
            while _quiet_status(tour, launch_dir) == 0 and time.monotonic() < deadline:
                time.sleep(0.3)
            tour.step(status, 1, "slot scheduler.1: not covered", "withdrawn, naming the slot")
            if served is not None:
                served.gauges(launch_dir.name, 0, 0)
            # In hindsight a death shows once its last heartbeat is out of the window (3 s):
            # rank 0 runs on a little longer, so the audit has a gap to show.
            time.sleep(max(0.0, killed + 6 - time.monotonic()))
        return launch_dir
    finally:
        stop_ecpa(proc, timeout)
