"""``ecpa sign`` and ``ecpa keygen``."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Annotated

import typer

from ecpa._files import write_new
from ecpa._text import safe, show
from ecpa.cli._app import one_command
from ecpa.cli._common import UNLOCK_HINT, echo_json, fail_usage, load_key, read_json_object
from ecpa.cli._options import AsJson, Issuer, Kid, NotAfter, NotBefore, PasswordFile, Subjects
from ecpa.errors import EcpaError
from ecpa.hsm import is_pkcs11_uri, key_password
from ecpa.profile.keys import SigningKey, VerifyKey, load_public_key
from ecpa.profile.sign import sign
from ecpa.profile.trust import TRUST_STORE_SCHEMA, TrustStore
from ecpa.runtime import add_trust_entry, check_trust_addition, trust_entry, validity_window

__all__ = ["keygen_app", "keygen_command", "sign_app", "sign_command"]

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
KeyFile = Annotated[
    str, typer.Option(metavar="KEY", help="Ed25519 private key: PEM PKCS#8, .jwk or pkcs11: URI.")
]


def _stem(kid: str) -> str:
    """The name keygen gives the files of ``kid``'s key: STEM.pem and STEM.pub.pem."""
    return _SAFE_NAME.sub("_", kid) or "key"


def _refuse_existing(*paths: Path, why: str = "use --force to replace it") -> None:
    """Refuse before writing any of ``paths`` when one exists."""
    for path in paths:
        if path.exists() or path.is_symlink():
            raise fail_usage(f"expected {path} not to exist ({why}), found it")


def _other_kid(key: str, kid: str, public: VerifyKey) -> str | None:
    """Without --trust, a note when keygen's public half of the statement's ``kid``
    (KID.pub.pem) lies beside the key file ``key`` and is another key: verify will refuse
    the signature. Only a note: a stray file is no proof, a trust store is (--trust)."""
    if is_pkcs11_uri(key):
        return None
    theirs = Path(key).parent / f"{_stem(kid)}.pub.pem"
    try:
        if not theirs.is_file() or load_public_key(theirs) == public:
            return None
    except (EcpaError, OSError):
        return None  # not a key keygen wrote: nothing to say
    return (
        f"expected the key of the statement's kid {safe(repr(kid))} (its public half is "
        f"{show(theirs)}), found another key in {show(key)}: verification will refuse the "
        "signature (--trust FILE checks the key against a trust store)"
    )


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
    trust: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Refuse unless this trust store holds KEY for the statement's issuer and kid "
            "(its window, subjects and enabled flag are verify's to check).",
            show_default=False,
        ),
    ] = None,
    password_file: PasswordFile = None,
    as_json: AsJson = False,
) -> None:
    """Sign a statement into PREFIX.json (its JCS payload) and PREFIX.jws (detached JWS).

    An invalid statement is refused with the code a verifier would give (exit 1), and so is
    a KEY that --trust FILE does not trust for the statement's kid. An encrypted key's
    passphrase comes from $ECPA_KEY_PASSWORD or --password-file; a token's PIN (--key
    'pkcs11:...') from the URI's pin-source, --password-file or $ECPA_PKCS11_PIN.

    \b
    Example:
      ecpa sign statement.json --key demo-key.pem --out evidence
    """
    doc = read_json_object(statement, "statement", evidence=True)
    signer = load_key(key, password_file)
    signed = sign(doc, signer)
    issuer, kid = signed.statement.issuer, signed.statement.kid
    if trust is not None:  # before anything is written
        TrustStore.load(trust).check_signer(issuer, kid, signer.public_key)
    elif (note := _other_kid(key, kid, signer.public_key)) is not None:
        typer.echo(f"ecpa sign: note: {note}", err=True)
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
            | {"issuer": issuer, "kid": kid}
            | {"payload_sha256": digest}
        )
    else:
        typer.echo(f"signed {show(statement)}: wrote {show(jws_path)} and {show(payload_path)}")


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
    stem = _stem(kid)
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


sign_app = one_command(sign_command, "sign")
keygen_app = one_command(keygen_command, "keygen")
