"""``ecpa run``: start a command under a fresh launch, and record how it ended."""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ecpa._text import json_line, safe
from ecpa.cli._app import one_command
from ecpa.cli._common import Invocation, fail_usage
from ecpa.launcher.fresh import REPEAT_WINDOW_S, fresh_supervisor
from ecpa.launcher.manager import load_manager_key
from ecpa.launcher.plan import with_host_evidence
from ecpa.launcher.run import default_plan, load_plan, prepare_launch, supervise_launch
from ecpa.runtime import Slot, make_undumpable, plan_from_dict

__all__ = ["RUN_CONTEXT", "RUN_EXAMPLES", "run_app", "run_command"]


#: Everything after the first COMMAND word belongs to the command (`-c` of `python -c`
#: included), never to `ecpa run`; `--` before the command is allowed and clearer.
RUN_CONTEXT: dict[str, Any] = {"allow_interspersed_args": False}

RUN_EXAMPLES = """\b
Examples:
  ecpa run --plan plan.json --evidence-dir runs -- vllm serve model
  ecpa run -- python -c "import os; print(os.environ['ECPA_LAUNCH_ID'])"
  ecpa status --launch runs/launch-0123456789abcdef

\b
plan.json: ecpa-plan/0.3 (0.2, 0.1 read): plugin_id, artifact_digest (required), plan_id,
issuer, process_epoch, emit_interval_s, heartbeat_window_s, max_duration_s, max_abstain_s,
slots, host_evidence (off|required), host_policy (docs/cli.md). Without --plan: the
installed org.vllm-hust.dla bundle. The tree gets VLLM_ECPA_EVIDENCE_SINK (ecpa's) and
_STRICT, _PLAN_ID, _LAUNCH_ID (docs/host-evidence.md); a caller's VLLM_ECPA_* is refused.

\b
Supervision: ecpa run is a child subreaper; the command runs in its own
session with SIGTERM as its parent-death signal. When the command exits, or
on SIGINT/SIGTERM/SIGHUP/SIGQUIT, the whole tree gets the signal (SIGTERM
after an exit), SIGKILL --grace seconds later; a second signal: SIGKILL now.
Each scheduler process enrolls its own key through enroll.sock; no private
key is written to disk. An ecpa run whose pid already has children (an agent
forked before exec ecpa run) forks first and supervises from the child, so
nothing of theirs joins the launch; the parent passes signals on.

\b
Exit status: the command's (128 + N when signal N killed it, 127 not found,
126 not executable); 2 usage error or bad plan, before anything runs.
"""


def run_command(
    ctx: typer.Context,
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
        typer.Option(
            min=0.0,
            metavar="S",
            help="Seconds between the tree's first signal (or the command's exit) and SIGKILL.",
        ),
    ] = 10.0,
    slots: Annotated[
        str | None,
        typer.Option(
            help="Obligated slots, comma-separated (scheduler.0,scheduler.1); "
            "overrides the plan's.",
            show_default=False,
        ),
    ] = None,
    launch_id: Annotated[
        str | None,
        typer.Option(
            metavar="ID",
            help="The launch id, launch-<16 hex> (default: random); never one that exists.",
            show_default=False,
        ),
    ] = None,
    host_evidence: Annotated[
        str | None,
        typer.Option(
            metavar="required|off",
            help="required: plugin reports alone never give true; overrides the plan's.",
        ),
    ] = None,
    manager_key: Annotated[
        str | None,
        typer.Option(
            metavar="KEY",
            help="Key that certifies each process key: PEM file or pkcs11: URI (default: "
            "$ECPA_MANAGER_KEY, else ~/.config/ecpa/manager-key.pem, made on first use).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Say the launch as one JSON object on stderr (stdout is COMMAND's)."
        ),
    ] = False,
) -> None:
    """Run COMMAND under a fresh launch, its process tree supervised.

    A fresh launch: a random launch id (or --launch-id) and challenge, the ECPA_* binding in
    the command's environment, an enrollment socket through which each scheduler
    process of the launch enrolls its own key, and the whole process tree supervised.
    Exits with the command's status.
    """
    standalone = isinstance(ctx.obj, Invocation) and ctx.obj.standalone
    if standalone:  # its memory and environment (a PIN, a passphrase) out of the tree's reach
        make_undumpable()
    if not command:
        raise fail_usage("expected a COMMAND to run (ecpa run [OPTIONS] -- COMMAND...), found none")
    if not math.isfinite(grace):
        raise fail_usage(f"expected --grace as a finite number of seconds, found {grace}")
    chosen = load_plan(plan) if plan is not None else default_plan()
    if slots is not None:
        parsed = [Slot.parse(s.strip()) for s in slots.split(",")]
        doc = {**chosen.to_dict(), "slots": [s.to_dict() for s in parsed]}
        chosen = plan_from_dict(doc, "--slots", default_issuer=chosen.issuer)
    if host_evidence is not None:
        chosen = with_host_evidence(chosen, host_evidence)
    # A process of its own: children from before exec are not the launch's.
    held = standalone and fresh_supervisor(say=_say)
    manager = load_manager_key(manager_key)  # after the fork: a token's session is per process
    launch = prepare_launch(
        chosen, evidence_dir, now=int(time.time()), environ=os.environ, launch_id=launch_id
    )
    if as_json:
        typer.echo(json_line(launch.record()), err=True)
    else:
        typer.echo(
            f"ecpa run: launch {launch.launch_id} in {safe(str(launch.directory))}", err=True
        )
    for note in manager.notes():
        _say(note)

    say = _say

    # Supervising, a closed pipe on stderr must be an error to ignore, not a signal that
    # kills ecpa run half way (the command still gets SIGPIPE by default: the exec wrapper
    # restores it).
    if standalone and hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)

    result, _problems = supervise_launch(
        launch,
        command,
        grace=grace,
        say=say,
        then_ignore=standalone,
        repeat_window_s=REPEAT_WINDOW_S if held else 0.0,
        manager=manager,
    )
    name = shlex.quote(command[0])
    if result.error is not None:
        say(result.error)
    elif result.signal is not None:
        say(f"{name} killed by {_signal_name(result.signal)}")
    where = shlex.quote(str(launch.directory))
    say(f"{name} exited with status {result.status}; ecpa status --launch {where}")
    if standalone:
        with contextlib.suppress(OSError):  # nothing more to say on a closed stderr
            sys.stderr.flush()
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # so no late flush can fail either
    raise typer.Exit(result.status)


def _say(line: str) -> None:  # said loudly; the command's status still passes through
    with contextlib.suppress(OSError):  # a closed stderr must not stop the supervision
        typer.echo(f"ecpa run: {safe(line)}", err=True)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


run_app = one_command(run_command, "run", epilog=RUN_EXAMPLES, context_settings=RUN_CONTEXT)
