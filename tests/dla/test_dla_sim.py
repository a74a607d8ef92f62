"""The DLA value simulator (dla_plugin.sim.simulate): determinism, identity without predictions,
bookkeeping under every step model, decode steps taken at once, and the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dla_plugin.sim.predict import PREDICTIONS, predict
from dla_plugin.sim.runs import metrics
from dla_plugin.sim.simulate import POLICIES, SimConfig, percentile, simulate
from dla_plugin.sim.steptime import ConstantStep
from dla_plugin.sim.workload import SyntheticParams, synthetic
from tests.support import ROOT

CONFIG = SimConfig(total_blocks=512)  # small: the pool overflows and preempts
CONSTANT = SimConfig(total_blocks=512, step_model=ConstantStep(0.025))
STEP_MODELS = {"profiled": CONFIG, "constant": CONSTANT}
JOBS = synthetic(600, 1, SyntheticParams())


def test_deterministic_for_a_seed() -> None:
    preds = predict(JOBS, "exact", 1)
    for policy in POLICIES:
        assert simulate(JOBS, preds, policy, CONFIG) == simulate(JOBS, preds, policy, CONFIG)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_without_predictions_every_policy_is_lifo_request_by_request(seed: int) -> None:
    jobs = synthetic(600, seed, SyntheticParams())
    none = predict(jobs, "none", seed)
    lifo = simulate(jobs, none, "lifo", CONFIG)
    assert lifo.total_preemptions > 0  # the comparison means something
    for policy in ("dla", "dla+reserve"):
        run = simulate(jobs, none, policy, CONFIG)
        assert run.finish_s == lifo.finish_s
        assert run.preemptions == lifo.preemptions
        assert run.wasted_tokens == lifo.wasted_tokens


@pytest.mark.parametrize("step", sorted(STEP_MODELS))
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("model", ["exact", "noise-add-1.0", "lognormal-1.0", "over"])
def test_every_job_finishes_once_and_tokens_are_conserved(
    policy: str, model: str, step: str
) -> None:
    preds = predict(JOBS, model, 1)
    run = simulate(JOBS, preds, policy, STEP_MODELS[step])
    assert len(run.finish_s) == len(JOBS)
    assert all(j > 0 for j in run.jct_s)  # nobody finishes before arriving, or at once
    assert all(0 <= q <= j for q, j in zip(run.queue_s, run.jct_s, strict=True))
    assert run.output_tokens == sum(job.output_tokens for job in JOBS)
    # Every computed token is in a finished job's prompt + output, or was wasted.
    assert run.computed_tokens - run.wasted_tokens == sum(
        job.prompt_tokens + job.output_tokens for job in JOBS
    )
    assert 0 <= run.wasted_s <= run.busy_s <= run.makespan_s + 1e-9
    assert run.decodes <= run.output_tokens


@pytest.mark.parametrize("step", sorted(STEP_MODELS))
@pytest.mark.parametrize("model", ["exact", "lognormal-1.0", "none"])
@pytest.mark.parametrize("policy", POLICIES)
def test_decode_steps_taken_at_once_change_nothing(policy: str, model: str, step: str) -> None:
    """Engine.decode_steps ends exactly where step() by step() would: every figure equal."""
    for seed in (1, 2):
        jobs = synthetic(400, seed)
        preds = predict(jobs, model, seed)
        fast = simulate(jobs, preds, policy, STEP_MODELS[step])
        slow = simulate(jobs, preds, policy, STEP_MODELS[step], batch_decodes=False)
        assert fast == slow
        assert fast.total_preemptions > 0 or model == "none"


def test_recomputation_costs_step_time_under_the_profiled_model() -> None:
    """docs/dla-value.md: a preempted request's recomputation costs time, which the waste shows."""
    preds = predict(JOBS, "exact", 1)
    small = simulate(JOBS, preds, "lifo", CONFIG)
    roomy = simulate(JOBS, preds, "lifo", SimConfig(total_blocks=8192))
    assert small.total_preemptions > 0
    assert roomy.total_preemptions == 0
    assert roomy.wasted_s == 0.0
    assert small.wasted_s > 0
    # The recomputed tokens are work the roomy pool did not do: the busy time shows it.
    assert small.busy_s > roomy.busy_s
    # Under a constant step a recomputation costs no time of its own (the engine of before).
    constant = simulate(JOBS, preds, "lifo", CONSTANT)
    assert constant.wasted_tokens > 0
    assert constant.wasted_s < small.wasted_s


@pytest.mark.parametrize("step", sorted(STEP_MODELS))
def test_lifo_reads_no_prediction_so_one_lifo_run_serves_every_model(step: str) -> None:
    """What runs.run_all relies on to run LIFO once a seed, and DLA without predictions not
    at all: every figure equal, not just the finish times."""
    lifo = metrics(simulate(JOBS, predict(JOBS, "none", 1), "lifo", STEP_MODELS[step]))
    for model in PREDICTIONS:
        assert metrics(simulate(JOBS, predict(JOBS, model, 1), "lifo", STEP_MODELS[step])) == lifo
    for policy in ("dla", "dla+reserve"):
        run = simulate(JOBS, predict(JOBS, "none", 1), policy, STEP_MODELS[step])
        assert metrics(run) == lifo


def test_the_victim_rule_changes_something_with_predictions() -> None:
    preds = predict(JOBS, "exact", 1)
    lifo = simulate(JOBS, preds, "lifo", CONFIG)
    dla = simulate(JOBS, preds, "dla", CONFIG)
    assert dla.finish_s != lifo.finish_s


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="predictions"):
        simulate(JOBS, [None], "lifo", CONFIG)
    with pytest.raises(ValueError, match="policy"):
        simulate(JOBS, predict(JOBS, "none", 1), "fifo", CONFIG)
    with pytest.raises(ValueError, match="0 < q"):
        percentile([], 50)
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 99) == 99.0


def run_sim(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dla_plugin.sim", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_command_prints_the_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "runs.json"
    done = run_sim(
        "--requests", "300", "--blocks", "512", "--predictions", "exact,none", "--json", str(out)
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "300 jobs (synthetic, rate 1.0/s); 512 blocks of 16 tokens; "
        "step time profiled (a100-llama2-7b)"
    )
    assert lines[1].split()[:4] == ["predictions", "policy", "JCT", "p50"]
    assert [line.split()[:2] for line in lines[3:9]] == [
        [m, p] for m in ("exact", "none") for p in POLICIES
    ]
    assert "over 3 seeds" in lines[9]
    assert "Queue and head-of-line blocking of the reserve:" in lines
    doc = json.loads(out.read_text())
    assert len(doc) == 2 * 3 * 3
    assert {(d["predictions"], d["policy"], d["seed"]) for d in doc} == {
        (m, p, s) for m in ("exact", "none") for p in POLICIES for s in (1, 2, 3)
    }
    assert {
        "preemptions",
        "wasted_tokens",
        "wasted_gpu_s",
        "jct_p50_s",
        "jct_p99_s",
        "jct_mean_s",
        "makespan_s",
        "mean_decode_batch",
        "queue_p50_s",
        "reserve_blocked_s",
    } <= set(doc[0])
    assert all(d["step_model"] == "a100-llama2-7b" and d["step_ms"] is None for d in doc)


def test_command_constant_step_and_its_arguments(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    args = ("--requests", "200", "--blocks", "512", "--seeds", "1", "--quiet")
    done = run_sim(*args, "--step-model", "constant", "--step-ms", "25", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith("a step lasts 25 ms")
    assert {(d["step_model"], d["step_ms"]) for d in json.loads(out.read_text())} == {
        ("constant", 25.0)
    }
    done = run_sim(*args, "--step-ms", "25")
    assert done.returncode == 2
    assert "expected no --step-ms with --step-model a100-llama2-7b" in done.stderr
    done = run_sim(*args, "--step-model", "h100")
    assert done.returncode == 2
    assert "invalid choice: 'h100'" in done.stderr
    done = run_sim(*args, "--predictions", "noise-1.0")
    assert done.returncode == 2
    assert "found 'noise-1.0' (now named 'lognormal-1.0') [params]" in done.stderr


def write_trace(path: Path, n: int, *, predicted: bool) -> None:
    rows = [
        "arrived_at,num_prefill_tokens,num_decode_tokens" + (",predicted_decode_tokens" * predicted)
    ]
    for job in synthetic(n, 7):
        row = f"{job.arrival_s!r},{job.prompt_tokens},{job.output_tokens}"
        rows.append(row + (f",{2 * job.output_tokens}" if predicted else ""))
    path.write_text("\n".join(rows) + "\n")


def test_command_replays_a_trace_and_seeds_vary_only_the_predictions(tmp_path: Path) -> None:
    trace, out = tmp_path / "t.csv", tmp_path / "t.json"
    write_trace(trace, 150, predicted=True)
    done = run_sim(
        "--trace", str(trace), "--blocks", "512", "--predictions", "all", "--json", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"150 jobs (trace {trace}); 512 blocks")
    doc = json.loads(out.read_text())
    models = list(dict.fromkeys(d["predictions"] for d in doc))
    assert models[:2] == ["exact", "trace"]
    assert "noise-add-1.0" in models
    by = {(d["predictions"], d["policy"], d["seed"]): d for d in doc}
    # One trace: what reads no noisy prediction is the same on every seed.
    for model, policy in [("exact", "lifo"), ("exact", "dla"), ("trace", "dla+reserve")]:
        assert by[(model, policy, 1)] == {**by[(model, policy, 2)], "seed": 1}
    assert by[("lognormal-1.0", "dla", 1)] != {**by[("lognormal-1.0", "dla", 2)], "seed": 1}


def test_command_refuses_options_that_would_be_ignored_or_lost(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    write_trace(trace, 30, predicted=False)
    cases = [
        (("--trace", str(trace), "--rate", "2"), "expected --rate only with the synthetic"),
        (("--model", "ChatGPT"), "expected --model only with --burstgpt"),
        (
            ("--json", str(tmp_path / "no" / "x.json")),
            f"expected --json to name a file that can be written, found {tmp_path}/no/x.json, "
            f"whose directory {tmp_path}/no does not exist",
        ),
        (
            ("--plot", str(tmp_path)),
            f"expected --plot to name a file that can be written, found the directory {tmp_path}",
        ),
        (("--step-model", "constant", "--step-ms", "0"), "expected a step of 0.001 ms to 60000 ms"),
        (("--jobs", "0"), "expected --requests >= 1, --seeds >= 1 and --jobs >= 1"),
    ]
    for args, message in cases:
        done = run_sim(*args, "--quiet")
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
        assert done.stdout == ""  # refused before running anything


def test_a_trace_is_read_whole_unless_requests_limits_it(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    write_trace(trace, 30, predicted=False)
    whole = run_sim("--trace", str(trace), "--seeds", "1", "--quiet")
    assert whole.stdout.startswith(f"30 jobs (trace {trace})"), whole.stderr
    first = run_sim("--trace", str(trace), "--seeds", "1", "--requests", "12", "--quiet")
    assert first.stdout.startswith(f"12 jobs (trace {trace})"), first.stderr


def test_command_reports_bad_traces_exactly(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,5\n1,10,0\n")
    done = run_sim("--trace", str(bad), "--quiet")
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"sim: {bad}:3: column 'num_decode_tokens': expected an integer >= 1"
    )
    assert done.stderr.rstrip().endswith("[value]")
    no_column = tmp_path / "plain.csv"
    write_trace(no_column, 5, predicted=False)
    done = run_sim("--trace", str(no_column), "--predictions", "trace", "--quiet")
    assert done.returncode == 2
    assert done.stderr == (
        "sim: expected 'trace' with a trace that has a predicted_decode_tokens column, "
        "found a trace without it [params]\n"
    )
    huge = tmp_path / "huge.csv"
    huge.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,5\n1,5000,100\n")
    done = run_sim("--trace", str(huge), "--blocks", "256", "--quiet")
    assert done.returncode == 2
    assert done.stderr == (
        "sim: expected requests of at most 4096 tokens, the pool of --blocks 256 (a request "
        f"must fit the pool alone), found 5100 tokens at {huge}:3 [params]\n"
    )


def test_command_reads_burstgpt_and_reports_bad_input(tmp_path: Path) -> None:
    sample = ROOT / "tests" / "data" / "burstgpt-sample.csv"
    done = run_sim("--burstgpt", str(sample), "--seeds", "3", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "BurstGPT" in done.stdout
    bad = tmp_path / "bad.csv"
    bad.write_text("Timestamp,Model\n1,x\n")
    done = run_sim("--burstgpt", str(bad), "--quiet")
    assert done.returncode == 2
    assert str(bad) in done.stderr
    done = run_sim("--predictions", "psychic")
    assert done.returncode == 2
    assert "psychic" in done.stderr


def test_wasted_output_is_the_decode_part_of_the_waste() -> None:
    preds = predict(JOBS, "exact", 1)
    for policy in POLICIES:
        run = simulate(JOBS, preds, policy, CONFIG)
        assert 0 <= run.wasted_output_tokens <= run.wasted_tokens
    # LIFO's victim is the newest request: it has produced little when it is preempted.
    lifo = simulate(JOBS, preds, "lifo", CONFIG)
    assert lifo.wasted_output_tokens < lifo.wasted_tokens / 2


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path: Path) -> None:
    fake = tmp_path / "fake" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('not installed')\n")
    done = subprocess.run(
        [sys.executable, "-m", "dla_plugin.sim", "--requests", "50", "--plot", "x.png"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{fake.parent}{os.pathsep}{ROOT}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "pip install 'ecpa[plot]'" in done.stderr


def test_plot_draws_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "dla.png"
    done = run_sim("--requests", "200", "--blocks", "512", "--quiet", "--plot", str(png))
    assert done.returncode == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_on_the_synthetic_workload_the_reserve_cuts_preemptions_and_waste() -> None:
    """DLA.md: with exact predictions, DLA victim + admission reserve preempts less and
    wastes fewer tokens than LIFO, on every seed (the default workload and engine)."""
    for seed in (1, 2, 3):
        jobs = synthetic(2_000, seed)
        preds = predict(jobs, "exact", seed)
        lifo = simulate(jobs, preds, "lifo")
        dla = simulate(jobs, preds, "dla+reserve")
        assert lifo.total_preemptions > 0
        assert dla.total_preemptions < 0.6 * lifo.total_preemptions
        assert dla.wasted_tokens < 0.6 * lifo.wasted_tokens
