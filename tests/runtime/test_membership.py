"""Who belongs to a launch (RUNTIME.md "Membership"): exactly the command's tree
under the supervisor, never a child the supervisor's pid had before the command (an agent
forked by an entry script before ``exec ecpa run``). One rule for the supervisor (signal,
reap), enrollment and status: :class:`ecpa.runtime.model.process.Membership`."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ecpa.runtime.model.launch import launch_from_file
from ecpa.runtime.model.membership import Membership, children_now
from tests.support import ROOT

pytestmark = pytest.mark.e2e  # real processes throughout

BOSS = 100


def stat(pid: int, ppid: int, ticks: int, state: str = "S") -> str:
    rest = [state, str(ppid), str(pid), str(pid)] + ["0"] * 15 + [str(ticks)] + ["0"] * 28
    return f"{pid} (proc {pid}) {' '.join(rest)}\n"


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    """A fake /proc: 1 -> 100 (the supervisor) -> 200 (an agent from before the command)
    -> 201 -> 202; 100 -> 300 (the command) -> 301 -> 302; 1 -> 400 (outside)."""
    root = tmp_path / "proc"
    tree = {1: 0, BOSS: 1, 200: BOSS, 201: 200, 202: 201, 300: BOSS, 301: 300, 302: 301, 400: 1}
    for pid, ppid in tree.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text(stat(pid, ppid, 1000 + pid))
    return root


def test_the_agents_subtree_is_not_the_launchs(proc: Path) -> None:
    membership = Membership(BOSS, children_now(BOSS, proc_root=proc) - {(300, 1300)})
    assert membership.excluded == {(200, 1200)}
    for pid in (BOSS, 300, 301, 302):
        assert membership.includes(pid, proc_root=proc), pid
    for pid in (200, 201, 202, 400, 1, 999):
        assert not membership.includes(pid, proc_root=proc), pid
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    assert sorted(membership.members(children, proc_root=proc)) == [300, 301, 302]


def test_a_reused_pid_of_an_excluded_child_is_a_member(proc: Path) -> None:
    """The record is (pid, start ticks): once the agent is gone and its pid reused by a
    process of the command, that process belongs to the launch."""
    membership = Membership(BOSS, frozenset({(300, 999)}))  # 300 started at 1300, not 999
    assert membership.includes(302, proc_root=proc)
    assert Membership(BOSS).includes(202, proc_root=proc)  # without the record: a member


def _launch_dir(stderr: str) -> Path:
    directory = Path(stderr.split(" in ", 1)[1].strip())
    return directory if directory.is_absolute() else Path.cwd() / directory


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _holding(tmp_path: Path, command: str) -> subprocess.Popen[str]:
    """``sh -c 'sleep 30 & exec ecpa run -- COMMAND'``: an ``ecpa run`` whose pid has a child."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECPA_")}
    env["PYTHONPATH"] = str(ROOT)
    ecpa = Path(sys.executable).parent / "ecpa"
    # The agent's child holds no end of our stderr pipe: reading it to its end must wait
    # for ecpa run and its command, never for this sleep (it cost 30 s a test).
    agent = "sleep 30 </dev/null >/dev/null 2>&1 &"
    script = f"{agent} exec {ecpa} run --grace 5 --evidence-dir {tmp_path / 'runs'} -- {command}"
    return subprocess.Popen(
        ["sh", "-c", script], env=env, stderr=subprocess.PIPE, text=True, process_group=0
    )


def _agents_of(shell: subprocess.Popen[str], directory: Path) -> list[int]:
    """The shell's children other than the launch's supervisor: the agent it forked."""
    boss = json.loads((directory / "launch.json").read_text())["supervisor"]["pid"]
    return [p for p, _ in children_now(shell.pid) if p != boss]


def _stop(shell: subprocess.Popen[str], started: list[int]) -> None:
    alive = shell.poll() is None
    for pid in [p for p, _ in children_now(shell.pid)] * alive + started:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    shell.wait(timeout=30)
    if shell.stderr is not None:
        shell.stderr.close()


def test_an_ecpa_run_with_children_supervises_from_a_fresh_process(tmp_path: Path) -> None:
    """``ecpa run`` started by a shell that forked an agent first: it forks, and the child,
    which has no other children, is the launch's supervisor; the agent is no member, is never
    signalled, and outlives the launch; the command's status passes through the holder."""
    shell = _holding(tmp_path, "sleep 3")
    started: list[int] = []
    try:
        assert shell.stderr is not None
        directory = _launch_dir(shell.stderr.readline())
        doc = json.loads((directory / "launch.json").read_text())
        assert doc["excluded_children"] == []  # a fresh process: it has none
        [agent] = _agents_of(shell, directory)
        started.append(agent)
        assert Path(f"/proc/{agent}/cmdline").read_bytes().startswith(b"sleep\x00")
        expected = launch_from_file(directory / "launch.json")
        assert expected.membership is not None
        assert expected.membership.supervisor != shell.pid
        assert _ppid(expected.membership.supervisor) == shell.pid  # forked by the holder
        assert not expected.membership.includes(agent)
        assert not expected.membership.includes(shell.pid)
        status = shell.wait(timeout=60)
        assert status == 0
        assert json.loads((directory / "exit.json").read_text())["exit_status"] == 0
        time.sleep(0.2)
        # The supervisor never signalled the agent: it outlives the launch, as it should.
        assert Path(f"/proc/{agent}").exists()
    finally:
        _stop(shell, started)


@pytest.mark.parametrize("how", ["pid", "group"])
def test_a_signal_to_the_holder_reaches_the_launch_once(tmp_path: Path, how: str) -> None:
    """A SIGTERM to the holder's pid (``docker stop``, systemd's main pid) or to its process
    group (a terminal's ^C, ``kill -- -PGID``) reaches the supervisor once: the command gets
    SIGTERM, and the grace period runs (a second signal would be SIGKILL at once)."""
    trap = "trap 'echo got-term >&2; sleep 1; exit 7' TERM; while :; do sleep 0.1; done"
    shell = _holding(tmp_path, f"sh -c {shlex.quote(trap)}")
    started: list[int] = []
    try:
        assert shell.stderr is not None
        directory = _launch_dir(shell.stderr.readline())
        started.extend(_agents_of(shell, directory))
        time.sleep(1)  # the command runs, its trap set
        if how == "pid":
            os.kill(shell.pid, signal.SIGTERM)
        else:
            os.killpg(os.getpgid(shell.pid), signal.SIGTERM)
        status = shell.wait(timeout=60)
        rest = shell.stderr.read()
        assert status == 7, rest  # the trap ran to its end: no SIGKILL came
        assert rest.count("got-term") == 1, rest
        assert "second signal" not in rest, rest
        assert json.loads((directory / "exit.json").read_text())["exit_status"] == 7
    finally:
        _stop(shell, started)


def test_a_signal_to_every_process_is_one_request(tmp_path: Path) -> None:
    """A SIGTERM sent to every process (systemd's control-group kill, ``pkill``) reaches
    the supervisor directly and through the holder: within 0.5 s the two are one request, not
    a second signal (which would send SIGKILL at once and skip the grace)."""
    trap = "trap 'echo got-term >&2; sleep 1; exit 7' TERM; while :; do sleep 0.1; done"
    shell = _holding(tmp_path, f"sh -c {shlex.quote(trap)}")
    started: list[int] = []
    try:
        assert shell.stderr is not None
        directory = _launch_dir(shell.stderr.readline())
        started.extend(_agents_of(shell, directory))
        boss = json.loads((directory / "launch.json").read_text())["supervisor"]["pid"]
        time.sleep(1)
        os.kill(boss, signal.SIGTERM)
        time.sleep(0.1)
        os.kill(shell.pid, signal.SIGTERM)
        status = shell.wait(timeout=60)
        rest = shell.stderr.read()
        assert status == 7, rest
        assert "the same request" in rest, rest
        assert "second signal" not in rest, rest
    finally:
        _stop(shell, started)


def test_a_supervisor_killed_by_a_signal_is_the_holders_status(tmp_path: Path) -> None:
    shell = _holding(tmp_path, "sleep 60")
    started: list[int] = []
    try:
        assert shell.stderr is not None
        directory = _launch_dir(shell.stderr.readline())
        started.extend(_agents_of(shell, directory))
        boss = json.loads((directory / "launch.json").read_text())["supervisor"]["pid"]
        os.kill(boss, signal.SIGKILL)
        assert shell.wait(timeout=60) == 128 + signal.SIGKILL
    finally:
        _stop(shell, started)


def test_an_inherited_ignored_sigchld_does_not_hang_the_launch(tmp_path: Path) -> None:
    """SIGCHLD ignored by the entry script survives exec; the supervisor still gets its
    command's status and ends with it, rather than running for ever."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECPA_")}
    env["PYTHONPATH"] = str(ROOT)
    ecpa = Path(sys.executable).parent / "ecpa"
    runs = tmp_path / "runs"
    for agent in ("", "sleep 30 & "):  # alone, and behind a holder
        script = f"trap '' CHLD; {agent}exec {ecpa} run --evidence-dir {runs} -- sh -c 'exit 3'"
        # bash, not sh: dash does not pass an ignored SIGCHLD on to what it execs.
        shell = subprocess.Popen(["bash", "-c", script], env=env, process_group=0, text=True)
        try:
            assert shell.wait(timeout=60) == 3
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGKILL)  # the agent, in the shell's group
            shell.wait(timeout=30)


def test_a_terminal_with_tostop_does_not_stop_the_supervisor(tmp_path: Path) -> None:
    """Behind a holder the supervisor is in a background group of the terminal; with
    ``stty tostop`` its writes to the terminal never stop it (a stop there would be for good).
    Here ``ecpa run`` runs on a pseudo-terminal it has as its controlling terminal."""
    import pty
    import termios

    env = {k: v for k, v in os.environ.items() if not k.startswith("ECPA_")}
    env["PYTHONPATH"] = str(ROOT)
    ecpa = Path(sys.executable).parent / "ecpa"
    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[3] |= termios.TOSTOP
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    script = f"sleep 30 & exec {ecpa} run --evidence-dir {tmp_path / 'runs'} -- sh -c 'exit 4'"
    take_tty = (
        "import fcntl,os,sys,termios;fcntl.ioctl(0,termios.TIOCSCTTY,0);"
        "os.execvp('sh',sys.argv[1:])"
    )
    shell = subprocess.Popen(
        [sys.executable, "-c", take_tty, "sh", "-c", script],
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    out = b""
    try:
        deadline = time.monotonic() + 60
        while shell.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                with contextlib.suppress(OSError):
                    out += os.read(master, 4096)
        assert shell.returncode == 4, out
        assert b"exited with status 4" in out
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        for pid in [p for p, _ in children_now(shell.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shell.wait(timeout=30)
        os.close(master)


def test_a_killed_holder_stops_the_launch_in_order(tmp_path: Path) -> None:
    """SIGKILL of the holder: the supervisor gets SIGTERM (its parent-death signal), stops the
    command's tree and writes exit.json."""
    shell = _holding(tmp_path, "sleep 60")
    started: list[int] = []
    try:
        assert shell.stderr is not None
        directory = _launch_dir(shell.stderr.readline())
        started.extend(_agents_of(shell, directory))
        boss = json.loads((directory / "launch.json").read_text())["supervisor"]["pid"]
        time.sleep(0.5)
        shell.kill()
        shell.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (directory / "exit.json").exists():
            time.sleep(0.1)
        assert json.loads((directory / "exit.json").read_text())["signal"] == signal.SIGTERM
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(f"/proc/{boss}").exists():
            time.sleep(0.1)
        assert not Path(f"/proc/{boss}").exists() or _zombie(boss)
    finally:
        _stop(shell, started)


def _zombie(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    return True


AGENT = r"""
import json, os, sys, time
from pathlib import Path
runs = Path(sys.argv[1])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    found = list(runs.glob("launch-*/launch.json"))
    if found:
        break
    time.sleep(0.05)
launch = json.loads(found[0].read_text())
directory = found[0].parent
os.environ.update(
    ECPA_PLAN_ID=launch["plan_id"],
    ECPA_LAUNCH_ID=launch["launch_id"],
    ECPA_CHALLENGE=launch["challenge"],
    ECPA_PLUGIN_ID=launch["plugin_id"],
    ECPA_ARTIFACT_DIGEST=launch["artifact_digest"],
    ECPA_ISSUER=launch["issuer"],
    ECPA_ENROLL_SOCKET=str(directory / launch["enroll_socket"]),
    ECPA_EVIDENCE_DIR=str(directory / "evidence"),
    ECPA_PROCESS_EPOCH=str(launch["process_epoch"]),
    ECPA_EMIT_INTERVAL_S="1",
)
from dla_plugin.sim.drive import main
sys.exit(main(["--seconds", "12", "--step-ms", "1"]))
"""


def test_an_agent_forked_before_exec_ecpa_run_never_makes_it_effective(tmp_path: Path) -> None:
    """RUNTIME.md "Membership": ``sh -c 'agent & exec ecpa run -- sleep 15'``.
    The agent is a child of the supervisor's pid; it reads launch.json, sets the binding, runs
    the real plugin driver and asks to enroll its own key, which would make status say true
    for a launch of ``sleep``. Enrollment refuses it (not a process of the launch), so it has
    no trusted key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECPA_")}
    env["PYTHONPATH"] = str(ROOT)
    ecpa = Path(sys.executable).parent / "ecpa"
    runs = tmp_path / "runs"
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    script = (
        f"{sys.executable} {agent} {runs} 2>{tmp_path / 'agent.err'} & "
        f"exec {ecpa} run --evidence-dir {runs} -- sleep 15"
    )
    shell = subprocess.Popen(
        ["sh", "-c", script], env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    started = [shell.pid]
    try:
        assert shell.stderr is not None
        directory = _launch_dir(shell.stderr.readline())
        doc = json.loads((directory / "launch.json").read_text())
        assert doc["excluded_children"] == []  # supervised from a fresh process
        started.extend(p for p, _ in children_now(shell.pid) if p != doc["supervisor"]["pid"])
        verdicts = _verdicts(directory, seconds=10)
        assert verdicts
        assert not any(verdicts)
        assert list((directory / "evidence").rglob("*.jsonl")) == []  # nothing enrolled
        err = (tmp_path / "agent.err").read_text()
        assert "key not enrolled" in err, err
        assert "not a process of the launch" in err, err
    finally:
        alive = shell.poll() is None
        for pid in [p for p, _ in children_now(shell.pid)] * alive + started[alive ^ 1 :]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shell.wait(timeout=30)
        for stream in (shell.stderr, shell.stdout):
            if stream is not None:
                stream.close()


DOUBLE_FORK = r"""
import os, sys, time
from pathlib import Path
# Once the launch runs (its command started: ecpa run is a child subreaper by then) ...
deadline = time.monotonic() + 60
while time.monotonic() < deadline and not list(Path(sys.argv[2]).glob("launch-*/enroll.sock")):
    time.sleep(0.05)
time.sleep(1)
# The agent double-forks: its child exits at once, so the grandchild is an orphan, and
# the kernel gives it to the nearest child subreaper among its ancestors.
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
    os._exit(0)
os.wait()
"""


def test_an_agents_double_forked_grandchild_never_makes_it_effective(tmp_path: Path) -> None:
    """The gap left by the record of excluded children: the agent's grandchild, orphaned by a
    double fork, used to be reparented to ``ecpa run`` (a child subreaper) and then looked
    like a process of the launch: it enrolled and status said true for a launch of
    ``sleep``. Now an ``ecpa run`` whose pid has children supervises from a freshly forked
    process with none, so no orphan of the agent ever comes into the launch's tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECPA_")}
    env["PYTHONPATH"] = str(ROOT)
    ecpa = Path(sys.executable).parent / "ecpa"
    runs = tmp_path / "runs"
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "fork.py").write_text(DOUBLE_FORK)
    script = (
        f"{sys.executable} {tmp_path / 'fork.py'} {tmp_path / 'agent.py'} {runs} "
        f"2>{tmp_path / 'agent.err'} & exec {ecpa} run --evidence-dir {runs} -- sleep 15"
    )
    shell = subprocess.Popen(
        ["sh", "-c", script], env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    grandchildren: list[int] = []
    try:
        assert shell.stderr is not None
        directory = _launch_dir(shell.stderr.readline())
        agents = str(tmp_path / "agent.py")

        def seen() -> None:  # each grandchild, for the cleanup
            grandchildren.extend(p for p in _agents(agents) if p not in grandchildren)

        verdicts = _verdicts(directory, seconds=10, each=seen)
        assert grandchildren  # the agent ran, in the grandchild
        assert verdicts
        assert not any(verdicts)
        assert list((directory / "evidence").rglob("*.jsonl")) == []  # nothing enrolled
        err = (tmp_path / "agent.err").read_text()
        assert "not a process of the launch" in err, err
        expected = launch_from_file(directory / "launch.json")
        assert expected.membership is not None
        for pid in grandchildren:
            assert not expected.membership.includes(pid)
    finally:
        alive = shell.poll() is None
        for pid in grandchildren + [p for p, _ in children_now(shell.pid)] * alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if alive:
            shell.send_signal(signal.SIGTERM)
        shell.wait(timeout=60)
        for stream in (shell.stderr, shell.stdout):
            if stream is not None:
                stream.close()


def _verdicts(
    directory: Path, *, seconds: float, each: Callable[[], None] = lambda: None
) -> list[bool]:
    """``ecpa status --json``'s runtime_effective for ``directory``, every 0.5 s for
    ``seconds`` (``each`` runs before every status)."""
    ecpa = Path(sys.executable).parent / "ecpa"
    verdicts = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        each()
        out = subprocess.run(
            [str(ecpa), "status", "--launch", str(directory), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        verdicts.append(json.loads(out.stdout)["runtime_effective"])
        time.sleep(0.5)
    return verdicts


def _agents(script: str) -> list[int]:
    """The pids of live processes whose command line runs ``script``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\x00")
        except OSError:
            continue
        if script.encode() in words[1:2]:
            found.append(int(entry.name))
    return found


# -- directories (RUNTIME.md "Directories") -----------------------------------------------------


@pytest.mark.parametrize(("mode", "refused"), [(0o777, True), (0o1777, False), (0o755, False)])
def test_an_evidence_dir_under_a_directory_others_may_write_is_refused(
    tmp_path: Path, mode: int, refused: bool
) -> None:
    """RUNTIME.md "Directories": ``--evidence-dir`` under a 0777 directory without
    the sticky bit is refused, since another user could rename the launch directory away while
    it runs. Every ancestor must be root's or the user's, and not writable by others unless
    sticky."""
    from tests._cli_helpers import ecpa_main

    shared = tmp_path / "s"  # short: the enrollment socket's path has at most 107 bytes
    shared.mkdir()
    shared.chmod(mode)
    result = ecpa_main("run", "--evidence-dir", shared / "r", "--", "true")
    if refused:
        assert result.status == 2
        assert "unless sticky" in result.err
        assert f"{shared} with uid {os.geteuid()} and mode 0777" in result.err
        assert not (shared / "r").exists() or not list((shared / "r").iterdir())
    else:
        assert result.status == 0, result.err


def test_a_launch_dir_under_a_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    from tests._cli_helpers import ecpa_main

    runs = tmp_path / "r"
    result = ecpa_main("run", "--evidence-dir", runs, "--", "true")
    assert result.status == 0, result.err
    [directory] = runs.iterdir()
    assert ecpa_main("status", "--launch", directory).status == 1  # ended: false, readable
    tmp_path.chmod(0o777)
    try:
        refused = ecpa_main("status", "--launch", directory)
        assert refused.status == 2
        assert "unless sticky" in refused.err
    finally:
        tmp_path.chmod(0o700)


def test_a_symlink_in_a_directory_others_may_write_is_judged_too(tmp_path: Path) -> None:
    """The directory holding a symlink is judged as well as the ancestors of the resolved
    path: whoever may write that directory may point the link elsewhere."""
    from ecpa._files import check_ancestors
    from ecpa.errors import EcpaError, ErrorCode

    target = tmp_path / "real"
    target.mkdir()
    shared = tmp_path / "s"
    shared.mkdir()
    (shared / "link").symlink_to(target)
    check_ancestors(shared / "link" / "launch", ErrorCode.INVALID_INPUT, what="launch directory")
    shared.chmod(0o777)
    with pytest.raises(EcpaError) as refused:
        check_ancestors(
            shared / "link" / "launch", ErrorCode.INVALID_INPUT, what="launch directory"
        )
    assert refused.value.code is ErrorCode.INVALID_INPUT
    assert f"{shared} with uid" in refused.value.detail  # the link's own directory, named


#: A scheduler of the launch that waits until the test has moved the launch directory (and
#: put a decoy at its old path), then enrolls through the socket where it now is.
ENROLL_AFTER_MOVE = """
import os, sys, time
from pathlib import Path
import ecpa
from ecpa.runtime.model.enroll import Request, enroll
from ecpa.runtime.model.launch import Slot
from ecpa.runtime.model.process import read_identity
moved, out = Path(sys.argv[1]), Path(sys.argv[2])
deadline = time.monotonic() + 30
while not moved.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
key = ecpa.SigningKey.generate()
kid = enroll(moved / "enroll.sock", Request(key.public_key.to_b64(), Slot("scheduler", 0),
                                            read_identity()))
out.write_text(kid)
"""


def test_a_launch_directory_moved_while_it_runs_keeps_getting_its_writes(tmp_path: Path) -> None:
    """The launch directory renamed away while the launch runs, a decoy directory with a
    trust store of its own put at its old path: enrollment's trust.json, the closing of the
    key windows and exit.json all go to the launch's own directory, never to the decoy, and
    ``ecpa run`` says the directory was moved."""
    from tests._launch_helpers import Launches

    runs = tmp_path / "runs"
    launches = Launches(tmp_path)
    out = tmp_path / "kid"
    try:
        moved = runs / "moved"
        proc, directory = launches.start(
            sys.executable, "-c", ENROLL_AFTER_MOVE, str(moved), str(out), evidence_dir=runs
        )
        time.sleep(0.5)
        directory.rename(moved)
        directory.mkdir(mode=0o700)
        decoy = b'{"schema": "ecpa-trust-store/0.1", "keys": []}\n'
        (directory / "trust.json").write_bytes(decoy)
        (directory / "launch.json").write_bytes((moved / "launch.json").read_bytes())
        assert proc.wait(timeout=60) == 0
        assert proc.stderr is not None
        err = proc.stderr.read()
        kid = out.read_text()
        trust = json.loads((moved / "trust.json").read_text())
        [entry] = trust["keys"]
        assert entry["kid"] == kid
        exit_doc = json.loads((moved / "exit.json").read_text())
        assert entry["not_after"] <= exit_doc["ended_at"]  # the window closed at the end
        assert (directory / "trust.json").read_bytes() == decoy  # the decoy untouched
        assert not (directory / "exit.json").exists()
        assert f"the launch directory was moved away from {directory}" in err, err
    finally:
        launches.cleanup()
