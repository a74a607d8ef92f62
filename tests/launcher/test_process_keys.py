"""`ecpa status` never says true without a live process of the launch doing the work
(RUNTIME.md "Process keys"; docs/runtime.md "Files, replay fences, trust stores"): real `ecpa
run`, real enrollment, real forgeries, real directories of the wrong owner and mode."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import ecpa
from ecpa.runtime.model.enroll import Request, enroll, request_bytes
from ecpa.runtime.model.launch import Slot
from ecpa.runtime.model.process import read_identity
from tests._launch_helpers import (
    DRIVE,
    ECPA,
    PLAN,
    Launches,
    clean_env,
    connect_unix,
    launches,
    status,
    wait_status,
    wait_until,
)
from tests.support import codes

pytestmark = pytest.mark.e2e  # real processes throughout

__all__ = ["launches"]  # the fixture, used by name

#: A process of the launch that enrolls a key of its own (legitimately, for itself) and then
#: forges: a record naming pid 1 signed with that key, in its own log and in a log named
#: after pid 1, and a record whose kid claims pid 1. It dispatches nothing itself.
FORGER = """
import os, sys, time
from pathlib import Path
import ecpa
from ecpa.observer.record import Signer, Window, build_evidence
from ecpa.runtime.model.enroll import Request, enroll, kid_for, log_name
from ecpa.runtime.host.evidence_log import EvidenceLog
from ecpa.runtime.model.launch import Slot
from ecpa.runtime.model.process import launch_from_env, read_identity

b = launch_from_env(os.environ)
me, pid1, slot = read_identity(), read_identity(1), Slot("scheduler", 0)
key = ecpa.SigningKey.generate()
kid = enroll(b.enroll_socket, Request(key.public_key.to_b64(), slot, me))
logs = b.evidence_dir / b.launch_id
now = int(time.time())
window = Window(1, 50, 40, 10, 0, 0, now - 1, now, now, 20, now)
mine = Signer(key, kid, slot, process_keys=True)             # my key, my kid, pid 1 named
claim = Signer(key, kid_for(slot, pid1), slot, process_keys=True)  # my key, pid 1's kid
for name, signer in ((log_name(kid), mine), (log_name(kid_for(slot, pid1)), mine),
                     (log_name(kid_for(slot, pid1)), claim)):
    with EvidenceLog(logs / name) as log:
        log.append(build_evidence(b, pid1, signer, window, issued_at=now))
open(sys.argv[1], "w").write(kid)
time.sleep(60)
"""


def test_no_private_key_is_written_anywhere(tmp_path: Path, launches: Launches) -> None:
    """No private key is a file a process of the same user could read (RUNTIME.md "Process
    keys": no shared signing key on disk)."""
    _proc, directory = launches.start(*DRIVE)
    wait_status(directory, True)
    launches.logs(directory)
    for path in directory.rglob("*"):
        if path.is_file():
            assert b"PRIVATE KEY" not in path.read_bytes(), path
    assert not list(directory.rglob("*.pem"))
    env = set(json.loads((directory / "launch.json").read_text()))
    assert "kid" not in env


def test_a_record_naming_pid_1_never_turns_status_true(tmp_path: Path, launches: Launches) -> None:
    """A forged counters line naming pid 1 never turns `ecpa status` true while no
    scheduler of the launch is alive: a key speaks only for the process it was enrolled for;
    every forgery is refused, naming why, and status stays false."""
    marker = tmp_path / "enrolled"
    _proc, directory = launches.start(sys.executable, "-c", FORGER, str(marker))
    assert wait_until(lambda: marker.exists() and marker.read_text() != "")
    launches.logs(directory)
    code, doc = status(directory)
    assert code == 1
    assert doc["runtime_effective"] is False
    assert doc["accepted"] == 0
    assert doc["refused"] == {"ATTESTATION_BINDING_MISMATCH": 2, "ATTESTATION_UNKNOWN_KEY": 1}
    reasons = "\n".join(r["text"] for r in doc["reasons"] if r["code"] == "refused")
    assert "was not enrolled for the process it names" in reasons  # which binding failed
    assert {
        "code": "no_evidence",
        "text": "slot scheduler.0: no evidence",
        "slot": "scheduler.0",
    } in doc["reasons"]
    [slot] = doc["slots"]
    assert slot["process"] is None


def test_a_process_outside_the_launch_cannot_enroll(tmp_path: Path, launches: Launches) -> None:
    """The test process is not a descendant of `ecpa run`: refused, whoever it claims to be."""
    _proc, directory = launches.start(sys.executable, "-c", "import time; time.sleep(60)")
    sock = directory / "enroll.sock"
    assert wait_until(sock.exists)
    key = ecpa.SigningKey.generate().public_key.to_b64()
    for who in (read_identity(), read_identity(1)):
        with pytest.raises(ecpa.EcpaError) as exc_info:
            enroll(sock, Request(key, Slot("scheduler", 0), who), timeout=5)
        assert exc_info.value.code is ecpa.ErrorCode.INVALID_INPUT
        assert "enrollment refused" in exc_info.value.detail
    assert json.loads((directory / "trust.json").read_text())["keys"] == []
    assert oct(os.stat(sock).st_mode & 0o777) == oct(0o600)


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o777])
def test_ecpa_run_refuses_an_evidence_dir_others_may_write(tmp_path: Path, mode: int) -> None:
    """`ecpa run --evidence-dir` refuses a group- or world-writable directory."""
    runs = tmp_path / "runs"
    runs.mkdir()
    runs.chmod(mode)
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    out = subprocess.run(
        [
            str(ECPA),
            "run",
            "--plan",
            str(tmp_path / "plan.json"),
            "--evidence-dir",
            str(runs),
            "--",
            "true",
        ],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert f"found uid {os.geteuid()} and mode {mode:04o}" in out.stderr
    assert list(runs.iterdir()) == []  # nothing written into it


def _status_code(directory: Path) -> tuple[int, str]:
    out = subprocess.run(
        [str(ECPA), "status", "--launch", str(directory)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
        check=False,
    )
    return out.returncode, out.stdout + out.stderr


def _finished_launch(tmp_path: Path, launches: Launches) -> Path:
    proc, directory = launches.start("true")
    assert proc.wait(timeout=30) == 0
    return directory


@pytest.mark.parametrize(
    ("where", "change"),
    [
        ("launch", {"mode": 0o770}),
        ("launch", {"mode": 0o707}),
        ("evidence", {"mode": 0o777}),
        ("launch", {"uid": 65534}),
        ("evidence", {"uid": 65534}),
    ],
)
def test_status_refuses_a_launch_directory_another_user_could_have_swapped(
    tmp_path: Path, launches: Launches, where: str, change: dict[str, Any]
) -> None:
    """A launch directory another user could have swapped (its own launch.json, trust.json
    and key) never makes status, run as root, say true: a directory others may write is
    refused."""
    directory = _finished_launch(tmp_path, launches)
    target = directory if where == "launch" else directory / "evidence"
    if "mode" in change:
        target.chmod(change["mode"])
    else:
        if os.geteuid() != 0:
            pytest.skip("changing a directory's owner needs root")
        os.chown(target, change["uid"], -1)
    code, out = _status_code(directory)
    assert code == 2, out
    assert str(target) in out
    assert "not writable by group or others" in out


def test_a_peer_that_hangs_up_early_never_kills_ecpa_run(
    tmp_path: Path, launches: Launches
) -> None:
    """Found by the fork test: a process that exits in the middle of its enrollment made
    ecpa run's reply raise SIGPIPE, which killed the supervisor. Replies never signal."""
    proc, directory = launches.start(sys.executable, "-c", "import time; time.sleep(60)")
    sock_path = directory / "enroll.sock"
    assert wait_until(sock_path.exists)
    key = ecpa.SigningKey.generate().public_key.to_b64()
    request = request_bytes(Request(key, Slot("scheduler", 0), read_identity()))
    for _ in range(20):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            connect_unix(conn, sock_path)
            conn.sendall(request)  # and hang up before the answer
    time.sleep(0.5)
    assert proc.poll() is None  # still supervising
    code, doc = status(directory)
    assert code == 1
    assert "supervisor_not_alive" not in codes(doc["reasons"])
    assert "supervisor_alive" in codes(doc["reasons"])


#: Enrolls one key twice (a retry after a slow answer), then another key: prints the answers.
TWICE = """
import os, sys
import ecpa
from ecpa.runtime.model.enroll import Request, enroll
from ecpa.runtime.model.launch import Slot
from ecpa.runtime.model.process import launch_from_env, read_identity
b, me = launch_from_env(os.environ), read_identity()
req = Request(ecpa.SigningKey.generate().public_key.to_b64(), Slot("scheduler", 0), me)
out = [enroll(b.enroll_socket, req), enroll(b.enroll_socket, req)]
other = Request(ecpa.SigningKey.generate().public_key.to_b64(), Slot("scheduler", 0), me)
try:
    enroll(b.enroll_socket, other)
    out.append("enrolled twice!")
except ecpa.EcpaError as exc:
    out.append(exc.detail)
open(sys.argv[1], "w").write(repr(out))
"""


def test_the_same_enrollment_again_gets_the_same_answer(tmp_path: Path, launches: Launches) -> None:
    """The same enrollment asked again gets the same answer, so an observer whose first
    answer came late (a slow trust store) is not refused on every retry ('already holds key')
    and its process has a log; another key for the same process is still refused."""
    out = tmp_path / "out"
    proc, _ = launches.start(sys.executable, "-c", TWICE, str(out))
    assert proc.wait(timeout=30) == 0
    first, again, other = eval(out.read_text())
    assert first == again
    assert first.startswith("scheduler.0-")
    assert "already holds key" in other


def test_a_flood_of_silent_connections_neither_spins_nor_locks_out(
    tmp_path: Path, launches: Launches
) -> None:
    """Idle connections from outside the launch (80 here; 64 are enough to show a spin of
    ~80% CPU) neither make `ecpa run` spin (under half a core over 2 s) nor make the real
    scheduler's enrollment time out."""
    command = "sleep 1; exec " + " ".join(DRIVE)
    proc, directory = launches.start("sh", "-c", command)
    sock_path = directory / "enroll.sock"
    assert wait_until(sock_path.exists)
    flood = []
    try:
        for _ in range(80):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connect_unix(conn, sock_path)
            flood.append(conn)
        before = _cpu_ticks(proc.pid)
        time.sleep(2)
        assert _cpu_ticks(proc.pid) - before < 100  # under half a core over 2 s
        wait_status(directory, True)
        launches.logs(directory)
    finally:
        for conn in flood:
            conn.close()


def _cpu_ticks(pid: int) -> int:
    data = Path(f"/proc/{pid}/stat").read_bytes()
    fields = data[data.rfind(b")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_a_busy_trust_store_delays_enrollment_and_never_the_supervisor(
    tmp_path: Path, launches: Launches
) -> None:
    """Enrollment waits at most 0.5 s for the store's lock inside the supervisor's loop and
    answers 'busy' (waiting up to 10 s there would leave signals not acted on and children
    not reaped); the observer tries again at its next record."""
    proc, directory = launches.start(*DRIVE)
    lock = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        time.sleep(3)  # the scheduler's first enrollment attempts meet a locked store
        code, _ = status(directory)
        assert code == 1
        started = time.monotonic()
        fcntl.flock(lock, fcntl.LOCK_UN)
    finally:
        os.close(lock)
    wait_status(directory, True, timeout=20)  # enrolled at a later attempt
    launches.logs(directory)
    assert time.monotonic() - started < 20
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0


SPAWNER = """
import os, sys, time
out = sys.argv[1]
seen = set()
while True:
    for name in os.listdir(out):
        if name.startswith("go-") and name not in seen:
            seen.add(name)
            if os.fork() == 0:
                open(os.path.join(out, f"helper-{os.getpid()}"), "w").close()
                time.sleep(60)
                os._exit(0)
    time.sleep(0.01)
"""


def test_a_pid_reused_after_its_peer_exited_is_never_enrolled(
    tmp_path: Path, launches: Launches
) -> None:
    """An outside process connects and exits; its pid, reused by a process of the launch,
    must not be enrolled for a key the outsider's parent holds. The kernel's pidfd of the
    connecting process binds the request to it: exited means refused."""
    last_pid = Path("/proc/sys/kernel/ns_last_pid")
    if os.geteuid() != 0 or not os.access(last_pid, os.W_OK):
        pytest.skip("choosing the next pid needs root (ns_last_pid)")
    out = tmp_path / "spawn"
    out.mkdir()
    _, directory = launches.start(sys.executable, "-c", SPAWNER, str(out))
    sock_path = directory / "enroll.sock"
    assert wait_until(sock_path.exists)
    key = ecpa.SigningKey.generate().public_key.to_b64()
    for attempt in range(10):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:  # the outsider: connects with the shared socket, and leaves
            try:
                connect_unix(sock, sock_path)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        last_pid.write_text(str(pid - 1))
        (out / f"go-{attempt}").touch()
        assert wait_until(lambda a=attempt: len(list(out.glob("helper-*"))) > a, timeout=10)
        helpers = sorted(int(p.name.split("-")[1]) for p in out.glob("helper-*"))
        launches.pids.update(helpers)
        if pid not in helpers:
            sock.close()
            continue  # another process took the pid first: try again
        victim = read_identity(pid)
        sock.sendall(request_bytes(Request(key, Slot("scheduler", 0), victim)))
        reply = json.loads(sock.recv(4096))
        sock.close()
        assert "kid" not in reply, reply
        assert "has exited" in reply["error"]
        assert json.loads((directory / "trust.json").read_text())["keys"] == []
        return
    pytest.skip("the pid could not be handed to a process of the launch in 10 tries")


@pytest.mark.e2e
def test_a_launch_deeper_than_a_socket_address_still_enrolls(
    tmp_path: Path, launches: Launches
) -> None:
    """A launch directory whose ``enroll.sock`` path is longer than a Unix socket address
    holds (108 bytes) still enrolls its processes: ``ecpa run`` binds through /proc's link
    to the directory, and the observer connects the same way (before: no evidence at all,
    each scheduler's enrollment failing with "AF_UNIX path too long")."""
    deep = tmp_path / ("d" * 60) / "runs"
    _proc, directory = launches.start(*DRIVE, evidence_dir=deep)
    assert len(os.fsencode(directory / "enroll.sock")) > 108
    doc = wait_status(directory, True)
    assert doc["runtime_effective"] is True
    launches.logs(directory)


@pytest.mark.e2e
def test_the_launched_command_never_gets_a_key_passphrase(
    tmp_path: Path, launches: Launches
) -> None:
    """``ECPA_KEY_PASSWORD`` is ecpa's own: ``ecpa run`` drops it from the command's
    environment (nothing the command runs needs it, and a workload's logs or crash dumps
    should never hold it)."""
    out = tmp_path / "seen"
    code = "import os, sys; open(sys.argv[1], 'w').write(repr(os.environ.get('ECPA_KEY_PASSWORD')))"
    os.environ["ECPA_KEY_PASSWORD"] = "do-not-pass-on"
    try:
        proc, _directory = launches.start(sys.executable, "-c", code, str(out))
    finally:
        del os.environ["ECPA_KEY_PASSWORD"]
    proc.wait(timeout=60)
    assert out.read_text() == "None"
