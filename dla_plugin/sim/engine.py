"""A block-pool engine of continuous batching (DLA.md "Value check"), small and exact.

Each step: admit waiting requests first come first served while their blocks fit (with the
admission reserve when enabled), then every running request computes one token: its prefill
and first token in the step it is admitted, one output token per step after that. A request
that needs a new block when none is free makes the engine preempt a victim chosen through a
host path (:class:`~dla_plugin.sim.host.preemption.HostPath`: the typed preemption controller of
:mod:`dla_plugin.sim.host.preemption`, or the ``VictimSelector`` scheduler of
:mod:`dla_plugin.sim.host.victim_selector`), in recompute mode: the victim's blocks are
freed, its computed tokens are wasted (counted) and redone when it is admitted again, at the
head of the queue.

Time: a step lasts what its :class:`~dla_plugin.sim.steptime.StepModel` says for what it
computed (the prefills of the requests it admitted, recomputations included, and the decode
batch with its KV cache); the clock (:attr:`BlockPoolEngine.now`, seconds) advances by it.
The part of a step's time spent recomputing (the step with the recomputed prefills minus the
step without them) is counted as wasted GPU time.

The reserve never stalls the engine: when nothing is running and the head of the queue
cannot be admitted under its reserve, it is admitted by its prompt alone (DLA.md's reserve
with one exception, so that the engine never idles with work waiting). While the head waits
only because of its reserve (its prompt would fit), the engine counts that time and the
queue wait of the requests behind it: head-of-line blocking, measured.

The driver (``python -m dla_plugin.drive``) runs this engine with the plugin inside a real
process; the simulator builds on it. One rule for the victim: the policy object the plugin
ships, called through the host's own path.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from dla_plugin.admission import blocks_needed
from dla_plugin.sim.host.preemption import HostPath
from dla_plugin.sim.steptime import ConstantStep, StepModel

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
    first_admitted_at: float | None = None  # clock (s) at the start of its first step
    finished_at: float | None = None  # clock (s) at the end of the step of its last token
    finished_step: int | None = None  # the number of that step, from 1
    prefilled_in: int = -1  # the step that last prefilled it


@dataclass
class EngineStats:
    """Counts of what the engine did (times in seconds of the engine's clock)."""

    steps: int = 0
    admitted: int = 0
    preemptions: int = 0
    wasted_tokens: int = 0  # computed tokens thrown away by preemptions, later redone
    wasted_output_tokens: int = 0  # the part of them that was output (decode), not prompt
    computed_tokens: int = 0
    output_tokens: int = 0
    busy_s: float = 0.0  # the steps' durations, summed
    wasted_s: float = 0.0  # the part of them spent recomputing preempted requests
    decodes: int = 0  # requests that decoded a token, summed over steps
    reserve_bypasses: int = 0  # heads admitted by their prompt alone on an idle engine
    reserve_blocked_s: float = 0.0  # time the head waited only because of its reserve
    reserve_blocked_wait_s: float = 0.0  # queue wait of the requests behind it meanwhile
    finished: list[SimRequest] = field(default_factory=list)


class BlockPoolEngine:
    """Continuous batching over ``total_blocks`` blocks of ``block_size`` tokens, timed by
    ``step_model`` (default: a constant 25 ms step)."""

    def __init__(
        self,
        controller: HostPath,
        *,
        total_blocks: int,
        block_size: int = 16,
        admission_reserve: bool = False,
        scheduling_policy: str = "fcfs",
        step_model: StepModel | None = None,
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
        self.step_model: StepModel = step_model or ConstantStep(0.025)
        self.free_blocks = total_blocks
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.stats = EngineStats()
        self.clock_s = 0.0
        # What the step being taken computed (filled by _admit and step).
        self._prefills: list[int] = []
        self._recomputed: list[int] = []
        self._blocked_behind = -1  # requests behind a head the reserve blocks; -1: none

    @property
    def now(self) -> float:
        """The current time in seconds: the start of the next step."""
        return self.clock_s

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
            required = max(now, blocks_needed(req, self.block_size))
        return now, required

    def _admit(self) -> None:
        while self.waiting:
            req = self.waiting[0]
            allocate, required = self._admission_blocks(req)
            if self.free_blocks < required:
                if self.running or self.free_blocks < allocate:
                    # First come, first served: the head waits, and so do the others.
                    if self.free_blocks >= allocate:  # its prompt fits: the reserve blocks
                        self._blocked_behind = len(self.waiting) - 1
                    return
                # Nothing runs: the reserve must not stall the engine; the prompt fits.
                self.stats.reserve_bypasses += 1
            self.waiting.popleft()
            self.free_blocks -= allocate
            req.blocks = allocate
            # Prefill (again, after a preemption): the prompt and the output so far.
            req.num_computed_tokens = req.num_prompt_tokens + req.num_output_tokens
            self.stats.computed_tokens += req.num_computed_tokens
            self._prefills.append(req.num_computed_tokens)
            if req.num_preemptions:
                self._recomputed.append(req.num_computed_tokens)
            req.prefilled_in = self.stats.steps
            if req.first_admitted_at is None:
                req.first_admitted_at = self.clock_s
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
        victim: SimRequest = self.controller.victim(
            self.running,
            requesting,
            self.scheduling_policy,
            1.0 - self.free_blocks / self.total_blocks,
            self.clock_s,
        )
        return victim

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
        """One engine step: admit, then one token for every running request; the clock
        advances by the step's duration."""
        self._prefills.clear()
        self._recomputed.clear()
        self._blocked_behind = -1
        preemptions = self.stats.preemptions
        self._admit()
        step = self.stats.steps
        size = self.block_size
        decodes = decode_kv = produced = 0
        done: list[SimRequest] = []
        for req in list(self.running):
            blocks = req.blocks
            if blocks == 0:  # preempted earlier in this step (a running request has blocks)
                continue
            computed = req.num_computed_tokens
            # A new block is needed when the next token does not fit the ones it holds.
            if computed >= blocks * size and not self._grow(req):
                continue
            if req.prefilled_in != step:  # its prefill already gave it this step's token
                decodes += 1
                decode_kv += computed
            req.num_computed_tokens = computed + 1
            req.num_output_tokens += 1
            produced += 1
            if req.num_output_tokens >= req.output_length:
                self.running.remove(req)
                self.free_blocks += req.blocks
                req.blocks = 0
                done.append(req)
        self.stats.computed_tokens += produced
        self.stats.output_tokens += produced
        model = self.step_model
        seconds = model.seconds(self._prefills, decodes, decode_kv)
        if self._recomputed:
            fresh = list(self._prefills)
            for tokens in self._recomputed:
                fresh.remove(tokens)
            self.stats.wasted_s += seconds - model.seconds(fresh, decodes, decode_kv)
        if self._blocked_behind >= 0:
            self.stats.reserve_blocked_s += seconds
            self.stats.reserve_blocked_wait_s += seconds * self._blocked_behind
        self.stats.busy_s += seconds
        self.stats.decodes += decodes
        self.clock_s += seconds
        self.stats.steps += 1
        for req in done:
            req.finished_at = self.clock_s
            req.finished_step = self.stats.steps
            self.stats.finished.append(req)
        self.controller.end_step(self.stats.preemptions != preemptions)

    def _demand(self, steps: int) -> int:
        """Blocks the running requests allocate over ``steps`` more decode steps."""
        size, total = self.block_size, 0
        for req in self.running:
            first = req.blocks * size - req.num_computed_tokens + 1  # the step of its next block
            if steps >= first:
                total += 1 + (steps - first) // size
        return total

    def _last_within(self, steps: int, limit: int) -> int:
        """The most steps (<= ``steps``) whose block demand stays within ``limit``."""
        low, high = 0, steps
        while low < high:
            mid = (low + high + 1) // 2
            if self._demand(mid) <= limit:
                low = mid
            else:
                high = mid - 1
        return low

    def decode_steps(self, until: float) -> int:
        """Take, at once, the steps that only decode: while nothing is admitted, finishes,
        is preempted or changes how the queue's head waits, and each step starts before
        ``until`` (the next arrival). The state, the counts and the clock end exactly as
        :meth:`step` would leave them, step by step (the same durations, added in the same
        order). Returns the steps taken; 0 when the next step is not such a step.
        """
        running = self.running
        if not running:
            return 0
        head_blocked = -1  # the requests behind a head its reserve blocks; -1: none
        class_limit = self.free_blocks
        if self.waiting:
            allocate, required = self._admission_blocks(self.waiting[0])
            if self.free_blocks >= required:
                return 0  # the next step admits
            if self.free_blocks >= allocate:
                head_blocked = len(self.waiting) - 1
                # Stay within the steps at whose start the head's prompt still fits.
                class_limit = self.free_blocks - allocate
        steps = min(r.output_length - r.num_output_tokens for r in running) - 1
        if steps <= 0:
            return 0
        if self._demand(steps) > self.free_blocks:
            steps = self._last_within(steps, self.free_blocks)  # no step runs out of blocks
        if head_blocked >= 0 and self._demand(steps - 1) > class_limit:
            steps = min(steps, self._last_within(steps, class_limit) + 1)
        batch = len(running)
        kv = sum(r.num_computed_tokens for r in running)
        stats, clock = self.stats, self.clock_s
        taken = 0
        for seconds in self.step_model.decode_durations(batch, kv, steps):
            if clock >= until:
                break
            if head_blocked >= 0:
                stats.reserve_blocked_s += seconds
                stats.reserve_blocked_wait_s += seconds * head_blocked
            stats.busy_s += seconds
            clock += seconds
            taken += 1
        if not taken:
            return 0
        self.free_blocks -= self._demand(taken)
        size = self.block_size
        for req in running:
            computed = req.num_computed_tokens + taken
            req.num_computed_tokens = computed
            req.num_output_tokens += taken
            req.blocks = max(req.blocks, -(-computed // size))
        stats.computed_tokens += batch * taken
        stats.output_tokens += batch * taken
        stats.decodes += batch * taken
        stats.steps += taken
        self.clock_s = clock
        return taken

    def wait_until(self, seconds: float) -> None:
        """Move an idle engine's clock forward to ``seconds`` (nothing happens meanwhile).

        Raises:
            ValueError: when the engine is not idle or ``seconds`` is in the past.
        """
        if not self.idle or seconds < self.clock_s:
            raise ValueError(f"expected an idle engine and a time >= {self.clock_s}")
        self.clock_s = seconds

    @property
    def idle(self) -> bool:
        """True when nothing is running or waiting."""
        return not self.running and not self.waiting
