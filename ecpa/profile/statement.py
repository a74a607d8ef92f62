"""The ECPA 0.1 statement (PROFILE §1) and its checks (PROFILE §3 steps 14-17).

The statement and its process are frozen shapes (:mod:`ecpa.shapes.shape`), strict: an
integer is never a boolean or a string, a string is never a number.
``schemas/statement.schema.json`` is generated from :class:`Statement`.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.profile.ids import PROFILE_ID, STATEMENT_SCHEMA
from ecpa.shapes.rules import ANY_TEXT, COUNT, TEXT, Array, Text
from ecpa.shapes.shape import Nested, Shaped, ShapeError, member

__all__ = [
    "PROFILE_ID",
    "STATEMENT_SCHEMA",
    "Process",
    "Statement",
    "check_statement",
    "validate_input",
]

#: ``sha256:`` followed by 64 lowercase hexadecimal digits.
SHA256_DIGEST = Text(min_length=0, pattern=r"^sha256:[0-9a-f]{64}$")


class Process(Shaped):
    """The process a statement speaks for."""

    host: str = member(TEXT)
    role: str = member(TEXT)
    start_identity: str = member(TEXT)
    ordinal: int = member(COUNT)
    epoch: int = member(COUNT)


class Statement(Shaped):
    """An ECPA 0.1 statement: exactly the 18 members of PROFILE §1.

    ``schema`` is exposed as :attr:`statement_schema`.
    """

    # Step 14 requires non-empty strings (as the reference's statement check does), and only
    # then does step 15 compare them with the constants: "" is INVALID_STATEMENT.
    statement_schema: str = member(TEXT, wire="schema")
    profile: str = member(TEXT)
    issuer: str = member(TEXT)
    kid: str = member(TEXT)
    subject: str = member(TEXT)
    plan_id: str = member(TEXT)
    launch_id: str = member(TEXT)
    plugin_id: str = member(TEXT)
    obligation: str = member(TEXT)
    event: str = member(TEXT)
    challenge_nonce: str = member(TEXT)
    artifact_digest: str = member(SHA256_DIGEST)
    evidence_digest: str = member(SHA256_DIGEST)
    process: Process = member(Nested(Process))
    observed_at: int = member(COUNT)
    issued_at: int = member(COUNT)
    expires_at: int = member(COUNT)
    critical_claims: tuple[str, ...] = member(Array(ANY_TEXT, unique=True, as_tuple=True))


_S = TypeVar("_S", bound=Shaped)


def validate_input(shape: type[_S], values: dict[str, Any], what: str) -> _S:
    """``shape`` from ``values`` a user gave (a file, options), not evidence.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT``: ``what``, then what was expected and found.
    """
    try:
        return shape.from_dict(values, what)
    except ShapeError as exc:
        raise invalid_input(f"{what}: {exc}") from None


def check_statement(obj: dict[str, Any], header_kid: str | None = None) -> Statement:
    """Apply PROFILE §3 steps 14-17 to a parsed payload object.

    ``header_kid`` is the JWS header's ``kid``; ``None`` skips step 16 (the signer takes
    the header's ``kid`` from the statement).

    Raises:
        EcpaError: ``ATTESTATION_INVALID_STATEMENT`` (step 14), ``ATTESTATION_WRONG_PROFILE``
            (15), ``ATTESTATION_KEY_MISMATCH`` (16), ``ATTESTATION_UNKNOWN_CRITICAL_CLAIM`` (17).
    """
    try:
        statement = Statement.from_dict(obj, "statement")
    except ShapeError as exc:  # PROFILE §3 step 14
        raise EcpaError(ErrorCode.INVALID_STATEMENT, str(exc)) from None
    if statement.statement_schema != STATEMENT_SCHEMA:  # step 15
        raise EcpaError(
            ErrorCode.WRONG_PROFILE,
            f"expected statement schema {STATEMENT_SCHEMA!r}, found {statement.statement_schema!r}",
        )
    if statement.profile != PROFILE_ID:  # step 15
        raise EcpaError(
            ErrorCode.WRONG_PROFILE,
            f"expected statement profile {PROFILE_ID!r}, found {statement.profile!r}",
        )
    if header_kid is not None and statement.kid != header_kid:  # step 16
        raise EcpaError(
            ErrorCode.KEY_MISMATCH,
            f"expected statement kid equal to header kid {header_kid!r}, found {statement.kid!r}",
        )
    if statement.critical_claims:  # step 17: the known set is empty in 0.1
        raise EcpaError(
            ErrorCode.UNKNOWN_CRITICAL_CLAIM,
            f"expected no critical claims (none are known in 0.1), "
            f"found {statement.critical_claims[0]!r}",
        )
    return statement
