"""The DLA value simulator (DLA.md "Value check"): does DLA pay off, on this workload, with
this prediction quality?

It replays a trace of jobs (:mod:`dla_plugin.sim.workload`) through the block-pool engine
(:mod:`dla_plugin.sim.engine`) under three policies, each the object the plugin ships, called
through the host controller as the engine calls it (there is no second implementation of
the rule):

- ``lifo``: no policy; the engine's builtin victim (the last running request, FCFS);
- ``dla``: the DLA victim selector;
- ``dla+reserve``: the DLA victim selector and the admission reserve.

Time: one engine step computes one token for every running request and lasts ``step_s``
seconds (25 ms by default); a job arriving at ``t`` seconds joins the queue at step
``floor(t / step_s)``. Runs are deterministic for a trace and its predictions.
Run ``python -m dla_plugin.sim --help``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dla_plugin.host import PreemptionController, VictimPolicy
from dla_plugin.selector import DlaVictimSelector
from dla_plugin.sim.engine import BlockPoolEngine, SimRequest
from dla_plugin.sim.workload import Job

__all__ = ["POLICIES", "RunResult", "SimConfig", "percentile", "simulate"]

POLICIES = ("lifo", "dla", "dla+reserve")


@dataclass(frozen=True)
class SimConfig:
    """The engine a trace runs on."""

    total_blocks: int = 2048  # 32,768 tokens of KV cache at 16 tokens a block
    block_size: int = 16
    step_s: float = 0.025


@dataclass(frozen=True)
class RunResult:
    """One policy's run of one trace."""

    policy: str
    jct_s: tuple[float, ...]  # per job, in trace order: finish time - arrival time
    finish_steps: tuple[int, ...]  # per job: the step it finished (for exact comparisons)
    preemptions: tuple[int, ...]  # per job
    wasted_tokens: int  # computed tokens thrown away by preemptions (recomputed later)
    wasted_output_tokens: int  # the output (decode) part of them
    computed_tokens: int
    output_tokens: int
    makespan_s: float  # first arrival to last finish
    steps: int

    @property
    def total_preemptions(self) -> int:
        """Preemptions over the whole run."""
        return sum(self.preemptions)

    @property
    def throughput(self) -> float:
        """Output tokens per second of the run."""
        return self.output_tokens / self.makespan_s if self.makespan_s > 0 else 0.0


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
) -> RunResult:
    """Run ``jobs`` (with ``predictions``, one per job) under ``policy`` until every job
    has finished. ``progress`` is called with the number of finished jobs now and then.

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
    )
    requests = [
        SimRequest(f"job-{i}", float(i), job.prompt_tokens, job.output_tokens, predicted)
        for i, (job, predicted) in enumerate(zip(jobs, predictions, strict=True))
    ]
    # arrival_time is the job's index: the engine orders ties by it, and it is unique.
    arrivals = [math.floor(job.arrival_s / config.step_s) for job in jobs]
    order = sorted(range(len(jobs)), key=lambda i: (arrivals[i], i))
    finished = engine.stats.finished
    nxt = 0
    while nxt < len(order) or not engine.idle:
        if engine.idle and nxt < len(order):
            engine.skip_to(max(engine.stats.steps, arrivals[order[nxt]]))
        while nxt < len(order) and arrivals[order[nxt]] <= engine.stats.steps:
            engine.add(requests[order[nxt]])
            nxt += 1
        engine.step()
        if progress is not None and engine.stats.steps % 2000 == 0:
            progress(len(finished))
    if progress is not None:
        progress(len(finished))
    step_s = config.step_s
    ends = [req.finished_at for req in requests]
    assert all(end is not None for end in ends)  # the loop runs until every job finished
    finish = [int(end or 0) for end in ends]
    jct = tuple((f - arrivals[i]) * step_s for i, f in enumerate(finish))
    first = min(arrivals) if arrivals else 0
    return RunResult(
        policy=policy,
        jct_s=jct,
        finish_steps=tuple(finish),
        preemptions=tuple(req.num_preemptions for req in requests),
        wasted_tokens=engine.stats.wasted_tokens,
        wasted_output_tokens=engine.stats.wasted_output_tokens,
        computed_tokens=engine.stats.computed_tokens,
        output_tokens=engine.stats.output_tokens,
        makespan_s=(max(finish, default=0) - first) * step_s,
        steps=engine.stats.steps,
    )
