"""Real-process helpers for launch tests: ``ecpa run`` as a subprocess, ``ecpa status`` on
its directory, and cleanup of every process a test started or learned of, by pid, even
when the test fails."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ecpa.launcher.run import BINDING_NAMES
from tests.support import ROOT

ECPA = Path(sys.executable).parent / "ecpa"
PLAN: dict[str, Any] = {
    "schema": "ecpa-plan/0.2",
    "plan_id": "plan-real",
    "plugin_id": "org.vllm-hust.dla/victim-selector",
    "artifact_digest": "sha256:" + "7" * 64,
    "emit_interval_s": 1,
}
DRIVE = [sys.executable, "-m", "dla_plugin.drive", "--seconds", "60", "--step-ms", "1"]


def clean_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in BINDING_NAMES and not k.startswith("VLLM_ECPA_")
    }
    env["PYTHONPATH"] = str(ROOT)
    return env


def ecpa_cmd(*args: str | Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``ecpa ARGS`` as a process; a hang is a failure (TimeoutExpired), never a stall."""
    return subprocess.run(
        [str(ECPA), *map(str, args)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=timeout,
        check=False,
    )


def connect_unix(sock: socket.socket, path: Path) -> None:
    """Connect ``sock`` to the Unix socket ``path`` through /proc's link to its directory,
    so that a path longer than a socket address holds (108 bytes: pytest's temporary
    directories under xdist are deep) still connects, as the observer does."""
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        sock.connect(f"/proc/self/fd/{fd}/{path.name}")
    finally:
        os.close(fd)


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(step)


def alive(pid: int) -> bool:
    """A process ``pid`` exists and is not a zombie."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return data[data.rfind(b")") + 2 : data.rfind(b")") + 3] not in (b"Z", b"X")


class Launches:
    """``ecpa run`` processes of one test, and every pid to kill at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[str]] = []
        self.pids: set[int] = set()

    def start(
        self,
        *command: str,
        grace: float = 5.0,
        plan: dict[str, Any] | None = None,
        extra: tuple[str, ...] = (),
        evidence_dir: Path | None = None,
        stdout: Path | None = None,
    ) -> tuple[subprocess.Popen[str], Path]:
        """Start ``ecpa run`` of ``command`` (its standard output into the file ``stdout``,
        else discarded); return it and its launch directory."""
        plan_file = self.tmp / "plan.json"
        plan_file.write_text(json.dumps(plan if plan is not None else PLAN))
        runs = evidence_dir if evidence_dir is not None else self.tmp / "runs"
        args = [str(ECPA), "run", "--plan", str(plan_file), "--evidence-dir", str(runs)]
        with open(os.devnull if stdout is None else stdout, "wb") as out:
            proc = subprocess.Popen(
                [*args, "--grace", str(grace), *extra, "--", *command],
                env=clean_env(),
                cwd=self.tmp,
                stdout=out,
                stderr=subprocess.PIPE,
                text=True,
            )
        self.procs.append(proc)
        assert proc.stderr is not None
        first = proc.stderr.readline()
        match = re.match(r"ecpa run: launch (\S+) in (.+)$", first)
        assert match, first + proc.stderr.read()
        directory = Path(match.group(2).strip())
        return proc, directory if directory.is_absolute() else self.tmp / directory

    def logs(self, directory: Path) -> list[Path]:
        """The launch's process logs; their pids are remembered for cleanup."""
        launch_id = directory.name
        found = sorted((directory / "evidence" / launch_id).glob("*.jsonl"))
        for log in found:
            self.pids.add(int(log.name.split("-")[1]))
        return found

    def cleanup(self) -> None:
        """Stop every `ecpa run` with SIGTERM (it then stops and reaps its own tree: nothing
        is left for init, which may not reap, to collect), SIGKILL what still runs after
        that, and every pid the test learned of."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=15)
            if proc.stderr is not None:
                proc.stderr.close()
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def launches(tmp_path: Path) -> Iterator[Launches]:
    runner = Launches(tmp_path)
    try:
        yield runner
    finally:
        runner.cleanup()


def status(directory: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """``ecpa status --launch DIR --json ARGS`` as a subprocess: exit code and document."""
    out = subprocess.run(
        [str(ECPA), "status", "--launch", str(directory), "--json", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=clean_env(),
    )
    assert out.returncode in (0, 1), out.stdout + out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return out.returncode, doc


def wait_status(directory: Path, want: bool, timeout: float = 30.0) -> dict[str, Any]:
    """Poll status until runtime_effective is ``want`` (asserting it then)."""
    deadline = time.monotonic() + timeout
    while True:
        code, doc = status(directory)
        if doc["runtime_effective"] is want or time.monotonic() > deadline:
            if doc["runtime_effective"] is not want:
                print("wait_status: gave up; last reasons:", doc["reasons"])
            assert doc["runtime_effective"] is want, doc["reasons"]
            assert code == (0 if want else 1)
            return doc
        time.sleep(0.3)
