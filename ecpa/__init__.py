"""ecpa: signed evidence records for LLM-serving plugins (ECPA attestation profile 0.1).

A statement is a JSON object, canonicalized with RFC 8785 (JCS) and signed as a detached
compact JWS with Ed25519. :func:`verify` either returns the statement or raises
:class:`EcpaError` with the code of the first check that failed (PROFILE §3)::

    import ecpa
    store = ecpa.TrustStore.load("trust.json")
    key = ecpa.SigningKey.load("signing-key.pem")
    signed = ecpa.sign(statement, key)
    verified = ecpa.verify(signed.payload, signed.detached_jws, store, now=1800000000)

Names are imported on first use (PEP 562): ``import ecpa`` itself loads nothing, so a
command that needs one part (``ecpa --version``, the observer in a scheduler) pays for that
part only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ecpa.errors import EcpaError as EcpaError
    from ecpa.errors import ErrorCode as ErrorCode
    from ecpa.profile.ids import PROFILE_ID as PROFILE_ID
    from ecpa.profile.ids import STATEMENT_SCHEMA as STATEMENT_SCHEMA
    from ecpa.profile.json.jcs import canonicalize as canonicalize
    from ecpa.profile.keys import SigningKey as SigningKey
    from ecpa.profile.keys import VerifyKey as VerifyKey
    from ecpa.profile.sign import Signed as Signed
    from ecpa.profile.sign import sign as sign
    from ecpa.profile.statement import Process as Process
    from ecpa.profile.statement import Statement as Statement
    from ecpa.profile.trust import TRUST_STORE_SCHEMA as TRUST_STORE_SCHEMA
    from ecpa.profile.trust import TrustEntry as TrustEntry
    from ecpa.profile.trust import TrustStore as TrustStore
    from ecpa.profile.verify import Binding as Binding
    from ecpa.profile.verify import Policy as Policy
    from ecpa.profile.verify import Verified as Verified
    from ecpa.profile.verify import verify as verify
    from ecpa.runtime import MemoryReplayFence as MemoryReplayFence
    from ecpa.runtime import PostgresReplayFence as PostgresReplayFence
    from ecpa.runtime import ReplayFence as ReplayFence
    from ecpa.runtime import SqliteReplayFence as SqliteReplayFence
    from ecpa.shapes.shape import ShapeError as ShapeError

__version__ = "0.1.0"

#: Each public name and the module it lives in.
_EXPORTS = {
    "EcpaError": "ecpa.errors",
    "ErrorCode": "ecpa.errors",
    "PROFILE_ID": "ecpa.profile.ids",
    "STATEMENT_SCHEMA": "ecpa.profile.ids",
    "canonicalize": "ecpa.profile.json.jcs",
    "SigningKey": "ecpa.profile.keys",
    "VerifyKey": "ecpa.profile.keys",
    "ShapeError": "ecpa.shapes.shape",
    "Signed": "ecpa.profile.sign",
    "sign": "ecpa.profile.sign",
    "Process": "ecpa.profile.statement",
    "Statement": "ecpa.profile.statement",
    "TRUST_STORE_SCHEMA": "ecpa.profile.trust",
    "TrustEntry": "ecpa.profile.trust",
    "TrustStore": "ecpa.profile.trust",
    "Binding": "ecpa.profile.verify",
    "Policy": "ecpa.profile.verify",
    "Verified": "ecpa.profile.verify",
    "verify": "ecpa.profile.verify",
    "MemoryReplayFence": "ecpa.runtime",
    "PostgresReplayFence": "ecpa.runtime",
    "ReplayFence": "ecpa.runtime",
    "SqliteReplayFence": "ecpa.runtime",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (PEP 562)."""
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'ecpa' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
