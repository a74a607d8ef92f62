"""Supervision of a launch's process tree (RUNTIME.md "Slots", supervision).

``ecpa run`` makes itself a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): every process
the command starts stays in its tree, even one that calls ``setsid`` and double-forks, since
orphans are reparented to it instead of to init. The command runs in its own session, with
SIGTERM as its parent-death signal (``PR_SET_PDEATHSIG``), so a SIGKILL of ``ecpa run`` still
stops the serving command.

One loop, on the main thread, does everything: it reaps children, serves the enrollment
socket (:class:`~ecpa.launcher.enroll.EnrollServer`) and acts on signals, which handlers only
record. When the direct child exits, or on SIGINT, SIGTERM, SIGHUP or SIGQUIT (forwarded as
received), every process of the tree gets the signal (SIGTERM when the child exited by
itself); ``grace`` seconds later whatever is left gets SIGKILL; a second signal escalates to
SIGKILL at once. The loop returns when no process of the tree is left (or, for processes the
kernel will not let go of, after a bounded wait).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from ecpa.launcher.enroll import EnrollServer
from ecpa.runtime import (
    PR_SET_CHILD_SUBREAPER,
    PROC,
    Membership,
    children_now,
    children_of,
    prctl,
    proc_table,
)

__all__ = ["FORWARDED", "LaunchExit", "Supervisor"]

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_POLL_S = 0.05
#: While the command runs and nothing is asked: reaping and the socket only, less often.
_IDLE_POLL_S = 0.2
#: After SIGKILL, how long to wait for the kernel to let processes go (uninterruptible sleep).
_KILL_WAIT_S = 5.0
_Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


@dataclass(frozen=True)
class LaunchExit:
    """How the command ended, as a shell reports it: ``status`` is its exit code, 128 + N
    when signal N killed it, 127 when it was not found and 126 when it could not be run
    (then ``error`` says why and it never started)."""

    status: int
    signal: int | None = None
    error: str | None = None

    @classmethod
    def from_returncode(cls, returncode: int) -> LaunchExit:
        """From ``Popen.returncode`` (``-N`` for signal N)."""
        if returncode < 0:
            return cls(128 - returncode, -returncode)
        return cls(returncode)

    @classmethod
    def from_wait_status(cls, status: int) -> LaunchExit:
        """From a ``waitpid`` status."""
        if os.WIFSIGNALED(status):
            return cls.from_returncode(-os.WTERMSIG(status))
        return cls(os.waitstatus_to_exitcode(status))


def _prctl(option: int, value: int) -> bool:
    return prctl(option, value) == 0


#: Run first in the child, by this interpreter (``-I -S``: nothing of the command's
#: environment changes how it starts): SIGTERM as the parent-death signal, SIGPIPE and
#: SIGXFSZ back to their defaults (Python ignores them, and an ignored signal survives exec),
#: SIGTTOU and SIGTTIN too (a fresh supervisor ignores them), then exec of the command, same
#: pid. Done here rather than in ``preexec_fn``, which is
#: unsafe when the parent has other threads (a test process, a library caller).
_EXEC = (
    "import ctypes,os,signal,sys\n"
    "ctypes.CDLL(None,use_errno=True).prctl(1,15,0,0,0)\n"
    "for s in (signal.SIGPIPE,signal.SIGXFSZ,signal.SIGTTOU,signal.SIGTTIN):\n"
    " signal.signal(s,signal.SIG_DFL)\n"
    "if os.getppid()!=int(sys.argv[1]):os._exit(143)\n"
    "try:os.execvp(sys.argv[2],sys.argv[2:])\n"
    "except OSError as e:\n"
    " sys.stderr.write(sys.argv[2]+': cannot execute: '+str(e.strerror)+chr(10))\n"
    " os._exit(127 if isinstance(e,FileNotFoundError) else 126)\n"
)


def _resolve(command: str, env: dict[str, str]) -> LaunchExit | None:
    """Why ``command`` cannot be run (127 not found, 126 not executable), or None."""
    if "/" in command:
        if not os.path.exists(command):
            return LaunchExit(127, None, f"{command}: command not found")
        if os.path.isdir(command) or not os.access(command, os.X_OK):
            return LaunchExit(126, None, f"{command}: cannot execute: Permission denied")
        return None
    if shutil.which(command, path=env.get("PATH", os.defpath)) is None:
        return LaunchExit(127, None, f"{command}: command not found")
    return None


@dataclass
class Supervisor:
    """Runs one command and supervises its tree; see the module's text."""

    grace: float
    enroll: EnrollServer | None = None
    #: Called with a line for standard error (what was sent to whom, what could not be done).
    say: Callable[[str], None] = lambda line: None
    signals: list[int] = field(default_factory=list)
    #: When each of :attr:`signals` came (``time.monotonic``).
    signal_times: list[float] = field(default_factory=list)
    #: The same signal again within this many seconds of the first is the same request,
    #: not a second one (``ecpa run`` behind a holder: a signal sent to every process reaches
    #: the supervisor directly and through the holder). 0: every repeat escalates.
    repeat_window_s: float = 0.0
    subreaper: bool = False
    #: Who belongs to the launch (RUNTIME.md "Membership"): this process's tree, less the
    #: children it had before the command started. Made at :meth:`run` when not given.
    membership: Membership | None = None
    #: Where processes are read from (a fake one in tests).
    proc_root: Path = PROC

    @property
    def foreign(self) -> frozenset[int]:
        """The pids of the children this process had before the command: never signalled,
        never reaped (they are not the launch's)."""
        if self.membership is None:
            return frozenset()
        return frozenset(pid for pid, _ in self.membership.excluded)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.signal_times.append(time.monotonic())
        self.signals.append(signum)

    @contextmanager
    def handlers(self, *, then_ignore: bool = False) -> Iterator[None]:
        """Record SIGINT, SIGTERM, SIGHUP and SIGQUIT while the block runs (the main thread
        only; a signal ignored when ``ecpa run`` started stays ignored, as a shell leaves it).
        Keep the block around everything up to the last file written: a signal then never
        kills ``ecpa run`` half way through closing the launch. With ``then_ignore`` the
        signals are ignored afterwards instead of restored (a command about to exit with
        its child's status)."""
        previous: dict[signal.Signals, _Handler] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in FORWARDED:
                current = signal.getsignal(signum)
                if current is signal.SIG_IGN:
                    continue
                previous[signum] = current
                signal.signal(signum, self._handle)
            if signal.getsignal(signal.SIGCHLD) is signal.SIG_IGN:  # inherited: no status
                previous[signal.SIGCHLD] = signal.SIG_IGN  # would ever be waited for
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            # Blocked by a fresh supervisor until now (ecpa.launcher.fresh): handled from here.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        try:
            yield
        finally:
            for signum, old in previous.items():
                if then_ignore and signum != signal.SIGCHLD:
                    signal.signal(signum, signal.SIG_IGN)
                else:
                    signal.signal(signum, old if old is not None else signal.SIG_DFL)

    def run(self, command: Sequence[str], env: dict[str, str]) -> LaunchExit:
        """Run ``command`` with ``env`` and supervise it until its whole tree is gone.

        Raises nothing for a command that cannot be started: that is status 127 or 126.
        """
        me = os.getpid()
        if self.membership is None or self.membership.supervisor != me:
            self.membership = Membership(me, children_now(me))
        self.subreaper = _prctl(PR_SET_CHILD_SUBREAPER, 1)
        if not self.subreaper:
            self.say("cannot become a child subreaper: orphans of the command leave the tree")
        refused = _resolve(command[0], env)
        if refused is not None:
            return refused
        wrapper = [sys.executable, "-I", "-S", "-c", _EXEC, str(me)]
        try:
            child = subprocess.Popen([*wrapper, *command], env=env, start_new_session=True)  # noqa: S603
        except OSError as exc:
            return LaunchExit(126, None, f"{command[0]}: cannot execute: {exc.strerror}")
        return self._loop(child)

    def _signal_tree(self, child: int | None, signum: int) -> int:
        """Send ``signum`` to every process of the tree, and to every process group the
        tree's processes lead or belong to (``killpg`` reaches a whole group at once, a
        process forking meanwhile included); return how many processes were signalled."""
        table = proc_table(self.proc_root)
        parents = children_of(table)
        groups = {pid: entry.pgid for pid, entry in table.items() if entry.live}
        me = os.getpid()
        targets = self._members(parents)
        if child is not None and child not in targets:
            targets.append(child)
        own = groups.get(me)
        signalled: set[int] = set()
        for group in {groups[pid] for pid in targets if pid in groups} - {own, 0, 1}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signum)
                signalled.add(group)
        sent = 0
        for pid in targets:
            if pid not in groups and pid != child:
                continue  # a zombie: nothing to signal, only to reap
            sent += 1
            if groups.get(pid) in signalled:
                continue  # once only: a process handling the signal must not get it twice
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
        return sent

    def _members(self, parents: dict[int, list[int]]) -> list[int]:
        membership = self.membership or Membership(os.getpid())
        return membership.members(parents, self.proc_root)

    def tree(self) -> list[int]:
        """The processes of the launch's tree now (zombies included)."""
        return self._members(children_of(proc_table(self.proc_root)))

    def _reap(self, child: subprocess.Popen[bytes], result: list[LaunchExit]) -> None:
        if self.foreign:  # only the tree's own children: a caller's keep their statuses
            mine = children_of(proc_table(self.proc_root)).get(os.getpid(), [])
            pids = [p for p in mine if p not in self.foreign]
        else:  # a process of its own (the ecpa script): every child is the tree's
            pids = [-1]
        for pid in pids:
            while True:
                try:
                    done, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    break
                if done == 0:
                    break
                if done == child.pid:
                    exit_ = LaunchExit.from_wait_status(status)
                    child.returncode = -exit_.signal if exit_.signal else exit_.status
                    result.append(exit_)
                if pid != -1:
                    break

    def _kill_tree(self, child: int | None) -> int:
        """SIGKILL to the tree and its process groups, sweep after sweep until a listing
        finds nothing left to kill (at most 32 sweeps a call; the loop calls again)."""
        sent = 0
        for _ in range(32):
            killed = self._signal_tree(child, signal.SIGKILL)
            sent += killed
            child = None
            if not killed:
                break
        return sent

    def _wait(self, timeout: float) -> None:
        fds = self.enroll.fds() if self.enroll is not None else []
        try:
            ready, _, _ = select.select(fds, [], [], timeout)
        except (InterruptedError, OSError, ValueError):
            ready = []
        if self.enroll is not None:
            self.enroll.serve(ready)

    def _loop(self, child: subprocess.Popen[bytes]) -> LaunchExit:
        result: list[LaunchExit] = []
        term_at: float | None = None  # when the tree got its first stop signal
        killed_at: float | None = None
        handled = 0
        first: tuple[int, float] | None = None  # the first stop signal, and when
        while True:
            self._reap(child, result)
            now = time.monotonic()
            leader = None if result else child.pid
            while handled < len(self.signals):  # act first, then say (saying may fail)
                signum, at = self.signals[handled], self.signal_times[handled]
                handled += 1
                if (
                    first is not None
                    and first[0] == signum
                    and at - first[1] < self.repeat_window_s
                ):
                    self.say(
                        f"{signal.Signals(signum).name} again within {self.repeat_window_s:g} s: "
                        "the same request (sent to the holder and to ecpa run), not a second one"
                    )
                    continue
                if first is None:
                    first = (signum, at)
                if term_at is None:
                    term_at = now
                    self._signal_tree(leader, signum)
                    self.say(f"{signal.Signals(signum).name}: passed on to the command's tree")
                elif killed_at is None:
                    killed_at = now
                    self._kill_tree(leader)
                    self.say("second signal: SIGKILL to the command's tree")
            if result and term_at is None:  # the direct child exited by itself
                term_at = now
                if self._signal_tree(None, signal.SIGTERM):
                    self.say("the command exited; SIGTERM to the processes it left behind")
            if term_at is not None and killed_at is None and now - term_at >= self.grace:
                killed_at = now
                if self._kill_tree(leader):
                    self.say(f"grace of {self.grace:g} s over: SIGKILL to the command's tree")
            if killed_at is not None and self.tree():
                self._kill_tree(leader)  # whatever appeared since: killed as well
            if result and not self.tree():
                return result[0]
            if killed_at is not None and now - killed_at > _KILL_WAIT_S:
                left = self.tree()
                self.say(f"processes that did not end after SIGKILL: {left}")
                if result:
                    return result[0]
            self._wait(_POLL_S if term_at is not None else _IDLE_POLL_S)
