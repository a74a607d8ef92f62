"""``ecpa trust list|add|disable|check``: look after a trust store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ecpa._text import json_line, safe, show
from ecpa.cli._app import command_group
from ecpa.cli._common import EXIT_OK, EXIT_USAGE, UNLOCK_HINT, echo_json, fail_usage
from ecpa.cli._options import (
    AsJson,
    Issuer,
    JsonLines,
    Kid,
    NotAfter,
    NotBefore,
    PasswordFile,
    Subjects,
)
from ecpa.errors import EcpaError, ErrorCode
from ecpa.hsm import load_public
from ecpa.profile.keys import VerifyKey
from ecpa.profile.trust import TrustStore, document_problems, read_document
from ecpa.runtime import add_trust_entry, disable_trust_entry, trust_entry, validity_window

__all__ = ["trust_app"]

trust_app = command_group(
    "Look after a trust store: list, add, disable, check.",
    "\b\nExamples:\n  ecpa trust list trust.json\n  ecpa trust check trust.json",
)
StoreArg = Annotated[Path, typer.Argument(help="The trust store file.")]


@trust_app.command("list")
def trust_list(
    store: StoreArg,
    as_json: JsonLines = False,
) -> None:
    """List the entries of a trust store (which must load by every rule).

    \b
    Example:
      ecpa trust list trust.json
    """
    loaded = TrustStore.load(store)
    for trusted in loaded:
        e = trusted.entry
        if as_json:
            typer.echo(json_line(e.to_dict(omit_none=True)))
            continue
        state = "enabled" if e.enabled else "DISABLED"
        typer.echo(
            f"{state} issuer={show(e.issuer)} kid={show(e.kid)} "
            f"subjects={show(','.join(e.subjects))} window=[{e.not_before},{e.not_after}] "
            f"key={trusted.key.to_b64()}"
        )
    typer.echo(f"{len(loaded)} key(s) in {show(store)}", err=True)


@trust_app.command("add")
def trust_add(
    store: StoreArg,
    issuer: Issuer,
    kid: Kid,
    key: Annotated[
        str | None,
        typer.Option(metavar="KEY", help="Key file (PEM public or private, a JWK) or pkcs11: URI."),
    ] = None,
    public_key_b64: Annotated[
        str | None, typer.Option(help="The 32 raw key bytes, base64url.")
    ] = None,
    subject: Subjects = None,
    not_before: NotBefore = None,
    not_after: NotAfter = None,
    password_file: PasswordFile = None,
    as_json: AsJson = False,
) -> None:
    """Add a key to a trust store (created if missing); the result must load by every rule.

    \b
    Example:
      ecpa trust add trust.json --issuer urn:ecpa:issuer:host-a --kid key-2 --key k.pub.pem
    """
    if (key is None) == (public_key_b64 is None):
        raise fail_usage("expected exactly one of --key and --public-key-b64")
    try:
        public = (
            load_public(key, password_file, hint=UNLOCK_HINT)
            if key is not None
            else VerifyKey.from_b64(public_key_b64 or "")
        )
    except EcpaError as exc:
        raise EcpaError(ErrorCode.TRUST_STORE_CONFIG, exc.detail) from None
    window = validity_window(not_before, not_after)
    entry = trust_entry(issuer, kid, public, subject or ["host-runtime"], window)
    add_trust_entry(store, entry)
    if as_json:
        echo_json({"store": str(store), "added": entry})
    else:
        typer.echo(f"added issuer={show(issuer)} kid={show(kid)} to {show(store)}")


@trust_app.command("disable")
def trust_disable(
    store: StoreArg,
    issuer: Issuer,
    kid: Kid,
    as_json: AsJson = False,
) -> None:
    """Disable an entry: evidence under it then fails with ATTESTATION_TRUST_POLICY.

    \b
    Example:
      ecpa trust disable trust.json --issuer urn:ecpa:issuer:host-a --kid key-1
    """
    count = disable_trust_entry(store, issuer, kid)
    if as_json:
        echo_json({"store": str(store), "issuer": issuer, "kid": kid, "disabled": count})
    else:
        typer.echo(f"disabled issuer={show(issuer)} kid={show(kid)} in {show(store)}")


@trust_app.command("check")
def trust_check(store: StoreArg, as_json: AsJson = False) -> None:
    """Load a trust store by every rule of PROFILE §5 and report each problem, not only the
    first. Exit 0 when it loads, 2 when it does not.

    \b
    Example:
      ecpa trust check trust.json
    """
    code, doc = ErrorCode.TRUST_STORE_CONFIG.value, None
    try:
        problems = document_problems(doc := read_document(store))
    except EcpaError as exc:
        if not as_json:
            raise
        problems, code = [exc.detail], exc.code.value  # not even a document: one problem
    keys = len(TrustStore.from_dict(doc)) if doc is not None and not problems else None
    if as_json:
        found = [{"code": code, "detail": problem} for problem in problems]
        echo_json({"store": str(store), "ok": not problems, "keys": keys, "problems": found})
    for problem in [] if as_json else problems:
        typer.echo(f"PROBLEM {show(store)} {code}: {safe(problem)}")
    if problems:
        typer.echo(f"{len(problems)} problem(s) in {show(store)}", err=True)
        raise typer.Exit(EXIT_USAGE)
    if not as_json:
        typer.echo(f"OK {show(store)}: {keys} key(s), every rule holds")
    raise typer.Exit(EXIT_OK)
