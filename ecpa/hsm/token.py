"""An Ed25519 key held by a token, reached over PKCS#11 with python-pkcs11 (ADR 0006).

:func:`open_pkcs11_key` loads the module, finds the one token and the one Ed25519 private
key the URI names, logs in, reads the public half and checks it (a large-order point,
:class:`~ecpa.profile.keys.VerifyKey`), then has the token sign a probe once and verifies
it, so a public object that is not the private key's half is refused when the key is
opened, not when a verifier refuses the first statement. ``pkcs11`` is imported here, on
first use: ``ecpa`` runs without it, and only a ``pkcs11:`` URI asks for it.

PKCS#11 logs an application in per token, not per session: every session on the token
shares one login, and logging out of any session logs all out. So one login session per
token and module is kept while any key on that token is open, and each key signs on a
session of its own (unauthenticated itself, the token's login applying to it).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.hsm.module import load_pkcs11, module_file, token_error
from ecpa.hsm.unlock import pkcs11_pin
from ecpa.hsm.uri import Pkcs11Uri, parse_pkcs11_uri
from ecpa.profile.keys import VerifyKey

if TYPE_CHECKING:
    from pkcs11 import Session, SignMixin, Token

__all__ = ["PROBE", "Pkcs11Key", "open_pkcs11_key"]

#: What the token signs once when a key is opened, to check its public half.
PROBE = b"ecpa: a probe signature, made once when a token's key is opened (docs/pkcs11.md)"
_SIGNATURE_LEN = 64
_MANY = 100  # objects looked at, at most, when counting matches for a message
_KEY = ErrorCode.INVALID_KEY


@dataclass
class _Login:
    session: Session  # the session whose C_Login made the token's login; closing it logs out
    pin_digest: bytes
    holders: int = 0


_LOGINS: dict[tuple[str, int], _Login] = {}
_LOGINS_LOCK = threading.RLock()  # a finalizer may run inside, on this thread


def _log_in(module: str, token: Token, pin: str, where: str) -> tuple[str, int]:
    """Take a share of the token's login, logging in when this process has none yet."""
    pkcs11 = load_pkcs11()
    place = (module, int(token.slot.slot_id))
    digest = hashlib.sha256(pin.encode("utf-8")).digest()
    with _LOGINS_LOCK:
        login = _LOGINS.get(place)
        if login is None:
            try:
                session = token.open(user_pin=pin)
            except pkcs11.PKCS11Error as exc:
                raise token_error(exc, f"log in to {where}") from None
            login = _LOGINS[place] = _Login(session, digest)
        elif not hmac.compare_digest(login.pin_digest, digest):
            raise EcpaError(
                _KEY,
                f"expected the PIN this process logged in to {where} with, found another "
                "(the token keeps one login per process)",
            )
        login.holders += 1
    return place


def _log_out(place: tuple[str, int]) -> None:
    with _LOGINS_LOCK:
        login = _LOGINS.get(place)
        if login is None:
            return
        login.holders -= 1
        if login.holders > 0:
            return
        del _LOGINS[place]
    with contextlib.suppress(Exception):  # the login ends either way; nothing to tell
        login.session.close()  # C_Logout, then C_CloseSession


def _release(session: Session, place: tuple[str, int]) -> None:
    """Close a key's session and give back its share of the login (also run by the key's
    finalizer, when a key nobody closed is collected or the interpreter exits)."""
    with contextlib.suppress(Exception):  # a session already gone is closed enough
        session.close()
    _log_out(place)


class Pkcs11Key:
    """An Ed25519 private key on a token: an :class:`~ecpa.profile.keys.Ed25519Signer`
    (``public_key``, ``sign``), safe to share between threads (one session, signing under a
    lock). Close it, or use it as a context manager; one nobody closes is closed when it is
    collected. Made by :func:`open_pkcs11_key`.
    """

    def __init__(
        self,
        session: Session,
        private: SignMixin,
        public: VerifyKey,
        place: tuple[str, int],
        what: str,
    ) -> None:
        """Wrap an open session and its private key object; use :func:`open_pkcs11_key`."""
        self._session = session
        self._private = private
        self._public = public
        self._lock = threading.Lock()
        self._closed = False
        self._mechanism = load_pkcs11().Mechanism.EDDSA
        self.description = what
        self._finalizer = weakref.finalize(self, _release, session, place)

    @property
    def public_key(self) -> VerifyKey:
        """The public half, as the token holds it beside the private key (checked)."""
        return self._public

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature (RFC 8032, pure: ``CKM_EDDSA`` without parameters)
        of ``message``, made by the token.

        Raises:
            EcpaError: ``ECPA_INVALID_KEY`` when the key is closed, the token fails (naming
                the token, the object and the kind of failure) or returns no 64 bytes.
        """
        pkcs11 = load_pkcs11()
        with self._lock:
            if self._closed:
                raise EcpaError(_KEY, f"expected an open key, found {self.description} closed")
            try:
                signature = self._private.sign(bytes(message), mechanism=self._mechanism)
            except pkcs11.PKCS11Error as exc:
                raise token_error(exc, f"sign with {self.description}") from None
        if not isinstance(signature, bytes) or len(signature) != _SIGNATURE_LEN:
            found = f"{len(signature)} bytes" if isinstance(signature, bytes) else "no bytes"
            raise EcpaError(
                _KEY,
                f"expected a {_SIGNATURE_LEN}-byte Ed25519 signature from {self.description}, "
                f"found {found}",
            )
        return signature

    def close(self) -> None:
        """Close the key's session (and the token's login, with the last key on it)."""
        with self._lock:
            self._closed = True
            self._finalizer()

    def __enter__(self) -> Pkcs11Key:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Pkcs11Key({self.description}, public={self._public.to_b64()!r})"


def open_pkcs11_key(
    uri: str, *, password_file: Path | None = None, environ: Mapping[str, str] = os.environ
) -> Pkcs11Key:
    """Open the Ed25519 private key ``uri`` names on a token (RFC 7512;
    :func:`~ecpa.hsm.uri.parse_pkcs11_uri`).

    The module is the URI's ``module-path`` (with ``module-name``: the module of that name
    in the directory it names), else ``$ECPA_PKCS11_MODULE``; the PIN the URI's
    ``pin-source`` file, else ``password_file``, else ``$ECPA_PKCS11_PIN``. Exactly one
    initialized token must match the URI's token, slot and library attributes, and on it
    exactly one private key of type ``CKK_EC_EDWARDS`` and one public key of that type
    with the URI's ``object`` (label) and ``id``.

    Raises:
        EcpaError: ``ECPA_INVALID_KEY`` for a bad URI, no module or PIN, python-pkcs11 not
            installed, a module that cannot be loaded, no or several matching tokens or
            keys (saying how many), a token error (a wrong PIN, a token gone: naming it),
            a public key that is malformed or of small order, or a probe signature that
            does not verify under it.
    """
    parsed = parse_pkcs11_uri(uri)
    if parsed.object_type not in (None, "private"):
        raise EcpaError(
            _KEY,
            f"expected type=private (a signing key) in the URI, found type={parsed.object_type}",
        )
    module = module_file(parsed, environ)
    pin = pkcs11_pin(parsed.pin_file, password_file, environ)
    pkcs11 = load_pkcs11()
    try:
        lib = pkcs11.lib(module)
    except pkcs11.PKCS11Error as exc:
        raise token_error(exc, f"load the PKCS#11 module {module}") from None
    token = _one_token(pkcs11, lib, parsed, module)
    where = f"token {token.label!r} (module {module})"
    place = _log_in(module, token, pin, where)
    try:
        session = token.open()
    except pkcs11.PKCS11Error as exc:
        _log_out(place)
        raise token_error(exc, f"open a session on {where}") from None
    what = f"{parsed.describe()} on token {token.label!r}"
    try:
        private = _one_object(pkcs11, session, parsed, pkcs11.ObjectClass.PRIVATE_KEY, what)
        public = _public_key(pkcs11, session, parsed, what)
        key = Pkcs11Key(session, private, public, place, what)
    except BaseException:
        _release(session, place)
        raise
    try:
        public.verify(key.sign(PROBE), PROBE)
    except EcpaError as exc:
        key.close()
        if exc.code is _KEY:
            raise
        raise EcpaError(
            _KEY,
            f"expected the token's signature to verify under the public key beside {what}, "
            "found one that does not (that public object is not this private key's half)",
        ) from None
    return key


def _one_token(pkcs11: ModuleType, lib: Any, uri: Pkcs11Uri, module: str) -> Token:
    """The one initialized token the URI's token, slot and library attributes match."""
    library = (
        (uri.library_manufacturer, lib.manufacturer_id),
        (uri.library_description, lib.library_description),
        (uri.library_version, tuple(lib.library_version)),
    )
    if any(want is not None and want != _unpad(have) for want, have in library):
        raise EcpaError(
            _KEY,
            f"expected the module {module} to be the library the URI names, found "
            f"{lib.manufacturer_id!r}, {lib.library_description!r}, version "
            f"{'.'.join(map(str, lib.library_version))}",
        )
    try:
        tokens: list[Token] = []
        for slot in lib.get_slots(token_present=True):
            token = slot.get_token()
            if token.flags & pkcs11.TokenFlag.TOKEN_INITIALIZED and _matches(uri, slot, token):
                tokens.append(token)
    except pkcs11.PKCS11Error as exc:
        raise token_error(exc, f"list the tokens of the module {module}") from None
    if len(tokens) != 1:
        names = ", ".join(repr(t.label) for t in tokens[:8])
        raise EcpaError(
            _KEY,
            f"expected one initialized token matching the URI ({_token_words(uri)}) in the "
            f"module {module}, found {len(tokens)}{': ' + names if names else ''}",
        )
    return tokens[0]


def _matches(uri: Pkcs11Uri, slot: Any, token: Any) -> bool:
    pairs = (
        (uri.token, token.label),
        (uri.manufacturer, token.manufacturer_id),
        (uri.model, token.model),
        (uri.serial, token.serial),
        (uri.slot_description, slot.slot_description),
        (uri.slot_manufacturer, slot.manufacturer_id),
        (uri.slot_id, slot.slot_id),
    )
    return all(want is None or want == _unpad(have) for want, have in pairs)


def _unpad(value: object) -> object:
    """A CK_*_INFO field as the URI spells it: blank padding gone, bytes (a serial) as text."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value.rstrip(" ") if isinstance(value, str) else value


def _token_words(uri: Pkcs11Uri) -> str:
    names = ("token", "manufacturer", "model", "serial", "slot_description", "slot_manufacturer")
    given = [
        f"{n.replace('_', '-')}={getattr(uri, n)!r}" for n in names if getattr(uri, n) is not None
    ]
    given += [f"slot-id={uri.slot_id}"] if uri.slot_id is not None else []
    return ", ".join(given) or "any token"


def _one_object(pkcs11: ModuleType, session: Session, uri: Pkcs11Uri, kind: Any, what: str) -> Any:
    """The one object of class ``kind`` and type ``CKK_EC_EDWARDS`` with the URI's label
    and id; when there is none, how many of other types there are, in the refusal."""
    attribute = pkcs11.Attribute
    template: dict[Any, Any] = {attribute.CLASS: kind}
    if uri.object is not None:
        template[attribute.LABEL] = uri.object
    if uri.object_id is not None:
        template[attribute.ID] = uri.object_id
    noun = "private key" if kind == pkcs11.ObjectClass.PRIVATE_KEY else "public key"
    objects: Any = session.get_objects(template)  # a generator: closed below
    try:
        found = list(islice(objects, _MANY))
        edwards = [o for o in found if o[attribute.KEY_TYPE] == pkcs11.KeyType.EC_EDWARDS]
    except pkcs11.PKCS11Error as exc:
        raise token_error(exc, f"find the {noun} {what}") from None
    finally:
        objects.close()  # C_FindObjectsFinal: the session takes no other call until then
    if len(edwards) == 1:
        return edwards[0]
    others = len(found) - len(edwards)
    aside = f" (and {others} {noun}(s) of another type)" if others else ""
    raise EcpaError(
        _KEY,
        f"expected one Ed25519 (CKK_EC_EDWARDS) {noun} {what}, found {len(edwards)}{aside}",
    )


def _public_key(pkcs11: ModuleType, session: Session, uri: Pkcs11Uri, what: str) -> VerifyKey:
    """The public key object's ``CKA_EC_POINT``: a DER OCTET STRING (``04 20`` and the 32
    bytes, as PKCS#11 3.0 says) or, as some tokens give it, the 32 bytes alone; checked
    by :class:`VerifyKey` (canonical, on the curve, not of small order)."""
    public = _one_object(pkcs11, session, uri, pkcs11.ObjectClass.PUBLIC_KEY, what)
    try:
        point = bytes(public[pkcs11.Attribute.EC_POINT])
    except pkcs11.PKCS11Error as exc:
        raise token_error(exc, f"read the public key (CKA_EC_POINT) {what}") from None
    if len(point) == 34 and point[:2] == b"\x04\x20":
        point = point[2:]
    if len(point) != 32:
        raise EcpaError(
            _KEY,
            f"expected the public key {what} as 32 bytes (or DER 04 20 and 32 bytes), found "
            f"{len(point)} bytes",
        )
    try:
        return VerifyKey.from_bytes(point)
    except EcpaError as exc:
        raise EcpaError(_KEY, f"the public key {what}: {exc.detail}") from None
