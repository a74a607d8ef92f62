"""Bounded memory of pure judgements, for a process that judges the same launches again and
again (``ecpa serve``'s judging process, once a refresh; docs/scale.md "The fleet verdict").

A :class:`Memo` keeps what a pure function answered for a key that holds every input it
reads (bytes by their SHA-256, parsed values by their content): the same inputs give the
same answer, so what is remembered can never differ from what would be computed again,
only be cheaper. Nothing that depends on the clock is remembered here: a launch's keys are
judged as of each certificate's own issue, never as of now. Errors are never remembered.

Each memory is bounded by the weight of what it holds (a launch's keys weigh as many as
there are), the oldest forgotten first; :func:`forget` empties them all (a benchmark of a
command that starts cold, a test).
"""

from __future__ import annotations

import hashlib
import threading
from typing import Generic, TypeVar

__all__ = ["Memo", "Same", "digest", "forget", "memory_sizes"]

K = TypeVar("K")
V = TypeVar("V")

_ALL: list[Memo[object, object]] = []


class Memo(Generic[K, V]):
    """Answers by key, their weights (a launch's keys: how many) adding up to at most
    ``size``, the oldest forgotten first; safe across threads."""

    def __init__(self, name: str, size: int) -> None:
        if size < 1:
            raise ValueError(f"expected a size of at least 1, found {size}")
        self.name, self.size = name, size
        self._answers: dict[K, tuple[V, int]] = {}
        self._weight = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        _ALL.append(self)  # type: ignore[arg-type]

    def get(self, key: K) -> V | None:
        """The answer remembered for ``key``, or None."""
        with self._lock:
            found = self._answers.get(key)
            if found is None:
                self.misses += 1
                return None
            self.hits += 1
            return found[0]

    def put(self, key: K, answer: V, weight: int = 1) -> V:
        """Remember ``answer`` for ``key`` (forgetting the oldest until its ``weight``, at
        least 1, fits; one heavier than the whole memory is not kept); ``answer``."""
        weight = max(1, weight)
        with self._lock:
            old = self._answers.pop(key, None)
            if old is not None:
                self._weight -= old[1]
            if weight > self.size:
                return answer
            while self._weight + weight > self.size:
                _, dropped = self._answers.pop(next(iter(self._answers)))
                self._weight -= dropped
            self._answers[key] = (answer, weight)
            self._weight += weight
        return answer

    def resize(self, size: int) -> None:
        """Hold at most ``size`` (at least 1) from now on, the oldest forgotten first."""
        if size < 1:
            raise ValueError(f"expected a size of at least 1, found {size}")
        with self._lock:
            self.size = size
            while self._weight > size:
                _, dropped = self._answers.pop(next(iter(self._answers)))
                self._weight -= dropped

    @property
    def weight(self) -> int:
        """The weights of the answers held, added up."""
        return self._weight

    def __len__(self) -> int:
        return len(self._answers)

    def clear(self) -> None:
        """Forget every answer (and the counts)."""
        with self._lock:
            self._answers.clear()
            self._weight = 0
            self.hits = self.misses = 0


class Same:
    """A part of a key naming ``thing`` by its identity, for a value that is never changed
    and costs more to name by content (a launch's trust store, as its keys' judgement gave
    it). The key holds ``thing``, so while it is remembered no other object can take its
    identity."""

    __slots__ = ("thing",)

    def __init__(self, thing: object) -> None:
        self.thing = thing

    def __hash__(self) -> int:
        return id(self.thing)

    def __eq__(self, other: object) -> bool:
        return type(other) is Same and other.thing is self.thing

    def __repr__(self) -> str:
        return f"Same({type(self.thing).__name__} at {id(self.thing):#x})"


def digest(data: bytes) -> bytes:
    """The SHA-256 of ``data``: how bytes are named in a key."""
    return hashlib.sha256(data).digest()


def forget() -> None:
    """Empty every memory of this process."""
    for memo in _ALL:
        memo.clear()


def memory_sizes() -> str:
    """What each memory of this process holds now: ``"launch keys: 100 (10000 of 20000),
    ..."``, the answers and their weights of the whole."""
    return ", ".join(f"{m.name}: {len(m)} ({m.weight} of {m.size})" for m in _ALL)
