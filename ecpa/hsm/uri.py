"""PKCS#11 URIs (RFC 7512): the text that names a key on a token, read exactly.

The grammar is RFC 7512 §2.3: ``pkcs11:`` then path attributes separated by ``;``, then
optionally ``?`` and query attributes separated by ``&``. A value holds the characters its
component admits (``pk11-pchar``, ``pk11-qchar``) and percent-escapes (``%HH``) for any
other byte; the text ones are UTF-8. The scheme and the attribute names are ABNF quoted
strings, which RFC 5234 §2.3 makes case-insensitive (and RFC 3986 §3.1 says schemes are), so
``PKCS11:`` and ``Object=`` are read; ``type``'s literals likewise.

Stricter than the RFC asks, on purpose (each refusal is ``ECPA_INVALID_KEY`` naming what was
expected and what was found, never a value of ``pin-value``):

- ``pin-value`` is refused wherever it stands: a PIN on a command line is readable by every
  user through ``ps``. The PIN comes from ``pin-source``, ``--password-file`` or
  ``$ECPA_PKCS11_PIN`` (:mod:`ecpa.hsm.unlock`).
- an attribute ecpa does not apply is refused, the vendor-specific ones of RFC 7512's
  grammar included (``pk11-v-pattr``, ``pk11-v-qattr``: names of letters, digits, ``-`` and
  ``_``, with an ``x-`` prefix or without): a path attribute narrows the selection, so
  ignoring one would sign with a key the URI did not name.
- every attribute at most once (the RFC allows repeated vendor query attributes; ecpa
  refuses those anyway), no empty attribute between delimiters, and a URI that names no
  object (neither ``object`` nor ``id``) selects every key and is refused.
- ``pin-source`` is a file: a path or a ``file:`` URI (RFC 8089, local); the RFC's
  ``|command`` form is refused (ecpa runs no program to learn a PIN), as are other schemes.

No I/O here: the module and the PIN are looked up by :mod:`ecpa.hsm.token` and
:mod:`ecpa.hsm.unlock`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ecpa.errors import EcpaError, ErrorCode

__all__ = [
    "MAX_URI_CHARS",
    "NO_PIN_VALUE",
    "Pkcs11Uri",
    "is_pkcs11_uri",
    "parse_pkcs11_uri",
    "pin_file_of",
]

#: The longest URI read: far beyond any real one (a label is at most 32 bytes, an id a few
#: dozen), small enough that no input costs more than a glance. Checked before parsing.
MAX_URI_CHARS = 4096
_SCHEME = "pkcs11:"
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_RES_AVAIL = frozenset(":[]@!$'()*+,=")
#: ``pk11-pchar`` and ``pk11-qchar`` of RFC 7512 §2.3, without their ``pct-encoded``.
_PATH_CHARS = _UNRESERVED | _RES_AVAIL | {"&"}
_QUERY_CHARS = _UNRESERVED | _RES_AVAIL | {"/", "?", "|"}
_HEX = frozenset("0123456789abcdefABCDEF")
_NAME = re.compile(r"[A-Za-z0-9_-]+\Z")  # pk11-v-attr-nm-char; the standard names match it
_SCHEME_OF = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")  # RFC 3986 §3.1
_TYPES = ("public", "private", "cert", "secret-key", "data")
#: Path attribute -> field; the order is the order :meth:`Pkcs11Uri.to_uri` writes.
_PATH = {
    "token": "token",
    "manufacturer": "manufacturer",
    "serial": "serial",
    "model": "model",
    "library-manufacturer": "library_manufacturer",
    "library-description": "library_description",
    "library-version": "library_version",
    "slot-description": "slot_description",
    "slot-manufacturer": "slot_manufacturer",
    "slot-id": "slot_id",
    "object": "object",
    "type": "object_type",
    "id": "object_id",
}
_QUERY = {"module-name": "module_name", "module-path": "module_path", "pin-source": "pin_source"}
NO_PIN_VALUE = (
    "expected no pin-value in a pkcs11: URI (a PIN on the command line is readable by every "
    "user through ps), found one: put the PIN in a file of mode 0600 named by "
    "pin-source=FILE or --password-file FILE, or in $ECPA_PKCS11_PIN"
)


def _bad(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.INVALID_KEY, detail)


@dataclass(frozen=True)
class Pkcs11Uri:
    """A parsed PKCS#11 URI: the attributes given, decoded (``None``: not given).

    Text attributes are the decoded UTF-8 text; ``object_id`` (``id``) the decoded bytes;
    ``object_type`` (``type``) one of RFC 7512's literals in lower case; ``library_version``
    ``(major, minor)``; ``slot_id`` the number. Make one with :func:`parse_pkcs11_uri`.
    """

    token: str | None = None
    manufacturer: str | None = None
    serial: str | None = None
    model: str | None = None
    library_manufacturer: str | None = None
    library_description: str | None = None
    library_version: tuple[int, int] | None = None
    slot_description: str | None = None
    slot_manufacturer: str | None = None
    slot_id: int | None = None
    object: str | None = None
    object_type: str | None = None
    object_id: bytes | None = None
    module_name: str | None = None
    module_path: str | None = None
    pin_source: str | None = None

    def to_uri(self) -> str:
        """The URI in one canonical form: attributes in a fixed order, every byte a
        component does not admit percent-encoded (``id`` always, byte by byte), so that
        ``parse_pkcs11_uri(uri.to_uri()) == uri``."""
        path = [
            f"{name}={_encode(getattr(self, field), _PATH_CHARS, name == 'id')}"
            for name, field in _PATH.items()
            if getattr(self, field) is not None
        ]
        query = [
            f"{name}={_encode(getattr(self, field), _QUERY_CHARS, False)}"
            for name, field in _QUERY.items()
            if getattr(self, field) is not None
        ]
        return _SCHEME + ";".join(path) + ("?" + "&".join(query) if query else "")

    @property
    def pin_file(self) -> str | None:
        """The file ``pin-source`` names (:func:`pin_file_of`), or None."""
        return None if self.pin_source is None else pin_file_of(self.pin_source)

    def describe(self) -> str:
        """The key's selection in words, for messages: ``object 'b', id 01ff``."""
        parts = [f"object {self.object!r}"] if self.object is not None else []
        parts += [f"id {self.object_id.hex() or '(empty)'}"] if self.object_id is not None else []
        return ", ".join(parts) or "any object"


def _encode(value: object, allowed: frozenset[str], every_byte: bool) -> str:
    if isinstance(value, tuple):  # library-version
        return f"{value[0]}.{value[1]}"
    if isinstance(value, int):  # slot-id
        return str(value)
    data = value if isinstance(value, bytes) else str(value).encode("utf-8")
    return "".join(chr(b) if not every_byte and chr(b) in allowed else f"%{b:02X}" for b in data)


def is_pkcs11_uri(text: str) -> bool:
    """Whether ``text`` is meant as a PKCS#11 URI: it starts with the scheme ``pkcs11:``,
    in any case of its ASCII letters (RFC 3986 §3.1). A key file whose name starts so is
    named ``./pkcs11:...``."""
    head = text[: len(_SCHEME)]
    return head.isascii() and head.lower() == _SCHEME


def parse_pkcs11_uri(text: str) -> Pkcs11Uri:
    """Parse a PKCS#11 URI naming one private key (RFC 7512, with the refusals of this
    module's text).

    Raises:
        EcpaError: ``ECPA_INVALID_KEY`` naming the attribute and what is wrong with it
            (never echoing a value of ``pin-value``).
    """
    if not isinstance(text, str):
        raise _bad(f"expected a pkcs11: URI as text, found {type(text).__name__}")
    if len(text) > MAX_URI_CHARS:
        raise _bad(
            f"expected a pkcs11: URI of at most {MAX_URI_CHARS} characters, found {len(text)}"
        )
    if not is_pkcs11_uri(text):
        raise _bad("expected a URI starting with 'pkcs11:' (RFC 7512), found another text")
    path, _, query = text[len(_SCHEME) :].partition("?")  # '?' is no pk11-pchar
    found: dict[str, object] = {}
    for piece_no, piece in enumerate(path.split(";") if path else [], 1):
        name, raw = _attribute(piece, piece_no, "path", ";")
        if name not in _PATH:
            raise _misplaced(name, "path")
        found[_PATH[name]] = _path_value(name, raw, found)
    for piece_no, piece in enumerate(query.split("&") if query else [], 1):
        name, raw = _attribute(piece, piece_no, "query", "&")
        if name not in _QUERY:
            raise _misplaced(name, "query")
        found[_QUERY[name]] = _query_value(name, raw, found)
    uri = Pkcs11Uri(**found)  # type: ignore[arg-type]  # each value checked by its kind
    if uri.object is None and uri.object_id is None:
        raise _bad(
            "expected a pkcs11: URI naming its key by object=LABEL or id=%HH..., found "
            "neither (it would select every key on the token)"
        )
    return uri


def _attribute(piece: str, number: int, component: str, separator: str) -> tuple[str, str]:
    """``name=value`` of one attribute, the name folded to lower case. The piece itself is
    never quoted in a message: it could be a PIN typed where it does not belong."""
    name, equals, raw = piece.partition("=")
    where = f"attribute {number} of the {component}"
    if not piece:
        raise _bad(f"expected an attribute between two {separator!r}, found none ({where})")
    if not equals:
        raise _bad(f"expected name=value, found no '=' ({where})")
    if not _NAME.match(name):
        raise _bad(
            f"expected an attribute name of letters, digits, '-' and '_' (RFC 7512 §2.3), "
            f"found another ({where})"
        )
    name = name.lower()
    if name == "pin-value":
        raise _bad(NO_PIN_VALUE)
    return name, raw


def _misplaced(name: str, component: str) -> EcpaError:
    other = _QUERY if component == "path" else _PATH
    if name in other:
        where = "query, after '?'" if component == "path" else "path, before '?'"
        return _bad(f"expected the attribute {name!r} in the {where}, found it in the {component}")
    known = ", ".join(_PATH if component == "path" else [*_QUERY, "pin-value (refused)"])
    return _bad(
        f"expected a {component} attribute ecpa applies ({known}), found {name!r}: ecpa "
        "refuses an attribute it cannot apply rather than select more than the URI names"
    )


def _once(name: str, field: str, found: dict[str, object]) -> None:
    if field in found:
        raise _bad(f"expected the attribute {name!r} once, found it again")


def _path_value(name: str, raw: str, found: dict[str, object]) -> object:
    _once(name, _PATH[name], found)
    if name == "type":  # pk11-type: a literal, no escapes
        if raw.lower() not in _TYPES:
            raise _bad(f"expected type= one of {', '.join(_TYPES)} (RFC 7512 §2.3), found another")
        return raw.lower()
    if name == "slot-id":  # 1*DIGIT, a CK_SLOT_ID (CK_ULONG)
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 20 and int(raw) < 2**64):
            raise _bad(
                "expected slot-id= a decimal number below 2**64 (RFC 7512 §2.3), found another"
            )
        return int(raw)
    if name == "library-version":  # 1*DIGIT [ "." 1*DIGIT ], each a CK_BYTE
        parts = raw.split(".")
        if not (
            len(parts) in (1, 2)
            and all(p.isascii() and p.isdigit() and len(p) <= 3 and int(p) <= 255 for p in parts)
        ):
            raise _bad(
                "expected library-version= MAJOR or MAJOR.MINOR, each 0 to 255 (RFC 7512 §2.3), "
                "found another"
            )
        return (int(parts[0]), int(parts[1]) if len(parts) == 2 else 0)
    data = _decode(raw, _PATH_CHARS, name)
    return data if name == "id" else _text(data, name)


def _query_value(name: str, raw: str, found: dict[str, object]) -> str:
    _once(name, _QUERY[name], found)
    text = _text(_decode(raw, _QUERY_CHARS, name), name)
    if not text:
        raise _bad(f"expected a value for {name!r}, found an empty one")
    if name == "module-path" and not text.startswith("/"):
        raise _bad(
            "expected module-path= an absolute file name (a relative one names another "
            f"module in another directory), found {text!r}"
        )
    if name == "module-name" and "/" in text:
        raise _bad(f"expected module-name= a module's name without a directory, found {text!r}")
    if name == "pin-source":
        pin_file_of(text)
    return text


def _decode(raw: str, allowed: frozenset[str], name: str) -> bytes:
    """The bytes of a value: its admitted characters as they are, each ``%HH`` the byte."""
    out = bytearray()
    i = 0
    while i < len(raw):
        char = raw[i]
        if char == "%":
            escape = raw[i + 1 : i + 3]
            if len(escape) != 2 or not set(escape) <= _HEX:
                raise _bad(
                    f"expected '%' followed by two hexadecimal digits in {name}=, found "
                    f"{'%' + escape!r} at offset {i}"
                )
            out.append(int(escape, 16))
            i += 3
            continue
        if char not in allowed:
            shown = repr(char) if char.isprintable() else f"U+{ord(char):04X}"
            raise _bad(
                f"expected {name}= to hold only the characters RFC 7512 §2.3 admits there, "
                f"found {shown} at offset {i} (percent-encode it, e.g. %{ord(char):02X})"
                if ord(char) < 128
                else f"expected {name}= to hold only the characters RFC 7512 §2.3 admits "
                f"there, found {shown} at offset {i} (percent-encode its UTF-8 bytes)"
            )
        out.append(ord(char))
        i += 1
    return bytes(out)


def _text(data: bytes, name: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(f"expected {name}= to decode to UTF-8 text, found bytes that do not") from None
    if "\0" in text:
        raise _bad(f"expected {name}= without a NUL character, found one")
    return text


def pin_file_of(pin_source: str) -> str:
    """The file a ``pin-source`` value names: a path as it is, or the path of a local
    ``file:`` URI (RFC 8089: ``file:/p``, ``file:///p``, ``file://localhost/p``).

    Raises:
        EcpaError: ``ECPA_INVALID_KEY`` for ``|command`` (ecpa runs no program to learn a
            PIN), another scheme, a ``file:`` URI with another host or a relative path.
    """
    if pin_source.startswith("|"):
        raise _bad(
            "expected pin-source= a file, found a command ('|...'): ecpa runs no program to "
            "learn a PIN"
        )
    scheme = _SCHEME_OF.match(pin_source)
    if scheme is None:
        return pin_source
    if scheme.group(1).lower() != "file":
        raise _bad(
            "expected pin-source= a file name or a file: URI, found the scheme "
            f"{scheme.group(1)!r} (write ./NAME for a file whose name has a colon)"
        )
    rest = pin_source[scheme.end() :]
    if rest.startswith("//"):
        host, slash, tail = rest[2:].partition("/")
        if host.lower() not in ("", "localhost"):
            raise _bad(f"expected pin-source= a local file: URI, found the host {host!r}")
        rest = slash + tail
    if not rest.startswith("/"):
        raise _bad("expected pin-source=file:/ABSOLUTE/PATH (RFC 8089), found a relative path")
    return rest
