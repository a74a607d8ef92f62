"""Which of ``ecpa serve``'s judging processes judges which launch (docs/serve.md).

A launch stays with the process that judged it before: that process remembers its keys
and its verified records, so a refresh there verifies only what is new. A launch new to
the server goes to the process with the least work, the work of a launch being how long
its judging took at the refresh before (a launch not judged yet weighs the mean of those
that were). So the parts are even by work, not by count: a launch of 1,000 slots weighs as
much as ten of 100, where a hash of the launch id split 100 launches of equal size 54 to 46
as often as not (docs/scale.md "The fleet verdict")."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

__all__ = ["Shares"]


class Shares:
    """The launches of one source shared among ``parts`` judging processes; safe across
    threads."""

    def __init__(self, parts: int) -> None:
        if parts < 1:
            raise ValueError(f"expected at least one part, found {parts}")
        self.parts = parts
        self._part: dict[str, int] = {}
        self._took: dict[str, float] = {}
        self._lock = threading.Lock()

    def split(self, names: Sequence[str]) -> list[list[str]]:
        """``names`` (a listing, in its order) in ``parts`` lists, each in that order: a
        name held before in its part, a new one in the part with the least work (the
        lowest index among equals); a name no longer listed is forgotten."""
        with self._lock:
            took = {n: self._took[n] for n in names if n in self._took}
            unknown = sum(took.values()) / len(took) if took else 1.0
            part = {n: self._part[n] for n in names if n in self._part}
            load = [0.0] * self.parts
            for name, index in part.items():
                load[index] += took.get(name, unknown)
            for name in names:
                if name not in part:
                    index = min(range(self.parts), key=lambda i: (load[i], i))
                    part[name] = index
                    load[index] += unknown
            self._part, self._took = part, took
        found: list[list[str]] = [[] for _ in range(self.parts)]
        for name in names:
            found[part[name]].append(name)
        return found

    def judged(self, took: Iterable[tuple[str, float]]) -> None:
        """How long each launch's judging took (seconds), for the next :meth:`split`; a
        name not in a part is left out."""
        with self._lock:
            for name, seconds in took:
                if name in self._part and seconds >= 0:
                    self._took[name] = seconds
