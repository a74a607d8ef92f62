"""``ecpa ship``: copy a launch's evidence into a PostgreSQL evidence store, exactly once."""

from __future__ import annotations

import signal
import threading
from typing import Annotated, Any

import typer

from ecpa._text import safe
from ecpa.cli._app import one_command
from ecpa.cli._common import EXIT_OK, echo_json, fail_usage
from ecpa.cli._options import AsJson, RequiredLaunchDir
from ecpa.runtime import EvidenceStore, ShipReport, is_postgres_dsn, ship_launch

__all__ = ["SHIP_EXAMPLES", "ship_app", "ship_command"]

SHIP_EXAMPLES = """\b
Examples:
  ecpa ship --launch runs/launch-1 --db postgresql://ecpa@db.example/ecpa
  ecpa ship --launch runs/launch-1 --db "$DSN" --once

\b
Following (the default), it copies new lines every --interval seconds and exits 0 once the
launch has ended (exit.json) and everything written before that is stored; SIGTERM or
SIGINT stop it after the transaction in flight. Killed at any moment, run it again: it
resumes where its last commit stopped, and no line is stored twice.

\b
Exit status: 0 done, 2 usage error, unreadable launch or unusable store, 3 internal error.
"""


def ship_command(
    launch: RequiredLaunchDir,
    db: Annotated[
        str,
        typer.Option(
            metavar="DSN",
            envvar="ECPA_DB",
            show_envvar=True,
            help="Evidence store: a postgresql:// DSN (its password may come from libpq's "
            "PGPASSWORD or ~/.pgpass instead).",
        ),
    ],
    once: Annotated[
        bool, typer.Option("--once", help="Copy what is there now, then exit.")
    ] = False,
    interval: Annotated[
        float, typer.Option(help="Seconds between passes when following (0.05 to 60).")
    ] = 0.5,
    as_json: AsJson = False,
) -> None:
    """Copy each complete evidence line of a launch into the evidence store, once.

    Stores launch.json, trust.json and exit.json with the lines of every process log, so
    that `ecpa status --db DSN --launch-id ID` can judge the launch from any host. With
    --json, the last line is one object: launch_id, stored, logs, passes, outcome, notes.
    """
    if not is_postgres_dsn(db):
        raise fail_usage("expected --db postgresql://..., found a value that is not such a URI")
    if not 0.05 <= interval <= 60:
        raise fail_usage(f"expected --interval within [0.05, 60] seconds, found {interval}")
    if not launch.is_dir():
        raise fail_usage(f"expected a launch directory at {launch}, found none")
    stopping = threading.Event()
    previous: dict[signal.Signals, Any] = {}

    def stop(signum: int, _frame: object) -> None:
        stopping.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, stop)
    report = ShipReport()
    try:
        with EvidenceStore(db) as store:
            ship_launch(
                launch, store, once=once, interval=interval, stop=stopping.is_set, report=report
            )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for note in report.notes:
            typer.echo(f"ecpa ship: note: {safe(note)}", err=True)
    how = (
        "launch ended, all stored"
        if report.ended
        else "supervisor gone, all stored"
        if report.supervisor_gone
        else "stopped"
        if stopping.is_set()
        else "done"
    )
    if as_json:
        counts = {"stored": report.stored, "logs": report.logs, "passes": report.passes}
        echo_json(
            {"launch_id": report.launch_id} | counts | {"outcome": how} | {"notes": report.notes}
        )
        raise typer.Exit(EXIT_OK)
    typer.echo(
        f"shipped launch {report.launch_id}: {report.stored} line(s) stored from "
        f"{report.logs} log(s) in {report.passes} pass(es); {how}"
    )
    raise typer.Exit(EXIT_OK)


ship_app = one_command(ship_command, "ship", epilog=SHIP_EXAMPLES)
