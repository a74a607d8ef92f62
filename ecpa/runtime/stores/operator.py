"""The operator's trust store and ecpa's configuration directory (docs/keys.md).

The operator's trust store lists the manager keys (subject ``process-key``) whose
enrollment certificates make a launch's process keys trusted, and any other key the
operator trusts (an auditor's receipts). It lives outside every launch directory and every
evidence store: ``--trust FILE``, else ``$ECPA_TRUST_STORE``, else
``$XDG_CONFIG_HOME/ecpa/trust.json`` (``~/.config/ecpa/trust.json``) when it exists. A store
owned by a user other than this one or root, or that group or others may write (checked on
the file as opened), or below a directory they may write, is refused: whoever can write it
decides what is true.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ecpa._files import check_ancestors, describe_mode, read_bounded
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.json.strict_json import parse_object
from ecpa.profile.trust import MAX_TRUST_STORE_BYTES, TrustStore

__all__ = [
    "MANAGER_KEY_ENV",
    "TRUST_ENV",
    "OperatorTrust",
    "config_dir",
    "default_manager_key",
    "default_trust_store",
    "operator_trust",
]

TRUST_ENV = "ECPA_TRUST_STORE"
MANAGER_KEY_ENV = "ECPA_MANAGER_KEY"


def config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/ecpa``, or ``~/.config/ecpa`` (XDG Base Directory: a relative
    ``XDG_CONFIG_HOME`` is ignored)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME", "")
    if not base or not os.path.isabs(base):
        base = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "ecpa"


def default_trust_store(environ: Mapping[str, str] | None = None) -> Path:
    """Where the operator's trust store is when nothing names another."""
    return config_dir(environ) / "trust.json"


def default_manager_key(environ: Mapping[str, str] | None = None) -> Path:
    """Where ``ecpa run`` keeps its manager key when nothing names another."""
    return config_dir(environ) / "manager-key.pem"


@dataclass(frozen=True)
class OperatorTrust:
    """The operator's trust store as found: the store (None: none), and where it was
    (or where it was looked for), for reasons."""

    store: TrustStore | None
    where: str


def _owner(path: Path) -> Callable[[os.stat_result], None]:
    """The check of the store's file as opened (not as named: nothing can be swapped in
    between): owned by this user or root, not writable by group or others."""

    def check(st: os.stat_result) -> None:
        if st.st_uid not in (os.geteuid(), 0) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise EcpaError(
                ErrorCode.TRUST_STORE_CONFIG,
                f"expected the operator's trust store {path} owned by uid {os.geteuid()} or "
                f"root and not writable by group or others, found owner uid {st.st_uid} and "
                f"{describe_mode(st.st_mode)}",
            )

    return check


def _load(path: Path) -> TrustStore:
    check_ancestors(path, ErrorCode.TRUST_STORE_CONFIG, what="operator's trust store")
    data = read_bounded(
        path, MAX_TRUST_STORE_BYTES, ErrorCode.TRUST_STORE_CONFIG, follow=True, check=_owner(path)
    )
    try:
        return TrustStore.from_dict(parse_object(data, what=str(path)))
    except EcpaError as exc:
        if exc.code is ErrorCode.TRUST_STORE_CONFIG:
            raise
        raise EcpaError(ErrorCode.TRUST_STORE_CONFIG, exc.detail) from None


def operator_trust(
    given: Path | None = None, *, environ: Mapping[str, str] | None = None
) -> OperatorTrust:
    """The operator's trust store: ``given`` (``--trust``), else ``$ECPA_TRUST_STORE``, else
    the default file when it exists (see the module's text).

    Raises:
        EcpaError: ``ATTESTATION_TRUST_STORE_CONFIG`` for a store named but missing, one
            owned by a user other than this one or root, or that group or others may write
            (it, as opened, or a directory above it, as ssh's StrictModes judges them), or
            one that breaks a rule of PROFILE §5.
    """
    env = os.environ if environ is None else environ
    named = given if given is not None else (Path(env[TRUST_ENV]) if env.get(TRUST_ENV) else None)
    if named is None:
        default = default_trust_store(env)
        if not os.path.lexists(default):
            return OperatorTrust(None, f"none: no --trust, no ${TRUST_ENV}, no {default}")
        named = default
    return OperatorTrust(_load(named), str(named))
