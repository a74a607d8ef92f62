"""Where the secrets that unlock a key come from: a key file's passphrase and a token's PIN.

Never a command-line value (``ps`` shows every argument to every user): a file that only its
owner may read (:func:`ecpa._files.read_private`), standard input, or the environment.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from ecpa._files import read_private
from ecpa.errors import EcpaError, ErrorCode, invalid_input

__all__ = [
    "MAX_PASSWORD_FILE",
    "MAX_PIN_FILE",
    "PIN_ENV",
    "key_password",
    "pkcs11_pin",
]

#: The most of a password file read (its first line is the passphrase).
MAX_PASSWORD_FILE = 64 * 1024
#: The most of a PIN file read: a PIN is a few characters (PKCS#11 tokens take up to 255).
MAX_PIN_FILE = 4096
#: The environment variable holding a token's PIN when no file names it.
PIN_ENV = "ECPA_PKCS11_PIN"
_KEY = ErrorCode.INVALID_KEY


def key_password(password_file: Path | None) -> bytes | None:
    """The passphrase of a key file: the first line of ``password_file`` (``-``: standard
    input), else ``$ECPA_KEY_PASSWORD`` (its bytes as they are), else None.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a password file that is unreadable, that group
            or others may read, or whose first line is empty (never its contents).
    """
    if password_file is not None:
        if str(password_file) == "-":
            data = sys.stdin.buffer.read(MAX_PASSWORD_FILE)
        else:
            data = read_private(
                password_file, MAX_PASSWORD_FILE, ErrorCode.INVALID_INPUT, "password file"
            )
        line = data.split(b"\n", 1)[0].removesuffix(b"\r")
        if not line.strip():
            raise invalid_input(f"expected a passphrase in {password_file}, found an empty line")
        return line
    return os.environb.get(b"ECPA_KEY_PASSWORD") or None


def pkcs11_pin(pin_file: str | None, password_file: Path | None, environ: Mapping[str, str]) -> str:
    """A token's user PIN, from the first of: the file the URI's ``pin-source`` names
    (``pin_file``), ``--password-file`` (``-``: standard input), ``$ECPA_PKCS11_PIN``.
    A file holds the PIN on one line (one trailing newline is dropped).

    Raises:
        EcpaError: ``ECPA_INVALID_KEY`` when none of the three gives a PIN, or a file is
            unreadable, may be read by group or others, is empty, holds several lines or
            is not UTF-8 (naming the file, never the PIN).
    """
    if pin_file is not None:
        return _read_pin(Path(pin_file))
    if password_file is not None:
        return _read_pin(password_file)
    pin = environ.get(PIN_ENV)
    if pin:
        return pin
    raise EcpaError(
        _KEY,
        "expected the token's PIN from the URI's pin-source=FILE, --password-file FILE or "
        f"${PIN_ENV}, found none of them (never a PIN on the command line: ps shows it)",
    )


def _read_pin(path: Path) -> str:
    if str(path) == "-":
        data = sys.stdin.buffer.read(MAX_PIN_FILE + 1)
        if len(data) > MAX_PIN_FILE:
            raise EcpaError(_KEY, f"expected a PIN of at most {MAX_PIN_FILE} bytes, found more")
    else:
        data = read_private(path, MAX_PIN_FILE, _KEY, "PIN file")
    data = data.removesuffix(b"\n").removesuffix(b"\r")
    if not data:
        raise EcpaError(_KEY, f"expected a PIN in the PIN file {path}, found an empty file")
    if any(byte in data for byte in b"\n\r\0"):
        raise EcpaError(
            _KEY, f"expected the PIN on one line of {path}, found several lines or a NUL byte"
        )
    try:
        return data.decode("utf-8")  # CK_UTF8CHAR
    except UnicodeDecodeError:
        raise EcpaError(
            _KEY, f"expected the PIN file {path} to hold UTF-8 text, found bytes that are not"
        ) from None
