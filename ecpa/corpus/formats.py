"""The corpus file formats, as models: they generate ``schemas/corpus*.schema.json`` and
check the committed corpus files. The runner (``ecpa.corpus.runner``) reads the same shapes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from ecpa.errors import ErrorCode
from ecpa.profile.trust import TrustEntry
from ecpa.profile.verify import Binding, Policy
from ecpa.shapes.pydantic_types import NonEmptyStr, SafeInt

__all__ = ["AttestationVectors", "TrustStoreVectors"]

_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True)

_EXPECTED = ("OK", *(code.value for code in ErrorCode))


def _known(value: str) -> str:
    if value not in _EXPECTED:
        raise ValueError(f"expected 'OK' or an ecpa error code, found {value!r}")
    return value


#: "OK" or one of the codes of ``ecpa.ErrorCode``.
Expected = Annotated[
    str,
    Field(strict=True),
    AfterValidator(_known),
    WithJsonSchema({"type": "string", "enum": list(_EXPECTED)}),
]


class AttestationCase(BaseModel):
    """One case: evidence, the time it is verified at, and the code a verifier must give."""

    model_config = _CONFIG

    id: NonEmptyStr
    category: NonEmptyStr
    why: NonEmptyStr | None = Field(
        default=None, description="One line: what is wrong, or which boundary a positive sits on."
    )
    step: Annotated[int, Field(strict=True, ge=1, le=25)] | None = Field(
        default=None, description="The PROFILE §3 step the case targets."
    )
    payload_b64: str = Field(description="The payload bytes, base64url without padding.")
    detached_jws: str
    now: SafeInt
    expected: Expected
    binding: Binding | None = Field(
        description="null: no binding and no replay fence; otherwise both, the fence shared "
        "by all such cases of the file, in file order."
    )
    layer: NonEmptyStr
    policy: Policy | None = Field(default=None, description="Replaces the default policy.")
    trust: dict[str, Any] | None = Field(
        default=None,
        description="A whole trust-store document replacing 'keys' for this case; one that "
        "does not load makes the case's result ATTESTATION_TRUST_STORE_CONFIG.",
    )


class AttestationVectors(BaseModel):
    """A corpus of attestation cases (the published ECPA 0.1 format, extended)."""

    model_config = _CONFIG

    corpus_schema: Literal["ecpa-attestation-vectors/0.1"] = Field(alias="schema")
    test_only: bool
    keys: list[TrustEntry]
    cases: list[AttestationCase]


class TrustStoreCase(BaseModel):
    """A trust-store document and whether loading it must succeed."""

    model_config = _CONFIG

    id: NonEmptyStr
    why: NonEmptyStr
    document: dict[str, Any]
    expected: Literal["OK", "ATTESTATION_TRUST_STORE_CONFIG"]


class TrustStoreVectors(BaseModel):
    """A corpus of trust-store loading cases (PROFILE §5)."""

    model_config = _CONFIG

    corpus_schema: Literal["ecpa-trust-store-vectors/0.1"] = Field(alias="schema")
    test_only: bool
    cases: list[TrustStoreCase]
