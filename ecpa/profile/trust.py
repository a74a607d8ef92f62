"""The trust store (PROFILE §5): which key may speak for which issuer, subjects and window.

A trust store document is ``{"schema": "ecpa-trust-store/0.1", "keys": [ENTRY, ...]}``.
Everything wrong with it is refused when it is loaded, with
``ATTESTATION_TRUST_STORE_CONFIG``; ``verify`` never sees a half-valid store.
``schemas/trust-store.schema.json`` is generated from :class:`TrustStoreDocument`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecpa._files import read_bounded
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.json.strict_json import parse_object
from ecpa.profile.keys import VerifyKey
from ecpa.shapes.rules import ANY_TEXT, COUNT, TEXT, Array, Const, Flag, Value
from ecpa.shapes.shape import Nested, Shaped, ShapeError, member

__all__ = [
    "TRUST_STORE_SCHEMA",
    "TrustEntry",
    "TrustStore",
    "TrustStoreDocument",
    "TrustedKey",
    "document_problems",
    "read_document",
]

TRUST_STORE_SCHEMA = "ecpa-trust-store/0.1"
MAX_TRUST_STORE_BYTES = 16 * 1024 * 1024


class TrustEntry(Shaped):
    """One trusted key, in the shape of the corpus's ``keys`` items.

    The key is given in exactly one form: ``public_key_b64`` (32 raw bytes, base64url),
    ``public_key_jwk`` (an RFC 8037 OKP JWK) or ``public_key_pem`` (PEM SubjectPublicKeyInfo).
    """

    issuer: str = member(TEXT)
    kid: str = member(TEXT)
    public_key_b64: str | None = member(ANY_TEXT, default=None, nullable=True)
    public_key_jwk: dict[str, Any] | None = member(Value(), default=None, nullable=True)
    public_key_pem: str | None = member(ANY_TEXT, default=None, nullable=True)
    subjects: list[str] = member(Array(TEXT, min_items=1))
    enabled: bool = member(Flag())
    not_before: int = member(COUNT)
    not_after: int = member(COUNT)

    def check_whole(self) -> str | None:
        forms = [
            name
            for name in ("public_key_b64", "public_key_jwk", "public_key_pem")
            if getattr(self, name) is not None
        ]
        if len(forms) != 1:
            return (
                "expected exactly one of public_key_b64, public_key_jwk, public_key_pem, "
                f"found {forms or 'none'}"
            )
        if self.not_before > self.not_after:
            return f"expected not_before <= not_after, found {self.not_before} > {self.not_after}"
        return None

    def verify_key(self) -> VerifyKey:
        """The entry's checked public key. Raises ``EcpaError`` (``ECPA_INVALID_KEY``)."""
        if self.public_key_b64 is not None:
            return VerifyKey.from_b64(self.public_key_b64)
        if self.public_key_jwk is not None:
            return VerifyKey.from_jwk(self.public_key_jwk)
        assert self.public_key_pem is not None
        return VerifyKey.from_pem(self.public_key_pem)


class TrustStoreDocument(Shaped):
    """The trust store file: ``{"schema": "ecpa-trust-store/0.1", "keys": [...]}``."""

    store_schema: str = member(Const(TRUST_STORE_SCHEMA), wire="schema")
    keys: list[TrustEntry] = member(Array(Nested(TrustEntry)))


@dataclass(frozen=True)
class TrustedKey:
    """A loaded entry: its document form and its checked key."""

    entry: TrustEntry
    key: VerifyKey

    def check(self, subject: str, now: int) -> None:
        """PROFILE §3 step 18 after the lookup: enabled, subject allowed, ``now`` in window.

        Raises:
            EcpaError: ``ATTESTATION_TRUST_POLICY``.
        """
        entry = self.entry
        if (
            entry.enabled
            and subject in entry.subjects
            and entry.not_before <= now <= entry.not_after
        ):
            return  # the common case, without building the messages below
        who = f"key ({entry.issuer!r}, {entry.kid!r})"
        if not entry.enabled:
            raise EcpaError(
                ErrorCode.TRUST_POLICY, f"expected an enabled key, found {who} disabled"
            )
        if subject not in entry.subjects:
            raise EcpaError(
                ErrorCode.TRUST_POLICY,
                f"expected a subject among {entry.subjects} for {who}, found {subject!r}",
            )
        raise EcpaError(
            ErrorCode.TRUST_POLICY,
            f"expected now within [{entry.not_before}, {entry.not_after}] for {who}, "
            f"found now = {now}",
        )


def _config_error(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.TRUST_STORE_CONFIG, detail)


class TrustStore:
    """Trusted Ed25519 keys, looked up by ``(issuer, kid)``.

    Build it with :meth:`from_dict` or :meth:`load`; both refuse a bad document whole.
    """

    __slots__ = ("_keys", "document")

    def __init__(self, document: TrustStoreDocument) -> None:
        """From a validated document. Raises ``EcpaError`` (``ATTESTATION_TRUST_STORE_CONFIG``)."""
        keys: dict[tuple[str, str], TrustedKey] = {}
        for index, entry in enumerate(document.keys):
            ident = (entry.issuer, entry.kid)
            if ident in keys:
                raise _config_error(
                    f"keys.{index}: expected unique (issuer, kid), found {ident!r} again"
                )
            try:
                key = entry.verify_key()
            except EcpaError as exc:
                raise _config_error(f"keys.{index} {ident!r}: {exc.detail}") from None
            keys[ident] = TrustedKey(entry, key)
        self._keys = keys
        self.document = document

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> TrustStore:
        """From a trust store document already parsed from JSON.

        Raises:
            EcpaError: ``ATTESTATION_TRUST_STORE_CONFIG`` naming the first problem.
        """
        try:
            document = TrustStoreDocument.from_dict(doc, "document")
        except ShapeError as exc:
            raise _config_error(str(exc)) from None
        return cls(document)

    @classmethod
    def load(cls, path: str | Path) -> TrustStore:
        """Read a trust store JSON file (strict JSON, at most 16 MiB).

        Raises:
            EcpaError: ``ATTESTATION_TRUST_STORE_CONFIG`` for an unreadable or invalid file.
        """
        doc = read_document(path)
        return cls.from_dict(doc)

    def lookup(self, issuer: str, kid: str) -> TrustedKey | None:
        """The entry for ``(issuer, kid)``, or ``None``. Names compare exactly, unnormalized."""
        return self._keys.get((issuer, kid))

    def check_signer(self, issuer: str, kid: str, key: VerifyKey) -> None:
        """That ``key`` is the one this store trusts for ``(issuer, kid)``: what a signer can
        check before signing (``ecpa sign --trust``), so that a statement naming one key is
        not signed with another, to fail at PROFILE §3 step 18 or 20 later.

        Raises:
            EcpaError: the code verification would give, ``ATTESTATION_UNKNOWN_KEY`` (no
                entry for ``(issuer, kid)``) or ``ATTESTATION_INVALID_SIGNATURE`` (the entry
                holds another key); the detail names the kids this store trusts ``key`` for.
        """
        trusted = self.lookup(issuer, kid)
        if trusted is not None and trusted.key == key:
            return
        theirs = ", ".join(
            f"kid {t.entry.kid!r} of issuer {t.entry.issuer!r}" for t in self if t.key == key
        )
        if trusted is None:
            raise EcpaError(
                ErrorCode.UNKNOWN_KEY,
                f"expected a trusted key for issuer {issuer!r} and kid {kid!r}, found none"
                + (f" (the key given is trusted for {theirs})" if theirs else ""),
            )
        raise EcpaError(
            ErrorCode.INVALID_SIGNATURE,
            f"expected the key trusted for issuer {issuer!r} and kid {kid!r}, found "
            + (
                f"the key trusted for {theirs}" if theirs else "a key the trust store does not hold"
            ),
        )

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Any:
        return iter(self._keys.values())

    def to_dict(self) -> dict[str, Any]:
        """The document as plain JSON values."""
        return self.document.to_dict(omit_none=True)


def read_document(path: str | Path, *, dir_fd: int | None = None) -> dict[str, Any]:
    """Read a trust store file as plain JSON values, strictly, without checking its rules
    (``path`` relative to the directory open as ``dir_fd`` when given).

    Raises:
        EcpaError: ``ATTESTATION_TRUST_STORE_CONFIG`` for an unreadable file or bad JSON.
    """
    path = Path(path)
    data = read_bounded(
        path,
        MAX_TRUST_STORE_BYTES,
        ErrorCode.TRUST_STORE_CONFIG,
        dir_fd=dir_fd,
        follow=dir_fd is None,  # a store the user names; a launch's own is never a link
    )
    try:
        return parse_object(data, what=str(path))
    except EcpaError as exc:
        raise _config_error(exc.detail) from None


def document_problems(doc: Mapping[str, Any]) -> list[str]:
    """Every problem PROFILE §5 finds in a trust store document, not just the first.

    An empty list means :meth:`TrustStore.from_dict` accepts the document.
    """
    problems: list[str] = []
    if doc.get("schema") != TRUST_STORE_SCHEMA:
        problems.append(f"expected schema {TRUST_STORE_SCHEMA!r}, found {doc.get('schema')!r}")
    extra = sorted(set(doc) - {"schema", "keys"})
    if extra:
        problems.append(f"expected only the members ['keys', 'schema'], found extra {extra}")
    keys = doc.get("keys")
    if not isinstance(keys, list):
        problems.append(f"expected member 'keys' as an array, found {type(keys).__name__}")
        return problems
    seen: dict[tuple[Any, Any], int] = {}
    for index, raw in enumerate(keys):
        where = f"keys.{index}"
        ident = (raw.get("issuer"), raw.get("kid")) if isinstance(raw, dict) else None
        if ident is not None and all(isinstance(part, str) for part in ident):
            if ident in seen:
                problems.append(
                    f"{where}: expected unique (issuer, kid), found {ident!r} as in "
                    f"keys.{seen[ident]}"
                )
            else:
                seen[ident] = index
        found = TrustEntry.problems(raw, "entry")
        if found:
            problems.extend(f"{where}: {p}" for p in found)
            whole_ran = any(p.startswith("entry: ") for p in found)  # the entry-level check
            problems.extend(f"{where}: {p}" for p in _raw_problems(raw, window=not whole_ran))
            continue
        try:
            TrustEntry.from_dict(raw, "entry").verify_key()
        except EcpaError as exc:
            problems.append(f"{where}: {exc.detail}")
    return problems


def _raw_problems(raw: Any, *, window: bool) -> list[str]:
    """Key and window problems of an entry whose other members already failed (the
    entry-level checks then do not run), so that none goes unseen."""
    if not isinstance(raw, dict):
        return []
    start, end = raw.get("not_before"), raw.get("not_after")
    problems = []
    if window and type(start) is int and type(end) is int and start > end:
        problems.append(f"entry: expected not_before <= not_after, found {start} > {end}")
    loaders: tuple[tuple[str, Any], ...] = (
        ("public_key_b64", VerifyKey.from_b64),
        ("public_key_jwk", VerifyKey.from_jwk),
        ("public_key_pem", VerifyKey.from_pem),
    )
    for name, load in loaders:
        if isinstance(raw.get(name), (str, dict)):
            try:
                load(raw[name])
            except EcpaError as exc:
                problems.append(exc.detail)
    return problems
