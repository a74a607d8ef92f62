"""``python -m dla_plugin.sim``: run the policies over seeds and prediction models, print
tables (mean ± standard deviation over seeds, and the change against LIFO), optionally write
every run's figures as JSON and plot."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from dla_plugin.sim.engine import blocks_for
from dla_plugin.sim.predict import PREDICTIONS, predict
from dla_plugin.sim.runs import (
    HOL_METRICS,
    METRICS,
    Cell,
    Study,
    distinct,
    run_all,
    spread,
    summarize,
)
from dla_plugin.sim.simulate import POLICIES, SimConfig
from dla_plugin.sim.steptime import STEP_MODELS, step_model
from dla_plugin.sim.trace import Trace, load_trace
from dla_plugin.sim.workload import Job, SyntheticParams, WorkloadError, load_burstgpt, synthetic

__all__ = ["format_table", "main"]

TRACE_MODEL = "trace"  #: the prediction model that reads a trace's predicted_decode_tokens


def _figure(unit: str, value: float) -> str:
    if unit == "s":
        return f"{value:,.2f}"
    return f"{value:,.1f}" if abs(value) < 100 else f"{value:,.0f}"


def format_table(
    cells: dict[tuple[str, str], Cell],
    seeds: int,
    columns: Sequence[tuple[str, str, str]] = METRICS,
) -> str:
    """A table: one line per (model, policy), each figure as mean ± sd and its change."""
    header = ["predictions", "policy"] + [
        f"{label}{f' ({unit})' if unit else ''}" for _, label, unit in columns
    ]
    lines = [header]
    models = list(dict.fromkeys(m for m, _ in cells))  # in the order they were run
    for model, policy in ((m, p) for m in models for p in POLICIES):
        cell = cells[(model, policy)]
        row = [model, policy]
        for key, _, unit in columns:
            mean, sd = spread(cell.values[key])
            text = f"{_figure(unit, mean)} ± {_figure(unit, sd)}"
            changes = cell.changes[key]
            if policy != "lifo" and not any(math.isnan(c) for c in changes):
                cmean, csd = spread(changes)
                text += f" ({cmean:+.0f}% ± {csd:.0f})"
            row.append(text)
        lines.append(row)
    widths = [max(len(r[i]) for r in lines) for i in range(len(header))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    plural = "s" if seeds != 1 else ""
    out.append(f"mean ± sd over {seeds} seed{plural}; (change against LIFO, mean ± sd over seeds)")
    return "\n".join(out)


def plot(cells: dict[tuple[str, str], Cell], path: Path) -> None:
    """Bar charts of the change against LIFO, one panel per metric (needs matplotlib).

    Raises:
        ImportError: when matplotlib is not installed (``pip install 'ecpa[plot]'``).
    """
    import matplotlib  # optional extra: ecpa[plot]

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({m for m, _ in cells})
    policies = [p for p in POLICIES if p != "lifo"]
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 4), squeeze=False)
    for ax, (key, label, _) in zip(axes[0], METRICS, strict=True):
        width = 0.8 / len(policies)
        for j, policy in enumerate(policies):
            means = [spread(cells[(m, policy)].changes[key])[0] for m in models]
            sds = [spread(cells[(m, policy)].changes[key])[1] for m in models]
            xs = [i + j * width for i in range(len(models))]
            ax.bar(xs, means, width, yerr=sds, label=policy)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_title(f"{label}: change vs LIFO (%)")
        ax.set_xticks([i + width * (len(policies) - 1) / 2 for i in range(len(models))])
        ax.set_xticklabels(models, rotation=30, ha="right")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


class _Progress:
    """Progress on standard error: a bar on a terminal, else one line per run."""

    def __init__(self, total_runs: int, jobs: int, stream: TextIO, enabled: bool) -> None:
        self.total, self.jobs, self.stream, self.enabled = total_runs, jobs, stream, enabled
        self.done = 0
        self.tty = stream.isatty()
        self.start = time.monotonic()

    def update(self, finished: int) -> None:
        if not (self.enabled and self.tty):
            return
        frac = (self.done + finished / max(self.jobs, 1)) / self.total
        bar = "#" * int(30 * frac)
        elapsed = time.monotonic() - self.start
        self.stream.write(
            f"\r[{bar:<30}] {100 * frac:5.1f}%  {self.done}/{self.total} runs  {elapsed:5.0f} s"
        )
        self.stream.flush()

    def run_done(self, key: tuple[str, str, int]) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.tty:
            self.update(0)
            if self.done == self.total:
                self.stream.write("\n")
        else:
            elapsed = time.monotonic() - self.start
            model, policy, seed = key
            self.stream.write(
                f"run {self.done}/{self.total} {model} seed {seed} {policy} ({elapsed:.0f} s)\n"
            )
        self.stream.flush()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dla_plugin.sim",
        description="Does DLA pay off? Run LIFO, DLA victim and DLA victim + admission "
        "reserve over a trace, for several seeds and prediction models.",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--burstgpt", type=Path, help="a BurstGPT CSV file instead of synthetic")
    source.add_argument(
        "--trace",
        type=Path,
        help="a trace CSV (arrived_at,num_prefill_tokens,num_decode_tokens"
        "[,predicted_decode_tokens]) instead of synthetic; --seeds then vary only the "
        "prediction noise",
    )
    parser.add_argument(
        "--requests",
        type=int,
        help="jobs per trace: synthetic 10,000, BurstGPT the first 10,000; a --trace is read "
        "whole unless this is given",
    )
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..N (at least 3 for sd)")
    parser.add_argument(
        "--predictions",
        default="exact",
        help=f"comma-separated models from {', '.join(PREDICTIONS)} (and '{TRACE_MODEL}': "
        "the trace's predicted_decode_tokens), or 'all'",
    )
    parser.add_argument("--model", help="with --burstgpt: keep only this Model")
    parser.add_argument(
        "--rate",
        type=float,
        help=f"synthetic only: mean arrivals per second outside bursts "
        f"(default {SyntheticParams().rate_per_s:g})",
    )
    parser.add_argument(
        "--blocks", type=int, default=SimConfig().total_blocks, help="KV blocks of 16 tokens"
    )
    parser.add_argument(
        "--step-model",
        choices=STEP_MODELS,
        default=STEP_MODELS[0],
        help="how long a step lasts: profiled A100 80 GB / Llama-2-7B timings (default), or "
        "constant (--step-ms, 25 by default)",
    )
    parser.add_argument("--step-ms", type=float, help="with --step-model constant: a step's ms")
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="runs in parallel processes (default: the CPUs)",
    )
    parser.add_argument("--plot", type=Path, help="draw the comparison (needs ecpa[plot])")
    parser.add_argument("--json", type=Path, help="write every run's figures as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")
    return parser


def _unwritable(path: Path | None) -> str | None:
    """Why ``path`` cannot be written (checked before a run of minutes), or None."""
    if path is None:
        return None
    if path.is_dir():
        return f"the directory {path}"
    parent = path.parent
    if not parent.is_dir():
        return f"{path}, whose directory {parent} does not exist"
    if not os.access(parent, os.W_OK) and not os.access(path, os.W_OK):
        return f"{path}, in a directory this user cannot write"
    return None


def _late(message: str) -> int:
    """A failure after the run (its tables printed): say it, exit 1."""
    print(f"sim: {message}", file=sys.stderr)
    return 1


def _fail(message: str) -> int:
    print(f"sim: {message}", file=sys.stderr)
    return 2


def _models(asked: str, trace: Trace | None) -> list[str]:
    known = list(PREDICTIONS)
    if trace is not None and trace.predicted is not None:
        known.insert(1, TRACE_MODEL)
    if asked == "all":
        return known
    models = asked.split(",")
    for unknown in (m for m in models if m not in known):
        if unknown == TRACE_MODEL:
            raise WorkloadError(
                "params",
                f"{TRACE_MODEL!r} with a trace that has a predicted_decode_tokens column",
                "a trace without it" if trace is not None else "no --trace",
            )
        predict([], unknown, 1)  # raises: the message for a renamed or an unknown model
    return models


def _check_fits(jobs: list[Job], trace: Trace | None, where: str, config: SimConfig) -> None:
    tokens = config.total_blocks * config.block_size
    for i, job in enumerate(jobs):
        total = job.prompt_tokens + job.output_tokens
        if blocks_for(total, config.block_size) > config.total_blocks:
            line = f":{trace.lines[i]}" if trace is not None else f" (job {i + 1})"
            raise WorkloadError(
                "params",
                f"requests of at most {tokens} tokens, the pool of --blocks "
                f"{config.total_blocks} (a request must fit the pool alone)",
                f"{total} tokens at {where}{line}",
            )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the simulator; exit 0, 2 for bad arguments or a bad trace file, 1 when the run's
    --json or --plot file could not be written at the end."""
    args = _parser().parse_args(argv)
    if (args.requests is not None and args.requests < 1) or args.seeds < 1 or args.jobs < 1:
        return _fail("expected --requests >= 1, --seeds >= 1 and --jobs >= 1")
    if args.blocks < 256:  # 256 blocks of 16 hold the longest synthetic request
        return _fail(f"expected --blocks >= 256, found {args.blocks}")
    if args.rate is not None and (args.trace or args.burstgpt):
        return _fail("expected --rate only with the synthetic workload (not --trace/--burstgpt)")
    if args.model is not None and not args.burstgpt:
        return _fail("expected --model only with --burstgpt")
    for option, path in (("--json", args.json), ("--plot", args.plot)):
        problem = _unwritable(path)
        if problem:
            return _fail(f"expected {option} to name a file that can be written, found {problem}")
    if args.step_model == "constant" and args.step_ms is None:
        args.step_ms = 25.0
    try:
        model = step_model(args.step_model, args.step_ms)
    except ValueError as exc:
        return _fail(str(exc))
    config = SimConfig(total_blocks=args.blocks, step_model=model)
    trace: Trace | None = None
    traces: dict[int, list[Job]] = {}
    seeds = range(1, args.seeds + 1)
    try:
        if args.trace is not None:  # one real trace; seeds vary the predictions
            trace = load_trace(args.trace, limit=args.requests)  # None: the whole file
            traces = dict.fromkeys(seeds, trace.jobs)
            source = f"trace {args.trace}"
        elif args.burstgpt is not None:
            limit = args.requests or 10_000
            jobs = load_burstgpt(args.burstgpt, limit=limit, model=args.model)
            traces = dict.fromkeys(seeds, jobs)
            source = f"BurstGPT {args.burstgpt}"
        else:
            params = SyntheticParams(**({} if args.rate is None else {"rate_per_s": args.rate}))
            n = args.requests or 10_000
            traces = {seed: synthetic(n, seed, params) for seed in seeds}
            source = f"synthetic, rate {params.rate_per_s}/s"
        models = _models(args.predictions, trace)
        for seed, jobs in traces.items():
            _check_fits(jobs, trace, str(args.trace or args.burstgpt or f"seed {seed}"), config)
        predictions: dict[tuple[str, int], list[int | None]] = {}
        for m in models:
            for seed, jobs in traces.items():
                if m == TRACE_MODEL and trace is not None and trace.predicted is not None:
                    predictions[(m, seed)] = list(trace.predicted)
                else:
                    predictions[(m, seed)] = predict(jobs, m, seed)
    except WorkloadError as exc:
        return _fail(str(exc))
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return _fail("--plot needs matplotlib: pip install 'ecpa[plot]'")
    study = Study(traces, predictions, config)
    n_jobs = len(traces[1])
    total = len(distinct(study))
    progress = _Progress(total, n_jobs, sys.stderr, not args.quiet)
    workers = min(args.jobs, total)
    runs = run_all(study, workers=workers, done=progress.run_done, progress=progress.update)
    cells = summarize(runs)
    step = (
        f"a step lasts {args.step_ms:g} ms"
        if args.step_model == "constant"
        else f"step time profiled ({args.step_model})"
    )
    print(
        f"{n_jobs} jobs ({source}); {config.total_blocks} blocks of {config.block_size} "
        f"tokens; {step}"
    )
    print(format_table(cells, args.seeds))
    print()
    print("Queue and head-of-line blocking of the reserve:")
    print(format_table(cells, args.seeds, HOL_METRICS))
    status = 0
    if args.json is not None:
        doc = [
            {"predictions": m, "policy": p, "seed": s}
            | {"step_model": args.step_model, "step_ms": args.step_ms}
            | runs[(m, p, s)]
            for m, p, s in study.order()
        ]
        try:
            args.json.write_text(json.dumps(doc, indent=1) + "\n")
        except OSError as exc:  # the tables above are printed: say so, and fail
            status = _late(f"could not write --json {args.json}: {exc.strerror or exc}")
    if args.plot is not None:
        try:
            plot(cells, args.plot)
            print(f"plot: {args.plot}")
        except OSError as exc:
            status = _late(f"could not write --plot {args.plot}: {exc.strerror or exc}")
    return status
