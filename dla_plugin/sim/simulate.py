"""The DLA value simulator (DLA.md "Value check"): does DLA pay off, on this workload, with
this prediction quality?

It replays a trace of jobs (:mod:`dla_plugin.sim.workload`) through the block-pool engine
(:mod:`dla_plugin.sim.engine`) under three policies, each the object the plugin ships, called
through the host controller as the engine calls it (there is no second implementation of
the rule):

- ``lifo``: no policy; the engine's builtin victim (the last running request, FCFS);
- ``dla``: the DLA victim selector;
- ``dla+reserve``: the DLA victim selector and the admission reserve.

Time: a step lasts what the configured step model (:mod:`dla_plugin.sim.steptime`; by default
the profiled A100 / Llama-2-7B model) says for what it computed; a job arriving at ``t``
seconds joins the queue at the first step that starts at or after ``t`` (an idle engine waits
for it). Runs are deterministic for a trace and its predictions.
Run ``python -m dla_plugin.sim --help``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dla_plugin.selector import DlaVictimSelector
from dla_plugin.sim.engine import BlockPoolEngine, SimRequest
from dla_plugin.sim.host.preemption import PreemptionController, VictimPolicy
from dla_plugin.sim.steptime import ProfiledStep, StepModel
from dla_plugin.sim.workload import Job

__all__ = ["POLICIES", "RunResult", "SimConfig", "percentile", "simulate"]

POLICIES = ("lifo", "dla", "dla+reserve")


@dataclass(frozen=True)
class SimConfig:
    """The engine a trace runs on."""

    total_blocks: int = 2048  # 32,768 tokens of KV cache at 16 tokens a block
    block_size: int = 16
    step_model: StepModel = field(default_factory=ProfiledStep)


@dataclass(frozen=True)
class RunResult:
    """One policy's run of one trace (times in seconds)."""

    policy: str
    jct_s: tuple[float, ...]  # per job, in trace order: finish time - arrival time
    queue_s: tuple[float, ...]  # per job: first admission - arrival (its wait in the queue)
    finish_s: tuple[float, ...]  # per job: when it finished (for exact comparisons)
    preemptions: tuple[int, ...]  # per job
    wasted_tokens: int  # computed tokens thrown away by preemptions (recomputed later)
    wasted_output_tokens: int  # the output (decode) part of them
    computed_tokens: int
    output_tokens: int
    wasted_s: float  # step time spent recomputing preempted requests
    busy_s: float  # step time, summed
    makespan_s: float  # first arrival to last finish
    steps: int
    decodes: int  # requests that decoded a token, summed over steps
    reserve_bypasses: int  # heads admitted by their prompt alone on an idle engine
    reserve_blocked_s: float  # time a head waited only because of its reserve
    reserve_blocked_wait_s: float  # queue wait of the requests behind it meanwhile

    @property
    def total_preemptions(self) -> int:
        """Preemptions over the whole run."""
        return sum(self.preemptions)

    @property
    def throughput(self) -> float:
        """Output tokens per second of the run."""
        return self.output_tokens / self.makespan_s if self.makespan_s > 0 else 0.0

    @property
    def mean_decode_batch(self) -> float:
        """Requests decoding a token in a step, on average over the steps."""
        return self.decodes / self.steps if self.steps else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0 < q <= 100) of ``values``.

    Raises:
        ValueError: for no values or ``q`` outside (0, 100].
    """
    if not values or not 0 < q <= 100:
        raise ValueError(f"expected values and 0 < q <= 100, found {len(values)} values, q={q}")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _policy(name: str) -> tuple[VictimPolicy | None, bool]:
    if name == "lifo":
        return None, False
    if name == "dla":
        return DlaVictimSelector(observer=None), False
    if name == "dla+reserve":
        return DlaVictimSelector(observer=None), True
    raise ValueError(f"expected a policy in {POLICIES}, found {name!r}")


def simulate(
    jobs: Sequence[Job],
    predictions: Sequence[int | None],
    policy: str,
    config: SimConfig = SimConfig(),
    *,
    progress: Callable[[int], None] | None = None,
    batch_decodes: bool = True,
) -> RunResult:
    """Run ``jobs`` (with ``predictions``, one per job) under ``policy`` until every job
    has finished. ``progress`` is called with the number of finished jobs now and then.
    ``batch_decodes`` takes runs of decode-only steps at once
    (:meth:`~dla_plugin.sim.engine.BlockPoolEngine.decode_steps`; the same result, faster).

    Raises:
        ValueError: for an unknown policy, predictions of another length, or a job that
            cannot fit the pool even alone.
    """
    if len(predictions) != len(jobs):
        raise ValueError(f"expected {len(jobs)} predictions, found {len(predictions)}")
    selector, reserve = _policy(policy)
    engine = BlockPoolEngine(
        PreemptionController(selector),
        total_blocks=config.total_blocks,
        block_size=config.block_size,
        admission_reserve=reserve,
        step_model=config.step_model,
    )
    requests = [
        SimRequest(f"job-{i}", float(i), job.prompt_tokens, job.output_tokens, predicted)
        for i, (job, predicted) in enumerate(zip(jobs, predictions, strict=True))
    ]
    # arrival_time is the job's index: the engine orders ties by it, and it is unique.
    arrivals = [job.arrival_s for job in jobs]
    order = sorted(range(len(jobs)), key=lambda i: (arrivals[i], i))
    finished = engine.stats.finished
    nxt = 0
    while nxt < len(order) or not engine.idle:
        if engine.idle and arrivals[order[nxt]] > engine.now:
            engine.wait_until(arrivals[order[nxt]])
        while nxt < len(order) and arrivals[order[nxt]] <= engine.now:
            engine.add(requests[order[nxt]])
            nxt += 1
        until = arrivals[order[nxt]] if nxt < len(order) else math.inf
        before = engine.stats.steps
        if not (batch_decodes and engine.decode_steps(until)):
            engine.step()
        if progress is not None and engine.stats.steps // 2000 != before // 2000:
            progress(len(finished))
    if progress is not None:
        progress(len(finished))
    finish = [req.finished_at for req in requests]
    admitted = [req.first_admitted_at for req in requests]
    # The loop runs until every job finished (so each was admitted).
    assert all(f is not None for f in finish)
    assert all(a is not None for a in admitted)
    ends = [f or 0.0 for f in finish]
    stats = engine.stats
    return RunResult(
        policy=policy,
        jct_s=tuple(end - arrival for end, arrival in zip(ends, arrivals, strict=True)),
        queue_s=tuple((a or 0.0) - arrival for a, arrival in zip(admitted, arrivals, strict=True)),
        finish_s=tuple(ends),
        preemptions=tuple(req.num_preemptions for req in requests),
        wasted_tokens=stats.wasted_tokens,
        wasted_output_tokens=stats.wasted_output_tokens,
        computed_tokens=stats.computed_tokens,
        output_tokens=stats.output_tokens,
        wasted_s=stats.wasted_s,
        busy_s=stats.busy_s,
        makespan_s=max(ends, default=0.0) - min(arrivals, default=0.0),
        steps=stats.steps,
        decodes=stats.decodes,
        reserve_bypasses=stats.reserve_bypasses,
        reserve_blocked_s=stats.reserve_blocked_s,
        reserve_blocked_wait_s=stats.reserve_blocked_wait_s,
    )
