"""``ecpa verify`` and ``ecpa inspect``."""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ecpa import verify_jobs
from ecpa._text import json_line, show
from ecpa.cli._app import one_command
from ecpa.cli._common import (
    EXIT_INVALID,
    EXIT_OK,
    display_json,
    fail_usage,
    load_trust,
    read_json_object,
)
from ecpa.cli._options import JsonLines, Now, Payload, ReplayDb
from ecpa.cli._progress import progress
from ecpa.errors import EcpaError
from ecpa.profile.b64 import b64u_decode
from ecpa.profile.json.strict_json import MAX_SAFE_INTEGER
from ecpa.profile.statement import validate_input
from ecpa.profile.verify import Binding, Policy

if TYPE_CHECKING:
    from ecpa.runtime import ReplayFence

#: More workers than this is a mistake, not a speed-up (each is a process).
MAX_JOBS = 256

VERIFY_EXAMPLES = """\b
Examples:
  ecpa verify evidence.jws --trust trust.json     # payload from evidence.json
  ecpa verify run.jsonl --trust trust.json --json # a log: one JSON line per record
  ecpa verify big.jsonl --trust trust.json --jobs 0 # a worker process per CPU
  cat bundle.json | ecpa verify - --now 1800000000

\b
Exit status: 0 all valid, 1 any invalid, 2 usage error or unreadable input,
3 internal error.
"""

EvidenceArg = Annotated[
    list[str],
    typer.Argument(
        metavar="EVIDENCE...",
        help="A .jws file, a JSON bundle, a .jsonl evidence log, or - for standard input.",
        show_default=False,
    ),
]
TrustOpt = Annotated[
    Path | None,
    typer.Option(
        "--trust",
        envvar="ECPA_TRUST_STORE",
        help="Trust store file (default: $ECPA_TRUST_STORE).",
        show_default=False,
    ),
]


def verify_command(
    evidence: EvidenceArg,
    trust: TrustOpt = None,
    payload: Payload = None,
    now: Now = None,
    at_issue: Annotated[
        bool,
        typer.Option(
            "--at-issue",
            help="Verify each item as of its own issued_at (history: evidence valid when it "
            "was written), said on each line (at_issue=T); never the default.",
        ),
    ] = False,
    clock_skew: Annotated[int, typer.Option(help="Allowed clock skew, seconds.")] = 0,
    max_ttl: Annotated[int, typer.Option(help="Largest expires_at - issued_at, seconds.")] = 300,
    max_age: Annotated[int, typer.Option(help="Largest now - observed_at, seconds.")] = 300,
    binding: Annotated[
        Path | None, typer.Option(help="JSON file with the six expected binding values.")
    ] = None,
    replay_db: ReplayDb = None,
    as_json: JsonLines = False,
    jobs: Annotated[
        int,
        typer.Option(
            help="Worker processes (0: one per CPU); the output is the same for any number."
        ),
    ] = 1,
) -> None:
    """Verify evidence by the ECPA 0.1 profile, one result line per item."""
    specs = evidence
    if specs.count("-") > 1:
        raise fail_usage("expected standard input (-) at most once, found it twice")
    jws_count = sum(1 for s in specs if s.endswith(".jws"))
    if payload is not None and (jws_count != 1 or len(specs) != 1):
        raise fail_usage("expected --payload with exactly one .jws EVIDENCE, found otherwise")
    if not 0 <= jobs <= MAX_JOBS:
        raise fail_usage(f"expected --jobs within [0, {MAX_JOBS}] (0: one per CPU), found {jobs}")
    workers = jobs if jobs > 0 else (os.cpu_count() or 1)
    store = load_trust(trust)
    limits = {"clock_skew": clock_skew, "max_ttl": max_ttl, "max_observation_age": max_age}
    policy = validate_input(Policy, limits, "policy")
    doc = None if binding is None else read_json_object(binding, "binding")
    expected = None if doc is None else validate_input(Binding, doc, f"binding {binding}")
    if at_issue and now is not None:
        raise fail_usage("expected --now T or --at-issue, not both")
    when: int | None = int(time.time()) if now is None else now
    if when is not None and not 0 <= when <= MAX_SAFE_INTEGER:
        raise fail_usage(f"expected --now within [0, 2**53-1], found {when}")
    if at_issue and replay_db is not None:
        raise fail_usage(
            "expected --at-issue without --replay-db (a fence forgets a nonce once it has "
            "expired; as of issued_at, an expired record would count again)"
        )
    if at_issue:
        when = None
        typer.echo("ecpa verify: --at-issue: each item verified as of its own issued_at", err=True)
    with ExitStack() as stack:
        advance = stack.enter_context(progress(None, "verifying"))
        fence: ReplayFence | None = None
        if replay_db is not None:
            from ecpa.runtime import open_replay_fence

            durable = open_replay_fence(replay_db)
            stack.callback(durable.close)
            fence = durable
        if workers > 1:
            config = verify_jobs.VerifyConfig(
                store.document, when, policy, expected, as_json, fence is not None
            )
            tally = verify_jobs.verify_with_jobs(
                specs,
                payload,
                jobs=workers,
                config=config,
                fence=fence,
                echo=typer.echo,
                advance=advance,
            )
        else:  # today's loop, in this process
            tally = verify_jobs.verify_in_process(
                specs,
                payload,
                store=store,
                now=when,
                policy=policy,
                binding=expected,
                fence=fence,
                as_json=as_json,
                stdout=sys.stdout,
                echo=typer.echo,
                advance=advance,
            )
    if tally.items > 1:
        typer.echo(tally.summary(), err=True)
    raise typer.Exit(EXIT_INVALID if tally.failed else EXIT_OK)


def _decode_json(segment: str, what: str) -> Any:
    try:
        raw = b64u_decode(segment, what=what)
    except EcpaError as exc:
        return {"error": f"{exc.code.value}: {exc.detail}"}
    return display_json(raw)


def _warn(line: str) -> None:
    typer.echo(line, err=True)


def inspect_command(
    evidence: EvidenceArg,
    payload: Payload = None,
    as_json: JsonLines = False,
) -> None:
    """Show the decoded header and payload of evidence WITHOUT verifying anything.

    Nothing shown is checked: signature, key, time and binding are ignored. Use
    `ecpa verify` before acting on any of it. Exit status 0 unless an input is unreadable.
    """
    for spec in evidence:
        for item in verify_jobs.evidence_items(spec, payload, warn=_warn):
            shown: dict[str, Any] = {"input": item.input, "line": item.line, "verified": False}
            if item.evidence is None:
                err = item.error
                shown["error"] = f"{err.code.value}: {err.detail}" if err else "no evidence"
            else:
                header_b64 = item.evidence.detached_jws.split(".")[0]
                shown["header"] = _decode_json(header_b64, "header")
                shown["payload"] = display_json(item.evidence.payload)
            if as_json:
                typer.echo(json_line(shown))
            else:
                typer.echo(f"UNVERIFIED {show(item.name)}: decoded only, nothing is checked")
                typer.echo(json.dumps(shown, indent=2, ensure_ascii=True, allow_nan=False))
    raise typer.Exit(EXIT_OK)


verify_app = one_command(verify_command, "verify", epilog=VERIFY_EXAMPLES)
inspect_app = one_command(inspect_command, "inspect", epilog="Example: ecpa inspect evidence.jws")
