"""``ecpa status``: is the plugin really handling runtime work in a live process, now."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from ecpa import runtime  # names loaded on first use: each source loads its own part
from ecpa._text import json_line, safe, when
from ecpa.cli._app import one_command
from ecpa.cli._common import EXIT_INVALID, EXIT_OK, db_from_env, fail_usage, read_json_object
from ecpa.cli._options import AsJson, LaunchDir, LaunchId, Now, ReplayDb, StoreDsn
from ecpa.errors import EcpaError
from ecpa.profile.json.strict_json import MAX_SAFE_INTEGER

__all__ = ["STATUS_EXAMPLES", "status_app", "status_command"]

STATUS_EXAMPLES = """\b
Examples:
  ecpa status --launch runs/launch-1
  ecpa status --launch runs/launch-1 --max-idle 30 --json
  ecpa status --evidence ev/launch-1.jsonl --trust trust.json --binding binding.json --json
  ecpa status --db postgresql://ecpa@db.example/ecpa --launch-id launch-1 --json
  ecpa status --db postgresql://ecpa@db.example/ecpa --all --json

\b
--db: from the evidence store `ecpa ship` fills, for a launch on another host. /proc of that
host is not read: a process counts as alive while its newest signed heartbeat is within the
heartbeat window, and the reasons say so. --all: every launch of the store without an end,
one verdict each (--json: one object per line), exit 0 only if all are true.

\b
binding.json: {"plan_id", "launch_id", "plugin_id", "artifact_digest", "process_epoch",
"challenge", "heartbeat_window_s" (optional, default 3)}.

\b
Exit status: 0 runtime_effective true, 1 false, 2 usage error or unreadable input,
3 internal error.
"""


def status_command(
    launch: LaunchDir = None,
    evidence: Annotated[
        Path | None, typer.Option(help="Evidence log (.jsonl); needs --trust and --binding.")
    ] = None,
    trust: Annotated[
        Path | None,
        typer.Option(
            help="With --launch or --db: the operator's trust store, whose manager keys certify "
            "process keys (default: $ECPA_TRUST_STORE, else ~/.config/ecpa/trust.json); "
            "with --evidence: the log's own trust store."
        ),
    ] = None,
    binding: Annotated[
        Path | None, typer.Option(help="JSON file with the expected launch (with --evidence).")
    ] = None,
    now: Now = None,
    max_idle: Annotated[
        int | None,
        typer.Option(
            help="Also false when a slot's newest dispatch is older than this many seconds "
            "(off by default: evidence says the plugin works, not that it is busy now)."
        ),
    ] = None,
    max_abstain: Annotated[
        int | None,
        typer.Option(
            help="Not covered when a slot's plugin was called without selecting for longer "
            "than this many seconds (default: the launch's max_abstain_s, 30; idle is not "
            "abstaining)."
        ),
    ] = None,
    replay_db: ReplayDb = None,
    db: StoreDsn = None,
    launch_id: LaunchId = None,
    every: Annotated[
        bool, typer.Option("--all", help="Every launch of --db without an end (a fleet).")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Derive runtime_effective: signed, fresh, bound evidence from a live process.

    Prints `runtime_effective: true|false`, then one `reason:` line per reason.
    """
    db = db_from_env(db, launch, evidence)
    at = int(time.time()) if now is None else now
    if not 0 <= at <= MAX_SAFE_INTEGER:
        raise fail_usage(f"expected --now within [0, 2**53-1], found {at}")
    if max_idle is not None and not 0 <= max_idle <= MAX_SAFE_INTEGER:
        raise fail_usage(f"expected --max-idle within [0, 2**53-1] seconds, found {max_idle}")
    if max_abstain is not None and not 1 <= max_abstain <= MAX_SAFE_INTEGER:
        raise fail_usage(f"expected --max-abstain within [1, 2**53-1] seconds, found {max_abstain}")
    if sum(x is not None for x in (launch, evidence, db)) != 1:
        raise fail_usage("expected exactly one of --launch DIR, --evidence LOG and --db DSN")
    if (db is None) != (launch_id is None and not every) or (every and launch_id is not None):
        raise fail_usage("expected --launch-id ID or --all with --db DSN, and only with it")
    if every:
        _fleet(str(db), now, trust, replay_db, max_idle, max_abstain, as_json)
    launch_doc: dict[str, Any] | None = None  # launch.json (or --binding): the lifecycle
    # A monitor's timeout sends SIGTERM (a person, SIGINT): the history walks stop at their
    # next line boundary and are saved (RUNTIME.md "Bounded work"), then status exits 130.
    with runtime.interruptible():
        if db is not None:
            assert launch_id is not None
            if not runtime.is_postgres_dsn(db):
                raise fail_usage(
                    "expected --db postgresql://..., found a value that is not such a URI"
                )
            if binding is not None:
                raise fail_usage("expected no --binding with --db (the store holds the launch)")
            status = runtime.status_from_store(
                db,
                launch_id,
                now=now,  # None: the database server's clock
                trust=trust,
                replay_db=replay_db,
                max_idle=max_idle,
                max_abstain=max_abstain,
                save_checkpoints=now is None,  # a time of its own: leave shared checkpoints alone
            )
            if as_json:
                from ecpa.launcher.lifecycle import store_binding

                launch_doc = store_binding(db, launch_id)
        elif launch is not None:
            if binding is not None:
                raise fail_usage("expected no --binding with --launch (it holds it)")
            if not launch.is_dir():
                raise fail_usage(f"expected a launch directory at {launch}, found none")
            status = runtime.status_from_launch_dir(
                launch,
                now=at,
                replay_db=replay_db,
                max_idle=max_idle,
                max_abstain=max_abstain,
                save_checkpoints=now is None,  # a time of its own: leave the checkpoints alone
                operator=runtime.operator_trust(trust),
            )
            if as_json:  # the lifecycle's stages: for --json only
                from ecpa.launcher.lifecycle import launch_dir_binding

                launch_doc = launch_dir_binding(launch)
        else:
            assert evidence is not None
            if trust is None or binding is None:
                raise fail_usage("expected --trust FILE and --binding FILE with --evidence")
            launch_doc = read_json_object(binding, "binding")
            expected = runtime.expected_from_dict(launch_doc, f"binding {binding}")
            if max_abstain is not None:
                expected = replace(expected, max_abstain_s=max_abstain)
            status = runtime.status_from_files(
                evidence, trust, expected, now=at, replay_db=replay_db, max_idle=max_idle
            )
    if runtime.history.STOP.is_set():
        raise KeyboardInterrupt("interrupted: the history walked so far is saved")
    if as_json:
        from ecpa.launcher.lifecycle import status_document

        typer.echo(json_line(status_document(status, launch_doc)))
    else:
        typer.echo(f"runtime_effective: {'true' if status.effective else 'false'}")
        covered = sum(s.covered for s in status.slots)
        typer.echo(f"now: {when(status.now)}  coverage: {covered}/{len(status.slots)} slots")
        for reason in status.reasons:
            typer.echo(f"reason: {safe(reason.text)}")
    raise typer.Exit(EXIT_OK if status.effective else EXIT_INVALID)


def _error(exc: EcpaError) -> dict[str, str]:
    return {"code": exc.code.value, "detail": exc.detail}


def _fleet(db: str, now: int | None, *options: Any) -> None:
    """``--all``: each launch's verdict, a line (``--json``: an object) each."""
    trust, replay_db, max_idle, max_abstain, as_json = options
    if not runtime.is_postgres_dsn(db):
        raise fail_usage("expected --db postgresql://..., found a value that is not such a URI")
    with runtime.interruptible():
        entries, more = runtime.fleet_status(
            db, now=now, trust=trust, replay_db=replay_db, max_idle=max_idle,
            max_abstain=max_abstain,
        )  # fmt: skip
    if runtime.history.STOP.is_set():
        raise KeyboardInterrupt("interrupted: the launches after this one were not judged")
    for e in entries:
        if as_json:
            doc = {"launch_id": e.launch_id, "runtime_effective": False}
            if e.status is not None:
                from ecpa.launcher.lifecycle import status_document

                doc |= status_document(e.status, None) | {"launch_id": e.launch_id}
            typer.echo(json_line(doc | ({} if e.error is None else {"error": _error(e.error)})))
        elif e.status is not None:
            covered = sum(s.covered for s in e.status.slots)
            verdict = "true" if e.status.effective else "false"
            typer.echo(f"{e.launch_id}: {verdict} ({covered}/{len(e.status.slots)} slots)")
        else:
            assert e.error is not None
            typer.echo(f"{e.launch_id}: not judged: {safe(e.error.detail)}")
    if more:
        typer.echo(f"ecpa status: judged the first {len(entries):,} launches only", err=True)
    if not entries:
        typer.echo("ecpa status: no launch without an end in the store", err=True)
    # True only for a whole fleet judged true: none left out, none not judged.
    ok = bool(entries) and not more and all(e.status and e.status.effective for e in entries)
    raise typer.Exit(EXIT_OK if ok else EXIT_INVALID)


status_app = one_command(status_command, "status", epilog=STATUS_EXAMPLES)
