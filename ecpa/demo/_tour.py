"""One run of the demo: how it runs ``ecpa`` in this process, where its narrative goes, and
whether each step behaved as the profile says. The command line hands in both ends, so the
demo neither imports the command line nor prints by itself."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Ecpa", "Say", "Tour"]

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
