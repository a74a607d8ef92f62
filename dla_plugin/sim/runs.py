"""The simulator's runs and their figures: every (prediction model, policy, seed) of a study,
run in worker processes (:func:`run_all`), and the figures the table and ``--json`` report of
each run (:func:`metrics`), summarized over seeds (:func:`summarize`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

from dla_plugin.sim.simulate import POLICIES, RunResult, SimConfig, percentile, simulate
from dla_plugin.sim.workload import Job

__all__ = [
    "HOL_METRICS",
    "METRICS",
    "Cell",
    "Study",
    "distinct",
    "metrics",
    "run_all",
    "spread",
    "summarize",
]

#: (key, label, unit): the main table's figures of a run.
METRICS = (
    ("jct_p50_s", "JCT p50", "s"),
    ("jct_p99_s", "JCT p99", "s"),
    ("jct_mean_s", "JCT mean", "s"),
    ("preemptions", "preemptions", ""),
    ("wasted_tokens", "wasted tokens", ""),
    ("wasted_gpu_s", "wasted GPU", "s"),
    ("mean_decode_batch", "decode batch", ""),
    ("throughput_tok_s", "throughput", "tok/s"),
)

#: (key, label, unit): the queue and the head-of-line blocking of the admission reserve.
HOL_METRICS = (
    ("queue_p50_s", "queue wait p50", "s"),
    ("queue_p99_s", "queue wait p99", "s"),
    ("reserve_blocked_s", "head blocked by reserve", "s"),
    ("reserve_blocked_wait_s", "wait behind it", "req*s"),
    ("reserve_bypasses", "admitted by prompt alone", ""),
)


def metrics(run: RunResult) -> dict[str, float]:
    """Every figure of one run (the tables' and ``--json``'s), times in seconds."""
    return {
        "jct_p50_s": percentile(run.jct_s, 50),
        "jct_p99_s": percentile(run.jct_s, 99),
        "jct_mean_s": statistics.fmean(run.jct_s),
        "preemptions": float(run.total_preemptions),
        "wasted_tokens": float(run.wasted_tokens),
        "wasted_output_tokens": float(run.wasted_output_tokens),
        "wasted_gpu_s": run.wasted_s,
        "busy_s": run.busy_s,
        "makespan_s": run.makespan_s,
        "mean_decode_batch": run.mean_decode_batch,
        "throughput_tok_s": run.throughput,
        "queue_p50_s": percentile(run.queue_s, 50),
        "queue_p99_s": percentile(run.queue_s, 99),
        "reserve_blocked_s": run.reserve_blocked_s,
        "reserve_blocked_wait_s": run.reserve_blocked_wait_s,
        "reserve_bypasses": float(run.reserve_bypasses),
        "steps": float(run.steps),
    }


@dataclass
class Cell:
    """One (prediction model, policy): a figure per seed, and its change against LIFO."""

    values: dict[str, list[float]] = field(default_factory=dict)
    changes: dict[str, list[float]] = field(default_factory=dict)  # per seed, in percent (nan:
    # LIFO's figure was 0 and this one is not)


def summarize(
    runs: dict[tuple[str, str, int], dict[str, float]],
) -> dict[tuple[str, str], Cell]:
    """Cells keyed by (prediction model, policy) from figures keyed by (model, policy, seed)."""
    cells: dict[tuple[str, str], Cell] = {}
    for (model, policy, seed), figures in runs.items():
        cell = cells.setdefault((model, policy), Cell())
        base = runs[(model, "lifo", seed)]
        for key, value in figures.items():
            cell.values.setdefault(key, []).append(value)
            if base[key]:
                change = 100.0 * (value - base[key]) / base[key]
            else:  # no change against nothing; any other figure has no percentage
                change = 0.0 if value == base[key] else math.nan
            cell.changes.setdefault(key, []).append(change)
    return cells


@dataclass(frozen=True)
class Study:
    """What to run: a trace per seed, the predictions of each (model, seed), an engine."""

    traces: dict[int, list[Job]]
    predictions: dict[tuple[str, int], list[int | None]]
    config: SimConfig

    def order(self) -> list[tuple[str, str, int]]:
        """Every run, as (prediction model, policy, seed), in the order of the table."""
        models = list(dict.fromkeys(m for m, _ in self.predictions))
        return [(m, p, s) for m in models for s in self.traces for p in POLICIES]


def _one(
    jobs: list[Job], predictions: list[int | None], policy: str, config: SimConfig
) -> dict[str, float]:
    return metrics(simulate(jobs, predictions, policy, config))


def _source(key: tuple[str, str, int], first_model: str) -> tuple[str, str, int]:
    """The run whose figures ``key``'s are: LIFO reads no prediction, so one LIFO run serves
    every prediction model of a seed; without predictions the DLA policies are LIFO, request
    by request (tests/dla/test_dla_sim.py shows both)."""
    model, policy, seed = key
    if policy == "lifo" or model == "none":
        return (first_model, "lifo", seed)
    return key


def run_all(
    study: Study,
    *,
    workers: int,
    done: Callable[[tuple[str, str, int]], None],
    progress: Callable[[int], None] | None = None,
) -> dict[tuple[str, str, int], dict[str, float]]:
    """The figures of every run of ``study``, keyed by (model, policy, seed); ``done`` is
    called as each distinct run ends (runs whose figures another run gives, see
    :func:`distinct`, are not run again). With ``workers`` > 1 the runs go to that many
    processes (each run is deterministic, so where it runs changes nothing); with 1 they run
    here and ``progress`` hears of the jobs finished within a run.
    """
    keys = study.order()
    todo = distinct(study)
    out: dict[tuple[str, str, int], dict[str, float]] = {}
    if workers <= 1:
        for key in todo:
            model, policy, seed = key
            predictions = study.predictions[(model, seed)]
            run = simulate(study.traces[seed], predictions, policy, study.config, progress=progress)
            out[key] = metrics(run)
            done(key)
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {
                pool.submit(_one, study.traces[s], study.predictions[(m, s)], p, study.config): (
                    m,
                    p,
                    s,
                )
                for m, p, s in todo
            }
            for future in as_completed(futures):
                key = futures[future]
                out[key] = future.result()
                done(key)
    first = keys[0][0] if keys else ""
    return {key: out[_source(key, first)] for key in keys}


def distinct(study: Study) -> list[tuple[str, str, int]]:
    """The runs :func:`run_all` takes: one per distinct result, in the table's order."""
    keys = study.order()
    first = keys[0][0] if keys else ""
    return list(dict.fromkeys(_source(key, first) for key in keys))


def spread(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard deviation (0 for a single value)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0
