"""A block-pool engine of continuous batching (DLA.md "Value check"), small and exact.

Each step: admit waiting requests first come first served while their blocks fit (with the
admission reserve when enabled), then every running request computes one token: its prefill
and first token in the step it is admitted, one output token per step after that. A request
that needs a new block when none is free makes the engine preempt a victim chosen by the
:class:`~dla_plugin.host.PreemptionController`, in recompute mode: the victim's blocks are
freed, its computed tokens are wasted (counted) and redone when it is admitted again, at the
head of the queue. Time is the step number.

The driver (``python -m dla_plugin.drive``) runs this engine with the plugin inside a real
process; the simulator builds on it. One rule for the victim: the policy object the plugin
ships, called through the host controller.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from dla_plugin.admission import blocks_needed
from dla_plugin.contract import Candidate, PreemptionContext
from dla_plugin.host import PreemptionController

__all__ = ["BlockPoolEngine", "EngineStats", "SimRequest", "blocks_for"]


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks that hold ``tokens`` tokens: ``ceil(tokens / block_size)``."""
    return -(-tokens // block_size)


@dataclass(eq=False)
class SimRequest:
    """A request in the engine: what the client sent, and where it stands now."""

    request_id: str
    arrival_time: float
    num_prompt_tokens: int
    output_length: int  # the true length, known only to the engine
    predicted_length: int | None = None
    priority: int = 0
    max_tokens: int = 1 << 20
    num_output_tokens: int = 0
    num_computed_tokens: int = 0
    num_preemptions: int = 0
    blocks: int = 0
    finished_at: float | None = None

    def candidate(self) -> Candidate:
        """The host-contract view the policy sees (without the true output length)."""
        return Candidate(
            request_id=self.request_id,
            priority=self.priority,
            arrival_time=self.arrival_time,
            num_prompt_tokens=self.num_prompt_tokens,
            num_output_tokens=self.num_output_tokens,
            num_computed_tokens=self.num_computed_tokens,
            num_preemptions=self.num_preemptions,
            max_tokens=self.max_tokens,
            predicted_length=self.predicted_length,
        )


@dataclass
class EngineStats:
    """Counts of what the engine did."""

    steps: int = 0
    admitted: int = 0
    preemptions: int = 0
    wasted_tokens: int = 0  # computed tokens thrown away by preemptions, later redone
    wasted_output_tokens: int = 0  # the part of them that was output (decode), not prompt
    computed_tokens: int = 0
    output_tokens: int = 0
    finished: list[SimRequest] = field(default_factory=list)


class BlockPoolEngine:
    """Continuous batching over ``total_blocks`` blocks of ``block_size`` tokens."""

    def __init__(
        self,
        controller: PreemptionController,
        *,
        total_blocks: int,
        block_size: int = 16,
        admission_reserve: bool = False,
        scheduling_policy: str = "fcfs",
    ) -> None:
        if total_blocks < 1 or block_size < 1:
            raise ValueError(
                f"expected total_blocks and block_size >= 1, found {total_blocks}, {block_size}"
            )
        if scheduling_policy not in ("fcfs", "priority"):
            raise ValueError(f"expected 'fcfs' or 'priority', found {scheduling_policy!r}")
        self.controller = controller
        self.total_blocks = total_blocks
        self.block_size = block_size
        self.admission_reserve = admission_reserve
        self.scheduling_policy = scheduling_policy
        self.free_blocks = total_blocks
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.stats = EngineStats()

    @property
    def now(self) -> float:
        """The current time: the number of steps taken."""
        return float(self.stats.steps)

    def add(self, request: SimRequest) -> None:
        """Queue a new request.

        Raises:
            ValueError: when it could never fit the pool, even alone.
        """
        total = request.num_prompt_tokens + request.output_length
        if request.num_prompt_tokens < 1 or request.output_length < 1:
            raise ValueError(f"{request.request_id}: expected prompt and output of >= 1 token")
        if blocks_for(total, self.block_size) > self.total_blocks:
            raise ValueError(
                f"{request.request_id}: expected at most {self.total_blocks * self.block_size} "
                f"tokens (the whole pool), found {total}"
            )
        self.waiting.append(request)

    def _admission_blocks(self, req: SimRequest) -> tuple[int, int]:
        """(blocks to allocate now, free blocks required to admit)."""
        now = blocks_for(req.num_prompt_tokens + req.num_output_tokens + 1, self.block_size)
        required = now
        if self.admission_reserve and req.predicted_length is not None:
            # DLA.md "Admission reserve", as the plugin ships it (one implementation).
            reserve = blocks_needed(req, self.block_size)
            # A reserve beyond the pool would never be met: then the pool must be empty.
            required = max(now, min(reserve, self.total_blocks))
        return now, required

    def _admit(self) -> None:
        while self.waiting:
            req = self.waiting[0]
            allocate, required = self._admission_blocks(req)
            if self.free_blocks < required:
                return  # first come, first served: the head waits, and so do the others
            self.waiting.popleft()
            self.free_blocks -= allocate
            req.blocks = allocate
            # Prefill (again, after a preemption): the prompt and the output so far.
            req.num_computed_tokens = req.num_prompt_tokens + req.num_output_tokens
            self.stats.computed_tokens += req.num_computed_tokens
            self.running.append(req)
            self.stats.admitted += 1

    def _preempt(self, victim: SimRequest) -> None:
        self.running.remove(victim)
        self.free_blocks += victim.blocks
        victim.blocks = 0
        self.stats.wasted_tokens += victim.num_computed_tokens
        if victim.num_computed_tokens:
            self.stats.wasted_output_tokens += victim.num_output_tokens
        victim.num_computed_tokens = 0
        victim.num_preemptions += 1
        self.stats.preemptions += 1
        self.waiting.appendleft(victim)

    def _victim(self, requesting: SimRequest) -> SimRequest:
        context = PreemptionContext(
            candidates=tuple(r.candidate() for r in self.running),
            scheduling_policy=self.scheduling_policy,
            requesting_request_id=requesting.request_id,
            kv_cache_usage=1.0 - self.free_blocks / self.total_blocks,
            now=self.now,
        )
        victim_id = self.controller.choose(context)
        return next(r for r in self.running if r.request_id == victim_id)

    def _grow(self, req: SimRequest) -> bool:
        """Give ``req`` room for one more token, preempting as needed; False if it was."""
        need = blocks_for(req.num_computed_tokens + 1, self.block_size)
        while req.blocks < need:
            if self.free_blocks > 0:
                self.free_blocks -= 1
                req.blocks += 1
                continue
            victim = self._victim(req)
            self._preempt(victim)
            if victim is req:
                return False
        return True

    def step(self) -> None:
        """One engine step: admit, then one token for every running request."""
        self._admit()
        for req in list(self.running):
            if req.blocks == 0:  # preempted earlier in this step (a running request has blocks)
                continue
            if not self._grow(req):
                continue
            req.num_computed_tokens += 1
            req.num_output_tokens += 1
            self.stats.computed_tokens += 1
            self.stats.output_tokens += 1
            if req.num_output_tokens >= req.output_length:
                self.running.remove(req)
                self.free_blocks += req.blocks
                req.blocks = 0
                req.finished_at = self.now + 1
                self.stats.finished.append(req)
        self.stats.steps += 1

    def skip_to(self, step: int) -> None:
        """Jump an idle engine's clock forward to ``step`` (nothing happens in between).

        Raises:
            ValueError: when the engine is not idle or ``step`` is in the past.
        """
        if not self.idle or step < self.stats.steps:
            raise ValueError(f"expected an idle engine and a step >= {self.stats.steps}")
        self.stats.steps = step

    @property
    def idle(self) -> bool:
        """True when nothing is running or waiting."""
        return not self.running and not self.waiting
