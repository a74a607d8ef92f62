"""The host contract's shapes (DLA.md "Host contract"): vLLM-HUST typed preemption policy, API 1.0.

These frozen dataclasses are what tests, the driver and the simulator build. The policy never
requires them: it reads attributes, so any object with these attributes will do (the engine's
own request objects, for instance). vLLM itself is not a dependency.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Candidate", "PreemptionContext", "WaitingRequest"]


@dataclass(frozen=True)
class Candidate:
    """A running request the engine may preempt."""

    request_id: str
    priority: int
    arrival_time: float
    num_prompt_tokens: int
    num_output_tokens: int
    num_computed_tokens: int
    num_preemptions: int
    max_tokens: int
    #: Predicted output length, already including its safety margin; None = no prediction.
    predicted_length: int | None = None


@dataclass(frozen=True)
class PreemptionContext:
    """What the engine passes to ``select_victim`` when the KV block pool is full."""

    candidates: tuple[Candidate, ...]  # running requests, in running order
    scheduling_policy: str  # "fcfs" | "priority"
    requesting_request_id: str | None
    kv_cache_usage: float
    now: float
    builtin_victim_id: str | None = None


@dataclass(frozen=True)
class WaitingRequest:
    """A request waiting for admission (the admission reserve reads these attributes)."""

    request_id: str
    num_prompt_tokens: int
    predicted_length: int | None = None
    arrival_time: float = 0.0
    priority: int = 0
    max_tokens: int = field(default=1 << 30)
