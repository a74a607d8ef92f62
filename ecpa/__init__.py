"""ecpa: signed evidence records for LLM-serving plugins (ECPA attestation profile 0.1).

A statement is a JSON object, canonicalized with RFC 8785 (JCS) and signed as a detached
compact JWS with Ed25519. :func:`verify` either returns the statement or raises
:class:`EcpaError` with the code of the first check that failed (PROFILE §3)::

    import ecpa
    store = ecpa.TrustStore.load("trust.json")
    key = ecpa.SigningKey.load("signing-key.pem")
    signed = ecpa.sign(statement, key)
    verified = ecpa.verify(signed.payload, signed.detached_jws, store, now=1800000000)
"""

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.jcs import canonicalize
from ecpa.profile.keys import SigningKey, VerifyKey
from ecpa.profile.sign import Signed, sign
from ecpa.profile.statement import PROFILE_ID, STATEMENT_SCHEMA, Process, Statement
from ecpa.profile.trust import TRUST_STORE_SCHEMA, TrustEntry, TrustStore
from ecpa.profile.verify import Binding, Policy, Verified, verify
from ecpa.runtime import (
    MemoryReplayFence,
    PostgresReplayFence,
    ReplayFence,
    SqliteReplayFence,
)

__all__ = [
    "PROFILE_ID",
    "STATEMENT_SCHEMA",
    "TRUST_STORE_SCHEMA",
    "Binding",
    "EcpaError",
    "ErrorCode",
    "MemoryReplayFence",
    "Policy",
    "PostgresReplayFence",
    "Process",
    "ReplayFence",
    "Signed",
    "SigningKey",
    "SqliteReplayFence",
    "Statement",
    "TrustEntry",
    "TrustStore",
    "Verified",
    "VerifyKey",
    "__version__",
    "canonicalize",
    "sign",
    "verify",
]

__version__ = "0.1.0"
