"""Step models (dla_plugin.sim.steptime): the profiled A100 / Llama-2-7B model hits the six
points docs/dla-value.md names within 10%, every coefficient comes from the profiled rows, and the
constant model is the engine of before."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dla_plugin.sim import vidur_a100_llama2_7b as vidur
from dla_plugin.sim.steptime import (
    STEP_MODELS,
    ConstantStep,
    ProfiledStep,
    fit_relative,
    step_model,
)

MODEL = ProfiledStep()

# docs/dla-value.md: within 10% of the points the profiled data gives (ms per step).
POINTS = [
    ("prefill 1x1024", [1024], 0, 0, 77.0),
    ("prefill 1x2048", [2048], 0, 0, 160.0),
    ("prefill 1x4000", [4000], 0, 0, 342.0),
    ("decode b1 kv256", [], 1, 256, 9.5),
    ("decode b32 kv1024", [], 32, 32 * 1024, 20.7),
    ("decode b128 kv3000", [], 128, 128 * 3000, 126.0),
]


@pytest.mark.parametrize(("name", "prefills", "decodes", "kv", "ms"), POINTS)
def test_the_profiled_model_hits_the_six_points_within_ten_percent(
    name: str, prefills: list[int], decodes: int, kv: int, ms: float
) -> None:
    got = MODEL.seconds(prefills, decodes, kv) * 1000
    assert abs(got / ms - 1) <= 0.10, f"{name}: {got:.1f} ms, expected {ms} ms within 10%"


def test_the_token_wise_operators_are_the_profiled_sums_at_the_profiled_rows() -> None:
    for tokens, ops in vidur.LINEAR:
        assert MODEL.linear_ms(tokens) == pytest.approx(sum(ops), rel=1e-12)
    assert len(vidur.LINEAR_OPS) == len(vidur.LINEAR[0][1])
    # Between rows: on the segment; beyond the last: the 2048..4096 slope; never decreasing.
    assert MODEL.linear_ms(96) == pytest.approx((0.303 + 0.3825) / 2)
    slope = (MODEL.linear_ms(4096) - MODEL.linear_ms(2048)) / 2048
    assert MODEL.linear_ms(8192) == pytest.approx(MODEL.linear_ms(4096) + slope * 4096)
    values = [MODEL.linear_ms(n) for n in range(1, 9000, 7)]
    assert values == sorted(values)
    assert MODEL.linear_ms(0) == 0.0


def test_the_attention_coefficients_are_the_fits_of_the_profiled_rows() -> None:
    decode = fit_relative([((1.0, b, b * kv), ms) for b, kv, ms in vidur.DECODE])
    prefill = fit_relative([((1.0, p, p * p), ms) for p, ms in vidur.PREFILL])
    assert decode == MODEL.decode_coef
    assert prefill == MODEL.prefill_coef
    # The fits describe their rows: decode within 30% of every row, prefill within 10%.
    for b, kv, ms in vidur.DECODE:
        a, bb, c = decode
        assert abs((a + bb * b + c * b * kv) / ms - 1) < 0.30, (b, kv)
    for p, ms in vidur.PREFILL:
        e0, e1, e2 = prefill
        assert abs((e0 + e1 * p + e2 * p * p) / ms - 1) < 0.10, p


def test_fit_relative_recovers_exact_coefficients_and_refuses_bad_rows() -> None:
    rows = [((1.0, x, x * x), 2.0 + 3.0 * x + 0.5 * x * x) for x in (1.0, 2.0, 5.0, 9.0)]
    assert fit_relative(rows) == pytest.approx((2.0, 3.0, 0.5))
    with pytest.raises(ValueError, match="none"):
        fit_relative([])
    with pytest.raises(ValueError, match="y > 0"):
        fit_relative([((1.0,), 0.0)])
    with pytest.raises(ValueError, match="determine"):
        fit_relative([((1.0, 1.0), 1.0), ((2.0, 2.0), 2.0)])


def test_no_batching_overhead_for_llama2_7b_and_vidur_prefill_aggregation() -> None:
    """Vidur adds its 10% batching overheads only for grouped-query attention; Llama-2-7B has
    32 query and 32 KV heads (the attention.csv rows say so), so a batch costs its sum."""
    a, b, c = MODEL.decode_coef
    assert MODEL.decode_ms(1, 100) == pytest.approx(a + b + c * 100)
    assert MODEL.decode_ms(2, 200) == pytest.approx(a + 2 * b + c * 200)
    e0, e1, e2 = MODEL.prefill_coef
    assert MODEL.prefill_ms([300, 400]) == pytest.approx(e0 + e1 * 500 + e2 * 250_000)
    assert MODEL.decode_ms(0, 0) == MODEL.prefill_ms([]) == 0.0
    # The fast path of a decode-only step is the same sum of its terms.
    for decodes, kv in [(1, 256), (12, 12_000), (128, 384_000), (1500, 10**6)]:
        composed = (MODEL.linear_ms(decodes) + MODEL.decode_ms(decodes, kv)) * 32 / 1000
        assert MODEL.seconds((), decodes, kv) == pytest.approx(composed, rel=1e-12)


def test_the_coefficients_are_the_ones_the_docs_give() -> None:
    """docs/dla-value.md "Step time" quotes these (in microseconds and nanoseconds)."""
    assert MODEL.decode_coef == pytest.approx((8.87e-3, 0.936e-3, 8.77e-6), rel=2e-3)
    assert MODEL.prefill_coef == pytest.approx((4.29e-3, 0.140e-3, 0.1256e-6), rel=3e-3)
    slope = (MODEL.linear_ms(4096) - MODEL.linear_ms(2048)) / 2048
    assert slope == pytest.approx(1.95e-3, rel=2e-3)


# Rows of the same mlp.csv (tensor parallelism 1) that the model does not use: the sum of the
# nine medians at these num_tokens. Between its rows the model follows the data within 20%
# (the kernels' tile sizes make the cost step: 136 tokens cost more than 192).
HELD_OUT = {
    8: 0.283,
    16: 0.287,
    144: 0.556,
    176: 0.5225,
    192: 0.4975,
    200: 0.558,
    256: 0.5565,
    264: 0.7005,
    344: 0.725,
    880: 1.829,
    1000: 2.1005,
    2240: 4.665,
}


def test_between_its_rows_the_model_stays_near_rows_it_does_not_use() -> None:
    errors = {n: MODEL.linear_ms(n) / ms - 1 for n, ms in HELD_OUT.items()}
    assert all(abs(e) <= 0.20 for e in errors.values()), errors
    assert sum(abs(e) for e in errors.values()) / len(errors) <= 0.07, errors


def test_a_step_that_computes_nothing_lasts_nothing() -> None:
    assert MODEL.seconds([], 0, 0) == 0.0
    assert ConstantStep(0.025).seconds([], 0, 0) == 0.0
    assert ConstantStep(0.025).seconds([10], 0, 0) == 0.025
    assert ConstantStep(0.025).seconds([], 3, 99) == 0.025


@given(
    st.lists(st.integers(1, 4096), max_size=6),
    st.integers(0, 256),
    st.integers(0, 4096),
    st.integers(1, 4096),
)
def test_more_work_never_makes_a_profiled_step_shorter(
    prefills: list[int], decodes: int, kv_each: int, extra: int
) -> None:
    base = MODEL.seconds(prefills, decodes, decodes * kv_each)
    assert base >= 0
    # A recomputed prefill added to the step costs time (docs/dla-value.md: recomputation costs).
    assert MODEL.seconds([*prefills, extra], decodes, decodes * kv_each) > base
    # So does one more decode, and a longer KV cache.
    more = MODEL.seconds(prefills, decodes + 1, (decodes + 1) * kv_each + 1)
    assert more > base


def test_step_model_by_name() -> None:
    assert STEP_MODELS == ("a100-llama2-7b", "constant")
    assert isinstance(step_model("a100-llama2-7b"), ProfiledStep)
    constant = step_model("constant", 25)
    assert isinstance(constant, ConstantStep)
    assert constant.step_s == 0.025
    with pytest.raises(ValueError, match="expected --step-ms with --step-model constant"):
        step_model("constant")
    with pytest.raises(ValueError, match="expected no --step-ms"):
        step_model("a100-llama2-7b", 25)
    with pytest.raises(ValueError, match="found 'h100'"):
        step_model("h100")
    for bad in (0.0, -0.025, float("nan"), float("inf"), 1e300, 1e-320, True):
        with pytest.raises(ValueError, match=r"expected a step of 0\.001 ms to 60000 ms"):
            ConstantStep(bad)


@given(st.integers(1, 1500), st.integers(0, 10**6), st.integers(0, 40))
def test_decode_durations_are_the_steps_one_by_one(decodes: int, kv: int, steps: int) -> None:
    """What the engine adds when it takes decode steps at once is exactly what step() adds."""
    for model in (MODEL, ConstantStep(0.025)):
        got = model.decode_durations(decodes, kv, steps)
        assert got == [model.seconds((), decodes, kv + i * decodes) for i in range(steps)]
