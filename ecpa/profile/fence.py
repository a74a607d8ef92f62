"""What ``verify`` needs of a replay fence (PROFILE §3 step 25), and the in-memory fence.

A fence is consulted last, after every other check has passed, and records the nonce in the
same step that accepts it, so a statement refused for any other reason never consumes its
nonce. Any object with ``check_and_record`` can serve as a fence; the durable ones (SQLite)
live in :mod:`ecpa.runtime.replay`, beside the files they keep.
"""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable

from ecpa.errors import EcpaError, ErrorCode

__all__ = ["MemoryReplayFence", "ReplayFence", "replayed"]


@runtime_checkable
class ReplayFence(Protocol):
    """What ``verify`` needs of a fence."""

    def check_and_record(self, nonce: str, *, expires_at: int) -> None:
        """Record ``nonce``, atomically; raise ``EcpaError`` (``REPLAYED_NONCE``) if seen."""
        ...


def replayed(nonce: str) -> EcpaError:
    """The error a fence raises for a nonce it has already accepted."""
    return EcpaError(
        ErrorCode.REPLAYED_NONCE,
        f"expected a challenge_nonce not accepted before, found {nonce!r} again",
    )


class MemoryReplayFence:
    """An in-process fence, safe across threads. Forgets everything when the process ends."""

    __slots__ = ("_lock", "_seen")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}

    def check_and_record(self, nonce: str, *, expires_at: int) -> None:
        """Accept ``nonce`` once. Raises ``EcpaError`` (``REPLAYED_NONCE``) on a repeat."""
        with self._lock:
            if nonce in self._seen:
                raise replayed(nonce)
            self._seen[nonce] = expires_at

    def purge(self, *, now: int, clock_skew: int = 0) -> int:
        """Forget nonces of statements expired before ``now - clock_skew``; return how many.

        ``verify`` refuses such statements as expired at that ``now``, so they cannot be
        replayed into acceptance; keep ``now`` monotonic when you purge.
        """
        with self._lock:
            old = [n for n, exp in self._seen.items() if exp < now - clock_skew]
            for nonce in old:
                del self._seen[nonce]
            return len(old)

    def __contains__(self, nonce: object) -> bool:
        with self._lock:
            return nonce in self._seen

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)
