"""Conformance corpora in the published ECPA 0.1 format: run them and compare codes.

A corpus is ``{"schema", "test_only", "keys": [trust entries], "cases": [...]}``; a case has
``id``, ``payload_b64``, ``detached_jws``, ``now``, ``expected`` ("OK" or a code) and
``binding`` (null or the six binding values), and may have ``policy`` (a Policy's three
values) and ``trust`` (a whole trust-store document replacing ``keys`` for that case).
Cases run in file order; those with a binding share one replay fence (PROFILE §3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ecpa._b64 import b64u_decode
from ecpa.errors import EcpaError, ErrorCode
from ecpa.replay import MemoryReplayFence
from ecpa.statement import describe_validation
from ecpa.trust import TRUST_STORE_SCHEMA, TrustStore
from ecpa.verify import DEFAULT_POLICY, Binding, Policy, verify

__all__ = ["CaseResult", "run_corpus"]

OK = "OK"


@dataclass(frozen=True)
class CaseResult:
    """What one case expected and what the verifier said."""

    id: str
    expected: str
    got: str
    detail: str

    @property
    def passed(self) -> bool:
        """The verifier returned the recorded code."""
        return self.expected == self.got


def _bad_corpus(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.INVALID_INPUT, f"corpus: {detail}")


def _field(case: Mapping[str, Any], name: str, kind: type, where: str) -> Any:
    value = case.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool):
        raise _bad_corpus(f"{where}: expected {name!r} as {kind.__name__}, found {value!r:.40}")
    return value


def _case_inputs(
    case: Any, index: int
) -> tuple[str, str, bytes, str, int, Binding | None, Policy, Any]:
    where = f"cases.{index}"
    if not isinstance(case, Mapping):
        raise _bad_corpus(f"{where}: expected an object, found {type(case).__name__}")
    ident = _field(case, "id", str, where)
    where = f"{where} ({ident})"
    expected = _field(case, "expected", str, where)
    jws = _field(case, "detached_jws", str, where)
    now = _field(case, "now", int, where)
    payload = b64u_decode(
        _field(case, "payload_b64", str, where),
        what=f"{where} payload_b64",
        code=ErrorCode.INVALID_INPUT,
    )
    try:
        binding = Binding(**case["binding"]) if case.get("binding") is not None else None
        policy = Policy(**case["policy"]) if case.get("policy") is not None else DEFAULT_POLICY
    except (ValidationError, TypeError) as exc:
        found = describe_validation(exc, "case") if isinstance(exc, ValidationError) else exc
        raise _bad_corpus(f"{where}: binding or policy: {found}") from None
    return ident, expected, payload, jws, now, binding, policy, case.get("trust")


def run_corpus(doc: Mapping[str, Any]) -> list[CaseResult]:
    """Run every case of a corpus document in file order; return one result per case.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a document that is not a corpus, or
            ``ATTESTATION_TRUST_STORE_CONFIG`` when its ``keys`` do not load.
    """
    cases = doc.get("cases")
    keys = doc.get("keys")
    if not isinstance(cases, list) or not isinstance(keys, list):
        raise _bad_corpus("expected members 'keys' and 'cases' as arrays")
    shared = TrustStore.from_dict({"schema": TRUST_STORE_SCHEMA, "keys": keys})
    fence = MemoryReplayFence()
    results = []
    for index, case in enumerate(cases):
        ident, expected, payload, jws, now, binding, policy, trust = _case_inputs(case, index)
        try:
            store = shared if trust is None else TrustStore.from_dict(trust)
            verify(
                payload,
                jws,
                store,
                now=now,
                policy=policy,
                binding=binding,
                replay=fence if binding is not None else None,
            )
            got, detail = OK, ""
        except EcpaError as exc:
            got, detail = exc.code.value, exc.detail
        results.append(CaseResult(ident, expected, got, detail))
    return results
