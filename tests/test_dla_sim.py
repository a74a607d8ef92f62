"""The DLA value simulator (dla_plugin.sim.simulate): determinism, identity without predictions,
bookkeeping, and the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dla_plugin.sim.predict import predict
from dla_plugin.sim.simulate import POLICIES, SimConfig, percentile, simulate
from dla_plugin.sim.workload import SyntheticParams, synthetic
from tests.support import ROOT

CONFIG = SimConfig(total_blocks=512)  # small: the pool overflows and preempts
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
        assert run.finish_steps == lifo.finish_steps
        assert run.preemptions == lifo.preemptions
        assert run.wasted_tokens == lifo.wasted_tokens


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("model", ["exact", "noise-1.0", "over"])
def test_every_job_finishes_once_and_tokens_are_conserved(policy: str, model: str) -> None:
    preds = predict(JOBS, model, 1)
    run = simulate(JOBS, preds, policy, CONFIG)
    assert len(run.finish_steps) == len(JOBS)
    assert all(j >= 0 for j in run.jct_s)  # nobody finishes before arriving
    assert run.output_tokens == sum(job.output_tokens for job in JOBS)
    # Every computed token is in a finished job's prompt + output, or was wasted.
    assert run.computed_tokens - run.wasted_tokens == sum(
        job.prompt_tokens + job.output_tokens for job in JOBS
    )


def test_the_victim_rule_changes_something_with_predictions() -> None:
    preds = predict(JOBS, "exact", 1)
    lifo = simulate(JOBS, preds, "lifo", CONFIG)
    dla = simulate(JOBS, preds, "dla", CONFIG)
    assert dla.finish_steps != lifo.finish_steps


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
    assert lines[0].startswith("300 jobs (synthetic")
    assert [line.split()[:2] for line in lines[3:9]] == [
        [m, p] for m in ("exact", "none") for p in POLICIES
    ]
    assert "over 3 seeds" in lines[-1]
    doc = json.loads(out.read_text())
    assert len(doc) == 2 * 3 * 3
    assert {"jct_p50", "jct_p99", "preemptions", "wasted", "wasted_output", "throughput"} <= set(
        doc[0]
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
    """Issue 8: with exact predictions, DLA victim + admission reserve preempts less and
    wastes fewer tokens than LIFO, on every seed (the default workload and engine)."""
    for seed in (1, 2, 3):
        jobs = synthetic(2_000, seed)
        preds = predict(jobs, "exact", seed)
        lifo = simulate(jobs, preds, "lifo")
        dla = simulate(jobs, preds, "dla+reserve")
        assert lifo.total_preemptions > 0
        assert dla.total_preemptions < 0.6 * lifo.total_preemptions
        assert dla.wasted_tokens < 0.6 * lifo.wasted_tokens
