"""Keys in memory (RUNTIME.md "Keys in memory"): once an observer of a 0.2 launch
holds a process key, its process is not dumpable, so another process of the same user can
no longer read the key from ``/proc/<pid>/mem`` (a scheduler's 64-byte secret read that way
signs busy heartbeats in its name; docs/runtime.md "Threat model").

The processes run as an unprivileged user (uid 65534): root may read any process's memory,
so the check only means something for a same-user reader without ``CAP_SYS_PTRACE``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ecpa.runtime.model.process import PR_GET_DUMPABLE, prctl
from tests.support import ROOT

pytestmark = pytest.mark.e2e  # real processes throughout

NOBODY = 65534

# Imports everything first (the interpreter's files may not be readable by the other user),
# drops to uid 65534, makes itself dumpable again (a change of uid clears the flag), then
# builds a 0.2 launch's observer (or not), reports the flag, and waits.
TARGET = r"""
import os, sys, time
from pathlib import Path
from ecpa.observer import Observer
from ecpa.runtime.model.process import LaunchEnvironment, PR_GET_DUMPABLE, PR_SET_DUMPABLE, prctl
launch = LaunchEnvironment(
    plan_id="plan-1", launch_id="launch-1", challenge="c" * 43, plugin_id="dla",
    artifact_digest="sha256:" + "0" * 64, issuer="urn:ecpa:issuer:test", kid=None,
    signing_key_file=None, evidence_dir=Path("/nonexistent"), process_epoch=1,
    enroll_socket=Path("/nonexistent/enroll.sock"),
)
Observer(launch, start=False).close(timeout=0)  # every module it needs is loaded now
os.setgroups([]); os.setgid(65534); os.setuid(65534)
prctl(PR_SET_DUMPABLE, 1)
if sys.argv[1] == "observer":
    observer = Observer(launch, start=False)
print(prctl(PR_GET_DUMPABLE), flush=True)
time.sleep(60)
"""

# Reads another process's memory as uid 65534: the first bytes of its stack's mapping.
READER = r"""
import os, sys
os.setgroups([]); os.setgid(65534); os.setuid(65534)
pid = int(sys.argv[1])
try:
    fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
except PermissionError:
    print("refused"); sys.exit(0)
print("read")
"""


def _start(kind: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECPA_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(
        [sys.executable, "-c", TARGET, kind], env=env, stdout=subprocess.PIPE, text=True
    )


def _read(pid: int) -> str:
    done = subprocess.run(
        [sys.executable, "-c", READER, str(pid)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run processes as another uid")
def test_another_process_of_the_same_user_cannot_read_the_keys_memory() -> None:
    procs = {kind: _start(kind) for kind in ("observer", "plain")}
    try:
        flags = {}
        for kind, proc in procs.items():
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            assert line in ("0", "1"), f"{kind}: {line!r}"
            flags[kind] = int(line)
        assert flags == {"observer": 0, "plain": 1}
        # The control: the same user reads a dumpable process's memory on this kernel.
        if _read(procs["plain"].pid) != "read":
            pytest.skip("this kernel refuses same-user memory reads anyway (Yama ptrace_scope)")
        assert _read(procs["observer"].pid) == "refused"
    finally:
        for proc in procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()


def test_an_observer_of_a_0_2_launch_makes_its_process_undumpable(tmp_path: Path) -> None:
    """In a process of its own (the flag is per process): the observer sets it before the
    key exists, and says so."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECPA_")}
    env["PYTHONPATH"] = str(ROOT)
    code = (
        "from pathlib import Path\n"
        "from ecpa.observer import Observer\n"
        "from ecpa.runtime.model.process import LaunchEnvironment, PR_GET_DUMPABLE, prctl\n"
        "before = prctl(PR_GET_DUMPABLE)\n"
        "launch = LaunchEnvironment('p', 'launch-1', 'c' * 43, 'dla', 'sha256:' + '0' * 64,\n"
        "    'urn:ecpa:issuer:t', None, None, Path('/nonexistent'), 1,\n"
        "    enroll_socket=Path('/nonexistent/enroll.sock'))\n"
        "observer = Observer(launch, start=False)\n"
        "print(before, prctl(PR_GET_DUMPABLE), observer.undumpable)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "0", "True"]
    assert prctl(PR_GET_DUMPABLE) in (0, 1)  # this test process itself is left as it was
