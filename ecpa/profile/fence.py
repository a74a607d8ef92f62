"""What ``verify`` needs of a replay fence (PROFILE §3 step 25), and the in-memory fence.

A fence is consulted last, after every other check has passed, and records the nonce in the
same step that accepts it, so a statement refused for any other reason never consumes its
nonce. Any object with ``check_and_record`` can serve as a fence; the durable ones (SQLite)
live in :mod:`ecpa.runtime.stores.replay`, beside the files they keep.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Protocol, runtime_checkable

from ecpa.errors import EcpaError, ErrorCode

__all__ = [
    "MemoryReplayFence",
    "ReplayFence",
    "fingerprint",
    "record_nonce",
    "replayed",
]


@runtime_checkable
class ReplayFence(Protocol):
    """What ``verify`` needs of a fence."""

    def check_and_record(self, nonce: str, *, expires_at: int) -> None:
        """Record ``nonce``, atomically; raise ``EcpaError`` (``REPLAYED_NONCE``) if seen,
        ``ECPA_REPLAY_STORE`` when the fence's store cannot be used."""
        ...


def record_nonce(fence: ReplayFence, nonce: str, *, expires_at: int, fingerprint: str) -> None:
    """Pass ``nonce`` through ``fence``, letting a fence that keeps fingerprints accept the
    very same record again (same nonce, same ``fingerprint`` of its bytes): re-reading a log
    is not a replay; another record with an accepted nonce still is. Fences that do not keep
    fingerprints (third-party ones) get the strict call: any repeat is a replay.

    Raises:
        EcpaError: as the fence's ``check_and_record``.
    """
    keeps = getattr(fence, "keeps_fingerprints", False) is True
    if keeps:
        fence.check_and_record(nonce, expires_at=expires_at, fingerprint=fingerprint)  # type: ignore[call-arg]
    else:
        fence.check_and_record(nonce, expires_at=expires_at)


def fingerprint(payload: bytes, detached_jws: str) -> str:
    """The fingerprint of a record's verified bytes: SHA-256 of ``payload.detached_jws``."""
    return hashlib.sha256(payload + b"." + detached_jws.encode("ascii", "replace")).hexdigest()


def replayed(nonce: str) -> EcpaError:
    """The error a fence raises for a nonce it has already accepted."""
    return EcpaError(
        ErrorCode.REPLAYED_NONCE,
        f"expected a challenge_nonce not accepted before, found {nonce!r} again",
    )


class MemoryReplayFence:
    """An in-process fence, safe across threads. Forgets everything when the process ends."""

    __slots__ = ("_fingerprints", "_lock", "_seen")
    #: :func:`record_nonce` may pass ``fingerprint``.
    keeps_fingerprints = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self._fingerprints: dict[str, str] = {}

    def check_and_record(
        self, nonce: str, *, expires_at: int, fingerprint: str | None = None
    ) -> None:
        """Accept ``nonce`` once. With a ``fingerprint``, the same nonce with the same
        fingerprint (the very same record read again) is accepted again, silently.

        Raises:
            EcpaError: ``REPLAYED_NONCE`` on a repeat.
        """
        with self._lock:
            if nonce in self._seen:
                if fingerprint is None or self._fingerprints.get(nonce) != fingerprint:
                    raise replayed(nonce)
                return
            self._seen[nonce] = expires_at
            if fingerprint is not None:
                self._fingerprints[nonce] = fingerprint

    def purge(self, *, now: int, clock_skew: int = 0) -> int:
        """Forget nonces of statements expired before ``now - clock_skew``; return how many.

        ``verify`` refuses such statements as expired at that ``now``, so they cannot be
        replayed into acceptance; keep ``now`` monotonic when you purge.
        """
        with self._lock:
            old = [n for n, exp in self._seen.items() if exp < now - clock_skew]
            for nonce in old:
                del self._seen[nonce]
                self._fingerprints.pop(nonce, None)
            return len(old)

    def __contains__(self, nonce: object) -> bool:
        with self._lock:
            return nonce in self._seen

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)
