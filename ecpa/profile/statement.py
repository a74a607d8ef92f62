"""The ECPA 0.1 statement (PROFILE §1) and its checks (PROFILE §3 steps 14-17).

The models are frozen pydantic models in strict mode: an integer is never a boolean or a
string, a string is never a number. ``schemas/statement.schema.json`` is generated from
:class:`Statement`.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.profile.ids import PROFILE_ID, STATEMENT_SCHEMA
from ecpa.profile.strict_json import MAX_SAFE_INTEGER

__all__ = [
    "PROFILE_ID",
    "STATEMENT_SCHEMA",
    "Process",
    "Statement",
    "check_statement",
    "validate_input",
]


#: An integer in [0, 2**53-1]; booleans are refused (strict mode).
SafeInt = Annotated[int, Field(strict=True, ge=0, le=MAX_SAFE_INTEGER)]
#: A non-empty string, compared code point by code point (no Unicode normalization).
NonEmptyStr = Annotated[str, Field(strict=True, min_length=1)]
#: ``sha256:`` followed by 64 lowercase hexadecimal digits.
Sha256Digest = Annotated[str, Field(strict=True, pattern=r"^sha256:[0-9a-f]{64}$")]

# No populate_by_name: the wire name "schema" is the only name a statement may use.
_FROZEN = ConfigDict(frozen=True, extra="forbid", strict=True)


class Process(BaseModel):
    """The process a statement speaks for."""

    model_config = _FROZEN

    host: NonEmptyStr
    role: NonEmptyStr
    start_identity: NonEmptyStr
    ordinal: SafeInt
    epoch: SafeInt


class Statement(BaseModel):
    """An ECPA 0.1 statement: exactly the 18 members of PROFILE §1.

    ``schema`` is exposed as :attr:`statement_schema` (``schema`` is taken by pydantic).
    """

    model_config = _FROZEN

    # Step 14 requires non-empty strings (as the reference's statement check does), and only
    # then does step 15 compare them with the constants: "" is INVALID_STATEMENT.
    statement_schema: NonEmptyStr = Field(alias="schema")
    profile: NonEmptyStr
    issuer: NonEmptyStr
    kid: NonEmptyStr
    subject: NonEmptyStr
    plan_id: NonEmptyStr
    launch_id: NonEmptyStr
    plugin_id: NonEmptyStr
    obligation: NonEmptyStr
    event: NonEmptyStr
    challenge_nonce: NonEmptyStr
    artifact_digest: Sha256Digest
    evidence_digest: Sha256Digest
    process: Process
    observed_at: SafeInt
    issued_at: SafeInt
    expires_at: SafeInt
    critical_claims: Annotated[
        tuple[StrictStr, ...], Field(strict=False, json_schema_extra={"uniqueItems": True})
    ]

    @field_validator("critical_claims", mode="before")
    @classmethod
    def _array_only(cls, value: Any) -> Any:
        # Lax mode would also take a set or a generator; a statement holds a JSON array.
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"expected an array of strings, found {type(value).__name__}")
        return value

    @field_validator("critical_claims")
    @classmethod
    def _unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            dup = next(v for i, v in enumerate(value) if v in value[:i])
            raise ValueError(f"expected unique critical claims, found {dup!r} twice")
        return value

    def to_dict(self) -> dict[str, Any]:
        """The statement as plain JSON values (the input of JCS)."""
        data = self.model_dump(by_alias=True)
        data["critical_claims"] = list(self.critical_claims)
        return data


def describe_validation(exc: ValidationError, whole: str, *, every: bool = False) -> str:
    """One line for the first problem pydantic found (``every``: all of them, joined by
    "; "): where, what was expected, what was found. ``whole`` names the document when a
    problem is at its top level."""
    errors = exc.errors(include_url=False)
    return "; ".join(describe_one_error(err, whole) for err in (errors if every else errors[:1]))


def describe_one_error(err: Any, whole: str) -> str:
    loc = ".".join(str(part) for part in err["loc"]) or whole
    if err["type"] == "missing":
        return f"expected member {loc!r}, found it missing"
    if err["type"] == "extra_forbidden":
        return f"expected only the specified members, found extra member {loc!r}"
    if err["type"] == "value_error" and not err["loc"]:
        return f"{whole}: {err['msg'].removeprefix('Value error, ')}"  # says what it found
    found = repr(err.get("input"))
    if len(found) > 60:
        found = found[:57] + "..."
    return f"member {loc!r}: {err['msg']}; found {found}"


_M = TypeVar("_M", bound=BaseModel)


def validate_input(model: type[_M], values: dict[str, Any], what: str) -> _M:
    """``model`` from ``values`` a user gave (a file, options), not evidence.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT``: ``what``, then what was expected and found.
    """
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise invalid_input(f"{what}: {describe_validation(exc, what)}") from None


def check_statement(obj: dict[str, Any], header_kid: str | None = None) -> Statement:
    """Apply PROFILE §3 steps 14-17 to a parsed payload object.

    ``header_kid`` is the JWS header's ``kid``; ``None`` skips step 16 (the signer takes
    the header's ``kid`` from the statement).

    Raises:
        EcpaError: ``ATTESTATION_INVALID_STATEMENT`` (step 14), ``ATTESTATION_WRONG_PROFILE``
            (15), ``ATTESTATION_KEY_MISMATCH`` (16), ``ATTESTATION_UNKNOWN_CRITICAL_CLAIM`` (17).
    """
    try:
        statement = Statement.model_validate(obj)
    except ValidationError as exc:  # PROFILE §3 step 14
        raise EcpaError(
            ErrorCode.INVALID_STATEMENT, describe_validation(exc, "statement")
        ) from None
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
