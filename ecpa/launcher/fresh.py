"""A supervisor with no other children (RUNTIME.md "Round 3", "Membership").

An entry script that forks an agent and then ``exec``s ``ecpa run`` (``sh -c 'agent & exec
ecpa run -- ...'``) leaves ``ecpa run`` with a child that is not the launch's. Recording it
(``excluded_children``) is not enough: ``ecpa run`` is a child subreaper, so a grandchild
the agent double-forks is reparented to it and looks like a process of the launch. So when
its pid already has children, ``ecpa run`` forks first: the child, which has none, goes on
as the supervisor (launch, enrollment, the command), and the parent stays behind as a
*holder* that only passes signals on and reaps. Orphans of the agent come to the holder (or
to init), never into the supervisor's tree.

The holder passes SIGINT, SIGTERM, SIGHUP and SIGQUIT on to the supervisor (those not
ignored when it started), which is in a process group of its own so that a terminal's or a
``killpg``'s signal reaches it once, through the holder; a signal sent to every process (a
cgroup's, ``pkill``) reaches it twice, so the supervisor takes the same signal again within
0.5 s as the same request. The supervisor ignores SIGTTOU and SIGTTIN (a background group
of the terminal must not stop on a write with ``stty tostop``), keeps the stop signals
blocked until its handlers are in place, and has SIGTERM as its parent-death signal: a SIGKILL
of the holder stops the launch in order. The holder reaps every child of its own (it may be
pid 1 of a container) and exits with the supervisor's status (128 + N when signal N ended it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import NoReturn

from ecpa.runtime import children_now, prctl

__all__ = ["PR_SET_PDEATHSIG", "REPEAT_WINDOW_S", "fresh_supervisor"]

PR_SET_PDEATHSIG = 1
#: The same stop signal again within this long is the same request (see the module's text).
REPEAT_WINDOW_S = 0.5
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def fresh_supervisor(say: Callable[[str], None] = lambda line: None) -> bool:
    """Make sure this process has no children before it supervises anything: if it has some
    (forked before ``exec ecpa run``), fork; the child returns True and goes on with no other
    children, and the parent never returns (it holds, then exits with the child's status).

    Returns False when nothing was needed (no children), or when a fork is unsafe (other
    threads run in this process: then, said on ``say``, the children are excluded by record
    only, and a double fork of theirs is not kept out).
    """
    if not children_now(os.getpid()):
        return False
    if threading.active_count() > 1:
        say("this process has children and threads: its children are excluded by record only")
        return False
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()  # nothing buffered is written twice
    holder = os.getpid()
    # Inherited as ignored, SIGCHLD would leave no status to wait for, in either process.
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)  # none lost, none early
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)  # a group's signal reaches the holder only, which passes it on
        # In a background group of the terminal now: its writes must not stop it (stty tostop).
        for signum in (signal.SIGTTOU, signal.SIGTTIN):
            signal.signal(signum, signal.SIG_IGN)
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != holder:  # the holder is already gone: start nothing
            os._exit(128 + signal.SIGTERM)
        # The stop signals stay blocked until the supervisor's handlers are in place
        # (Supervisor.handlers unblocks them): one that comes early is handled, not fatal.
        signal.pthread_sigmask(signal.SIG_SETMASK, set(old_mask) | set(_FORWARDED))
        return True
    return _hold(child, old_mask)  # never returns: the holder exits with the child


def _hold(child: int, old_mask: set[int | signal.Signals]) -> NoReturn:
    """The holder's whole life: pass the signals on to ``child``, reap, and exit with
    ``child``'s status."""

    def forward(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for signum in _FORWARDED:
        if signal.getsignal(signum) is not signal.SIG_IGN:  # ignored at start: left so
            signal.signal(signum, forward)
    signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)  # retried after a handler ran (PEP 475)
        except ChildProcessError:  # pragma: no cover - the child is ours until reaped
            os._exit(1)
        if pid == child:
            if os.WIFSIGNALED(status):
                os._exit(128 + os.WTERMSIG(status))
            os._exit(os.waitstatus_to_exitcode(status))
