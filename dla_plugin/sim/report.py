"""``python -m dla_plugin.sim``: run the policies over seeds and prediction models, print a
table (mean ± standard deviation over seeds, and the change against LIFO), optionally plot."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from dla_plugin.sim.predict import PREDICTIONS, predict
from dla_plugin.sim.simulate import POLICIES, RunResult, SimConfig, percentile, simulate
from dla_plugin.sim.workload import Job, SyntheticParams, WorkloadError, load_burstgpt, synthetic

__all__ = ["METRICS", "Cell", "main", "metrics", "summarize"]

#: (key, label, unit): what the table reports for each run.
METRICS = (
    ("jct_p50", "JCT p50", "s"),
    ("jct_p99", "JCT p99", "s"),
    ("preemptions", "preemptions", ""),
    ("wasted", "wasted tokens", ""),
    ("wasted_output", "of which output", ""),
    ("throughput", "throughput", "tok/s"),
)


def metrics(run: RunResult) -> dict[str, float]:
    """The table's figures of one run."""
    return {
        "jct_p50": percentile(run.jct_s, 50),
        "jct_p99": percentile(run.jct_s, 99),
        "preemptions": float(run.total_preemptions),
        "wasted": float(run.wasted_tokens),
        "wasted_output": float(run.wasted_output_tokens),
        "throughput": run.throughput,
    }


@dataclass
class Cell:
    """One (prediction model, policy): a figure per seed, and its change against LIFO."""

    values: dict[str, list[float]] = field(default_factory=dict)
    changes: dict[str, list[float]] = field(default_factory=dict)  # per seed, in percent


def summarize(
    runs: dict[tuple[str, str, int], RunResult],
) -> dict[tuple[str, str], Cell]:
    """Cells keyed by (prediction model, policy) from runs keyed by (model, policy, seed)."""
    cells: dict[tuple[str, str], Cell] = {}
    for (model, policy, seed), run in runs.items():
        cell = cells.setdefault((model, policy), Cell())
        base = metrics(runs[(model, "lifo", seed)])
        for key, value in metrics(run).items():
            cell.values.setdefault(key, []).append(value)
            change = 100.0 * (value - base[key]) / base[key] if base[key] else 0.0
            cell.changes.setdefault(key, []).append(change)
    return cells


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def _figure(key: str, value: float) -> str:
    return f"{value:.2f}" if key.startswith("jct") else f"{value:,.0f}"


def format_table(cells: dict[tuple[str, str], Cell], seeds: int) -> str:
    """The table: one line per (model, policy), each metric as mean ± sd and its change."""
    header = ["predictions", "policy"] + [
        f"{label}{f' ({unit})' if unit else ''}" for _, label, unit in METRICS
    ]
    lines = [header]
    models = list(dict.fromkeys(m for m, _ in cells))  # in the order they were run
    for model, policy in ((m, p) for m in models for p in POLICIES):
        cell = cells[(model, policy)]
        row = [model, policy]
        for key, _, _ in METRICS:
            mean, sd = _mean_sd(cell.values[key])
            text = f"{_figure(key, mean)} ± {_figure(key, sd)}"
            if policy != "lifo":
                cmean, csd = _mean_sd(cell.changes[key])
                text += f" ({cmean:+.0f}% ± {csd:.0f})"
            row.append(text)
        lines.append(row)
    widths = [max(len(r[i]) for r in lines) for i in range(len(header))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    out.append(f"mean ± sd over {seeds} seeds; (change against LIFO, mean ± sd over seeds)")
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
            means = [_mean_sd(cells[(m, policy)].changes[key])[0] for m in models]
            sds = [_mean_sd(cells[(m, policy)].changes[key])[1] for m in models]
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
    """A progress bar on standard error (one line per run when it is not a terminal)."""

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

    def run_done(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.tty:
            self.update(0)
            if self.done == self.total:
                self.stream.write("\n")
        else:
            elapsed = time.monotonic() - self.start
            self.stream.write(f"run {self.done}/{self.total} {label} ({elapsed:.0f} s)\n")
        self.stream.flush()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dla_plugin.sim",
        description="Does DLA pay off? Run LIFO, DLA victim and DLA victim + admission "
        "reserve over a trace, for several seeds and prediction models.",
    )
    parser.add_argument("--requests", type=int, default=10_000, help="jobs per trace")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..N (at least 3 for sd)")
    parser.add_argument(
        "--predictions",
        default="exact",
        help=f"comma-separated models from {', '.join(PREDICTIONS)}, or 'all'",
    )
    parser.add_argument("--burstgpt", type=Path, help="a BurstGPT CSV file instead of synthetic")
    parser.add_argument("--model", help="with --burstgpt: keep only this Model")
    parser.add_argument(
        "--rate",
        type=float,
        default=SyntheticParams().rate_per_s,
        help="synthetic: mean arrivals per second outside bursts",
    )
    parser.add_argument(
        "--blocks", type=int, default=SimConfig().total_blocks, help="KV blocks of 16 tokens"
    )
    parser.add_argument(
        "--step-ms",
        type=float,
        default=SimConfig().step_s * 1000,
        help="duration of one engine step",
    )
    parser.add_argument("--plot", type=Path, help="draw the comparison (needs ecpa[plot])")
    parser.add_argument("--json", type=Path, help="write every run's figures as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the simulator; exit 0, or 2 for bad arguments or a bad trace file."""
    args = _parser().parse_args(argv)
    models = list(PREDICTIONS) if args.predictions == "all" else args.predictions.split(",")
    unknown = [m for m in models if m not in PREDICTIONS]
    if unknown or args.requests < 1 or args.seeds < 1 or args.blocks < 256 or args.step_ms <= 0:
        print(
            f"sim: expected --predictions from {PREDICTIONS} (found {unknown or 'ok'}), "
            "--requests >= 1, --seeds >= 1, --blocks >= 256, --step-ms > 0",
            file=sys.stderr,
        )
        return 2
    config = SimConfig(total_blocks=args.blocks, step_s=args.step_ms / 1000)
    traces: dict[int, list[Job]] = {}
    try:
        for seed in range(1, args.seeds + 1):
            if args.burstgpt is not None:  # one real trace; seeds vary the predictions
                traces[seed] = traces.get(1) or load_burstgpt(
                    args.burstgpt, limit=args.requests, model=args.model
                )
            else:
                params = SyntheticParams(rate_per_s=args.rate)
                traces[seed] = synthetic(args.requests, seed, params)
    except WorkloadError as exc:
        print(f"sim: {exc}", file=sys.stderr)
        return 2
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("sim: --plot needs matplotlib: pip install 'ecpa[plot]'", file=sys.stderr)
            return 2
    n_jobs = len(traces[1])
    progress = _Progress(
        len(models) * args.seeds * len(POLICIES), n_jobs, sys.stderr, not args.quiet
    )
    runs: dict[tuple[str, str, int], RunResult] = {}
    for model in models:
        for seed, jobs in traces.items():
            predictions = predict(jobs, model, seed)
            for policy in POLICIES:
                runs[(model, policy, seed)] = simulate(
                    jobs, predictions, policy, config, progress=progress.update
                )
                progress.run_done(f"{model} seed {seed} {policy}")
    cells = summarize(runs)
    source = f"BurstGPT {args.burstgpt}" if args.burstgpt else f"synthetic, rate {args.rate}/s"
    print(
        f"{n_jobs} jobs ({source}); {config.total_blocks} blocks of {config.block_size} "
        f"tokens; a step is {config.step_s * 1000:g} ms"
    )
    print(format_table(cells, args.seeds))
    if args.json is not None:
        doc = [
            {"predictions": m, "policy": p, "seed": s, **metrics(r)}
            for (m, p, s), r in sorted(runs.items())
        ]
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    if args.plot is not None:
        plot(cells, args.plot)
        print(f"plot: {args.plot}")
    return 0
