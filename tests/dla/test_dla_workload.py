"""Workloads of the DLA value check (DLA.md "Value check (simulator)"): the synthetic trace,
the BurstGPT loader and the prediction models.

``tests/data/burstgpt-sample.csv`` is hand-written for these tests in the BurstGPT column
format (values invented, not taken from the BurstGPT dataset): 50 rows, 5 of them with 0
request or 0 response tokens, 2 with a token count above 2048, models ``ChatGPT`` and
``GPT-4``, log types ``Conversation log`` and ``API log``.
"""

from __future__ import annotations

import itertools
import math
import pickle
import random
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dla_plugin.sim.predict import PREDICTIONS, predict, predictor
from dla_plugin.sim.workload import (
    Job,
    LoadReport,
    SyntheticParams,
    WorkloadError,
    load_burstgpt,
    load_burstgpt_report,
    synthetic,
    synthetic_stream,
)

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "burstgpt-sample.csv"
HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
ROW_A = "3,ChatGPT,10,20,30,Conversation log\n"
ROW_B = "5,GPT-4,7,8,15,API log\n"


# --- synthetic -------------------------------------------------------------------------------


def test_synthetic_is_deterministic_for_a_seed() -> None:
    assert synthetic(500, 7) == synthetic(500, 7)
    assert synthetic(500, 7) != synthetic(500, 8)
    params = SyntheticParams(rate_per_s=2.0)
    assert synthetic(500, 7, params) == synthetic(500, 7, params)
    assert synthetic(500, 7, params) != synthetic(500, 7)


def test_synthetic_statistics() -> None:
    # Short outputs, so that the tail is visible below the 2,048-token cap.
    params = SyntheticParams(rate_per_s=4.0, prompt_median=256, output_min=16)
    jobs = synthetic(20_000, 1, params)
    assert len(jobs) == 20_000
    arrivals = [j.arrival_s for j in jobs]
    assert arrivals[0] == 0.0
    assert all(a <= b for a, b in itertools.pairwise(arrivals))
    # The expected rate, bursts included: 4 * (0.95 + 0.05 * 8) = 5.4 per second.
    expected = params.rate_per_s * (1 - params.burst_prob + params.burst_prob * params.burst_factor)
    assert (len(jobs) - 1) / arrivals[-1] == pytest.approx(expected, rel=0.1)
    prompts = [j.prompt_tokens for j in jobs]
    assert statistics.median(prompts) == pytest.approx(params.prompt_median, rel=0.05)
    outputs = sorted(j.output_tokens for j in jobs)
    p50, p99 = outputs[len(outputs) // 2], outputs[int(len(outputs) * 0.99)]
    assert p50 == pytest.approx(params.output_min * 2 ** (1 / params.output_alpha), rel=0.1)
    assert p99 / p50 > 10  # a heavy tail
    assert min(outputs) >= params.output_min
    assert max(prompts) <= params.max_tokens
    assert max(outputs) == params.max_tokens  # the cap is reached and respected


def test_synthetic_bursts_cluster_arrivals() -> None:
    flat = synthetic(5_000, 3, SyntheticParams(burst_prob=0.0))
    bursty = synthetic(5_000, 3, SyntheticParams(burst_prob=0.1, burst_factor=20.0))

    def busiest(jobs: list[Job]) -> int:
        per_second: dict[int, int] = {}
        for job in jobs:
            per_second[int(job.arrival_s)] = per_second.get(int(job.arrival_s), 0) + 1
        return max(per_second.values())

    assert busiest(bursty) > 3 * busiest(flat)


def test_synthetic_high_rate_and_small_caps() -> None:
    # A mean of 2000 per second is drawn in chunks (exp(-2000) underflows): still Poisson.
    params = SyntheticParams(
        rate_per_s=2000.0, burst_prob=0.0, prompt_median=8, output_min=4, max_tokens=8
    )
    jobs = synthetic(60_000, 5, params)
    per_second = [0] * (int(jobs[-1].arrival_s) + 1)
    for job in jobs:
        per_second[int(job.arrival_s)] += 1
    full = per_second[1:-1]  # the first and last seconds are cut by the trace's ends
    assert statistics.fmean(full) == pytest.approx(2000.0, rel=0.05)
    assert 0.4 < statistics.variance(full) / 2000.0 < 2.0  # a Poisson variance is its mean
    assert all(1 <= j.prompt_tokens <= 8 and 4 <= j.output_tokens <= 8 for j in jobs)


@pytest.mark.parametrize(
    ("n", "seed", "params", "name"),
    [
        (0, 1, SyntheticParams(), "n"),
        (True, 1, SyntheticParams(), "n"),
        (10, 1.5, SyntheticParams(), "seed"),
        (10, 1, SyntheticParams(rate_per_s=0.0), "rate_per_s"),
        (10, 1, SyntheticParams(rate_per_s=math.nan), "rate_per_s"),
        (10, 1, SyntheticParams(burst_prob=1.5), "burst_prob"),
        (10, 1, SyntheticParams(burst_factor=0.5), "burst_factor"),
        (10, 1, SyntheticParams(prompt_median=0), "prompt_median"),
        (10, 1, SyntheticParams(prompt_median=4096), "prompt_median"),
        (10, 1, SyntheticParams(prompt_sigma=-1.0), "prompt_sigma"),
        (10, 1, SyntheticParams(output_alpha=0.0), "output_alpha"),
        (10, 1, SyntheticParams(output_min=0), "output_min"),
        (10, 1, SyntheticParams(max_tokens=0), "max_tokens"),
        (10, 1, SyntheticParams(prompt_median="256"), "prompt_median"),  # type: ignore[arg-type]
    ],
)
def test_synthetic_bad_params(n: int, seed: int, params: SyntheticParams, name: str) -> None:
    with pytest.raises(WorkloadError) as info:
        synthetic(n, seed, params)
    assert info.value.code == "params"
    assert str(info.value).startswith(f"expected {name} ")
    assert "found " in str(info.value)


@pytest.mark.parametrize(
    ("arrival", "prompt", "output"), [(-1.0, 1, 1), (math.inf, 1, 1), (0.0, 0, 1), (0.0, 1, 0)]
)
def test_job_checks_its_fields(arrival: float, prompt: int, output: int) -> None:
    with pytest.raises(WorkloadError) as info:
        Job(arrival, prompt, output)
    assert info.value.code == "params"


# --- BurstGPT: the sample --------------------------------------------------------------------


def test_sample_loads() -> None:
    jobs, report = load_burstgpt_report(SAMPLE)
    assert report == LoadReport(rows=50, kept=45, skipped_zero=5, clamped=2, filtered=0)
    assert len(jobs) == 45
    assert jobs[0] == Job(0.0, 412, 187)
    assert jobs[-1] == Job(275.0, 111, 57)  # 278 - 3
    assert Job(28.0, 2048, 256) in jobs  # 3120 request tokens, clamped
    assert Job(63.0, 245, 2048) in jobs  # 2600 response tokens, clamped
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(jobs))
    assert load_burstgpt(str(SAMPLE)) == jobs


def test_sample_filters_and_limit() -> None:
    gpt4, report = load_burstgpt_report(SAMPLE, model="GPT-4")
    assert report == LoadReport(rows=50, kept=13, skipped_zero=0, clamped=1, filtered=37)
    assert gpt4[0] == Job(0.0, 1200, 640)  # the first GPT-4 row, at 7 s
    _, report = load_burstgpt_report(SAMPLE, log_type="API log")
    assert report == LoadReport(rows=50, kept=17, skipped_zero=1, clamped=1, filtered=32)
    _, report = load_burstgpt_report(SAMPLE, model="GPT-4", log_type="API log")
    assert report.kept == 6
    first, report = load_burstgpt_report(SAMPLE, limit=3)
    assert first == load_burstgpt(SAMPLE)[:3]
    assert report == LoadReport(rows=3, kept=3, skipped_zero=0, clamped=0, filtered=0)


def test_clamp_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + ROW_A + ROW_B)
    jobs, report = load_burstgpt_report(path, max_tokens=12)
    assert jobs == [Job(0.0, 10, 12), Job(2.0, 7, 8)]
    assert report.clamped == 1


def test_zero_token_rows_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        HEADER
        + "1,ChatGPT,50,0,50,Conversation log\n"
        + ROW_A
        + "4,ChatGPT,0,9,9,API log\n"
        + ROW_B
    )
    jobs, report = load_burstgpt_report(path)
    # The arrivals count from the first kept row (3 s), not the skipped one (1 s).
    assert jobs == [Job(0.0, 10, 20), Job(2.0, 7, 8)]
    assert report == LoadReport(rows=4, kept=2, skipped_zero=2, clamped=0, filtered=0)


def test_bom_crlf_and_trailing_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    text = SAMPLE.read_text().replace("\n", "\r\n") + "\r\n\r\n"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert load_burstgpt_report(path) == load_burstgpt_report(SAMPLE)


def test_columns_in_another_order_and_quoted_fields(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "Log Type,Total tokens,Response tokens,Request tokens,Model,Timestamp\n"
        '"API log, batch",30,20,10,"GPT-4, ""turbo""",2.5\n'
    )
    assert load_burstgpt(path, model='GPT-4, "turbo"', log_type="API log, batch") == [
        Job(0.0, 10, 20)
    ]


# --- BurstGPT: one test per error ------------------------------------------------------------


def _error(tmp_path: Path, content: str | bytes, **options: object) -> tuple[WorkloadError, str]:
    path = tmp_path / "trace.csv"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    with pytest.raises(WorkloadError) as info:
        load_burstgpt(path, **options)  # type: ignore[arg-type]
    assert info.value.path == str(path)
    return info.value, str(path)


def _check(
    err: WorkloadError,
    path: str,
    code: str,
    line: int | None,
    column: str | None,
    expected: str,
    found: str,
) -> None:
    message = str(err)
    assert (err.code, err.line, err.column) == (code, line, column)
    assert message.startswith(f"{path}:{line}: " if line is not None else f"{path}: ")
    if column is not None:
        assert f"column {column!r}: " in message
    assert f"expected {expected}" in message
    assert f"found {found}" in message


def test_missing_column(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER.replace(",Log Type", "") + "3,ChatGPT,10,20,30\n")
    _check(
        err, path, "header", 1, None, "a header with the columns Timestamp, ", "missing 'Log Type'"
    )


def test_extra_column(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER.replace("\n", ",Extra\n") + ROW_A.replace("\n", ",x\n"))
    _check(err, path, "header", 1, None, "a header with the columns", "unexpected 'Extra'")


def test_misspelled_column(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER.replace("Response", "Respone") + ROW_A)
    _check(
        err,
        path,
        "header",
        1,
        None,
        "a header with the columns",
        "missing 'Response tokens'; unexpected 'Respone tokens'",
    )


def test_duplicated_column(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER.replace("Log Type", "Model") + ROW_A)
    assert "duplicated 'Model'" in err.found
    _check(err, path, "header", 1, None, "a header", "missing 'Log Type'")


def test_non_numeric_timestamp(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER + ROW_A + ROW_B.replace("5,", "soon,", 1))
    _check(err, path, "value", 3, "Timestamp", "a non-negative number of seconds", "'soon'")


@pytest.mark.parametrize("stamp", ["nan", "inf", "1e999", " 5", ""])
def test_odd_timestamps(tmp_path: Path, stamp: str) -> None:
    err, path = _error(tmp_path, HEADER + ROW_A.replace("3,", f"{stamp},", 1))
    _check(err, path, "value", 2, "Timestamp", "a non-negative number of seconds", repr(stamp))


def test_negative_tokens(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER + ROW_A + "5,GPT-4,-7,8,1,API log\n")
    _check(
        err,
        path,
        "value",
        3,
        "Request tokens",
        "a non-negative integer",
        "a negative number '-7'",
    )


def test_total_mismatch(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER + "3,ChatGPT,10,20,31,Conversation log\n")
    _check(
        err,
        path,
        "total",
        2,
        "Total tokens",
        "Request tokens + Response tokens = 10 + 20 = 30",
        "31",
    )


def test_decreasing_timestamp(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER + ROW_B + ROW_A)
    _check(err, path, "order", 3, "Timestamp", "a timestamp of at least '5' (line 2", "'3'")


def test_wrong_number_of_fields(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER + ROW_A + "5,GPT-4,7,8,15\n")
    _check(err, path, "row", 3, None, "6 fields", "5 fields")


def test_blank_line_between_rows(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER + ROW_A + "\n" + ROW_B)
    _check(err, path, "row", 3, None, "no blank line between rows", "a blank line at line 3")


def test_unterminated_quote(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER + ROW_A + '5,"GPT-4,7,8,15,API log\n')
    _check(err, path, "row", 3, None, "well-formed CSV", "unexpected end of data")


def test_empty_file(tmp_path: Path) -> None:
    err, path = _error(tmp_path, b"")
    _check(err, path, "header", None, None, "a header with the columns", "an empty file")


def test_header_only(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER + "\n")
    _check(err, path, "empty", None, None, "at least one data row", "only the header")


def test_non_utf8_bytes(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER.encode() + b"3,Chat\xe9GPT,10,20,30,API log\n")
    _check(err, path, "encoding", 2, None, "UTF-8 text", "the byte 0xe9 at byte 7")


def test_binary_file(tmp_path: Path) -> None:
    err, path = _error(tmp_path, bytes(range(256)) * 8)
    _check(err, path, "encoding", 1, None, "a text (CSV) file", "a NUL byte at byte 1")
    err, path = _error(tmp_path, b"\x89PNG\r\n\x1a\n" + bytes(100))
    _check(err, path, "encoding", 1, None, "UTF-8 text", "the byte 0x89 at byte 1")


def test_overlong_line(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER + "x" * 70_000)
    _check(err, path, "row", 2, None, "a line of at most 65536 bytes", "a longer one")


def test_filters_that_keep_nothing(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER + ROW_A + ROW_B, model="GPT-5")
    _check(
        err,
        path,
        "empty",
        None,
        None,
        "at least one job with model='GPT-5'",
        "none of 2 rows kept (2 filtered out, 0 with 0 tokens)",
    )
    assert "Model values seen: 'ChatGPT', 'GPT-4'" in str(err)
    err, path = _error(tmp_path, HEADER + ROW_A + ROW_B, model="GPT-4", log_type="Chat")
    assert "with model='GPT-4' and log_type='Chat'" in str(err)


def test_only_zero_token_rows(tmp_path: Path) -> None:
    err, path = _error(tmp_path, HEADER + "1,ChatGPT,50,0,50,Conversation log\n")
    _check(
        err,
        path,
        "empty",
        None,
        None,
        "at least one job",
        "none of 1 rows kept (0 filtered out, 1 with 0 tokens)",
    )


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.csv"
    with pytest.raises(WorkloadError) as info:
        load_burstgpt(path)
    _check(info.value, str(path), "io", None, None, "a readable file", "No such file")


@pytest.mark.parametrize(
    "options",
    [{"limit": 0}, {"max_tokens": 0}, {"max_tokens": 1.5}, {"model": 4}, {"log_type": b"x"}],
)
def test_bad_loader_options(options: dict[str, object]) -> None:
    with pytest.raises(WorkloadError) as info:
        load_burstgpt(SAMPLE, **options)  # type: ignore[arg-type]
    assert info.value.code == "params"
    assert str(info.value).startswith(f"expected {next(iter(options))} ")


def test_error_survives_pickling(tmp_path: Path) -> None:
    err, _ = _error(tmp_path, HEADER + ROW_B + ROW_A)
    copy = pickle.loads(pickle.dumps(err))
    assert (str(copy), copy.code, copy.line, copy.column) == (
        str(err),
        err.code,
        err.line,
        err.column,
    )


# --- predictions -----------------------------------------------------------------------------

JOBS = [Job(float(i), 100, out) for i, out in enumerate([1, 2, 3, 17, 100, 999])]


def test_exact_over_none() -> None:
    assert predict(JOBS, "exact", 1) == [1, 2, 3, 17, 100, 999]
    assert predict(JOBS, "over", 1) == [2, 3, 5, 26, 150, 1499]  # ceil(1.5 * output)
    assert predict(JOBS, "none", 1) == [None] * len(JOBS)
    assert predict([], "lognormal-1.0", 1) == []
    assert predict([], "noise-add-1.0", 1) == []


@pytest.mark.parametrize("model", PREDICTIONS)
def test_predictions_are_deterministic(model: str) -> None:
    jobs = synthetic(300, 2)
    first = predict(jobs, model, 4)
    for other in PREDICTIONS:  # other models drawn in between change nothing
        predict(jobs, other, 4)
    assert predict(jobs, model, 4) == first
    assert len(first) == len(jobs)
    if model.startswith(("noise-add", "lognormal")):
        assert predict(jobs, model, 5) != first
        assert all(p is not None and p >= 1 for p in first)
    else:
        assert predict(jobs, model, 5) == first


def test_over_is_never_below_exact() -> None:
    jobs = synthetic(2_000, 9)
    over = predict(jobs, "over", 9)
    exact = predict(jobs, "exact", 9)
    assert all(o is not None and e is not None and o >= e for o, e in zip(over, exact, strict=True))


@pytest.mark.parametrize(("model", "sigma"), [("lognormal-0.5", 0.5), ("lognormal-1.0", 1.0)])
def test_lognormal_noise_is_unbiased_in_log_space(model: str, sigma: float) -> None:
    jobs = [Job(0.0, 1, 1000)] * 20_000  # long outputs: rounding does not bias the logs
    logs = [math.log(p / 1000) for p in predict(jobs, model, 3) if p is not None]
    assert statistics.fmean(logs) == pytest.approx(0.0, abs=0.03)
    assert statistics.stdev(logs) == pytest.approx(sigma, rel=0.05)
    assert predict(jobs[:500], "lognormal-0.5", 3) != predict(jobs[:500], "lognormal-1.0", 3)


def test_lognormal_models_keep_the_predictions_they_had_as_noise() -> None:
    """Renamed, not changed: the stream of (noise-1.0, seed) before is (lognormal-1.0, seed)."""
    jobs = synthetic(200, 4)
    rng = random.Random("dla-predict:noise-1.0:4")
    old = [max(1, round(j.output_tokens * math.exp(rng.gauss(0.0, 1.0)))) for j in jobs]
    assert predict(jobs, "lognormal-1.0", 4) == old


@pytest.mark.parametrize(("model", "sigma"), [("noise-add-0.5", 0.5), ("noise-add-1.0", 1.0)])
def test_additive_noise_has_sd_sigma_times_the_length(model: str, sigma: float) -> None:
    """docs/dla-value.md: true length + N(0, (sigma * L)**2), rounded, at least 1."""
    jobs = [Job(0.0, 1, 1000)] * 20_000
    got = [p for p in predict(jobs, model, 3) if p is not None]
    floored = sum(p == 1 for p in got) / len(got)
    # The floor at 1 takes the draws below zero: P(Z < -1/sigma).
    expected_floor = statistics.NormalDist().cdf(-1 / sigma)
    assert floored == pytest.approx(expected_floor, abs=0.01)
    unfloored = [p for p in got if p > 1]
    if sigma == 0.5:  # the floor is rare: the mean and sd are those of the normal
        assert statistics.fmean(got) == pytest.approx(1000, rel=0.01)
        assert statistics.stdev(got) == pytest.approx(sigma * 1000, rel=0.05)
    assert min(unfloored) >= 2
    assert predict(jobs[:500], model, 3) != predict(jobs[:500], "lognormal-1.0", 3)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 100_000), min_size=1, max_size=50),
    st.integers(0, 2**32),
    st.sampled_from(["noise-add-0.5", "noise-add-1.0", "lognormal-0.5", "lognormal-1.0"]),
)
def test_noisy_predictions_are_never_below_one(lengths: list[int], seed: int, model: str) -> None:
    jobs = [Job(0.0, 1, n) for n in lengths]
    got = predict(jobs, model, seed)
    assert all(type(p) is int and p >= 1 for p in got)


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(WorkloadError) as info:
        predict(JOBS, "noise-2.0", 1)
    assert info.value.code == "params"
    assert str(info.value) == (
        "expected a prediction model among exact, noise-add-0.5, noise-add-1.0, lognormal-0.5, "
        "lognormal-1.0, over, none, found 'noise-2.0' [params]"
    )
    with pytest.raises(WorkloadError) as info:
        predict(JOBS, "noise-1.0", 1)
    assert str(info.value).endswith("found 'noise-1.0' (now named 'lognormal-1.0') [params]")
    with pytest.raises(WorkloadError):
        predict(JOBS, "exact", 1.0)  # type: ignore[arg-type]


def test_default_lengths_sit_near_burstgpt() -> None:
    """The defaults' medians are near those of BurstGPT's first rows (594 and 337 tokens)."""
    jobs = synthetic(20_000, 2)
    assert statistics.median(j.prompt_tokens for j in jobs) == pytest.approx(594, rel=0.1)
    assert statistics.median(j.output_tokens for j in jobs) == pytest.approx(337, rel=0.1)


def test_synthetic_is_the_start_of_the_endless_stream_and_predict_applies_predictor() -> None:
    stream = synthetic_stream(5)
    assert [next(stream) for _ in range(300)] == synthetic(300, 5)
    jobs = synthetic(300, 5)
    for model in PREDICTIONS:
        one = predictor(model, 5)
        assert [one(job) for job in jobs] == predict(jobs, model, 5)
