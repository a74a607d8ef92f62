"""The demo's question behind the plugin: does DLA pay off? A small run of the value
simulator (``python -m dla_plugin.sim``, docs/dla-value.md) on the profiled A100 /
Llama-2-7B step time: LIFO, the DLA victim rule, and the rule with the admission reserve.
The simulator runs as a child process: ecpa never imports dla_plugin."""

from __future__ import annotations

import shlex
import subprocess
import sys

import typer

__all__ = ["sim_step"]

#: Small enough to take seconds: 1,000 jobs of the default workload, one seed.
ARGS = ["--requests", "1000", "--seeds", "1", "--predictions", "exact"]


def sim_step(checks: list[bool]) -> None:
    """Run the simulator once; one check: it ran on profiled time and printed every policy."""
    typer.echo("\n# does DLA pay off? the value simulator, steps timed as on an A100 80 GB")
    typer.echo("$ python -m dla_plugin.sim " + " ".join(shlex.quote(a) for a in ARGS))
    done = subprocess.run(  # noqa: S603 - our own interpreter and module, no shell
        [sys.executable, "-m", "dla_plugin.sim", *ARGS, "--quiet", "--jobs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    table = done.stdout.split("\n\n")[0]
    typer.echo((table or done.stderr).rstrip("\n"))
    policies = [line.split()[1] for line in table.splitlines()[3:6] if len(line.split()) > 1]
    ok = (
        done.returncode == 0
        and "step time profiled (a100-llama2-7b)" in table
        and policies == ["lifo", "dla", "dla+reserve"]
    )
    checks.append(ok)
    if not ok:
        typer.echo(f"!! expected the simulator's table; got exit {done.returncode}")
