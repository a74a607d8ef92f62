"""``ecpa sign``, ``ecpa keygen`` and ``ecpa trust ...``."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from ecpa._files import read_input, write_file
from ecpa._text import json_line, safe, show
from ecpa.cli._common import EXIT_OK, EXIT_USAGE, fail_usage, read_json_object
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.keys import SigningKey, VerifyKey
from ecpa.profile.sign import sign
from ecpa.profile.trust import TRUST_STORE_SCHEMA, TrustStore, document_problems, read_document
from ecpa.runtime import update_trust_file

YEAR = 365 * 24 * 3600
MAX_TIME = 2**53 - 1
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


def _write_new(path: Path, data: bytes, *, mode: int = 0o644, force: bool = False) -> None:
    """``data`` as the file ``path``, whole or not at all (:func:`ecpa._files.write_file`);
    never through a symlink at ``path``, never over an existing file unless ``force``."""
    if path.is_symlink():
        raise fail_usage(f"expected a regular file path at {path}, found a symlink")
    if path.exists() and not force:
        raise fail_usage(f"expected {path} not to exist (use --force to replace it), found it")
    try:
        write_file(path, data, mode=mode, replace=force)
    except FileExistsError:
        raise fail_usage(
            f"expected {path} not to exist (use --force to replace it), found it"
        ) from None
    except OSError as exc:
        raise fail_usage(f"expected to write {path}, found: {exc.strerror}") from None


def sign_command(
    statement: Annotated[Path, typer.Argument(help="The statement, a JSON object.")],
    key: Annotated[Path, typer.Option(help="Ed25519 private key: PEM PKCS#8 (or a .jwk).")],
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output prefix: writes PREFIX.jws and PREFIX.json (default: STEM.signed)."
        ),
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace existing output files.")] = False,
) -> None:
    """Sign a statement: PREFIX.json gets the canonical payload, PREFIX.jws the detached JWS.

    An invalid statement is refused with the code a verifier would give (exit 1).

    \b
    Example:
      ecpa sign statement.json --key demo-key.pem --out evidence
    """
    doc = read_json_object(statement, "statement", evidence=True)
    signing_key = SigningKey.load(key)
    signed = sign(doc, signing_key)
    prefix = out if out is not None else statement.with_name(statement.stem + ".signed")
    jws_path, payload_path = Path(f"{prefix}.jws"), Path(f"{prefix}.json")
    for path in (payload_path, jws_path):  # refuse before writing either file
        if not force and (path.exists() or path.is_symlink()):
            raise fail_usage(f"expected {path} not to exist (use --force to replace it), found it")
    _write_new(payload_path, signed.payload, force=force)
    _write_new(jws_path, signed.detached_jws.encode("ascii") + b"\n", force=force)
    typer.echo(f"signed {show(statement)}: wrote {show(jws_path)} and {show(payload_path)}")


def _entry(
    issuer: str, kid: str, public: VerifyKey, subjects: list[str], not_before: int, not_after: int
) -> dict[str, Any]:
    return {
        "issuer": issuer,
        "kid": kid,
        "public_key_b64": public.to_b64(),
        "subjects": subjects,
        "enabled": True,
        "not_before": not_before,
        "not_after": not_after,
    }


def _store_doc(path: Path, *, create: bool) -> dict[str, Any]:
    if not path.exists() and create:
        return {"schema": TRUST_STORE_SCHEMA, "keys": []}
    return read_document(path)


def _adding(path: Path, entry: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The change that adds ``entry`` to the store at ``path``."""

    def change(doc: dict[str, Any]) -> dict[str, Any]:
        keys = doc.get("keys")
        if not isinstance(keys, list):
            raise EcpaError(ErrorCode.TRUST_STORE_CONFIG, f"{path}: expected 'keys' as an array")
        keys.append(entry)
        return doc

    return change


def _add_entry(path: Path, entry: dict[str, Any]) -> None:
    update_trust_file(path, _adding(path, entry), create=True)


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


def _window(not_before: int | None, not_after: int | None) -> tuple[int, int]:
    now = int(time.time())
    start = now if not_before is None else not_before
    return start, (min(start + YEAR, MAX_TIME) if not_after is None else not_after)


def keygen_command(
    issuer: Annotated[str, typer.Option(help="The issuer the key speaks for.")],
    kid: Annotated[str, typer.Option(help="The key id (the JWS header kid).")],
    subject: Subjects = None,
    out_dir: Annotated[Path, typer.Option(help="Directory for the key files.")] = Path("."),
    trust: Annotated[
        Path | None, typer.Option(help="Trust store to add the entry to (created if missing).")
    ] = None,
    not_before: NotBefore = None,
    not_after: NotAfter = None,
) -> None:
    """Make an Ed25519 key: KID.pem (PKCS#8, mode 0600, never over an existing file),
    KID.pub.pem, and its trust entry (printed, and added to --trust when given).

    \b
    Example:
      ecpa keygen --issuer urn:ecpa:issuer:host-a --kid key-1 --trust trust.json
    """
    start, end = _window(not_before, not_after)
    key = SigningKey.generate()
    entry = _entry(issuer, kid, key.public_key, subject or ["host-runtime"], start, end)
    # Every check before anything is written: the entry, and the store it will join.
    doc = _adding(trust, entry)(_store_doc(trust, create=True)) if trust is not None else None
    TrustStore.from_dict(doc or {"schema": TRUST_STORE_SCHEMA, "keys": [entry]})
    stem = _SAFE_NAME.sub("_", kid) or "key"
    private_path, public_path = out_dir / f"{stem}.pem", out_dir / f"{stem}.pub.pem"
    for path in (private_path, public_path):
        if path.exists() or path.is_symlink():
            raise fail_usage(f"expected {path} not to exist (keys are never overwritten), found it")
    _write_new(private_path, key.to_pem(), mode=0o600)
    _write_new(public_path, key.public_key.to_pem())
    if trust is not None:  # checked above; added under the store's lock, as it is now
        _add_entry(trust, entry)
        typer.echo(f"added {show(kid)} to {show(trust)}", err=True)
    typer.echo(f"wrote {show(private_path)} (mode 0600) and {show(public_path)}", err=True)
    typer.echo(json.dumps(entry, indent=2, ensure_ascii=False))


trust_app = typer.Typer(
    help="Look after a trust store: list, add, disable, check.",
    epilog="\b\nExamples:\n  ecpa trust list trust.json\n  ecpa trust check trust.json",
    no_args_is_help=True,
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
            typer.echo(json_line(e.model_dump(exclude_none=True)))
            continue
        state = "enabled" if e.enabled else "DISABLED"
        typer.echo(
            f"{state} issuer={show(e.issuer)} kid={show(e.kid)} "
            f"subjects={show(','.join(e.subjects))} window=[{e.not_before},{e.not_after}] "
            f"key={trusted.key.to_b64()}"
        )
    typer.echo(f"{len(loaded)} key(s) in {show(store)}", err=True)


def _public_key(path: Path) -> VerifyKey:
    data = read_input(path)
    if b"PRIVATE KEY" in data:
        return SigningKey.from_pem(data).public_key
    if data.lstrip().startswith(b"{"):
        jwk = read_json_object(path, "JWK")
        return VerifyKey.from_jwk({k: v for k, v in jwk.items() if k != "d"})
    return VerifyKey.from_pem(data)


@trust_app.command("add")
def trust_add(
    store: StoreArg,
    issuer: Annotated[str, typer.Option(help="The issuer the key speaks for.")],
    kid: Annotated[str, typer.Option(help="The key id (the JWS header kid).")],
    key: Annotated[
        Path | None, typer.Option(help="Key file: PEM public or private key, or a JWK.")
    ] = None,
    public_key_b64: Annotated[
        str | None, typer.Option(help="The 32 raw key bytes, base64url.")
    ] = None,
    subject: Subjects = None,
    not_before: NotBefore = None,
    not_after: NotAfter = None,
) -> None:
    """Add a key to a trust store (created if missing); the result must load by every rule.

    \b
    Example:
      ecpa trust add trust.json --issuer urn:ecpa:issuer:host-a --kid key-2 --key k.pub.pem
    """
    if (key is None) == (public_key_b64 is None):
        raise fail_usage("expected exactly one of --key and --public-key-b64")
    try:
        public = _public_key(key) if key is not None else VerifyKey.from_b64(public_key_b64 or "")
    except EcpaError as exc:
        raise EcpaError(ErrorCode.TRUST_STORE_CONFIG, exc.detail) from None
    start, end = _window(not_before, not_after)
    _add_entry(store, _entry(issuer, kid, public, subject or ["host-runtime"], start, end))
    typer.echo(f"added issuer={show(issuer)} kid={show(kid)} to {show(store)}")


@trust_app.command("disable")
def trust_disable(
    store: StoreArg,
    issuer: Annotated[str, typer.Option(help="Issuer of the entry.")],
    kid: Annotated[str, typer.Option(help="Key id of the entry.")],
) -> None:
    """Disable an entry: evidence under it then fails with ATTESTATION_TRUST_POLICY.

    \b
    Example:
      ecpa trust disable trust.json --issuer urn:ecpa:issuer:host-a --kid key-1
    """

    def disable(doc: dict[str, Any]) -> dict[str, Any]:
        keys = doc.get("keys")
        entries: list[Any] = keys if isinstance(keys, list) else []
        found = [
            e
            for e in entries
            if isinstance(e, dict) and (e.get("issuer"), e.get("kid")) == (issuer, kid)
        ]
        if not found:
            raise fail_usage(f"expected an entry ({issuer!r}, {kid!r}) in {store}, found none")
        for entry in found:
            entry["enabled"] = False
        return doc

    update_trust_file(store, disable)
    typer.echo(f"disabled issuer={show(issuer)} kid={show(kid)} in {show(store)}")


@trust_app.command("check")
def trust_check(store: StoreArg) -> None:
    """Load a trust store by every rule of PROFILE §5 and report each problem, not only the
    first. Exit 0 when it loads, 2 when it does not.

    \b
    Example:
      ecpa trust check trust.json
    """
    problems = document_problems(read_document(store))
    for problem in problems:
        typer.echo(f"PROBLEM {show(store)} {ErrorCode.TRUST_STORE_CONFIG.value}: {safe(problem)}")
    if problems:
        typer.echo(f"{len(problems)} problem(s) in {show(store)}", err=True)
        raise typer.Exit(EXIT_USAGE)
    typer.echo(f"OK {show(store)}: {len(TrustStore.load(store))} key(s), every rule holds")
    raise typer.Exit(EXIT_OK)
