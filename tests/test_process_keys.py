"""`ecpa status` never says true without a live process of the launch doing the work (issue
13, facts 1 and 2; RUNTIME.md "Process keys"): real `ecpa run`, real enrollment, real
forgeries, real directories of the wrong owner and mode."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import ecpa
from ecpa.runtime.enroll import Request, enroll, request_bytes
from ecpa.runtime.launch import Slot
from ecpa.runtime.process import read_identity
from tests._launch_helpers import (
    DRIVE,
    ECPA,
    PLAN,
    Launches,
    clean_env,
    launches,
    status,
    wait_status,
    wait_until,
)

__all__ = ["launches"]  # the fixture, used by name

#: A process of the launch that enrolls a key of its own (legitimately, for itself) and then
#: forges: a record naming pid 1 signed with that key, in its own log and in a log named
#: after pid 1, and a record whose kid claims pid 1. It dispatches nothing itself.
FORGER = """
import os, sys, time
from pathlib import Path
import ecpa
from ecpa.observer._record import Signer, Window, build_evidence
from ecpa.runtime.enroll import Request, enroll, kid_for, log_name
from ecpa.runtime.evidence import EvidenceLog
from ecpa.runtime.launch import Slot
from ecpa.runtime.process import launch_from_env, read_identity

b = launch_from_env(os.environ)
me, pid1, slot = read_identity(), read_identity(1), Slot("scheduler", 0)
key = ecpa.SigningKey.generate()
kid = enroll(b.enroll_socket, Request(key.public_key.to_b64(), slot, me))
logs = b.evidence_dir / b.launch_id
now = int(time.time())
window = Window(1, 50, 40, 10, 0, 0, now - 1, now, now)
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
    """Fact 1: the launch key was a file any process of the same user could read."""
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
    """Fact 1: a forged counters line naming pid 1 turned `ecpa status` true while no
    scheduler of the launch was alive. Now a key speaks only for the process it was enrolled
    for: every forgery is refused, naming why, and status stays false."""
    marker = tmp_path / "enrolled"
    _proc, directory = launches.start(sys.executable, "-c", FORGER, str(marker))
    assert wait_until(lambda: marker.exists() and marker.read_text() != "")
    launches.logs(directory)
    code, doc = status(directory)
    assert code == 1
    assert doc["runtime_effective"] is False
    assert doc["accepted"] == 0
    assert doc["refused"] == {"ATTESTATION_BINDING_MISMATCH": 2, "ATTESTATION_UNKNOWN_KEY": 1}
    reasons = "\n".join(doc["reasons"])
    assert "was not enrolled for the process it names" in reasons
    assert "slot scheduler.0: no evidence" in reasons
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
    """Fact 2: `ecpa run --evidence-dir` accepted a group- or world-writable directory."""
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
    """Fact 2: another user swapped the launch directory (its own launch.json, trust.json and
    key) and status, run as root, said true. A directory others may write is refused."""
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
            conn.connect(str(sock_path))
            conn.sendall(request)  # and hang up before the answer
    time.sleep(0.5)
    assert proc.poll() is None  # still supervising
    code, doc = status(directory)
    assert code == 1
    assert not any(r.startswith("supervisor not alive") for r in doc["reasons"])
