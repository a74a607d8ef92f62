"""The demo's question behind the plugin: does DLA pay off? A small run of the value
simulator (``python -m dla_plugin.sim``, docs/dla-value.md) on the profiled A100 /
Llama-2-7B step time: LIFO, the DLA victim rule, and the rule with the admission reserve.
The simulator runs as a child process: ecpa never imports dla_plugin."""

from __future__ import annotations

import shlex
import subprocess
import sys

from ecpa.demo._tour import Tour

__all__ = ["sim_step"]

#: Small enough to take seconds: 1,000 jobs of the default workload, one seed.
ARGS = ["--requests", "1000", "--seeds", "1", "--predictions", "exact"]


def sim_step(tour: Tour) -> None:
    """Run the simulator once; one check: it ran on profiled time and printed every policy."""
    tour.act("sim")
    tour.say("$ python -m dla_plugin.sim " + " ".join(shlex.quote(a) for a in ARGS))
    done = subprocess.run(  # noqa: S603 - our own interpreter and module, no shell
        [sys.executable, "-m", "dla_plugin.sim", *ARGS, "--quiet", "--jobs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    table = done.stdout.split("\n\n")[0]
    tour.say((table or done.stderr).rstrip("\n"))
    policies = [line.split()[1] for line in table.splitlines()[3:6] if len(line.split()) > 1]
    ok = (
        done.returncode == 0
        and "step time profiled (a100-llama2-7b)" in table
        and policies == ["lifo", "dla", "dla+reserve"]
    )
    tour.checks.append(ok)
    if not ok:
        tour.say(f"!! expected the simulator's table; got exit {done.returncode}")
