"""The options several commands share, each declared once (``typing.Annotated`` aliases:
``as_json: AsJson = False``). An option only one command has stays in its module."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = [
    "AsJson",
    "EvidenceDirs",
    "Issuer",
    "JsonLines",
    "Kid",
    "LaunchDir",
    "LaunchId",
    "Limit",
    "NotAfter",
    "NotBefore",
    "Now",
    "OperatorStore",
    "PasswordFile",
    "Payload",
    "ReplayDb",
    "RequiredLaunchDir",
    "StoreDsn",
    "Subjects",
]

# --- output ------------------------------------------------------------------------------

#: ``--json`` of a command with one result.
AsJson = Annotated[bool, typer.Option("--json", help="The result as one JSON object.")]
#: ``--json`` of a command with a result per item (a log's records, a corpus's cases).
JsonLines = Annotated[bool, typer.Option("--json", help="One JSON object per item (JSON Lines).")]

# --- keys, secrets and trust -------------------------------------------------------------

PasswordFile = Annotated[
    Path | None,
    typer.Option(
        help="File whose first line is the key's passphrase, - for standard input "
        "(default: $ECPA_KEY_PASSWORD).",
        show_default=False,
    ),
]
#: ``--trust`` of the commands that judge launches: the operator's trust store.
OperatorStore = Annotated[
    Path | None,
    typer.Option(
        "--trust",
        metavar="FILE",
        help="The operator's trust store: the manager keys that certify process keys "
        "(default: $ECPA_TRUST_STORE, else ~/.config/ecpa/trust.json; docs/keys.md).",
        show_default=False,
    ),
]

# --- a trust-store entry (keygen, trust add, trust disable) ------------------------------

Issuer = Annotated[str, typer.Option(help="The issuer the key speaks for.")]
Kid = Annotated[str, typer.Option(help="The key id (the JWS header kid).")]
Subjects = Annotated[
    list[str] | None,
    typer.Option(
        "--subject",
        metavar="SUBJECT",
        help="A subject the key may speak for (repeatable; default: host-runtime).",
        show_default=False,
    ),
]
NotBefore = Annotated[
    int | None, typer.Option(help="Start of validity, Unix seconds (default: now).")
]
NotAfter = Annotated[
    int | None, typer.Option(help="End of validity, Unix seconds (default: a year from now).")
]

# --- evidence and time -------------------------------------------------------------------

Payload = Annotated[
    Path | None, typer.Option(help="Payload of a single .jws (default: its sibling .json).")
]
Now = Annotated[
    int | None,
    typer.Option(metavar="T", help="The present, Unix seconds (default: the clock)."),
]
ReplayDb = Annotated[
    str | None,
    typer.Option(
        help="Replay fence, an SQLite file or a postgresql:// DSN shared by several "
        "hosts: each nonce is accepted once (a fence that cannot be used stops the "
        "command, exit 2)."
    ),
]

# --- launches and the evidence store -----------------------------------------------------

_LAUNCH_DIR = typer.Option(metavar="DIR", help="Launch directory written by `ecpa run`.")
LaunchDir = Annotated[Path | None, _LAUNCH_DIR]
RequiredLaunchDir = Annotated[Path, _LAUNCH_DIR]
LaunchId = Annotated[str | None, typer.Option(metavar="ID", help="The launch to judge from --db.")]
EvidenceDirs = Annotated[
    list[Path] | None,
    typer.Option(metavar="DIR", help="The --evidence-dir of `ecpa run` (repeatable)."),
]
#: ``--db`` of the commands that read the store, ``$ECPA_DB`` when no other source is given
#: (``ecpa.cli._common.db_from_env``): a DSN, password included, need not be in ``ps``.
StoreDsn = Annotated[
    str | None,
    typer.Option(
        metavar="DSN",
        help="Evidence store (postgresql:// DSN) `ecpa ship` fills (default: $ECPA_DB, "
        "when no other source is given).",
    ),
]
Limit = Annotated[
    int, typer.Option(metavar="N", help="Launches judged at most per source (1 to 1000).")
]
