"""``ecpa run``: start a command under a fresh launch, and record how it ended."""

from __future__ import annotations

import math
import os
import shlex
import signal
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ecpa.cli._common import fail_usage, safe
from ecpa.errors import EcpaError
from ecpa.launcher.run import (
    default_plan,
    finish_launch,
    load_plan,
    prepare_launch,
    run_launch,
)

__all__ = ["RUN_CONTEXT", "RUN_EXAMPLES", "run_command"]

#: Everything after the first COMMAND word belongs to the command (`-c` of `python -c`
#: included), never to `ecpa run`; `--` before the command is allowed and clearer.
RUN_CONTEXT: dict[str, Any] = {"allow_interspersed_args": False}

RUN_EXAMPLES = """\b
Examples:
  ecpa run --plan plan.json --evidence-dir runs -- vllm serve model
  ecpa run -- python -c "import os; print(os.environ['ECPA_LAUNCH_ID'])"
  ecpa status --launch runs/launch-0123456789abcdef

\b
plan.json: {"schema": "ecpa-plan/0.1", "plan_id", "plugin_id", "artifact_digest",
"issuer", "process_epoch", "emit_interval_s", "heartbeat_window_s", "max_duration_s"}
(plugin_id and artifact_digest required). Without --plan: the installed
org.vllm-hust.dla bundle.

\b
Exit status: the command's (128 + N when signal N killed it, 127 not found,
126 not executable); 2 usage error or bad plan, before anything runs.
"""


def run_command(
    command: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="COMMAND",
            help="The command to run and its arguments.",
            show_default=False,
        ),
    ] = None,
    plan: Annotated[
        Path | None,
        typer.Option(
            help="Plan file (ecpa-plan/0.1). Default: the installed org.vllm-hust.dla bundle.",
            show_default=False,
        ),
    ] = None,
    evidence_dir: Annotated[
        Path, typer.Option(help="Where launch directories are made: DIR/<launch_id>/.")
    ] = Path("ecpa-runs"),
    grace: Annotated[
        float,
        typer.Option(min=0.0, help="Seconds between forwarding SIGINT/SIGTERM/SIGHUP and SIGKILL."),
    ] = 10.0,
) -> None:
    """Run COMMAND under a fresh launch: a random launch id and challenge, a per-launch
    signing key enrolled in the launch's own trust store, and the ECPA_* binding in the
    command's environment. Exits with the command's status.
    """
    if not command:
        raise fail_usage("expected a COMMAND to run (ecpa run [OPTIONS] -- COMMAND...), found none")
    if not math.isfinite(grace):
        raise fail_usage(f"expected --grace as a finite number of seconds, found {grace}")
    chosen = load_plan(plan) if plan is not None else default_plan()
    launch = prepare_launch(chosen, evidence_dir, now=int(time.time()), environ=os.environ)
    typer.echo(f"ecpa run: launch {launch.launch_id} in {safe(str(launch.directory))}", err=True)
    result = run_launch(launch, command, grace=grace)
    try:
        finish_launch(launch, ended_at=int(time.time()), result=result)
    except EcpaError as exc:  # said loudly, but the command's status still passes through
        typer.echo(f"ecpa: {exc.code.value}: {safe(exc.detail)}", err=True)
    name = safe(shlex.quote(command[0]))
    if result.error is not None:
        typer.echo(f"ecpa run: {safe(result.error)}", err=True)
    elif result.signal is not None:
        typer.echo(f"ecpa run: {name} killed by {_signal_name(result.signal)}", err=True)
    typer.echo(
        f"ecpa run: {name} exited with status {result.status}; "
        f"ecpa status --launch {safe(shlex.quote(str(launch.directory)))}",
        err=True,
    )
    raise typer.Exit(result.status)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
