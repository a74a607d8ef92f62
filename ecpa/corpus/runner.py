"""Conformance corpora in the published ECPA 0.1 format: run them and compare codes.

A corpus is ``{"schema", "test_only", "keys": [trust entries], "cases": [...]}``; a case has
``id``, ``payload_b64``, ``detached_jws``, ``now``, ``expected`` ("OK" or a code) and
``binding`` (null or the six binding values), and may have ``policy`` (a Policy's three
values) and ``trust`` (a whole trust-store document replacing ``keys`` for that case).
Cases run in file order; those with a binding share one replay fence (PROFILE §3).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecpa._files import write_generated
from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.profile.b64 import b64u_decode
from ecpa.profile.fence import MemoryReplayFence
from ecpa.profile.trust import TRUST_STORE_SCHEMA, TrustStore
from ecpa.profile.verify import DEFAULT_POLICY, Binding, Policy, verify
from ecpa.shapes.shape import ShapeError

__all__ = [
    "BUILTIN",
    "CORPUS_FILES",
    "CaseResult",
    "corpus_files",
    "generate",
    "run_any",
    "run_corpus",
    "run_trust_corpus",
    "write",
]

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
        raw_binding, raw_policy = case.get("binding"), case.get("policy")
        binding = None if raw_binding is None else Binding.from_dict(raw_binding, "binding")
        policy = DEFAULT_POLICY if raw_policy is None else Policy.from_dict(raw_policy, "policy")
    except ShapeError as exc:
        raise _bad_corpus(f"{where}: binding or policy: {exc}") from None
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


def run_trust_corpus(doc: Mapping[str, Any]) -> list[CaseResult]:
    """Run every case of a trust-store corpus (``ecpa-trust-store-vectors/0.1``): load each
    document and compare "OK" or the code with the case's ``expected``.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a document that is not such a corpus.
    """
    cases = doc.get("cases")
    if not isinstance(cases, list):
        raise _bad_corpus("expected member 'cases' as an array")
    results = []
    for index, case in enumerate(cases):
        where = f"cases.{index}"
        if not isinstance(case, Mapping):
            raise _bad_corpus(f"{where}: expected an object, found {type(case).__name__}")
        ident = _field(case, "id", str, where)
        expected = _field(case, "expected", str, f"{where} ({ident})")
        try:
            TrustStore.from_dict(_field(case, "document", dict, f"{where} ({ident})"))
            got, detail = OK, ""
        except EcpaError as exc:
            got, detail = exc.code.value, exc.detail
        results.append(CaseResult(ident, expected, got, detail))
    return results


TRUST_VECTORS_SCHEMA = "ecpa-trust-store-vectors/0.1"


def run_any(doc: Mapping[str, Any]) -> list[CaseResult]:
    """Run a corpus of either kind, chosen by its ``schema``."""
    if doc.get("schema") == TRUST_VECTORS_SCHEMA:
        return run_trust_corpus(doc)
    return run_corpus(doc)


#: The project's corpus, ``corpus/ecpa-0.1/``: the published cases byte for byte, the
#: project's own cases, and the trust-store loading cases.
CORPUS_FILES = (
    "attestation-vectors.json",
    "attestation-vectors-extended.json",
    "trust-store-vectors.json",
)


def _dump(doc: Mapping[str, Any]) -> str:
    # The published file's layout exactly: two-space indent, raw UTF-8, final newline.
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def generate() -> dict[str, str]:
    """File name -> text of the whole corpus, deterministically (TEST seeds, fixed times)."""
    from ecpa.corpus.generator.extended import extended_document, trust_store_cases
    from ecpa.corpus.generator.upstream import upstream_document

    docs = (upstream_document(), extended_document(), trust_store_cases())
    return {name: _dump(doc) for name, doc in zip(CORPUS_FILES, docs, strict=True)}


#: The corpus the package carries (the repository's ``corpus/ecpa-0.1`` is these files).
BUILTIN = Path(__file__).resolve().parent / "vectors"


def corpus_files(paths: list[Path]) -> list[Path]:
    """The corpus files ``paths`` name: files as given, and each directory's ``*.json`` (the
    :data:`CORPUS_FILES` first, in that order, then the others by name).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a directory without corpus files.
    """
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                raise invalid_input(f"expected corpus files (*.json) in {path}, found none")
            known = [path / name for name in CORPUS_FILES if (path / name) in found]
            files += known + [f for f in found if f not in known]
        else:
            files.append(path)
    return files


def write(directory: Path) -> list[Path]:
    """Write the corpus into ``directory`` (created if missing); return the paths."""
    return write_generated(directory, generate())
