"""`ecpa run` never leaves a mess (RUNTIME.md "Slots", supervision):
real `ecpa run` processes, real children, every pid killed at the end."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest

from ecpa.runtime.model.launch import launch_from_file
from tests._launch_helpers import DRIVE, Launches, alive, launches, status, wait_status, wait_until
from tests.support import codes

pytestmark = pytest.mark.e2e  # real processes throughout

__all__ = ["launches"]  # the fixture, used by name

#: Writes ready-PID, then on SIGQUIT/SIGTERM writes SIGNAME-PID and exits with argv[2];
#: with argv[3] == "ignore-term", ignores SIGTERM instead.
TRAP = """
import os, signal, sys, time
out, code = sys.argv[1], int(sys.argv[2])
def on(signum, frame):
    open(os.path.join(out, f"{signal.Signals(signum).name}-{os.getpid()}"), "w").close()
    os._exit(code)
signal.signal(signal.SIGQUIT, on)
signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[3:] == ["ignore-term"] else on)
open(os.path.join(out, f"ready-{os.getpid()}"), "w").close()
time.sleep(60)
"""


def _cmdline_has(entry: Path, text: bytes) -> bool:
    try:
        return text in (entry / "cmdline").read_bytes()
    except OSError:
        return False


def pids(tmp: Path, prefix: str) -> list[int]:
    return sorted(int(p.name.rsplit("-", 1)[1]) for p in tmp.glob(f"{prefix}-*"))


def exit_doc(directory: Path) -> dict[str, object]:
    doc: dict[str, object] = json.loads((directory / "exit.json").read_text())
    return doc


def test_the_tests_start_ecpa_run_with_the_stop_signals_it_forwards_not_ignored() -> None:
    """The forwarding tests mean something only if ``ecpa run`` starts with the signals it
    forwards not ignored (it leaves ignored ones ignored): a shell's background job (``bash
    .ci/run &``) starts with SIGINT and SIGQUIT ignored, which tests/conftest.py undoes."""
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    assert signal.getsignal(signal.SIGQUIT) is not signal.SIG_IGN


def test_sigquit_is_forwarded_like_the_others(tmp_path: Path, launches: Launches) -> None:
    """SIGQUIT is passed on to the command like SIGINT, SIGTERM and SIGHUP (docs/runtime.md
    "A launch (0.2)"): the child gets it, and `ecpa run` exits with the child's own status
    instead of dying and leaving the child running."""
    proc, directory = launches.start(sys.executable, "-c", TRAP, str(tmp_path), "7")
    assert wait_until(lambda: len(pids(tmp_path, "ready")) == 1)
    launches.pids.update(pids(tmp_path, "ready"))
    proc.send_signal(signal.SIGQUIT)
    assert proc.wait(timeout=20) == 7  # the child's own status: it got SIGQUIT and exited
    assert pids(tmp_path, "SIGQUIT") == pids(tmp_path, "ready")
    assert exit_doc(directory)["exit_status"] == 7


def test_a_second_sigterm_while_finishing_never_kills_ecpa_run(
    tmp_path: Path, launches: Launches
) -> None:
    """A second SIGTERM just after the child exited never kills `ecpa run` (its handlers
    stay until finish_launch is done): the window is closed and exit.json written."""
    for trial in range(4):
        out = tmp_path / f"t{trial}"
        out.mkdir()
        proc, directory = launches.start(sys.executable, "-c", TRAP, str(out), "0")
        assert wait_until(lambda out=out: len(pids(out, "ready")) == 1)  # type: ignore[misc]
        launches.pids.update(pids(out, "ready"))
        proc.send_signal(signal.SIGTERM)
        # From the moment the child is gone until `ecpa run` returns: SIGTERM after SIGTERM.
        [child] = pids(out, "ready")
        assert wait_until(lambda child=child: not alive(child), step=0.001)  # type: ignore[misc]
        while proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.002)
        assert proc.returncode == 0, f"trial {trial}: ecpa run died of a signal"
        assert exit_doc(directory)["exit_status"] == 0
        assert "SIGTERM" in [p.name.split("-")[0] for p in out.iterdir()]


def test_sigkill_of_ecpa_run_stops_the_command_and_status_is_false(
    tmp_path: Path, launches: Launches
) -> None:
    """SIGKILL of `ecpa run` never leaves the child running with the window open: the child
    gets SIGTERM (its parent-death signal); and a grandchild that escaped it is still never
    effective: the supervisor is not alive."""
    script = "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(60)"
    proc, directory = launches.start(sys.executable, "-c", script, *DRIVE)
    wait_status(directory, True)
    assert launches.logs(directory)  # the driver's pid, for cleanup
    proc.kill()
    proc.wait(timeout=20)
    # The direct child (the python -c script) got SIGTERM from the kernel and is gone.
    expected = launch_from_file(directory / "launch.json")
    script_pids = [
        int(e.name)
        for e in Path("/proc").iterdir()
        if e.name.isdigit() and _cmdline_has(e, b"subprocess.Popen(sys.argv[1:])")
    ]
    assert wait_until(lambda: not any(alive(pid) for pid in script_pids), timeout=10)
    assert expected.supervisor is not None
    assert not (directory / "exit.json").exists()
    # The grandchild (the driver) may still run, reparented: status is false all the same.
    doc = wait_status(directory, False, timeout=10)
    assert "supervisor_not_alive" in codes(doc["reasons"]), doc["reasons"]


def test_a_command_that_exits_at_once_leaves_nothing_running(
    tmp_path: Path, launches: Launches
) -> None:
    """`sh -c 'python -m dla_plugin.drive & exit 0'`: when the command exits at once, the
    driver it left behind does not keep running and signing after `ecpa run` returns."""
    command = " ".join(DRIVE)
    logs = '"$ECPA_EVIDENCE_DIR"/*/*.jsonl'
    wait = f"until ls {logs} >/dev/null 2>&1; do sleep 0.1; done"  # the driver has signed
    proc, directory = launches.start("sh", "-c", f"{command} & {wait}; exit 0", grace=5)
    assert wait_until(lambda: bool(launches.logs(directory)), timeout=20)
    assert proc.wait(timeout=30) == 0
    [log] = launches.logs(directory)
    driver = int(log.name.split("-")[1])
    assert not alive(driver)  # stopped by `ecpa run` before it returned
    code, doc = status(directory)
    assert code == 1
    assert codes(doc["reasons"])[0] == "launch_ended"


def test_a_member_ignoring_sigterm_is_killed_when_the_leader_is_gone(
    tmp_path: Path, launches: Launches
) -> None:
    """SIGKILL after the grace reaches the whole tree, not only while the group's leader
    lives: the leader exits on SIGTERM at once; a member ignoring it (in the same group) and
    one that escaped to its own session both get SIGKILL after the grace."""
    leader = (
        "import subprocess, sys, os\n"
        f"trap = {TRAP!r}\n"
        "subprocess.Popen([sys.executable, '-c', trap, sys.argv[1], '0', 'ignore-term'])\n"
        "subprocess.Popen([sys.executable, '-c', trap, sys.argv[1], '0', 'ignore-term'],"
        " start_new_session=True)\n"
        "exec(trap)\n"
    )
    proc, directory = launches.start(sys.executable, "-c", leader, str(tmp_path), "3", grace=1)
    assert wait_until(lambda: len(pids(tmp_path, "ready")) == 3)
    ready = pids(tmp_path, "ready")
    launches.pids.update(ready)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 3  # the leader's status
    assert time.monotonic() - started >= 0.9  # the members had their grace
    assert [pid for pid in ready if alive(pid)] == []
    assert exit_doc(directory)["exit_status"] == 3


def test_grace_then_sigkill_and_a_second_signal_at_once(tmp_path: Path, launches: Launches) -> None:
    proc, directory = launches.start(
        sys.executable, "-c", TRAP, str(tmp_path), "0", "ignore-term", grace=30
    )
    assert wait_until(lambda: len(pids(tmp_path, "ready")) == 1)
    launches.pids.update(pids(tmp_path, "ready"))
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert proc.poll() is None  # the child ignores SIGTERM; the grace is 30 s
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)  # the second signal: SIGKILL now, not in 30 s
    assert proc.wait(timeout=20) == 128 + signal.SIGKILL
    assert time.monotonic() - sent < 10
    assert exit_doc(directory)["signal"] == signal.SIGKILL


def test_a_closed_stderr_never_stops_the_supervision(tmp_path: Path, launches: Launches) -> None:
    """With its stderr a pipe nobody reads (`ecpa run ... 2>&1 | head -1`), `ecpa run` still
    passes SIGTERM on and writes exit.json: SIGPIPE never kills it first, leaving the tree
    running and no exit.json."""
    proc, directory = launches.start(sys.executable, "-c", TRAP, str(tmp_path), "5")
    assert wait_until(lambda: len(pids(tmp_path, "ready")) == 1)
    launches.pids.update(pids(tmp_path, "ready"))
    assert proc.stderr is not None
    proc.stderr.close()  # the reader went away
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 5  # the child's status, not 141 (SIGPIPE)
    assert exit_doc(directory)["exit_status"] == 5
    assert not any(alive(pid) for pid in pids(tmp_path, "ready"))


#: Forks a copy of itself and exits, again and again: a process tree that never holds still.
HOPPER = """
import os, sys, time
open(os.path.join(sys.argv[1], f"hop-{os.getpid()}"), "w").close()
while True:
    if os.fork():
        os._exit(0)
    time.sleep(0.001)
"""


def test_a_tree_that_keeps_forking_is_gone_when_ecpa_run_returns(
    tmp_path: Path, launches: Launches
) -> None:
    """A process that keeps forking new copies of itself does not outlive `ecpa run`: the
    tree is frozen, then killed (SIGKILL sent once, to a snapshot of the tree, would miss the
    copies forked meanwhile)."""
    script = f"{sys.executable} -c '{HOPPER}' {tmp_path} & sleep 60"
    proc, _directory = launches.start("sh", "-c", script, grace=0.5)
    assert wait_until(lambda: len(list(tmp_path.glob("hop-*"))) == 1)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    time.sleep(0.5)
    survivors = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"os.fork()" in cmdline and str(tmp_path).encode() in cmdline:
                survivors.append(int(entry.name))
    launches.pids.update(survivors)
    assert survivors == []


def test_a_hostile_trust_store_never_skips_exit_json(tmp_path: Path, launches: Launches) -> None:
    """A command that writes `"keys": 5` into trust.json never keeps the finish from writing
    exit.json (no TypeError, no exit 3): the command's own status is the launch's."""
    script = (
        "import json, os, sys\n"
        "d = os.path.dirname(os.environ['ECPA_EVIDENCE_DIR'])\n"
        "open(os.path.join(d, 'trust.json'), 'w').write(json.dumps("
        "{'schema': 'ecpa-trust-store/0.1', 'keys': 5}))\n"
        "sys.exit(4)\n"
    )
    proc, directory = launches.start(sys.executable, "-c", script)
    assert proc.wait(timeout=30) == 4
    assert exit_doc(directory)["exit_status"] == 4
    assert proc.stderr is not None
    assert "keys" in proc.stderr.read()
