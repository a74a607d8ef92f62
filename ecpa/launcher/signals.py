"""Running a command in its own session, forwarding the signals that would stop the manager.

The command runs in a session (and process group) of its own, so a terminal's Ctrl-C
reaches the manager alone; the manager forwards SIGINT, SIGTERM and SIGHUP to the whole
group, and if the group's leader has not exited ``grace`` seconds after the first one, the
group gets SIGKILL. A signal that was ignored when the manager started stays ignored, as a
shell leaves it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_POLL_S = 0.1
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


class _Forwarder:
    """Signal handlers that pass SIGINT, SIGTERM and SIGHUP on to the child's group."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.child: subprocess.Popen[bytes] | None = None
        self.pending: list[int] = []
        self.deadline: float | None = None
        self.killed = False

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.deadline is None:
            self.deadline = time.monotonic() + self.grace
        if self.child is None:  # arrived while the child was being started
            self.pending.append(signum)
        else:
            self.send(signum)

    def send(self, signum: int) -> None:
        child = self.child
        if child is None or child.returncode is not None:  # reaped: its pgid may be reused
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signum)  # the child leads its own group (new session)

    def started(self, child: subprocess.Popen[bytes]) -> None:
        self.child = child
        for signum in self.pending:
            self.send(signum)

    def wait(self, child: subprocess.Popen[bytes]) -> int:
        # Poll rather than block: a handler cannot interrupt a blocking waitpid (PEP 475
        # restarts it), and the grace deadline must be noticed while the child lives.
        while True:
            try:
                return child.wait(timeout=_POLL_S)
            except subprocess.TimeoutExpired:
                pass
            if self.deadline is not None and not self.killed and time.monotonic() >= self.deadline:
                self.killed = True
                self.send(signal.SIGKILL)


@contextmanager
def _installed(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    previous: dict[signal.Signals, _Handler] = {}
    if threading.current_thread() is threading.main_thread():  # signal() works only there
        for signum in FORWARDED:
            current = signal.getsignal(signum)
            if current is signal.SIG_IGN:
                continue
            previous[signum] = current
            signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old if old is not None else signal.SIG_DFL)


def run_forwarding(command: Sequence[str], env: dict[str, str], *, grace: float) -> LaunchExit:
    """Run ``command`` with environment ``env`` in a new session and wait for it,
    forwarding signals (from the main thread; elsewhere none are caught). Raises nothing
    for a command that cannot be started: that is exit status 127 or 126."""
    forwarder = _Forwarder(grace)
    with _installed(forwarder.handle):
        try:
            child = subprocess.Popen(list(command), env=env, start_new_session=True)  # noqa: S603
        except FileNotFoundError:
            return LaunchExit(127, None, f"{command[0]}: command not found")
        except OSError as exc:
            return LaunchExit(126, None, f"{command[0]}: cannot execute: {exc.strerror}")
        forwarder.started(child)
        return LaunchExit.from_returncode(forwarder.wait(child))
