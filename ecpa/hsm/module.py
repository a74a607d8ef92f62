"""The PKCS#11 module a URI needs, and python-pkcs11, which loads it.

The module is a shared library whose code runs in this process: it is named by an absolute
path (the URI's ``module-path``, else ``$ECPA_PKCS11_MODULE``; never a search, never a
default such as SoftHSM's, which would sign with a key in a file where a hardware key was
meant) and checked as ssh checks what it trusts: a regular file owned by root or this user,
writable by nobody else, on a path nobody else may change.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from types import ModuleType

from ecpa._files import check_ancestors, safe_target
from ecpa.errors import EcpaError, ErrorCode
from ecpa.hsm.uri import Pkcs11Uri

__all__ = ["MODULE_ENV", "load_pkcs11", "module_file", "token_error"]

#: The environment variable naming the PKCS#11 module when the URI has no module-path.
MODULE_ENV = "ECPA_PKCS11_MODULE"
_KEY = ErrorCode.INVALID_KEY
#: What a token error means, in words, by python-pkcs11's exception name (CKR_* codes).
_KINDS = {
    "PinIncorrect": "the PIN is wrong",
    "PinInvalid": "the PIN has characters the token does not take",
    "PinLenRange": "the PIN's length is outside what the token takes",
    "PinExpired": "the PIN has expired (set a new one with the token's tools)",
    "PinLocked": "the PIN is locked after too many wrong ones (the security officer unlocks it)",
    "UserPinNotInitialized": "the token's user PIN was never set",
    "UserAlreadyLoggedIn": "the token is already logged in by this process, outside ecpa",
    "UserNotLoggedIn": "the session is not logged in",
    "TokenNotPresent": "the token is not present",
    "TokenNotRecognised": "the module does not recognise the token",
    "NoSuchToken": "no such token",
    "DeviceRemoved": "the device was removed",
    "DeviceError": "the device reported an error",
    "DeviceMemory": "the device is out of memory",
    "SessionClosed": "the session was closed",
    "SessionHandleInvalid": "the session is gone",
    "SessionCount": "the token has no session left to open",
    "MechanismInvalid": "the token does not offer Ed25519 signing (CKM_EDDSA)",
    "FunctionNotSupported": "the module does not support this function",
    "KeyHandleInvalid": "the key object is gone",
    "ObjectHandleInvalid": "the object is gone",
}


def load_pkcs11() -> ModuleType:
    """python-pkcs11's ``pkcs11`` package, imported on first use.

    Raises:
        EcpaError: ``ECPA_INVALID_KEY`` saying how to install it, when it is not.
    """
    try:
        import pkcs11
    except ImportError:
        raise EcpaError(
            _KEY,
            "expected python-pkcs11 to reach a key by a pkcs11: URI, found it not "
            "installed: pip install 'ecpa[hsm]'",
        ) from None
    return pkcs11


def token_error(exc: Exception, doing: str) -> EcpaError:
    """A python-pkcs11 error as ``ECPA_INVALID_KEY``: what was being ``doing`` (naming the
    token and object), and the kind of failure, its exception's name beside it."""
    name = type(exc).__name__
    kind = _KINDS.get(name, f"the module reported {name}")
    text = str(exc).strip()
    found = f"{kind} ({name}{': ' + text if text and text != name else ''})"
    return EcpaError(_KEY, f"expected to {doing}, found: {found}")


def module_file(uri: Pkcs11Uri, environ: Mapping[str, str]) -> str:
    """The PKCS#11 module to load for ``uri``: its ``module-path`` (with ``module-name``, the
    module of that name, ``NAME``, ``libNAME.so`` or ``NAME.so``, in the directory it names),
    else ``$ECPA_PKCS11_MODULE``; checked as this module's text says. Its real path is
    returned, the one name under which it is loaded.

    Raises:
        EcpaError: ``ECPA_INVALID_KEY`` when neither names a module, the name is relative,
            the file is missing, not regular, or another user's or others may write it or
            a directory above it.
    """
    if uri.module_path is None:
        if uri.module_name is not None:
            raise EcpaError(
                _KEY,
                "expected module-path=DIRECTORY beside module-name= (ecpa keeps no registry "
                "of modules), found module-name alone",
            )
        path = environ.get(MODULE_ENV, "")
        if not path:
            raise EcpaError(
                _KEY,
                "expected the PKCS#11 module in the URI (module-path=/ABSOLUTE/lib.so) or "
                f"${MODULE_ENV}, found neither",
            )
        if not path.startswith("/"):
            raise EcpaError(_KEY, f"expected ${MODULE_ENV} an absolute file name, found {path!r}")
    else:
        path = uri.module_path
        if uri.module_name is not None:
            path = _named_module(path, uri.module_name)
    try:
        real = safe_target(path, _KEY) if os.path.islink(path) else path
        check_ancestors(path, _KEY, what="PKCS#11 module")
        st = os.stat(real)
    except OSError as exc:
        raise EcpaError(
            _KEY, f"expected the PKCS#11 module {path}, found: {exc.strerror}"
        ) from None
    mode = stat.S_IMODE(st.st_mode)
    if not stat.S_ISREG(st.st_mode) or st.st_uid not in (0, os.geteuid()) or mode & 0o022:
        raise EcpaError(
            _KEY,
            f"expected the PKCS#11 module {path} a regular file owned by root or uid "
            f"{os.geteuid()} and not writable by group or others (loading it runs its code), "
            f"found uid {st.st_uid} and mode {stat.filemode(st.st_mode)}",
        )
    # One name per file: python-pkcs11 loads and initializes a module once per name, and a
    # second name for the same file (a symlink, '//') would initialize it twice (refused).
    return os.path.realpath(real)


def _named_module(path: str, name: str) -> str:
    candidates = (name, f"lib{name}.so", f"{name}.so")
    if os.path.isdir(path):
        for candidate in candidates:
            if os.path.isfile(os.path.join(path, candidate)):
                return os.path.join(path, candidate)
        raise EcpaError(
            _KEY, f"expected a module {' or '.join(candidates)} in {path}, found none of them"
        )
    if os.path.basename(path) not in candidates:
        raise EcpaError(
            _KEY,
            f"expected module-path= and module-name= to name one module, found {path!r} "
            f"and {name!r}",
        )
    return path
