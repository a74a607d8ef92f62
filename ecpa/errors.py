"""The one error type of `ecpa` and its stable codes (PROFILE §3).

Every failure the library reports is an :class:`EcpaError`. Its ``code`` is one of the
strings of :class:`ErrorCode`; callers and tests compare codes, never message text. The
``detail`` is for people: it says what was expected and what was found.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["EcpaError", "ErrorCode", "invalid_input"]


class ErrorCode(str, Enum):
    """Stable error codes. The value is the string a conforming verifier returns."""

    TOO_LARGE = "ATTESTATION_TOO_LARGE"
    MALFORMED_JWS = "ATTESTATION_MALFORMED_JWS"
    MALFORMED_JSON = "ATTESTATION_MALFORMED_JSON"
    DUPLICATE_KEY = "ATTESTATION_DUPLICATE_KEY"
    UNSUPPORTED_VALUE = "ATTESTATION_UNSUPPORTED_VALUE"
    UNKNOWN_CRITICAL_HEADER = "ATTESTATION_UNKNOWN_CRITICAL_HEADER"
    WRONG_ALGORITHM = "ATTESTATION_WRONG_ALGORITHM"
    WRONG_TYPE = "ATTESTATION_WRONG_TYPE"
    WRONG_PROFILE = "ATTESTATION_WRONG_PROFILE"
    UNKNOWN_KEY = "ATTESTATION_UNKNOWN_KEY"
    NONCANONICAL_PAYLOAD = "ATTESTATION_NONCANONICAL_PAYLOAD"
    INVALID_STATEMENT = "ATTESTATION_INVALID_STATEMENT"
    KEY_MISMATCH = "ATTESTATION_KEY_MISMATCH"
    UNKNOWN_CRITICAL_CLAIM = "ATTESTATION_UNKNOWN_CRITICAL_CLAIM"
    TRUST_POLICY = "ATTESTATION_TRUST_POLICY"
    INVALID_SIGNATURE = "ATTESTATION_INVALID_SIGNATURE"
    NOT_YET_VALID = "ATTESTATION_NOT_YET_VALID"
    EXPIRED = "ATTESTATION_EXPIRED"
    INVALID_TIME = "ATTESTATION_INVALID_TIME"
    BINDING_MISMATCH = "ATTESTATION_BINDING_MISMATCH"
    REPLAYED_NONCE = "REPLAYED_NONCE"
    TRUST_STORE_CONFIG = "ATTESTATION_TRUST_STORE_CONFIG"
    EVIDENCE_DIGEST_MISMATCH = "ATTESTATION_EVIDENCE_DIGEST_MISMATCH"
    INVALID_KEY = "ECPA_INVALID_KEY"
    INVALID_RECORD = "ECPA_INVALID_RECORD"
    INVALID_INPUT = "ECPA_INVALID_INPUT"
    #: The replay fence's store cannot be used (unreachable, locked, unwritable, a table
    #: that cannot enforce uniqueness): the command stops (exit 2); no item is judged by it.
    REPLAY_STORE = "ECPA_REPLAY_STORE"
    #: The evidence store (PostgreSQL: ``ecpa ship``, ``ecpa status --db``) cannot be used:
    #: unreachable, a schema of another version, or no such launch in it (exit 2).
    EVIDENCE_STORE = "ECPA_EVIDENCE_STORE"
    #: The host's evidence sink cannot record an event (no launch binding, a journal it
    #: cannot write, its queue full, or the process shutting down): the host, in strict
    #: mode, then fails closed and delivers no more (docs/host-evidence.md).
    HOST_SINK = "ECPA_HOST_SINK"

    def __str__(self) -> str:
        return self.value


class EcpaError(Exception):
    """Every failure of `ecpa`: a stable ``code`` and a human ``detail``.

    ``code`` is an :class:`ErrorCode` (a ``str``), so ``err.code == "ATTESTATION_EXPIRED"``
    holds. ``detail`` names what was expected and what was found.
    """

    code: ErrorCode
    detail: str

    def __init__(self, code: ErrorCode, detail: str) -> None:
        super().__init__(f"{code.value}: {detail}")
        self.code = code
        self.detail = detail

    def __repr__(self) -> str:
        return f"EcpaError({self.code.value!r}, {self.detail!r})"

    def __reduce__(self) -> tuple[type[EcpaError], tuple[ErrorCode, str]]:
        # Keeps the error picklable across process pools (bench, `--jobs`).
        return (type(self), (self.code, self.detail))


def invalid_input(detail: str) -> EcpaError:
    """An ``ECPA_INVALID_INPUT`` error saying ``detail``: what was expected, what was found."""
    return EcpaError(ErrorCode.INVALID_INPUT, detail)
