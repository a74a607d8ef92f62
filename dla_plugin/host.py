"""A host controller that calls a victim-selection policy the way vLLM-HUST's preemption
controller does (DLA.md "Host contract"), for tests, the driver and the simulator.

The engine always has a victim of its own (the builtin one). It asks the policy; on ``None``
(abstention) the builtin victim stands. An exception, or an id that is not a candidate,
disables the policy for the rest of the process: from then on the builtin victim is used
without asking, and the event is counted with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from dla_plugin.contract import Candidate, PreemptionContext

__all__ = ["ControllerStats", "PreemptionController", "VictimPolicy", "builtin_victim"]


class VictimPolicy(Protocol):
    """What the host requires of a policy: one method."""

    def select_victim(self, context: PreemptionContext) -> str | None: ...


def builtin_victim(candidates: tuple[Candidate, ...], scheduling_policy: str) -> Candidate:
    """The engine's own victim: the last running request under FCFS, the one with the largest
    ``(priority, arrival_time)`` under priority scheduling (on an exact tie the first in
    running order, as the engine's ``max()`` picks it).

    Raises:
        ValueError: when there is no candidate (the engine never asks then).
    """
    if not candidates:
        raise ValueError("expected at least one running request, found none")
    if scheduling_policy == "priority":
        best = candidates[0]
        for cand in candidates[1:]:
            if (cand.priority, cand.arrival_time) > (best.priority, best.arrival_time):
                best = cand
        return best
    return candidates[-1]


@dataclass
class ControllerStats:
    """What the controller saw: who chose each victim, and why the policy was disabled."""

    calls: int = 0
    policy_choices: int = 0
    abstentions: int = 0
    builtin_only: int = 0  # calls after the policy was disabled (or with no policy)
    disabled_reason: str | None = None
    errors: list[str] = field(default_factory=list)


class PreemptionController:
    """Chooses a victim for the engine, asking ``policy`` first (``None``: builtin only)."""

    def __init__(self, policy: VictimPolicy | None) -> None:
        self.policy = policy
        self.stats = ControllerStats()

    @property
    def disabled(self) -> bool:
        """True once the policy misbehaved; the builtin victim is then used for good."""
        return self.stats.disabled_reason is not None

    def _disable(self, reason: str) -> None:
        self.stats.disabled_reason = reason
        self.stats.errors.append(reason)

    def choose(self, context: PreemptionContext) -> str:
        """The victim's request id for ``context``: the policy's choice, or the builtin one.

        ``context.builtin_victim_id`` is filled in (as the host does) before the policy is
        asked. Never raises for a policy's misbehaviour; raises ``ValueError`` only when
        ``context`` has no candidates.
        """
        self.stats.calls += 1
        builtin = builtin_victim(context.candidates, context.scheduling_policy).request_id
        if self.policy is None or self.disabled:
            self.stats.builtin_only += 1
            return builtin
        if context.builtin_victim_id is None:
            context = replace(context, builtin_victim_id=builtin)
        try:
            choice = self.policy.select_victim(context)
        except Exception as exc:  # the host's rule: a raising policy is disabled
            self._disable(f"policy raised {type(exc).__name__}: {exc}")
            return builtin
        if choice is None:
            self.stats.abstentions += 1
            return builtin
        if not any(c.request_id == choice for c in context.candidates):
            self._disable(f"policy returned {choice!r}, not a candidate")
            return builtin
        self.stats.policy_choices += 1
        return choice
