"""The host controller and the block-pool engine (dla_plugin.host, dla_plugin.sim.engine)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dla_plugin.contract import Candidate, PreemptionContext
from dla_plugin.host import PreemptionController, builtin_victim
from dla_plugin.sim.drive import requests
from dla_plugin.sim.engine import BlockPoolEngine, SimRequest, blocks_for


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
    controller = PreemptionController(Fixed("a"))
    assert controller.choose(context(cand("a"), cand("b"))) == "a"
    assert controller.stats.policy_choices == 1


@pytest.mark.parametrize("bad", [RuntimeError("boom"), "zzz", 7])
def test_misbehaving_policy_is_disabled_for_good(bad: object) -> None:
    policy = Fixed(bad, "a")
    controller = PreemptionController(policy)
    ctx = context(cand("a"), cand("b"))
    assert controller.choose(ctx) == "b"
    assert controller.disabled
    assert controller.choose(ctx) == "b"  # not asked again
    assert len(policy.seen) == 1
    assert controller.stats.builtin_only == 1
    assert controller.stats.disabled_reason is not None


def test_no_policy_is_the_builtin_rule() -> None:
    controller = PreemptionController(None)
    assert controller.choose(context(cand("a"), cand("b"), policy="fcfs")) == "b"
    assert controller.stats.builtin_only == 1


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
