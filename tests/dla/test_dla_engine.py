"""The host controller and the block-pool engine (dla_plugin.sim.host.preemption,
dla_plugin.sim.engine)."""

from __future__ import annotations

import itertools
import random
from dataclasses import fields, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dla_plugin.contract import Candidate, PreemptionContext
from dla_plugin.selector import DlaVictimSelector
from dla_plugin.sim.drive import requests
from dla_plugin.sim.engine import BlockPoolEngine, SimRequest, blocks_for
from dla_plugin.sim.host.preemption import PreemptionController, builtin_victim
from dla_plugin.sim.steptime import ConstantStep, ProfiledStep


def cand(
    rid: str, *, priority: int = 0, arrival: float = 0.0, pred: int | None = None
) -> Candidate:
    return Candidate(rid, priority, arrival, 10, 0, 10, 0, 100, pred)


def context(*cands: Candidate, policy: str = "fcfs") -> PreemptionContext:
    return PreemptionContext(tuple(cands), policy, cands[0].request_id, 1.0, 5.0)


class Fixed:
    """A policy that answers what it is told, and remembers what it was asked."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.seen: list[PreemptionContext] = []

    def select_victim(self, ctx: PreemptionContext) -> str | None:
        self.seen.append(ctx)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]


# --- builtin victim -------------------------------------------------------------------------


def test_builtin_fcfs_is_the_last_running() -> None:
    assert builtin_victim((cand("a"), cand("b"), cand("c")), "fcfs").request_id == "c"


def test_builtin_priority_is_largest_priority_then_arrival() -> None:
    cands = (cand("a", priority=2, arrival=1), cand("b", priority=1, arrival=9))
    assert builtin_victim(cands, "priority").request_id == "a"
    cands = (cand("a", priority=2, arrival=1), cand("b", priority=2, arrival=3), cand("c"))
    assert builtin_victim(cands, "priority").request_id == "b"


def test_builtin_without_candidates_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        builtin_victim((), "fcfs")


# --- the controller -------------------------------------------------------------------------


def test_abstention_keeps_the_builtin_victim_and_the_policy_sees_it() -> None:
    policy = Fixed(None)
    controller = PreemptionController(policy)
    assert controller.choose(context(cand("a"), cand("b"))) == "b"
    assert policy.seen[0].builtin_victim_id == "b"
    assert controller.stats.abstentions == 1
    assert not controller.disabled


def test_a_candidate_choice_is_taken() -> None:
    controller = PreemptionController(Fixed("a", "a"))
    assert controller.choose(context(cand("a"), cand("b"))) == "a"
    assert controller.choose(context(cand("a"), cand("b"))) == "a"
    assert controller.export_stats() == {
        "policy_name": f"{Fixed.__module__}.{Fixed.__qualname__}",
        "enabled": True,
        "calls": 2,
        "selections": 2,
        "abstentions": 0,
        "failures": 0,
        "invalid_selections": 0,
    }
    assert controller.changed == 2  # "b" was the builtin victim


@pytest.mark.parametrize("bad", [RuntimeError("boom"), "zzz", 7])
def test_misbehaving_policy_is_disabled_for_good(bad: object) -> None:
    policy = Fixed(bad, "a")
    controller = PreemptionController(policy)
    ctx = context(cand("a"), cand("b"))
    assert controller.choose(ctx) == "b"
    assert controller.disabled
    assert controller.choose(ctx) == "b"  # not asked again
    assert len(policy.seen) == 1
    assert controller.builtin_only == 1
    assert controller.disabled_reason is not None
    stats = controller.export_stats()
    # The host's semantics: one call counted, one failure; an unknown id is also invalid.
    assert (stats["calls"], stats["failures"], stats["enabled"]) == (1, 1, False)
    assert stats["invalid_selections"] == (0 if isinstance(bad, Exception) else 1)


def test_no_policy_is_the_builtin_rule() -> None:
    controller = PreemptionController(None)
    assert controller.choose(context(cand("a"), cand("b"), policy="fcfs")) == "b"
    assert controller.builtin_only == 1
    assert controller.export_stats()["calls"] == 0  # the host counts nothing without a policy
    assert controller.export_stats()["policy_name"] == "builtin"


# --- the engine -----------------------------------------------------------------------------


def run(engine: BlockPoolEngine, reqs: list[SimRequest], max_steps: int = 100_000) -> None:
    for r in reqs:
        engine.add(r)
    for _ in range(max_steps):
        if engine.idle:
            return
        engine.step()
        used = sum(r.blocks for r in engine.running)
        assert engine.free_blocks + used == engine.total_blocks
        assert engine.free_blocks >= 0
        assert all(
            r.blocks >= blocks_for(r.num_computed_tokens, engine.block_size) for r in engine.running
        )
    pytest.fail("the engine did not drain")


def take(seed: int, n: int, predictions: str = "exact") -> list[SimRequest]:
    return [r for _, r in itertools.islice(requests(seed, predictions=predictions), n)]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), blocks=st.integers(256, 640), reserve=st.booleans())
def test_every_request_finishes_once_and_tokens_are_conserved(
    seed: int, blocks: int, reserve: bool
) -> None:
    reqs = take(seed, 60)
    engine = BlockPoolEngine(
        PreemptionController(None), total_blocks=blocks, admission_reserve=reserve
    )
    run(engine, reqs)
    finished = engine.stats.finished
    assert sorted(r.request_id for r in finished) == sorted(r.request_id for r in reqs)
    assert all(r.num_output_tokens == r.output_length for r in finished)
    st_ = engine.stats
    assert st_.output_tokens == sum(r.output_length for r in reqs)
    # Every computed token either survives in a finished request or was wasted by a preemption.
    assert st_.computed_tokens - st_.wasted_tokens == sum(
        r.num_prompt_tokens + r.output_length for r in reqs
    )
    assert st_.preemptions == sum(r.num_preemptions for r in reqs)
    assert engine.free_blocks == engine.total_blocks


def test_preemption_is_recompute_and_goes_to_the_head_of_the_queue() -> None:
    engine = BlockPoolEngine(PreemptionController(None), total_blocks=4, block_size=4)
    a = SimRequest("a", 0.0, 4, 8)
    b = SimRequest("b", 0.0, 4, 8)
    run(engine, [a, b])
    assert engine.stats.preemptions >= 1
    assert b.num_preemptions >= 1  # FCFS builtin: the last running is the victim
    assert engine.stats.wasted_tokens > 0


def test_admission_reserve_waits_for_the_predicted_blocks() -> None:
    engine = BlockPoolEngine(
        PreemptionController(None), total_blocks=8, block_size=4, admission_reserve=True
    )
    big = SimRequest("big", 0.0, 4, 8, predicted_length=20)  # needs ceil(24/4) = 6 blocks
    small = SimRequest("small", 0.0, 4, 4, predicted_length=4)  # needs 2
    engine.add(small)
    engine.add(big)
    engine.step()
    assert [r.request_id for r in engine.running] == ["small", "big"]  # 8 free: 2 + 6 fit
    engine2 = BlockPoolEngine(
        PreemptionController(None), total_blocks=7, block_size=4, admission_reserve=True
    )
    engine2.add(replace(small))
    engine2.add(replace(big))
    engine2.step()
    assert [r.request_id for r in engine2.running] == ["small"]  # 5 free < 6 required


def test_the_reserve_never_stalls_an_idle_engine() -> None:
    """docs/dla-value.md: when nothing runs and the head cannot be admitted under its reserve, it is
    admitted by its prompt alone (a prediction beyond the whole pool, here)."""
    engine = BlockPoolEngine(
        PreemptionController(None), total_blocks=8, block_size=4, admission_reserve=True
    )
    over = SimRequest("over", 0.0, 4, 8, predicted_length=400)  # reserve: 101 blocks > 8
    behind = SimRequest("behind", 0.0, 4, 4, predicted_length=4)
    engine.add(over)
    engine.add(behind)
    engine.step()
    # "over" by its prompt alone (2 blocks: its prompt and first token); then "behind",
    # first come, first served, whose own reserve (2 blocks) fits the 6 left.
    assert [r.request_id for r in engine.running] == ["over", "behind"]
    assert engine.stats.reserve_bypasses == 1
    assert over.num_output_tokens == 1  # it runs: the engine did not idle
    while not engine.idle:
        engine.step()
    assert engine.stats.reserve_bypasses == 1  # once: afterwards something always ran


def test_head_of_line_blocking_by_the_reserve_is_measured() -> None:
    first = SimRequest("first", 0.0, 4, 12)  # no prediction: 2 blocks, growing to 4
    head = SimRequest("head", 1.0, 4, 4, predicted_length=20)  # reserve: 6 blocks
    queued = [SimRequest(f"q{i}", 2.0 + i, 4, 4) for i in range(3)]
    engine2 = BlockPoolEngine(
        PreemptionController(None),
        total_blocks=7,
        block_size=4,
        admission_reserve=True,
        step_model=ConstantStep(0.5),
    )
    for r in [first, head, *queued]:
        engine2.add(r)
    engine2.step()  # first runs; head's prompt (2 blocks) fits the 5 free, its reserve does not
    assert [r.request_id for r in engine2.running] == ["first"]
    assert engine2.stats.reserve_blocked_s == 0.5
    assert engine2.stats.reserve_blocked_wait_s == 0.5 * 3  # three requests behind the head
    assert engine2.stats.reserve_bypasses == 0
    while not engine2.idle:
        engine2.step()
    # Blocked until first finished (12 output tokens, 12 steps): then admitted and done.
    assert engine2.stats.reserve_blocked_s == pytest.approx(0.5 * 12)
    assert engine2.stats.reserve_blocked_wait_s == pytest.approx(0.5 * 3 * 12)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    blocks=st.integers(256, 512),
    model=st.sampled_from(["exact", "lognormal-1.0", "noise-add-1.0", "over"]),
)
def test_the_engine_never_idles_with_work_waiting(seed: int, blocks: int, model: str) -> None:
    engine = BlockPoolEngine(
        PreemptionController(DlaVictimSelector(observer=None)),
        total_blocks=blocks,
        admission_reserve=True,
    )
    for r in take(seed, 80, model):
        engine.add(r)
    while not engine.idle:
        waiting = len(engine.waiting)
        computed = engine.stats.computed_tokens
        engine.step()
        # A step that began with work waiting computed something (a prefill at least).
        assert not waiting or engine.stats.computed_tokens > computed


def test_a_recomputed_prefill_costs_step_time_and_is_counted_as_wasted() -> None:
    model = ProfiledStep()
    engine = BlockPoolEngine(
        PreemptionController(None), total_blocks=4, block_size=4, step_model=model
    )
    a = SimRequest("a", 0.0, 4, 8)
    b = SimRequest("b", 1.0, 4, 8)
    engine.add(a)
    engine.add(b)
    clock = engine.now
    engine.step()  # both prefill 4 tokens: 2 blocks each; no wasted time
    assert engine.now - clock == pytest.approx(model.seconds([4, 4], 0, 0))
    assert engine.stats.wasted_s == 0.0
    while not b.num_preemptions:
        engine.step()
    wasted_tokens = engine.stats.wasted_tokens
    assert wasted_tokens > 0  # b's prompt and output so far
    while b not in engine.running:  # b is re-admitted once a finishes
        engine.step()
    # The step that re-admitted b prefilled its prompt and output so far again; the part of
    # that step's time due to it is counted as wasted.
    assert engine.stats.wasted_s > 0
    # It redid what was thrown away (its prefill also gave it one more token).
    assert b.num_prompt_tokens + b.num_output_tokens - 1 == wasted_tokens
    with_b = model.seconds([wasted_tokens], 0, 0)
    assert engine.stats.wasted_s == pytest.approx(with_b)  # nothing else ran in that step


def test_a_request_larger_than_the_pool_is_refused() -> None:
    engine = BlockPoolEngine(PreemptionController(None), total_blocks=2, block_size=4)
    with pytest.raises(ValueError, match="whole pool"):
        engine.add(SimRequest("x", 0.0, 5, 4))


def test_the_stream_is_deterministic_for_a_seed() -> None:
    first = [
        (s, r.request_id, r.num_prompt_tokens, r.output_length)
        for s, r in itertools.islice(requests(3), 50)
    ]
    again = [
        (s, r.request_id, r.num_prompt_tokens, r.output_length)
        for s, r in itertools.islice(requests(3), 50)
    ]
    assert first == again
    assert all(
        r.predicted_length is None for _, r in itertools.islice(requests(3, predictions="none"), 50)
    )


def test_builtin_priority_exact_tie_is_the_first_in_running_order() -> None:
    cands = (cand("a", priority=2, arrival=3), cand("b", priority=2, arrival=3))
    assert builtin_victim(cands, "priority").request_id == "a"


# --- the DLA policy in the engine -----------------------------------------------------------


class Recording:
    """Wraps the DLA selector; records (its answer, the builtin victim) for every call."""

    def __init__(self) -> None:
        from dla_plugin.selector import DlaVictimSelector

        self.inner = DlaVictimSelector(observer=None)
        self.calls: list[tuple[str | None, str | None]] = []

    def select_victim(self, ctx: PreemptionContext) -> str | None:
        answer = self.inner.select_victim(ctx)
        self.calls.append((answer, ctx.builtin_victim_id))
        return answer


def outcome(engine: BlockPoolEngine) -> list[tuple[str, float | None, int]]:
    return sorted((r.request_id, r.finished_at, r.num_preemptions) for r in engine.stats.finished)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_without_predictions_dla_equals_the_builtin_in_every_step(seed: int) -> None:
    policy = Recording()
    dla = BlockPoolEngine(PreemptionController(policy), total_blocks=384)
    builtin = BlockPoolEngine(PreemptionController(None), total_blocks=384)
    run(dla, take(seed, 150, predictions="none"))
    run(builtin, take(seed, 150, predictions="none"))
    assert policy.calls  # the pool overflowed: the policy was asked
    assert all(answer is None for answer, _ in policy.calls)
    assert outcome(dla) == outcome(builtin)  # request by request
    assert dla.stats.preemptions == builtin.stats.preemptions > 0


def test_with_exact_predictions_dla_chooses_victims_itself() -> None:
    policy = Recording()
    engine = BlockPoolEngine(PreemptionController(policy), total_blocks=384)
    run(engine, take(1, 150))
    chosen = [answer for answer, _ in policy.calls if answer is not None]
    assert chosen
    assert any(answer != builtin for answer, builtin in policy.calls if answer is not None)
    assert not engine.controller.disabled


# --- decode steps taken at once -------------------------------------------------------------


def _engine_and_arrivals(
    rng: random.Random,
) -> tuple[BlockPoolEngine, list[SimRequest], list[float]]:
    size = rng.choice([1, 2, 4, 16])
    blocks = rng.randint(2, 40)
    policy = DlaVictimSelector(observer=None) if rng.random() < 0.5 else None
    engine = BlockPoolEngine(
        PreemptionController(policy),
        total_blocks=blocks,
        block_size=size,
        admission_reserve=rng.random() < 0.5,
        scheduling_policy=rng.choice(["fcfs", "priority"]),
        step_model=rng.choice([ProfiledStep(), ConstantStep(rng.choice([0.001, 0.025, 1 / 3]))]),
    )
    reqs, arrivals, clock = [], [], 0.0
    for i in range(rng.randint(1, 20)):
        total = rng.randint(2, blocks * size)
        prompt = rng.randint(1, total - 1)
        output = total - prompt
        predicted = rng.choice([None, output, rng.randint(0, 3 * total), 5 * blocks * size])
        reqs.append(SimRequest(f"r{i}", float(i), prompt, output, predicted, rng.randint(0, 3)))
        clock += rng.choice([0.0, rng.random() * 0.05, rng.expovariate(5)])
        arrivals.append(clock)
    return engine, reqs, arrivals


def _state(engine: BlockPoolEngine, reqs: list[SimRequest]) -> object:
    stats = {f.name: getattr(engine.stats, f.name) for f in fields(engine.stats)}
    stats["finished"] = [r.request_id for r in engine.stats.finished]
    return (
        stats,
        [tuple(getattr(r, f.name) for f in fields(r)) for r in reqs],
        engine.free_blocks,
        engine.clock_s,
        [r.request_id for r in engine.waiting],
        [r.request_id for r in engine.running],
        engine.controller.stats,
    )


def _arrive(engine: BlockPoolEngine, reqs: list[SimRequest], at: list[float], nxt: int) -> int:
    if engine.idle and nxt < len(reqs) and at[nxt] > engine.now:
        engine.wait_until(at[nxt])
    while nxt < len(reqs) and at[nxt] <= engine.now:
        engine.add(reqs[nxt])
        nxt += 1
    return nxt


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_decode_steps_leave_the_engine_exactly_as_steps_one_by_one(seed: int) -> None:
    """Tiny pools, any block size, reserve or not, fcfs or priority, DLA or builtin, both step
    models, predictions beyond the pool, arbitrary cut-offs: every field equal, every time."""
    rng = random.Random(seed)
    fast, fast_reqs, at = _engine_and_arrivals(random.Random(seed))
    slow, slow_reqs, _ = _engine_and_arrivals(random.Random(seed))
    i = j = batched = 0
    while i < len(fast_reqs) or not fast.idle:
        i = _arrive(fast, fast_reqs, at, i)
        until = at[i] if i < len(at) else float("inf")
        if rng.random() < 0.3:
            until = min(until, fast.now + rng.random() * 0.2)
        taken = fast.decode_steps(until)
        batched += taken
        if not taken:
            fast.step()
        for _ in range(max(taken, 1)):
            j = _arrive(slow, slow_reqs, at, j)
            slow.step()
        assert _state(fast, fast_reqs) == _state(slow, slow_reqs)
    assert slow.idle
