"""The committed corpus (corpus/ecpa-0.1/): generated, complete, and passing.

It stands alone: only the byte comparison with the published file needs ../shared.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ecpa.cli import main
from ecpa.corpus.formats import AttestationVectors, TrustStoreVectors
from ecpa.corpus.runner import CORPUS_FILES, generate, run_any
from ecpa.errors import ErrorCode
from tests.support import CONFORMANCE, ROOT, needs_shared

CORPUS = ROOT / "corpus" / "ecpa-0.1"


def _load(name: str) -> dict[str, Any]:
    return json.loads((CORPUS / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_committed_corpus_is_the_generator_output(name: str) -> None:
    committed = (CORPUS / name).read_text(encoding="utf-8")
    assert committed == generate()[name], (
        f"corpus/ecpa-0.1/{name} is stale: run `ecpa corpus generate corpus/ecpa-0.1` and commit"
    )


def test_no_stray_corpus_files() -> None:
    assert {p.name for p in CORPUS.glob("*.json")} == set(CORPUS_FILES)


@needs_shared
def test_published_cases_byte_for_byte() -> None:
    published = CONFORMANCE / "upstream-ecpa-0.1" / "attestation-vectors.json"
    assert (CORPUS / "attestation-vectors.json").read_bytes() == published.read_bytes()


def test_files_follow_their_schemas() -> None:
    AttestationVectors.model_validate(_load("attestation-vectors.json"))
    AttestationVectors.model_validate(_load("attestation-vectors-extended.json"))
    TrustStoreVectors.model_validate(_load("trust-store-vectors.json"))


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_every_case_passes(name: str) -> None:
    results = run_any(_load(name))
    assert results
    assert [(r.id, r.expected, r.got) for r in results if not r.passed] == []


def test_corpus_check_command_over_the_directory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["corpus", "check", str(CORPUS)]) == 0
    total = sum(len(_load(name)["cases"]) for name in CORPUS_FILES)
    assert capsys.readouterr().out.splitlines()[-1] == f"{total} passed, 0 failed"


def test_every_code_of_the_profile_is_expected_somewhere() -> None:
    expected = {case["expected"] for name in CORPUS_FILES for case in _load(name)["cases"]}
    profile_codes = {
        code.value
        for code in ErrorCode
        if code.value.startswith("ATTESTATION_") or code is ErrorCode.REPLAYED_NONCE
    }
    # Not raised by verify over a corpus case: it needs a host-evidence record (RUNTIME.md).
    profile_codes.discard(ErrorCode.EVIDENCE_DIGEST_MISMATCH.value)
    assert profile_codes - expected == set()
    assert "OK" in expected


def test_every_step_has_a_negative_and_a_positive_around_it() -> None:
    cases = _load("attestation-vectors-extended.json")["cases"]
    negatives = {c["step"] for c in cases if c["expected"] != "OK"}
    positives = {c["step"] for c in cases if c["expected"] == "OK"}
    assert negatives == set(range(1, 26))
    assert positives == set(range(1, 26))


def test_generate_command_writes_the_committed_files(tmp_path: Any) -> None:
    assert main(["corpus", "generate", str(tmp_path)]) == 0
    for name in CORPUS_FILES:
        assert (tmp_path / name).read_bytes() == (CORPUS / name).read_bytes()
