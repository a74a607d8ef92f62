"""The demo's act of the host's own witness (docs/host-evidence.md): the DLA driver on the typed
preemption policy path, where the project's model of the vLLM-HUST host delivers each
resolution and dispatch to ecpa's sink, under ``ecpa run --host-evidence required``; status
true on the host's word; the launch stopped; its audit checks the journal against the signed
accounts, and finds a line taken out of it.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from ecpa.demo._tour import Tour, launched, spawn_ecpa, stop_ecpa

__all__ = ["host_loop"]


def host_loop(d: Path, tour: Tour, *, timeout: float = 30.0) -> None:
    """Launch with host evidence required, status true, stop, audit, audit a tampered
    journal; one check per step."""
    command = [sys.executable, "-m", "dla_plugin.drive", "--path", "policy", "--seconds", "120"]
    command += ["--step-ms", "1", "--blocks", "256", "--predictions", "lognormal-1.0"]
    args = ["run", "--evidence-dir", str(d / "runs3"), "--host-evidence", "required"]
    args += ["--grace", "5", "--", *command]
    tour.act("host")
    proc = spawn_ecpa(args, cwd=d, tour=tour)
    try:
        launch_dir = launched(proc, d, tour)
        if launch_dir is None:
            return
        status = ["status", "--launch", str(launch_dir)]
        deadline = time.monotonic() + timeout
        while tour.ecpa(status)[0] != 0 and time.monotonic() < deadline:
            time.sleep(0.3)
        why = "true on the host's word: it witnessed the policy's dispatches, not the plugin"
        tour.step(status, 0, "host witnessed policy", why)
        time.sleep(4)  # a few seconds of work, for the audit to show
        proc.send_signal(signal.SIGTERM)
        tour.checks.append(proc.wait(timeout=timeout) == 0)
        tour.say("\n# stop the launch (SIGTERM): the final records account for every line")
        audit = ["audit", "--launch", str(launch_dir)]
        tour.step(audit, 0, "host journals: 1 checked, 0 mismatch(es)", "the journal audited")
        [journal] = sorted((launch_dir / "evidence" / launch_dir.name / "host").glob("s*.jsonl"))
        lines = journal.read_bytes().splitlines(keepends=True)
        tour.say(f"\n# take line 2 of {len(lines)} out of {journal.name}")
        journal.write_bytes(b"".join(lines[:1] + lines[2:]))
        tour.step(audit, 1, "host_journal_mismatch", "the audit finds the line gone")
    finally:
        stop_ecpa(proc, timeout)
