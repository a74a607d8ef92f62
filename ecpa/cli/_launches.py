"""``ecpa launches``: the launches an evidence directory and an evidence store hold, each
with its verdict, one line (or one JSON object) per launch."""

from __future__ import annotations

from typing import Annotated

import typer

from ecpa._text import json_line, safe, when
from ecpa.cli._app import one_command
from ecpa.cli._common import EXIT_OK, db_from_env, fail_usage
from ecpa.cli._options import EvidenceDirs, Limit, StoreDsn
from ecpa.runtime import LaunchSummary, is_postgres_dsn, list_launches

__all__ = ["LAUNCHES_EXAMPLES", "launches_app", "launches_command"]

LAUNCHES_EXAMPLES = """\b
Examples:
  ecpa launches --evidence-dir runs
  ecpa launches --evidence-dir runs --evidence-dir /srv/ecpa/runs --json
  ecpa launches --db postgresql://ecpa@db.example/ecpa --json

\b
Each launch is judged as `ecpa status` judges it (--evidence-dir: by this host's clock and
/proc; --db: by the database server's clock and signed heartbeats). Entries that are no
launch (a name other than launch-<16 hex>, not a directory) or cannot be judged are skipped
and reported; at most 10,000 entries are read per directory and --limit launches judged per
source, and a note says when a cap was hit.

\b
Exit status: 0 listed (whatever the verdicts), 2 usage error, an evidence directory that
cannot be listed or a store that cannot be used, 3 internal error.
"""


def _line(launch: LaunchSummary) -> str:
    ended = "no" if launch.ended is None else f"yes ({safe(launch.ended)})"
    started = when(launch.started_at)
    return (
        f"{safe(launch.launch_id)}  runtime_effective: "
        f"{'true' if launch.effective else 'false'}  coverage: {launch.covered}/{launch.slots}"
        f"  started_at: {started}  ended: {ended}  in {safe(launch.source)}"
    )


def launches_command(
    evidence_dir: EvidenceDirs = None,
    db: StoreDsn = None,
    limit: Limit = 100,
    as_json: Annotated[
        bool, typer.Option("--json", help='One JSON object: {"launches": [...], ...}.')
    ] = False,
) -> None:
    """List the launches an evidence directory or store holds, with runtime_effective.

    One line per launch: its id, runtime_effective, coverage (covered/obligated slots),
    started_at and whether (and how) it ended; then one `skipped:` line per entry skipped
    and one `note:` line per cap hit.
    """
    dirs = list(evidence_dir or [])
    db = db_from_env(db, dirs)
    if not dirs and db is None:
        raise fail_usage("expected --evidence-dir DIR or --db DSN (or both)")
    if not 1 <= limit <= 1000:
        raise fail_usage(f"expected --limit within [1, 1000], found {limit}")
    if db is not None and not is_postgres_dsn(db):
        raise fail_usage("expected --db postgresql://..., found a value that is not such a URI")
    for directory in dirs:
        if not directory.is_dir():
            raise fail_usage(f"expected an evidence directory at {directory}, found none")
    found = list_launches(dirs, db, limit=limit)  # each launch judged when its turn comes
    if as_json:
        typer.echo(json_line(found.to_dict()))
    else:
        for launch in found.launches:
            typer.echo(_line(launch))
        for entry in found.skipped:
            typer.echo(f"skipped: {safe(entry.source)}/{safe(entry.name)}: {safe(entry.detail)}")
        for note in found.truncated:
            typer.echo(f"note: {safe(note)}")
        if not found.launches:
            typer.echo("no launches")
    raise typer.Exit(EXIT_OK)


launches_app = one_command(launches_command, "launches", epilog=LAUNCHES_EXAMPLES)
