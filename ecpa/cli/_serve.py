"""``ecpa serve``: the HTTP API, Prometheus metrics and status page over launches (the
``serve`` extra, imported only when the command runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ecpa.cli._app import one_command
from ecpa.cli._common import EXIT_OK, fail_usage
from ecpa.cli._options import EvidenceDirs, Limit, OperatorStore
from ecpa.runtime import is_postgres_dsn

__all__ = ["SERVE_EXAMPLES", "serve_app", "serve_command"]

SERVE_EXAMPLES = """\b
Examples:
  ecpa serve --evidence-dir runs
  ecpa serve --evidence-dir /srv/ecpa/runs --listen 0.0.0.0:9464 --token-file /etc/ecpa/token
  ECPA_DB=postgresql://ecpa@db.example/ecpa ecpa serve

\b
Endpoints (docs/serve.md): GET /v1/launches, GET /v1/launches/{launch_id} (the document of
`ecpa status --json`), GET /metrics (Prometheus), GET / (a page that refreshes itself),
GET /healthz, GET /openapi.json. Only GET and HEAD; read-only. Every launch is judged once
per --interval, whatever the number of clients; a judgement older than --stale-after is
served as not effective. Listening beyond loopback needs --token-file (a 0600 file of this
user holding the bearer token); /healthz needs no token.

\b
Exit status: 0 stopped by SIGINT or SIGTERM, 2 usage error (a non-loopback --listen without
--token-file, a bad token file, an address in use, no such evidence directory), 3 internal
error. A source that cannot be read (a store that is down) is served as not read.
"""


def serve_command(
    evidence_dir: EvidenceDirs = None,
    db: Annotated[
        str | None,
        typer.Option(
            metavar="DSN",
            envvar="ECPA_DB",
            show_envvar=True,
            help="Evidence store (postgresql:// DSN) `ecpa ship` fills.",
        ),
    ] = None,
    listen: Annotated[
        str, typer.Option(metavar="HOST:PORT", help="Address to listen on (port 0: any free).")
    ] = "127.0.0.1:9464",
    token_file: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Bearer token file (0600); required beyond loopback."),
    ] = None,
    interval: Annotated[
        float, typer.Option(metavar="S", help="Seconds between judgements (0.2 to 3600).")
    ] = 1.0,
    stale_after: Annotated[
        float | None,
        typer.Option(
            metavar="S",
            help="Serve every launch as not effective once the newest judgement is older "
            "(default: 10 s, 3 intervals or an interval and 2 refresh durations, the largest).",
        ),
    ] = None,
    retention: Annotated[
        float,
        typer.Option(metavar="S", help="Seconds an ended launch stays in /metrics (default 1 h)."),
    ] = 3600.0,
    limit: Limit = 100,
    trust: OperatorStore = None,
    judges: Annotated[
        int,
        typer.Option(
            metavar="N",
            help="Judging processes, each judging its part of the launches (1 to 64; "
            "0: one per CPU this process may use).",
        ),
    ] = 1,
) -> None:
    """Serve runtime_effective over HTTP: API, Prometheus metrics and a status page.

    Prints one line on stderr once it listens (the address actually bound), then serves
    until SIGINT or SIGTERM. Read-only: it changes no evidence.
    """
    dirs = list(evidence_dir or [])
    if not dirs and db is None:
        raise fail_usage("expected --evidence-dir DIR or --db DSN (or ECPA_DB), or both")
    if db is not None and not is_postgres_dsn(db):
        raise fail_usage("expected --db postgresql://..., found a value that is not such a URI")
    try:
        from ecpa.serve.board import Sources
        from ecpa.serve.server import serve, serve_options
    except ImportError as exc:
        raise fail_usage(
            f"ecpa serve needs the serve extra (pip install 'ecpa[serve]'): {exc}"
        ) from None
    options = serve_options(
        Sources(tuple(dirs), db, limit, trust=trust),
        listen=listen,
        token_file=token_file,
        interval=interval,
        stale_after=stale_after,
        retention_s=retention,
        judges=judges,
    )
    serve(options, say=lambda line: typer.echo(line, err=True))
    raise typer.Exit(EXIT_OK)


serve_app = one_command(serve_command, "serve", epilog=SERVE_EXAMPLES)
