"""``python -m dla_plugin.drive``: a scheduler process with the DLA plugin inside.

It runs the block-pool engine (:mod:`dla_plugin.sim.engine`) over a seeded stream of requests
with predicted output lengths, calling the victim-selection policy through the host
controller exactly as vLLM-HUST's preemption controller does. The policy is loaded the way
the host loads it: from the ``vllm.victim_selector`` entry point ``dla`` (``--policy
builtin`` runs without it). Under ``ecpa run`` the plugin's observer signs what the policy
did; without a launch binding nothing is signed.

It stops after ``--steps`` steps or ``--seconds`` seconds (``--step-ms`` paces the steps
like a real engine), on SIGTERM or SIGINT (cleanly: the observer's final record is written),
and prints one JSON summary line.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from importlib.metadata import entry_points
from types import FrameType
from typing import Any

from dla_plugin.host import PreemptionController, VictimPolicy
from dla_plugin.sim.engine import BlockPoolEngine, SimRequest
from dla_plugin.sim.predict import PREDICTIONS, predictor
from dla_plugin.sim.ranks import run_ranks
from dla_plugin.sim.workload import SyntheticParams, WorkloadError, synthetic_stream

__all__ = ["load_policy", "main", "requests"]

STEP_S = 0.025  #: one engine step: the engine's default constant step (dla_plugin.sim.steptime)


def requests(
    seed: int, *, predictions: str = "exact", rate: float = SyntheticParams().rate_per_s
) -> Iterator[tuple[int, SimRequest]]:
    """An endless, seeded stream of ``(arrival step, request)``: the simulator's synthetic
    trace (:func:`dla_plugin.sim.workload.synthetic_stream`, ``rate`` arrivals a second outside
    bursts) with the prediction model ``predictions`` (:data:`PREDICTIONS`).

    Raises:
        WorkloadError: for an unknown prediction model or a bad rate.
    """
    predicted = predictor(predictions, seed)
    jobs = synthetic_stream(seed, SyntheticParams(rate_per_s=rate))
    for n, job in enumerate(jobs):
        request = SimRequest(
            f"req-{n}", float(n), job.prompt_tokens, job.output_tokens, predicted(job)
        )
        yield math.floor(job.arrival_s / STEP_S), request


def load_policy(name: str, config: dict[str, Any]) -> VictimPolicy | None:
    """The policy the host would load: entry point ``name`` of group ``vllm.victim_selector``
    (``builtin``: no policy). Uses ``from_vllm_config`` when the class offers it.

    Raises:
        LookupError: when no such entry point is installed.
    """
    if name == "builtin":
        return None
    found = [ep for ep in entry_points(group="vllm.victim_selector") if ep.name == name]
    if not found:
        raise LookupError(f"expected an installed vllm.victim_selector entry point {name!r}")
    cls = found[0].load()
    if hasattr(cls, "from_vllm_config"):
        policy: VictimPolicy = cls.from_vllm_config({"additional_config": config})
    else:
        policy = cls(config)
    return policy


class _Stop(Exception):
    pass


def _stop(signum: int, frame: FrameType | None) -> None:
    del frame
    raise _Stop(signal.Signals(signum).name)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dla_plugin.drive",
        description="Run a simulated scheduler with the DLA victim selector inside.",
    )
    until = parser.add_mutually_exclusive_group()
    until.add_argument("--steps", type=int, help="stop after this many engine steps")
    until.add_argument("--seconds", type=float, help="stop after this many seconds")
    parser.add_argument("--step-ms", type=float, default=0.0, help="pause per step (ms)")
    parser.add_argument("--policy", default="dla", help="entry point name, or 'builtin'")
    parser.add_argument("--predictions", choices=PREDICTIONS, default="exact")
    parser.add_argument("--bypass", action="store_true", help="set the emergency bypass")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--blocks", type=int, default=512, help="KV blocks of 16 tokens")
    parser.add_argument(
        "--rate",
        type=float,
        default=SyntheticParams().rate_per_s,
        help="mean arrivals per second outside bursts (a step is 25 ms)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="run N scheduler processes (ranks), each its own engine, seed SEED+i and slot "
        "scheduler.i (ECPA_PROCESS_ORDINAL), like vLLM with data parallelism N",
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="with --processes: start a rank that died again, as a new process",
    )
    return parser


def _rank_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` without the options the parent of the ranks consumes."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--processes", "--seed"):
            skip = True
            continue
        if arg == "--restart" or arg.startswith(("--processes=", "--seed=")):
            continue
        out.append(arg)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the driver; returns the exit status (0, or 2 for bad arguments)."""
    args = _parser().parse_args(argv)
    if args.processes < 1 or args.processes > 1024:
        print("drive: expected --processes within [1, 1024]", file=sys.stderr)
        return 2
    if args.processes > 1 or args.restart:
        given = list(sys.argv[1:] if argv is None else argv)
        return run_ranks(_rank_argv(given), args.processes, seed=args.seed, restart=args.restart)
    if args.steps is None and args.seconds is None:
        args.steps = 1000
    if (args.steps is not None and args.steps < 0) or args.blocks < 256:
        # 256 blocks hold the longest request (2,048 prompt + 2,048 output tokens)
        print("drive: expected --steps >= 0 and --blocks >= 256", file=sys.stderr)
        return 2
    config = {"victim_selector_plugin_disabled": True} if args.bypass else {}
    try:
        policy = load_policy(args.policy, config)
    except LookupError as exc:
        print(f"drive: {exc}", file=sys.stderr)
        return 2
    controller = PreemptionController(policy)
    engine = BlockPoolEngine(controller, total_blocks=args.blocks)
    stream = requests(args.seed, predictions=args.predictions, rate=args.rate)
    try:
        arrival, pending = next(stream)
    except WorkloadError as exc:
        print(f"drive: {exc}", file=sys.stderr)
        return 2
    deadline = None if args.seconds is None else time.monotonic() + args.seconds
    stopped_by = None
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop)
    try:
        while (args.steps is None or engine.stats.steps < args.steps) and (
            deadline is None or time.monotonic() < deadline
        ):
            while arrival <= engine.stats.steps:
                engine.add(pending)
                arrival, pending = next(stream)
            engine.step()
            if args.step_ms:
                time.sleep(args.step_ms / 1000)
    except _Stop as stop:
        stopped_by = str(stop)
    stats, cs = engine.stats, controller.stats
    summary = {
        "steps": stats.steps,
        "finished": len(stats.finished),
        "preemptions": stats.preemptions,
        "wasted_tokens": stats.wasted_tokens,
        "policy_choices": cs.policy_choices,
        "abstentions": cs.abstentions,
        "policy_disabled": cs.disabled_reason,
        "stopped_by": stopped_by,
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
