"""``ecpa audit``: when was a launch effective, and a signed receipt of the answer."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from ecpa._text import iso_utc, json_line, safe, show
from ecpa.cli._app import one_command
from ecpa.cli._common import EXIT_INVALID, EXIT_OK, db_from_env, fail_usage, load_key
from ecpa.cli._options import (
    AsJson,
    LaunchDir,
    LaunchId,
    Now,
    OperatorStore,
    PasswordFile,
    StoreDsn,
)
from ecpa.profile.json.strict_json import MAX_SAFE_INTEGER
from ecpa.runtime import (
    audit_launch_dir,
    audit_store,
    check_receipt_files,
    is_postgres_dsn,
    operator_trust,
    plot_audit,
    report_bytes,
    report_lines,
    write_receipt,
)

__all__ = ["AUDIT_EXAMPLES", "audit_app", "audit_command"]

AUDIT_EXAMPLES = """\b
Examples:
  ecpa audit --launch runs/launch-0123456789abcdef
  ecpa audit --launch runs/launch-0123456789abcdef --from 1796200000 --to 1796200600 --json
  ecpa audit --launch DIR --sign manager.pem --issuer urn:ecpa:issuer:mgr --kid mgr-1 --out a
  ecpa audit --check a.report.json --receipt a.jws --trust manager-trust.json --launch DIR
  ecpa audit --launch DIR --plot timeline.png
  ecpa audit --db postgresql://ecpa@db.example/ecpa --launch-id launch-0123456789abcdef

\b
The verdict `ecpa status` would have given at each instant of the launch's life, judged
from the evidence as it stood then (each record verified as of its own issued_at, within
its key's window; liveness in hindsight from signed heartbeats and the supervisor's record
of the end): per slot and for the launch, the effective intervals [from, to) in Unix
seconds, the gaps and their causes, the plugin's decisions, startup_s and `exercised`. An
ended launch's audit is the same whenever it is made. See docs/audit.md.

\b
Exit status: 0 audited (exercised or not; with --check: the receipt holds), 1 --check found
the receipt or the report wrong, or host_journal_mismatch (a host journal's line removed,
altered, inserted or moved), 2 usage error or unreadable launch, 3 internal error.
"""


def _check(report_file: Path, receipt: Path, trust: Path | None, launch: Path | None) -> None:
    operator = operator_trust(trust)
    if operator.store is None:
        raise fail_usage(f"expected the operator's trust store, found {operator.where}")
    checked, report, doc = check_receipt_files(report_file, receipt, operator.store)
    st = checked.statement
    typer.echo(
        f"receipt OK: signed by {safe(st.issuer)} ({safe(st.kid)}) for launch "
        f"{safe(st.launch_id)}, verified as of its issued_at {st.issued_at} "
        f"({iso_utc(st.issued_at)}); the report's digest matches"
    )
    if launch is None:
        typer.echo("report not derived again (no --launch DIR given)")
        return
    window = (doc["window"]["from"], doc["window"]["to"])
    again = audit_launch_dir(launch, now=doc["judged_until"], window=window, operator=operator)
    if report_bytes(again.report) != report:
        typer.echo(f"FAIL: the report derived again from {show(launch)} differs from it")
        raise typer.Exit(EXIT_INVALID)
    typer.echo(f"report derived again from {show(launch)}: identical")


def audit_command(
    launch: LaunchDir = None,
    db: StoreDsn = None,
    launch_id: LaunchId = None,
    start: Annotated[
        int | None, typer.Option("--from", metavar="T", help="Window start, Unix seconds.")
    ] = None,
    end: Annotated[
        int | None, typer.Option("--to", metavar="T", help="Window end, Unix seconds.")
    ] = None,
    now: Now = None,
    as_json: AsJson = False,
    sign_key: Annotated[
        str | None,
        typer.Option("--sign", metavar="KEY", help="Sign a receipt: key file or pkcs11: URI."),
    ] = None,
    password_file: PasswordFile = None,
    issuer: Annotated[str | None, typer.Option(metavar="I", help="The receipt's issuer.")] = None,
    kid: Annotated[str | None, typer.Option(metavar="K", help="The receipt's key id.")] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            metavar="PREFIX", help="Receipt files: PREFIX.report.json, PREFIX.json, PREFIX.jws."
        ),
    ] = None,
    check: Annotated[
        Path | None, typer.Option(metavar="REPORT", help="Check a report against its receipt.")
    ] = None,
    receipt: Annotated[
        Path | None, typer.Option(metavar="JWS", help="The receipt (PREFIX.jws) for --check.")
    ] = None,
    trust: OperatorStore = None,
    plot: Annotated[
        Path | None, typer.Option(metavar="FILE.png", help="Draw the timeline (plot extra).")
    ] = None,
) -> None:
    """When was a launch effective: intervals, gaps and causes, and `exercised`.

    Prints the audit of --launch DIR (text, or --json); --sign writes a signed receipt;
    --check verifies a receipt and its report.
    """
    if check is not None:
        if receipt is None:
            raise fail_usage("expected --receipt PREFIX.jws with --check")
        _check(check, receipt, trust, launch)
        raise typer.Exit(EXIT_OK)
    db = db_from_env(db, launch)
    if (launch is None) == (db is None):
        raise fail_usage("expected --launch DIR or --db DSN (or --check REPORT --receipt JWS)")
    if (db is None) != (launch_id is None):
        raise fail_usage("expected --launch-id ID with --db DSN, and only with it")
    if db is not None and not is_postgres_dsn(db):
        raise fail_usage("expected --db postgresql://..., found a value that is not such a URI")
    if launch is not None and not launch.is_dir():
        raise fail_usage(f"expected a launch directory at {launch}, found none")
    when = int(time.time()) if now is None else now
    for name, value in (("--now", when), ("--from", start), ("--to", end)):
        if value is not None and not 0 <= value <= MAX_SAFE_INTEGER:
            raise fail_usage(f"expected {name} within [0, 2**53-1], found {value}")
    if start is not None and end is not None and end <= start:
        raise fail_usage(f"expected --to after --from, found {start} to {end}")
    if (sign_key is None) != (out is None) or (sign_key is not None and not (issuer and kid)):
        raise fail_usage("expected --sign KEY with --issuer I, --kid K and --out PREFIX")
    key = load_key(sign_key, password_file) if sign_key is not None else None
    operator = operator_trust(trust)
    if launch is not None:
        audit = audit_launch_dir(launch, now=when, window=(start, end), operator=operator)
    else:
        assert db is not None
        assert launch_id is not None
        audit = audit_store(db, launch_id, now=now, window=(start, end), operator=operator)
    report = audit.report
    if key is not None and out is not None and issuer and kid:
        write_receipt(out, report, key, issuer=issuer, kid=kid, now=when)
    if plot is not None:
        try:
            plot_audit(report, audit.processes, plot)
        except ImportError:
            raise fail_usage("--plot needs matplotlib: pip install 'ecpa[plot]'") from None
    if as_json:
        typer.echo(json_line(report))
    else:
        for line in report_lines(report):
            typer.echo(line)
        if key is not None:
            typer.echo(f"receipt: wrote {show(out)}.report.json, {show(out)}.json, {show(out)}.jws")
        if plot is not None:
            typer.echo(f"plot: wrote {show(plot)}")
    raise typer.Exit(EXIT_INVALID if audit.journal_mismatch or audit.untrusted else EXIT_OK)


audit_app = one_command(audit_command, "audit", epilog=AUDIT_EXAMPLES)
