"""What the commands share: exit codes, usage errors, configuration files, JSON shown."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ecpa._files import read_input
from ecpa._text import json_line
from ecpa.errors import EcpaError, ErrorCode, invalid_input

if TYPE_CHECKING:
    from ecpa.profile.keys import Ed25519Signer
    from ecpa.profile.trust import TrustStore

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


@dataclass(frozen=True)
class Invocation:
    """How the command line was started: :func:`ecpa.cli.main` hands it to every command as
    click's context object (``ctx.obj``).

    ``standalone`` is true for the installed ``ecpa`` script, a process that exits when the
    command returns: after supervision, SIGINT/SIGTERM/SIGHUP/SIGQUIT stay ignored, so a late
    signal cannot replace the command's exit status. In-process callers (tests, the demo)
    get their handlers back instead: an ignored disposition would be inherited by their
    children.
    """

    standalone: bool = False


#: Codes that mean "the input is not usable", not "the evidence is invalid": exit 2.
USAGE_CODES = frozenset(
    {
        ErrorCode.TRUST_STORE_CONFIG,
        ErrorCode.INVALID_INPUT,
        ErrorCode.INVALID_KEY,
        ErrorCode.REPLAY_STORE,
        ErrorCode.EVIDENCE_STORE,
    }
)


def fail_usage(detail: str) -> EcpaError:
    """An input that is not evidence at all (missing file, bad option): exit 2."""
    return invalid_input(detail)


def read_json_object(path: Path, what: str, *, evidence: bool = False) -> dict[str, Any]:
    """A strict JSON object from a file.

    With ``evidence`` (a statement to sign) parse errors keep their own codes (exit 1);
    otherwise the file is configuration and a parse error is ``ECPA_INVALID_INPUT`` (exit 2).
    """
    from ecpa.profile.json.strict_json import parse_object

    data = read_input(path)
    try:
        return parse_object(data, what=f"{what} {path}")
    except EcpaError as exc:
        if evidence:
            raise
        raise fail_usage(f"{exc.code.value}: {exc.detail}") from None


def load_trust(trust: Path | None) -> TrustStore:
    """The trust store named by --trust or $ECPA_TRUST_STORE (exit 2 when absent or bad)."""
    from ecpa.profile.trust import TrustStore

    if trust is None:
        raise fail_usage("expected a trust store (--trust FILE or $ECPA_TRUST_STORE), found none")
    return TrustStore.load(trust)


def display_json(data: bytes) -> Any:
    """Parse JSON for display only, lenient but total: numbers JSON cannot carry exactly
    and non-finite constants become ``{"$number": text}``, so output stays strict JSON."""
    try:
        return json.loads(
            data,
            parse_float=lambda text: {"$number": text},
            parse_constant=lambda text: {"$number": text},
            parse_int=lambda text: int(text) if len(text) < 40 else {"$number": text},
        )
    except (ValueError, RecursionError):
        return {"error": "not JSON", "text": data.decode("utf-8", "replace")}


def db_from_env(db: str | None, *others: object) -> str | None:
    """``--db``, or ``ECPA_DB`` when neither it nor any other source (``others``) is given:
    a DSN (password included) need not be on the command line, where ``ps`` shows it."""
    if db is not None or any(other for other in others):
        return db
    return os.environ.get("ECPA_DB") or None


#: Where a passphrase comes from, named in every refusal.
UNLOCK_HINT = " (from $ECPA_KEY_PASSWORD or --password-file FILE)"


def load_key(spec: str | Path, password_file: Path | None) -> Ed25519Signer:
    """The signing key ``spec`` names: a key file or a ``pkcs11:`` URI (:mod:`ecpa.hsm`)."""
    from ecpa.hsm import load_signer

    return load_signer(spec, password_file, hint=UNLOCK_HINT)


def echo_json(obj: dict[str, Any]) -> None:
    """One result as one JSON line on standard output."""
    typer.echo(json_line(obj))
