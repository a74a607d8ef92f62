"""Process identity, liveness and the launch binding (RUNTIME.md, ``ecpa/process.py``).

A fake ``/proc`` under ``tmp_path`` stands in for pid reuse, reboots, zombies and odd command
names; real child processes check the same against the kernel's ``/proc``. Failures are
compared by code, never by message text.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ecpa import ErrorCode
from ecpa.errors import EcpaError
from ecpa.runtime.model.process import (
    ENV_NAMES,
    LaunchEnvironment,
    ProcessIdentity,
    check_alive,
    launch_from_env,
    read_boot_id,
    read_identity,
)

BOOT = "0f6c3e52-9a1b-4c7d-8e2f-3a4b5c6d7e8f"
OTHER_BOOT = "11111111-2222-3333-4444-555555555555"
HOST = "h"
PID = 4242
TICKS = 1387110


def stat_line(
    pid: int = PID, comm: str = "sleep", state: str = "S", ticks: int | str = TICKS
) -> str:
    """A realistic 52-field ``/proc/<pid>/stat`` line; field 22 is ``ticks``."""
    after = [
        state,  # 3 state
        "1",  # 4 ppid
        str(pid),  # 5 pgrp
        str(pid),  # 6 session
        "0",  # 7 tty_nr
        "-1",  # 8 tpgid
        "4194304",  # 9 flags
        "102",  # 10 minflt
        "0",  # 11 cminflt
        "0",  # 12 majflt
        "0",  # 13 cmajflt
        "3",  # 14 utime
        "1",  # 15 stime
        "0",  # 16 cutime
        "0",  # 17 cstime
        "20",  # 18 priority
        "0",  # 19 nice
        "1",  # 20 num_threads
        "0",  # 21 itrealvalue
        str(ticks),  # 22 starttime
        "3133440",  # 23 vsize
        "416",  # 24 rss
        "18446744073709551615",  # 25 rsslim
    ]
    after += ["0"] * (50 - len(after))  # fields 26..52
    assert len(after) == 50
    return f"{pid} ({comm}) {' '.join(after)}\n"


def write_stat(proc: Path, pid: int, content: str | bytes) -> None:
    directory = proc / str(pid)
    directory.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else content
    (directory / "stat").write_bytes(data)


def write_boot_id(proc: Path, boot_id: str = BOOT) -> None:
    directory = proc / "sys" / "kernel" / "random"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "boot_id").write_text(boot_id + "\n", encoding="ascii")


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    """A fake /proc with one sleeping process PID and a boot id."""
    root = tmp_path / "proc"
    write_stat(root, PID, stat_line())
    write_boot_id(root)
    return root


def identity(
    pid: int = PID, ticks: int = TICKS, boot_id: str = BOOT, host: str = HOST
) -> ProcessIdentity:
    return ProcessIdentity(host=host, pid=pid, start_ticks=ticks, boot_id=boot_id)


def assert_invalid(exc_info: pytest.ExceptionInfo[EcpaError]) -> None:
    assert exc_info.value.code == ErrorCode.INVALID_INPUT


# --- read_identity on a fake /proc ------------------------------------------------------------


def test_read_identity_fake_proc(proc: Path) -> None:
    got = read_identity(PID, proc_root=proc, host=HOST)
    assert got == ProcessIdentity(HOST, PID, TICKS, BOOT)
    assert got.start_ticks == TICKS
    assert got.boot_id == BOOT
    assert read_boot_id(proc) == BOOT


def test_stat_line_helper_is_kernel_shaped() -> None:
    line = stat_line()
    fields = line.split()
    assert len(fields) == 52
    assert fields[21] == str(TICKS)  # field 22, 1-based


@pytest.mark.parametrize(
    "comm",
    [
        "a b",
        "a) (b",
        "(a) (b ) c",
        "a) (b ) c",
        ") (",
        "x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 99",
        ")",
        "((",
        "",
    ],
)
def test_odd_command_names_count_after_last_paren(tmp_path: Path, comm: str) -> None:
    root = tmp_path / "proc"
    write_stat(root, 123, stat_line(pid=123, comm=comm, ticks=777))
    write_boot_id(root)
    got = read_identity(123, proc_root=root, host=HOST)
    assert got.start_ticks == 777
    assert got.pid == 123


def test_spec_example_command_name(tmp_path: Path) -> None:
    root = tmp_path / "proc"
    line = stat_line(pid=123, comm="a) (b ) c", ticks=5555)
    assert line.startswith("123 (a) (b ) c) S 1 ")
    write_stat(root, 123, line)
    write_boot_id(root)
    assert read_identity(123, proc_root=root, host=HOST).start_ticks == 5555


@pytest.mark.parametrize(
    "content",
    [
        "",
        "\n",
        "garbage",
        "4242 sleep S 1 2 3",  # no parentheses at all
        "4242 (sleep",  # cut inside the command name
        "4242 (sleep)",  # nothing after the command name
        "4242 (sleep) S 1 4242 4242 0 -1 4194304 102 0 0 0",  # cut before field 22
        " ".join(stat_line().split()[:21]),  # cut right before field 22
        stat_line(ticks="abc"),  # field 22 not a number
        stat_line(ticks="-5"),  # field 22 negative
        stat_line(ticks="1.5"),  # field 22 a fraction
        b"\x00\xff\xfe\x01",  # binary noise
    ],
    ids=lambda c: repr(c)[:40],
)
def test_truncated_or_garbage_stat_is_invalid(tmp_path: Path, content: str | bytes) -> None:
    root = tmp_path / "proc"
    write_stat(root, PID, content)
    write_boot_id(root)
    with pytest.raises(EcpaError) as exc_info:
        read_identity(PID, proc_root=root, host=HOST)
    assert_invalid(exc_info)


def test_missing_pid_is_invalid(proc: Path) -> None:
    with pytest.raises(EcpaError) as exc_info:
        read_identity(PID + 1, proc_root=proc, host=HOST)
    assert_invalid(exc_info)


def test_missing_proc_root_is_invalid(tmp_path: Path) -> None:
    with pytest.raises(EcpaError) as exc_info:
        read_identity(PID, proc_root=tmp_path / "nowhere", host=HOST)
    assert_invalid(exc_info)


def test_missing_boot_id_is_invalid(tmp_path: Path) -> None:
    root = tmp_path / "proc"
    write_stat(root, PID, stat_line())
    with pytest.raises(EcpaError) as exc_info:
        read_identity(PID, proc_root=root, host=HOST)
    assert_invalid(exc_info)
    with pytest.raises(EcpaError) as exc_info:
        read_boot_id(root)
    assert_invalid(exc_info)


def test_zombie_has_no_identity(tmp_path: Path) -> None:
    root = tmp_path / "proc"
    write_stat(root, PID, stat_line(state="Z"))
    write_boot_id(root)
    with pytest.raises(EcpaError) as exc_info:
        read_identity(PID, proc_root=root, host=HOST)
    assert_invalid(exc_info)


def test_default_host_is_this_host(proc: Path) -> None:
    assert read_identity(PID, proc_root=proc).host == socket.gethostname()


# --- check_alive on a fake /proc --------------------------------------------------------------


def test_alive_same_identity(proc: Path) -> None:
    live = check_alive(identity(), proc_root=proc, host=HOST)
    assert live.alive is True


def test_alive_round_trip_with_read_identity(proc: Path) -> None:
    ident = read_identity(PID, proc_root=proc, host=HOST)
    assert check_alive(ident, proc_root=proc, host=HOST).alive is True


def test_pid_gone_is_not_alive(proc: Path) -> None:
    (proc / str(PID) / "stat").unlink()
    (proc / str(PID)).rmdir()
    live = check_alive(identity(), proc_root=proc, host=HOST)
    assert live.alive is False
    assert "process not alive" in live.reason


def test_pid_reused_is_not_alive(proc: Path) -> None:
    write_stat(proc, PID, stat_line(ticks=TICKS + 1))
    live = check_alive(identity(), proc_root=proc, host=HOST)
    assert live.alive is False
    assert "process not alive" in live.reason


def test_pid_reused_with_odd_name_is_not_alive(proc: Path) -> None:
    # The old start ticks appear inside the command name; only field 22 counts.
    name = f"x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 {TICKS}"
    write_stat(proc, PID, stat_line(comm=name, ticks=TICKS + 9))
    assert check_alive(identity(), proc_root=proc, host=HOST).alive is False


def test_reboot_is_not_alive(proc: Path) -> None:
    write_boot_id(proc, OTHER_BOOT)
    live = check_alive(identity(), proc_root=proc, host=HOST)
    assert live.alive is False
    assert live.reason


def test_other_boot_in_identity_is_not_alive(proc: Path) -> None:
    assert check_alive(identity(boot_id=OTHER_BOOT), proc_root=proc, host=HOST).alive is False


def test_other_host_is_not_alive(proc: Path) -> None:
    live = check_alive(identity(host="other"), proc_root=proc, host=HOST)
    assert live.alive is False
    assert live.reason


@pytest.mark.parametrize("state", ["Z", "X"])
def test_zombie_or_dead_is_not_alive(proc: Path, state: str) -> None:
    write_stat(proc, PID, stat_line(state=state))
    live = check_alive(identity(), proc_root=proc, host=HOST)
    assert live.alive is False
    assert "process not alive" in live.reason


@pytest.mark.parametrize("state", ["R", "S", "D", "T", "t", "I"])
def test_other_states_are_alive(proc: Path, state: str) -> None:
    write_stat(proc, PID, stat_line(state=state))
    assert check_alive(identity(), proc_root=proc, host=HOST).alive is True


# --- ProcessIdentity.start_identity and parse -------------------------------------------------


def test_start_identity_format() -> None:
    assert identity().start_identity == f"pid:{PID}:start_ticks:{TICKS}:boot:{BOOT}"


@pytest.mark.parametrize(
    "ident",
    [
        identity(),
        identity(pid=1, ticks=0, boot_id="a"),
        identity(pid=2**22, ticks=2**53 - 1, boot_id=BOOT.upper(), host="node-7.example"),
    ],
)
def test_start_identity_parse_round_trip(ident: ProcessIdentity) -> None:
    back = ProcessIdentity.parse(ident.host, ident.start_identity)
    assert back == ident
    assert back.start_identity == ident.start_identity


@pytest.mark.parametrize(
    "text",
    [
        "",
        "pid:",
        "pid:1",
        "pid:1:start_ticks:2",
        "pid:1:start_ticks:2:boot:",
        "pid::start_ticks:2:boot:b",
        "pid:1:start_ticks::boot:b",
        "pid:-1:start_ticks:2:boot:b",
        "pid:1:start_ticks:-2:boot:b",
        "pid:1.0:start_ticks:2:boot:b",
        "pid:1:start_ticks:1e3:boot:b",
        "pid:x:start_ticks:2:boot:b",
        "pid:1:start_ticks:2:boot:b c",
        "pid:1:start_ticks:2:boot:b/c",
        "pid:1:start_ticks:2:boot:b\n",
        " pid:1:start_ticks:2:boot:b",
        "pid:1:start_ticks:2:boot:b:extra",
        "PID:1:START_TICKS:2:BOOT:b",
        "pid=1:start_ticks=2:boot=b",
        "start_ticks:2:pid:1:boot:b",
        "pid:1:start_ticks:2:boot:b\x00",
    ],
)
def test_parse_malformed_is_invalid(text: str) -> None:
    with pytest.raises(EcpaError) as exc_info:
        ProcessIdentity.parse(HOST, text)
    assert_invalid(exc_info)


@pytest.mark.parametrize(
    "text",
    [
        "pid:\u0663:start_ticks:2:boot:b",  # ARABIC-INDIC DIGIT THREE
        "pid:1:start_ticks:\uff12:boot:b",  # FULLWIDTH DIGIT TWO
    ],
)
def test_parse_non_ascii_digits_is_invalid(text: str) -> None:
    with pytest.raises(EcpaError) as exc_info:
        ProcessIdentity.parse(HOST, text)
    assert_invalid(exc_info)


def test_parse_huge_number_is_invalid() -> None:
    with pytest.raises(EcpaError) as exc_info:
        ProcessIdentity.parse(HOST, "pid:" + "9" * 5000 + ":start_ticks:2:boot:b")
    assert_invalid(exc_info)


def test_stat_huge_start_ticks_is_invalid(tmp_path: Path) -> None:
    root = tmp_path / "proc"
    write_stat(root, PID, stat_line(ticks="9" * 5000))
    write_boot_id(root)
    with pytest.raises(EcpaError) as exc_info:
        read_identity(PID, proc_root=root, host=HOST)
    assert_invalid(exc_info)


# --- real processes ---------------------------------------------------------------------------


def real_boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()


def test_read_identity_of_this_process() -> None:
    me = read_identity()
    assert me.pid == os.getpid()
    assert me.boot_id == real_boot_id()
    assert me.host == socket.gethostname()
    fields = Path(f"/proc/{os.getpid()}/stat").read_bytes().rsplit(b")", 1)[1].split()
    assert me.start_ticks == int(fields[19])
    assert check_alive(me).alive is True
    assert read_identity(os.getpid()) == me


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()


def test_real_child_alive_while_running(child: subprocess.Popen[bytes]) -> None:
    ident = read_identity(child.pid)
    assert ident.pid == child.pid
    assert ident.boot_id == real_boot_id()
    live = check_alive(ident)
    assert live.alive is True, live.reason


def test_real_child_killed_and_reaped_not_alive(child: subprocess.Popen[bytes]) -> None:
    ident = read_identity(child.pid)
    child.send_signal(signal.SIGKILL)
    child.wait()
    live = check_alive(ident)
    assert live.alive is False
    assert "process not alive" in live.reason
    with pytest.raises(EcpaError) as exc_info:
        read_identity(child.pid)
    assert_invalid(exc_info)


def test_real_child_killed_zombie_not_alive(child: subprocess.Popen[bytes]) -> None:
    ident = read_identity(child.pid)
    child.send_signal(signal.SIGKILL)
    # Wait until it has exited but leave it unreaped (WNOWAIT): a zombie, state Z.
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    state = Path(f"/proc/{child.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    assert state in (b"Z", b"X")
    live = check_alive(ident)
    assert live.alive is False
    assert "process not alive" in live.reason
    child.wait()


# --- launch_from_env --------------------------------------------------------------------------

CHALLENGE = "q1w2e3r4t5y6u7i8o9p0AZ"  # 22 base64url characters: 128+ bits


def full_env(tmp_path: Path) -> dict[str, str]:
    return {
        "ECPA_PLAN_ID": "plan-1",
        "ECPA_LAUNCH_ID": "launch-1",
        "ECPA_CHALLENGE": CHALLENGE,
        "ECPA_PLUGIN_ID": "plugin-1",
        "ECPA_ARTIFACT_DIGEST": "sha256:" + "ab" * 32,
        "ECPA_ISSUER": "issuer-1",
        "ECPA_KID": "kid-1",
        "ECPA_SIGNING_KEY_FILE": str(tmp_path / "signing-key.pem"),
        "ECPA_EVIDENCE_DIR": str(tmp_path / "evidence"),
        "ECPA_PROCESS_EPOCH": "7",
    }


def test_env_names_are_the_spec_set(tmp_path: Path) -> None:
    assert set(ENV_NAMES) == set(full_env(tmp_path))
    assert len(ENV_NAMES) == 10


def test_no_launch_variables_is_none() -> None:
    assert launch_from_env({}) is None
    assert launch_from_env({"PATH": "/usr/bin", "HOME": "/root", "ECPA": "x"}) is None


def test_all_launch_variables_empty_is_none() -> None:
    assert launch_from_env(dict.fromkeys(ENV_NAMES, "")) is None


def test_full_set_gives_launch_environment(tmp_path: Path) -> None:
    env = full_env(tmp_path)
    env["PATH"] = "/usr/bin"  # unrelated variables are ignored
    launch = launch_from_env(env)
    assert isinstance(launch, LaunchEnvironment)
    assert launch == LaunchEnvironment(
        plan_id="plan-1",
        launch_id="launch-1",
        challenge=CHALLENGE,
        plugin_id="plugin-1",
        artifact_digest="sha256:" + "ab" * 32,
        issuer="issuer-1",
        kid="kid-1",
        signing_key_file=tmp_path / "signing-key.pem",
        evidence_dir=tmp_path / "evidence",
        process_epoch=7,
    )
    assert isinstance(launch.signing_key_file, Path)
    assert isinstance(launch.evidence_dir, Path)
    assert type(launch.process_epoch) is int
    for name in ("plan_id", "launch_id", "challenge", "plugin_id", "artifact_digest"):
        assert type(getattr(launch, name)) is str


@pytest.mark.parametrize("missing", ENV_NAMES)
def test_any_one_missing_is_invalid(tmp_path: Path, missing: str) -> None:
    env = full_env(tmp_path)
    del env[missing]
    with pytest.raises(EcpaError) as exc_info:
        launch_from_env(env)
    assert_invalid(exc_info)


@pytest.mark.parametrize("empty", ENV_NAMES)
def test_any_one_empty_is_invalid(tmp_path: Path, empty: str) -> None:
    env = full_env(tmp_path)
    env[empty] = ""
    with pytest.raises(EcpaError) as exc_info:
        launch_from_env(env)
    assert_invalid(exc_info)


@pytest.mark.parametrize("only", ENV_NAMES)
def test_only_one_present_is_invalid(tmp_path: Path, only: str) -> None:
    env = {only: full_env(tmp_path)[only]}
    with pytest.raises(EcpaError) as exc_info:
        launch_from_env(env)
    assert_invalid(exc_info)


@pytest.mark.parametrize(
    "epoch",
    [
        "abc",
        "seven",
        "-1",
        "-0",
        "+1",
        "1e3",
        "1.0",
        "1.5",
        "0x10",
        " 1",
        "1 ",
        "1_000",
        "NaN",
        "Infinity",
        "\u0663",  # ARABIC-INDIC DIGIT THREE
        "\uff11",  # FULLWIDTH DIGIT ONE
        "\u00b2",  # SUPERSCRIPT TWO
        str(2**53),
        str(2**64),
    ],
)
def test_bad_epoch_is_invalid(tmp_path: Path, epoch: str) -> None:
    env = full_env(tmp_path)
    env["ECPA_PROCESS_EPOCH"] = epoch
    with pytest.raises(EcpaError) as exc_info:
        launch_from_env(env)
    assert_invalid(exc_info)


@pytest.mark.parametrize("epoch", [0, 1, 2**53 - 1])
def test_epoch_bounds_accepted(tmp_path: Path, epoch: int) -> None:
    env = full_env(tmp_path)
    env["ECPA_PROCESS_EPOCH"] = str(epoch)
    launch = launch_from_env(env)
    assert launch is not None
    assert launch.process_epoch == epoch


def test_huge_epoch_is_invalid(tmp_path: Path) -> None:
    env = full_env(tmp_path)
    env["ECPA_PROCESS_EPOCH"] = "9" * 5000
    with pytest.raises(EcpaError) as exc_info:
        launch_from_env(env)
    assert_invalid(exc_info)


@pytest.mark.parametrize("length", [1, 16, 21])
def test_short_challenge_is_invalid(tmp_path: Path, length: int) -> None:
    env = full_env(tmp_path)
    env["ECPA_CHALLENGE"] = CHALLENGE[:length]
    with pytest.raises(EcpaError) as exc_info:
        launch_from_env(env)
    assert_invalid(exc_info)


@pytest.mark.parametrize("length", [22, 43, 86])
def test_long_enough_challenge_accepted(tmp_path: Path, length: int) -> None:
    env = full_env(tmp_path)
    env["ECPA_CHALLENGE"] = "A" * length
    launch = launch_from_env(env)
    assert launch is not None
    assert launch.challenge == "A" * length


def test_the_binding_is_defined_once_and_every_model_follows_it() -> None:
    """RUNTIME.md "Launch binding": BINDING_FIELDS names each field and its variable; the
    observer's environment, the expected launch and the manager's environment follow it."""
    import dataclasses

    from ecpa.runtime.model.launch import ExpectedLaunch
    from ecpa.runtime.model.process import BINDING_FIELDS, LaunchEnvironment

    fields = {f for f, _ in BINDING_FIELDS}
    assert fields <= {f.name for f in dataclasses.fields(LaunchEnvironment)}
    statement_bound = fields - {"issuer", "evidence_dir"}  # the statement's own binding
    assert statement_bound <= {f.name for f in dataclasses.fields(ExpectedLaunch)}
    assert len({name for _, name in BINDING_FIELDS}) == len(BINDING_FIELDS)
    assert all(name == "ECPA_" + f.upper() for f, name in BINDING_FIELDS)
