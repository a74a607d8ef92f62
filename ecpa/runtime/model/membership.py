"""Who belongs to a launch (RUNTIME.md "Round 3", "Membership"): the supervisor's tree, less
the children its pid had before the command. One rule for supervision, enrollment and
status; ``/proc`` is read through :mod:`ecpa.runtime.model.process` (``proc_root`` a parameter).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ecpa.errors import EcpaError
from ecpa.runtime.model.process import _MAX_DEPTH, PROC, _start_ticks, parent_pid, proc_table

__all__ = ["Membership", "children_now"]


@dataclass(frozen=True)
class Membership:
    """Which processes belong to a launch (RUNTIME.md "Round 3", "Membership"): exactly the
    command's process tree under the supervisor (``ecpa run``, a child subreaper), that is
    every descendant of ``supervisor`` whose parent chain does not pass through one of the
    children the supervisor's pid already had before the command started (``excluded``, each
    a pid with its start ticks: an agent forked by an entry script before ``exec ecpa run``,
    say). The supervisor signals and reaps by this rule, and enrollment and status admit by
    it: one definition.
    """

    supervisor: int
    #: The supervisor's pre-existing children, as (pid, start ticks).
    excluded: frozenset[tuple[int, int]] = frozenset()

    def _is_excluded(self, pid: int, proc_root: Path) -> bool:
        if not any(p == pid for p, _ in self.excluded):
            return False
        try:
            ticks = _start_ticks(pid, proc_root)
        except EcpaError:
            return True  # unreadable: never the more permissive answer
        return ticks is None or (pid, ticks) in self.excluded

    def includes(self, pid: int, *, proc_root: Path = PROC) -> bool:
        """Whether process ``pid`` belongs to the launch now: its parent chain, read from
        ``/proc``, reaches the supervisor (``pid`` may be the supervisor itself) without
        passing through an excluded child.

        Raises:
            EcpaError: ``ECPA_INVALID_INPUT`` when ``/proc`` cannot be read.
        """
        current: int | None = pid
        for _ in range(_MAX_DEPTH):
            if current is None or current <= 0 or (current == 1 and self.supervisor != 1):
                return False
            if current == self.supervisor:
                return True
            parent = parent_pid(current, proc_root=proc_root)
            if parent == self.supervisor and self._is_excluded(current, proc_root):
                return False
            current = parent
        return False

    def members(self, children: Mapping[int, list[int]], proc_root: Path = PROC) -> list[int]:
        """Every process of the launch in ``children`` (each pid's children, as read from
        ``/proc`` at once), the supervisor left out: the tree below it, less the subtrees
        of the excluded children."""
        found: list[int] = []
        queue = [
            pid
            for pid in children.get(self.supervisor, [])
            if not self._is_excluded(pid, proc_root)
        ]
        while queue:
            pid = queue.pop()
            found.append(pid)
            queue.extend(children.get(pid, []))
        return found


def children_now(pid: int, *, proc_root: Path = PROC) -> frozenset[tuple[int, int]]:
    """The live children of ``pid`` now, as (pid, start ticks): what a supervisor records as
    excluded before it starts its command. Never raises (an unreadable entry is skipped: a
    process that exited meanwhile)."""
    return frozenset(
        (child, entry.start_ticks)
        for child, entry in proc_table(proc_root).items()
        if entry.ppid == pid and entry.live
    )
