"""The pre-contract API: ``pick_victim(running, policy, kv_utilization, now_s)``.

Older hosts call a function with the running requests instead of a context object. This
module only adapts that shape: it builds a :class:`~dla_plugin.contract.PreemptionContext`
(without a builtin victim id, so the engine's rule for ``policy`` finds it) and delegates to
:meth:`DlaVictimSelector.select_victim`, the one implementation of the victim rule.
"""

from __future__ import annotations

from collections.abc import Iterable

from dla_plugin.contract import PreemptionContext
from dla_plugin.selector import DlaVictimSelector

__all__ = ["pick_victim"]

_shared: DlaVictimSelector | None = None


def _shared_selector() -> DlaVictimSelector:
    """The process's legacy selector, made on first use (never at import)."""
    global _shared  # one selector per process, created lazily
    if _shared is None:
        _shared = DlaVictimSelector()
    return _shared


def pick_victim(
    running: Iterable[object],
    policy: str,
    kv_utilization: float,
    now_s: float,
    *,
    selector: DlaVictimSelector | None = None,
) -> str | None:
    """The request id to preempt among ``running``, or ``None`` to keep the engine's victim.

    Args:
        running: candidate-like objects (see :mod:`dla_plugin.selector`), in running order.
        policy: the engine's scheduling policy, ``"fcfs"`` or ``"priority"``.
        kv_utilization: the KV cache usage, passed on as ``kv_cache_usage``.
        now_s: the current time in seconds, passed on as ``now``.
        selector: the policy instance to use; by default one shared by the process, which
            reports to the process observer.

    Never raises: inputs that do not even make a context (``running`` not iterable) are
    handed to the selector as no context at all, which abstains and counts a failure.
    """
    chosen = selector if selector is not None else _shared_selector()
    try:
        context = PreemptionContext(
            candidates=tuple(running),  # type: ignore[arg-type] # the rule checks each one
            scheduling_policy=policy,
            requesting_request_id=None,
            kv_cache_usage=kv_utilization,
            now=now_s,
        )
    except Exception:
        return chosen.select_victim(None)
    return chosen.select_victim(context)
