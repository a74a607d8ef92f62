"""One run of the demo: how it runs ``ecpa`` in this process, where its narrative goes, and
whether each step behaved as the profile says. The command line hands in both ends, so the
demo neither imports the command line nor prints by itself."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ecpa.demo.acts import ACTS
from ecpa.launcher.run import BINDING_NAMES

__all__ = ["LAUNCHED", "Ecpa", "Say", "Tour", "first_line", "launched", "spawn_ecpa", "stop_ecpa"]

#: Runs ``ecpa ARGV...`` in this process: its exit status, and all it printed (standard
#: output, then standard error).
Ecpa = Callable[[list[str]], tuple[int, str]]
#: Prints one line of the demo's narrative.
Say = Callable[[str], None]


@dataclass
class Tour:
    """The demo's two ends and its checks, one per step (True: as the profile says)."""

    ecpa: Ecpa
    say: Say
    checks: list[bool] = field(default_factory=list)

    def act(self, name: str) -> None:
        """Begin the act ``name`` of :data:`ecpa.demo.acts.ACTS`, saying its title."""
        self.say(f"\n## {ACTS[name]}")

    def step(self, args: list[str], expect_exit: int, expect_text: str, why: str) -> None:
        """Run ``ecpa ARGS...``, show it and what it printed; one check: it exited with
        ``expect_exit`` and printed ``expect_text``."""
        self.say(f"\n# {why}")
        self.say("$ ecpa " + " ".join(shlex.quote(a) for a in args))
        status, text = self.ecpa(args)
        self.say(text.rstrip("\n"))
        ok = status == expect_exit and expect_text in text
        self.checks.append(ok)
        if not ok:
            self.say(f"!! expected exit {expect_exit} and {expect_text!r}; got exit {status}")


def spawn_ecpa(args: list[str], *, cwd: Path, tour: Tour) -> subprocess.Popen[str]:
    """``ecpa ARGS...`` as a process of its own (shown as a background command), with no
    launch binding in its environment; its standard error is a pipe, for its first line."""
    tour.say("$ ecpa " + " ".join(shlex.quote(a) for a in args) + " &")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in BINDING_NAMES and not k.startswith("VLLM_ECPA_")
    }
    return subprocess.Popen(  # noqa: S603 - our own interpreter and arguments, no shell
        [sys.executable, "-m", "ecpa", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def first_line(proc: subprocess.Popen[str], pattern: str, tour: Tour) -> re.Match[str] | None:
    """The first line ``proc`` writes on standard error, shown and matched against
    ``pattern`` (one check: it matched)."""
    assert proc.stderr is not None
    line = proc.stderr.readline().rstrip("\n")
    tour.say(line)
    match = re.match(pattern, line)
    tour.checks.append(match is not None)
    if match is None:
        tour.say(f"!! expected a first line matching {pattern!r}")
    return match


#: The first line of ``ecpa run``, naming the launch directory.
LAUNCHED = r"ecpa run: launch \S+ in (.+)$"


def launched(proc: subprocess.Popen[str], d: Path, tour: Tour) -> Path | None:
    """The launch directory ``ecpa run`` (``proc``, started in ``d``) names on its first
    line (one check: it did), or None."""
    match = first_line(proc, LAUNCHED, tour)
    if match is None:
        return None
    directory = Path(match.group(1))
    return directory if directory.is_absolute() else d / directory


def stop_ecpa(proc: subprocess.Popen[str], timeout: float) -> None:
    """Stop ``proc`` if it still runs (SIGTERM, then SIGKILL after ``timeout``), reap it
    and close its standard error."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()
