"""``python -m dla_plugin.drive``: a scheduler process with the DLA plugin inside.

It runs the block-pool engine (:mod:`dla_plugin.engine`) over a seeded stream of requests
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
import random
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from importlib.metadata import entry_points
from types import FrameType
from typing import Any

from dla_plugin.engine import BlockPoolEngine, SimRequest
from dla_plugin.host import PreemptionController, VictimPolicy

__all__ = ["load_policy", "main", "requests"]

PREDICTIONS = ("exact", "none", "noisy")


def requests(
    seed: int, *, predictions: str = "exact", rate: float = 0.3, sigma: float = 0.5
) -> Iterator[tuple[int, SimRequest]]:
    """An endless, seeded stream of ``(arrival step, request)``: bursty Poisson arrivals,
    log-normal prompts and heavy-tailed (Pareto) outputs, each at most 512 tokens (so any
    request fits a pool of 64 blocks of 16), with predictions ``exact``,
    ``none`` or ``noisy`` (multiplicative log-normal noise of ``sigma``)."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible workload, not a secret
    step, n = 0, 0
    while True:
        burst = 4.0 if rng.random() < 0.1 else 1.0  # one step in ten is a burst
        for _ in range(_poisson(rng, rate * burst)):
            prompt = max(1, min(512, int(rng.lognormvariate(4.5, 0.8))))
            output = max(1, min(512, int(16 * rng.paretovariate(1.3))))
            predicted: int | None = output
            if predictions == "none":
                predicted = None
            elif predictions == "noisy":
                predicted = max(1, round(output * rng.lognormvariate(0.0, sigma)))
            yield step, SimRequest(f"req-{n}", float(step), prompt, output, predicted)
            n += 1
        step += 1


def _poisson(rng: random.Random, lam: float) -> int:
    limit, k, p = math.exp(-lam), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


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
    parser.add_argument("--blocks", type=int, default=256, help="KV blocks in the pool")
    parser.add_argument("--rate", type=float, default=0.3, help="mean arrivals per step")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the driver; returns the exit status (0, or 2 for bad arguments)."""
    args = _parser().parse_args(argv)
    if args.steps is None and args.seconds is None:
        args.steps = 1000
    if (args.steps is not None and args.steps < 0) or args.blocks < 64 or args.rate <= 0:
        print("drive: expected --steps >= 0, --blocks >= 64, --rate > 0", file=sys.stderr)
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
    arrival, pending = next(stream)
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
