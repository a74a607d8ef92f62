"""``ecpa sign``, ``ecpa keygen`` and ``ecpa trust ...``."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Annotated

import typer

from ecpa._files import write_new
from ecpa._text import json_line, safe, show
from ecpa.cli._app import command_group, one_command
from ecpa.cli._common import (
    EXIT_OK,
    EXIT_USAGE,
    UNLOCK_HINT,
    AsJson,
    PasswordFile,
    echo_json,
    fail_usage,
    load_key,
    read_json_object,
)
from ecpa.errors import EcpaError, ErrorCode
from ecpa.hsm import key_password, load_public
from ecpa.profile.keys import SigningKey, VerifyKey
from ecpa.profile.sign import sign
from ecpa.profile.trust import TRUST_STORE_SCHEMA, TrustStore, document_problems, read_document
from ecpa.runtime import (
    add_trust_entry,
    check_trust_addition,
    disable_trust_entry,
    trust_entry,
    validity_window,
)

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
KeyFile = Annotated[
    str, typer.Option(metavar="KEY", help="Ed25519 private key: PEM PKCS#8, .jwk or pkcs11: URI.")
]


def _refuse_existing(*paths: Path, why: str = "use --force to replace it") -> None:
    """Refuse before writing any of ``paths`` when one exists."""
    for path in paths:
        if path.exists() or path.is_symlink():
            raise fail_usage(f"expected {path} not to exist ({why}), found it")


def sign_command(
    statement: Annotated[Path, typer.Argument(help="The statement, a JSON object.")],
    key: KeyFile,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output prefix: writes PREFIX.jws and PREFIX.json (default: STEM.signed)."
        ),
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace existing output files.")] = False,
    password_file: PasswordFile = None,
    as_json: AsJson = False,
) -> None:
    """Sign a statement into PREFIX.json (its JCS payload) and PREFIX.jws (detached JWS).

    An invalid statement is refused with the code a verifier would give (exit 1). An
    encrypted key's passphrase comes from $ECPA_KEY_PASSWORD or --password-file; a token's
    PIN (--key 'pkcs11:...') from the URI's pin-source, --password-file or $ECPA_PKCS11_PIN.

    \b
    Example:
      ecpa sign statement.json --key demo-key.pem --out evidence
    """
    doc = read_json_object(statement, "statement", evidence=True)
    signed = sign(doc, load_key(key, password_file))
    prefix = out if out is not None else statement.with_name(statement.stem + ".signed")
    jws_path, payload_path = Path(f"{prefix}.jws"), Path(f"{prefix}.json")
    if not force:
        _refuse_existing(payload_path, jws_path)
    write_new(payload_path, signed.payload, force=force)
    write_new(jws_path, signed.detached_jws.encode("ascii") + b"\n", force=force)
    if as_json:
        digest = hashlib.sha256(signed.payload).hexdigest()
        echo_json(
            {"statement": str(statement), "jws": str(jws_path), "payload": str(payload_path)}
            | {"issuer": signed.statement.issuer, "kid": signed.statement.kid}
            | {"payload_sha256": digest}
        )
    else:
        typer.echo(f"signed {show(statement)}: wrote {show(jws_path)} and {show(payload_path)}")


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
Issuer = Annotated[str, typer.Option(help="The issuer the key speaks for.")]
Kid = Annotated[str, typer.Option(help="The key id (the JWS header kid).")]


def keygen_command(
    issuer: Issuer,
    kid: Kid,
    subject: Subjects = None,
    out_dir: Annotated[Path, typer.Option(help="Directory for the key files.")] = Path("."),
    trust: Annotated[
        Path | None, typer.Option(help="Trust store to add the entry to (created if missing).")
    ] = None,
    not_before: NotBefore = None,
    not_after: NotAfter = None,
    encrypt: Annotated[
        bool,
        typer.Option(
            "--encrypt",
            help="Encrypt KID.pem with the passphrase from $ECPA_KEY_PASSWORD or --password-file.",
        ),
    ] = False,
    password_file: PasswordFile = None,
    as_json: AsJson = False,
) -> None:
    """Make an Ed25519 key and its trust entry.

    Writes KID.pem (PKCS#8, mode 0600, never over an existing file; encrypted with
    --encrypt) and KID.pub.pem, and prints the trust entry (added to --trust when given).

    \b
    Examples:
      ecpa keygen --issuer urn:ecpa:issuer:host-a --kid key-1 --trust trust.json
      ECPA_KEY_PASSWORD=... ecpa keygen --issuer urn:ecpa:issuer:host-a --kid key-2 --encrypt
    """
    if password_file is not None and not encrypt:
        raise fail_usage("expected --encrypt with --password-file (a key is encrypted only then)")
    password = key_password(password_file) if encrypt else None
    if encrypt and (password is None or not password.strip()):
        raise fail_usage(f"expected a passphrase for --encrypt{UNLOCK_HINT}, found none")
    key = SigningKey.generate()
    window = validity_window(not_before, not_after)
    entry = trust_entry(issuer, kid, key.public_key, subject or ["host-runtime"], window)
    # Every check before anything is written: the entry, and the store it will join.
    if trust is not None:
        check_trust_addition(trust, entry)
    else:
        TrustStore.from_dict({"schema": TRUST_STORE_SCHEMA, "keys": [entry]})
    stem = _SAFE_NAME.sub("_", kid) or "key"
    private_path, public_path = out_dir / f"{stem}.pem", out_dir / f"{stem}.pub.pem"
    _refuse_existing(private_path, public_path, why="keys are never overwritten")
    write_new(private_path, key.to_pem(password), mode=0o600)
    write_new(public_path, key.public_key.to_pem())
    if trust is not None:  # checked above; added under the store's lock, as it is now
        add_trust_entry(trust, entry)
    if as_json:
        paths = {"private_key": str(private_path), "public_key": str(public_path)}
        echo_json(paths | {"encrypted": encrypt, "trust": trust and str(trust), "entry": entry})
        return
    if trust is not None:
        typer.echo(f"added {show(kid)} to {show(trust)}", err=True)
    what = "encrypted, mode 0600" if encrypt else "mode 0600"
    typer.echo(f"wrote {show(private_path)} ({what}) and {show(public_path)}", err=True)
    typer.echo(json.dumps(entry, indent=2, ensure_ascii=False))


trust_app = command_group(
    "Look after a trust store: list, add, disable, check.",
    "\b\nExamples:\n  ecpa trust list trust.json\n  ecpa trust check trust.json",
)
StoreArg = Annotated[Path, typer.Argument(help="The trust store file.")]


@trust_app.command("list")
def trust_list(
    store: StoreArg,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per entry.")] = False,
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
    issuer: Annotated[str, typer.Option(help="Issuer of the entry.")],
    kid: Annotated[str, typer.Option(help="Key id of the entry.")],
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


sign_app = one_command(sign_command, "sign")
keygen_app = one_command(keygen_command, "keygen")
