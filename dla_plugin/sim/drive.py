"""``python -m dla_plugin.drive``: a scheduler process with the DLA plugin inside.

It runs the block-pool engine (:mod:`dla_plugin.sim.engine`) over a seeded stream of requests
with predicted output lengths, loading and calling the plugin through one of the three ways
into the vLLM-HUST host, as the host's own code does (DLA.md "Host contract: three ways in"):

- ``--path legacy`` (default): ``additional_config.victim_selector_plugin = "dla"``, the
  entry point of group ``vllm.victim_selector``, ``pick_victim`` on the scheduler's
  ``running`` (:mod:`dla_plugin.sim.host.victim_selector`);
- ``--path component``: ``--extension org.vllm-hust.dla`` admitted from the installed bundle
  manifest and ``victim_selector_component = "org.vllm-hust.dla/victim-selector"``
  (:mod:`dla_plugin.sim.host.bundles`), its ``implementation_ref`` materialized;
- ``--path policy``: ``--preemption-policy dla_plugin.selector.DlaVictimSelector``, the typed
  preemption policy controller (:mod:`dla_plugin.sim.host.preemption`).

``--policy builtin`` runs without the plugin. Under ``ecpa run`` the plugin's observer signs
what the policy did; without a launch binding nothing is signed.

It stops after ``--steps`` steps or ``--seconds`` seconds (``--step-ms`` paces the steps
like a real engine), on SIGTERM or SIGINT (cleanly: the observer's final record is written),
and prints one JSON summary line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import Any

from dla_plugin import host_evidence
from dla_plugin.sim.engine import BlockPoolEngine, SimRequest
from dla_plugin.sim.host.bundles import BundleError, resolve_startup
from dla_plugin.sim.host.preemption import HostPath, PreemptionController
from dla_plugin.sim.host.preemption import load_policy as load_typed_policy
from dla_plugin.sim.host.victim_selector import (
    COMPONENT_KEY,
    DISABLED_KEY,
    PLUGIN_KEY,
    NoOpVictimSelector,
    SelectorScheduler,
    get_victim_selector,
)
from dla_plugin.sim.predict import PREDICTIONS, predictor
from dla_plugin.sim.ranks import run_ranks
from dla_plugin.sim.workload import SyntheticParams, WorkloadError, synthetic_stream

__all__ = ["PATHS", "host_path", "main", "requests"]

#: The three ways into the host (DLA.md), the legacy entry point first (the driver's default).
PATHS = ("legacy", "component", "policy")
BUNDLE_ID = "org.vllm-hust.dla"
COMPONENT_ID = "org.vllm-hust.dla/victim-selector"
POLICY_QUALNAME = "dla_plugin.selector.DlaVictimSelector"

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


class _SchedulerConfig:
    def __init__(self, preemption_policy: str | None) -> None:
        self.preemption_policy = preemption_policy


class _VllmConfig:
    """The part of the engine's configuration the host paths read."""

    def __init__(self, additional_config: dict[str, Any], preemption_policy: str | None) -> None:
        self.additional_config = additional_config
        self.scheduler_config = _SchedulerConfig(preemption_policy)


def host_path(path: str, name: str, *, bypass: bool = False) -> HostPath:
    """The host as a user configures it on ``path`` (:data:`PATHS`) for plugin ``name``
    (``dla``, or ``builtin`` for no plugin), with the emergency bypass when ``bypass``.

    Raises:
        LookupError: when the host would not start: the plugin or bundle is not installed,
            or the loaded object breaks the host's contract (the message says why).
    """
    additional: dict[str, Any] = {DISABLED_KEY: True} if bypass else {}
    qualname = POLICY_QUALNAME if path == "policy" and name != "builtin" else None
    config = _VllmConfig(additional, qualname)
    try:
        if path == "policy":
            return PreemptionController(load_typed_policy(config))
        if name == "builtin":
            return SelectorScheduler(NoOpVictimSelector())
        if path == "component":
            additional[COMPONENT_KEY] = COMPONENT_ID
            components = resolve_startup([BUNDLE_ID])
            return SelectorScheduler(get_victim_selector(config, components=components))
        if path != "legacy":
            raise ValueError(f"expected --path {' | '.join(PATHS)}, found {path!r}")
        additional[PLUGIN_KEY] = name
        return SelectorScheduler(get_victim_selector(config))
    except (BundleError, RuntimeError, TypeError, ValueError, ImportError) as exc:
        raise LookupError(f"the host would not start: {type(exc).__name__}: {exc}") from exc


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
    parser.add_argument(
        "--path",
        choices=PATHS,
        default="legacy",
        help="how the host loads the plugin: the legacy entry point (victim_selector_plugin), "
        "the typed component (--extension + victim_selector_component), or the typed "
        "preemption policy (--preemption-policy)",
    )
    parser.add_argument(
        "--policy", default="dla", help="the plugin (legacy entry point name), or 'builtin'"
    )
    parser.add_argument("--predictions", choices=PREDICTIONS, default="exact")
    parser.add_argument("--bypass", action="store_true", help="set the emergency bypass")
    parser.add_argument(
        "--predictor-stops-after",
        type=float,
        metavar="S",
        help="the length predictor goes away after S seconds: requests arriving later carry "
        "no prediction (the plugin then abstains once the predicted ones are gone)",
    )
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
        "--dp-rank",
        type=int,
        default=0,
        help="this engine core's data-parallel rank: the host binds the process to role "
        "engine-core-scheduler and this ordinal (its evidence's slot scheduler.RANK)",
    )
    parser.add_argument(
        "--linger",
        type=float,
        default=0.0,
        metavar="S",
        help="after the last step, print the summary and stay alive S seconds, idle (a "
        "server waiting for requests), before exiting",
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
        if arg in ("--processes", "--seed", "--dp-rank"):
            skip = True
            continue
        if arg == "--restart" or arg.startswith(("--processes=", "--seed=", "--dp-rank=")):
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
    if not 0 <= args.dp_rank <= 65535:
        print("drive: expected --dp-rank within [0, 65535]", file=sys.stderr)
        return 2
    # The engine core binds its process identity before it builds its scheduler.
    host_evidence.bind_process_identity("engine-core-scheduler", args.dp_rank)
    try:
        controller = host_path(args.path, args.policy, bypass=args.bypass)
    except LookupError as exc:
        print(f"drive: {exc}", file=sys.stderr)
        return 2
    engine = BlockPoolEngine(controller, total_blocks=args.blocks)
    stream = requests(args.seed, predictions=args.predictions, rate=args.rate)
    try:
        arrival, pending = next(stream)
    except WorkloadError as exc:
        print(f"drive: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    deadline = None if args.seconds is None else started + args.seconds
    stops = None if args.predictor_stops_after is None else started + args.predictor_stops_after
    stopped_by = None
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop)
    try:
        while (args.steps is None or engine.stats.steps < args.steps) and (
            deadline is None or time.monotonic() < deadline
        ):
            while arrival <= engine.stats.steps:
                if stops is not None and time.monotonic() >= stops:
                    pending.predicted_length = None  # the predictor is gone
                engine.add(pending)
                arrival, pending = next(stream)
            engine.step()
            if args.step_ms:
                time.sleep(args.step_ms / 1000)
    except _Stop as stop:
        stopped_by = str(stop)
    stats = engine.stats
    summary = {
        "path": args.path,
        "pid": os.getpid(),
        "dp_rank": args.dp_rank,
        "steps": stats.steps,
        "finished": len(stats.finished),
        "preemptions": stats.preemptions,
        "wasted_tokens": stats.wasted_tokens,
        "host": controller.summary(),
        "stopped_by": stopped_by,
    }
    print(json.dumps(summary), flush=True)
    if args.linger > 0 and stopped_by is None:
        with contextlib.suppress(_Stop):  # SIGTERM ends the wait, cleanly
            time.sleep(args.linger)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
