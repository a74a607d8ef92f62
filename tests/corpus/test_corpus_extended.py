"""The project's own corpus (STYLE rule 7): ``extended_document`` (attestation cases beside
the published 56) and ``trust_store_cases`` (PROFILE §5 loading cases).

(a) every case gets its expected code when the document runs, in file order, with one
replay fence; (b) the corpus covers every PROFILE §3 step, boundary, code and adjacent
pair of steps; (c) every trust-store document loads or is refused as recorded, and the 14
small-order keys are all there; (d) generation is deterministic.

A case whose expected code is PROFILE.md's but not the verifier's is listed in
``DEVIATIONS`` and marked xfail(strict=True); the expected code is never bent to match.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

import ecpa
from ecpa.corpus.generator.extended import extended_document, trust_store_cases
from ecpa.corpus.generator.trust_cases import small_order_keys
from ecpa.corpus.generator.upstream import upstream_document
from ecpa.corpus.runner import CaseResult, run_corpus
from ecpa.errors import ErrorCode
from tests.support import CONFORMANCE, NOW, b64d, load_json, needs_shared

C = ErrorCode
OK = "OK"

#: id -> why the verifier departs from PROFILE.md on this case (none known).
DEVIATIONS: dict[str, str] = {}

#: The codes each PROFILE §3 step may raise.
STEP_CODES: dict[int, set[str]] = {
    1: {C.TOO_LARGE},
    2: {C.MALFORMED_JWS},
    3: {C.MALFORMED_JWS},
    4: {C.MALFORMED_JSON, C.DUPLICATE_KEY, C.UNSUPPORTED_VALUE},
    5: {C.UNKNOWN_CRITICAL_HEADER},
    6: {C.MALFORMED_JWS},
    7: {C.WRONG_ALGORITHM},
    8: {C.WRONG_TYPE},
    9: {C.UNKNOWN_CRITICAL_HEADER},
    10: {C.WRONG_PROFILE},
    11: {C.UNKNOWN_KEY},
    12: {C.MALFORMED_JSON, C.DUPLICATE_KEY, C.UNSUPPORTED_VALUE},
    13: {C.NONCANONICAL_PAYLOAD},
    14: {C.INVALID_STATEMENT},
    15: {C.WRONG_PROFILE},
    16: {C.KEY_MISMATCH},
    17: {C.UNKNOWN_CRITICAL_CLAIM},
    18: {C.UNKNOWN_KEY, C.TRUST_POLICY},
    19: {C.MALFORMED_JWS},
    20: {C.INVALID_SIGNATURE},
    21: {C.NOT_YET_VALID},
    22: {C.EXPIRED},
    23: {C.INVALID_TIME},
    24: {C.BINDING_MISMATCH},
    25: {C.REPLAYED_NONCE},
}
STEPS = range(1, 26)
#: Every step has a boundary a positive case sits on (for steps 7-10, the one exact value
#: with a look-alike elsewhere in the header).
BOUNDARY_STEPS = STEPS
#: The codes verify raises (TRUST_STORE_CONFIG and EVIDENCE_DIGEST_MISMATCH it never does).
VERIFY_CODES = {
    code.value
    for code in ErrorCode
    if (code.value.startswith("ATTESTATION_") or code is C.REPLAYED_NONCE)
    and code not in (C.TRUST_STORE_CONFIG, C.EVIDENCE_DIGEST_MISMATCH)
}
MEMBERS = [
    "id",
    "category",
    "why",
    "step",
    "payload_b64",
    "detached_jws",
    "now",
    "expected",
    "binding",
    "layer",
]


@cache
def _doc() -> dict[str, Any]:
    return extended_document()


@cache
def _results() -> dict[str, CaseResult]:
    return {result.id: result for result in run_corpus(_doc())}


def _cases() -> list[dict[str, Any]]:
    return list(_doc()["cases"])


def _by_id(ident: str) -> dict[str, Any]:
    return next(case for case in _cases() if case["id"] == ident)


# --- (a) the run -------------------------------------------------------------------------


def _case_param(case: dict[str, Any]) -> Any:
    marks = []
    if case["id"] in DEVIATIONS:
        marks.append(pytest.mark.xfail(strict=True, reason=DEVIATIONS[case["id"]]))
    return pytest.param(case["id"], id=case["id"], marks=marks)


@pytest.mark.parametrize("ident", [_case_param(case) for case in extended_document()["cases"]])
def test_case_gets_its_expected_code(ident: str) -> None:
    """The whole document runs once, in file order with one fence; each case is checked."""
    result = _results()[ident]
    assert result.got == result.expected, f"{ident}: got {result.got} ({result.detail})"


def test_whole_run_passes_but_for_known_deviations() -> None:
    failed = [
        f"{r.id}: expected {r.expected}, got {r.got} ({r.detail})"
        for r in _results().values()
        if not r.passed and r.id not in DEVIATIONS
    ]
    assert failed == [], "\n".join(failed)


def test_positive_cases_are_what_the_producer_signs() -> None:
    """ecpa.sign, given each positive statement, gives the same payload and JWS."""
    keys = {"test-key-2": ecpa.SigningKey.from_seed(bytes(range(32, 64)))}
    default = ecpa.SigningKey.from_seed(bytes(range(32)))
    for case in _cases():
        if case["expected"] != OK:
            continue
        payload = b64d(case["payload_b64"])
        statement = json.loads(payload)
        signed = ecpa.sign(statement, keys.get(statement["kid"], default))
        assert (signed.payload, signed.detached_jws) == (payload, case["detached_jws"]), case["id"]


@pytest.mark.parametrize(
    ("ident", "jws_length", "payload_length"),
    [
        ("x-size-jws-16384", 16384, None),
        ("x-size-jws-16385", 16385, None),
        ("x-size-jws-16386", 16386, None),
        ("x-order-1-2", 16385, None),
        ("x-size-payload-65536", None, 65536),
        ("x-size-payload-65537", None, 65537),
    ],
)
def test_size_cases_have_the_sizes_they_claim(
    ident: str, jws_length: int | None, payload_length: int | None
) -> None:
    case = _by_id(ident)
    if jws_length is not None:
        assert len(case["detached_jws"]) == jws_length
    if payload_length is not None:
        assert len(b64d(case["payload_b64"])) == payload_length


# --- (b) coverage -------------------------------------------------------------------------


def test_every_case_has_the_published_members_in_order() -> None:
    for case in _cases():
        extra = [name for name in ("policy", "trust") if name in case]
        assert list(case) == MEMBERS + extra, case["id"]
        assert case["layer"] == (
            "coordinator-policy" if case["step"] in (24, 25) else "cryptographic-envelope"
        ), case["id"]


def test_every_case_says_in_one_line_why() -> None:
    for case in _cases():
        assert isinstance(case["why"], str), case["id"]
        assert case["why"].strip(), case["id"]
        assert "\n" not in case["why"], case["id"]


def test_expected_code_belongs_to_the_cases_step() -> None:
    for case in _cases():
        assert case["step"] in STEPS, case["id"]
        if case["expected"] != OK:
            assert case["expected"] in STEP_CODES[case["step"]], case["id"]


@pytest.mark.parametrize("step", STEPS)
def test_every_step_has_a_negative(step: int) -> None:
    assert any(c["step"] == step and c["expected"] != OK for c in _cases())


@pytest.mark.parametrize("step", BOUNDARY_STEPS)
def test_every_step_has_a_positive_on_its_boundary(step: int) -> None:
    assert any(c["step"] == step and c["expected"] == OK for c in _cases())


def test_every_code_verify_raises_is_expected_somewhere() -> None:
    expected = {case["expected"] for case in _cases()}
    assert VERIFY_CODES - expected == set()
    assert C.KEY_MISMATCH in expected
    assert expected - VERIFY_CODES == {OK}


@pytest.mark.parametrize("first", range(1, 25))
def test_every_adjacent_pair_of_steps_has_an_order_case(first: int) -> None:
    """``x-order-A-B``: the defects of steps A and A+1 together give step A's code."""
    case = _by_id(f"x-order-{first}-{first + 1}")
    assert case["step"] == first
    assert case["expected"] in STEP_CODES[first]


def test_ids_are_unique_across_both_files() -> None:
    published = [case["id"] for case in upstream_document()["cases"]]
    mine = [case["id"] for case in _cases()]
    assert len(set(mine)) == len(mine)
    assert set(mine).isdisjoint(published)
    assert all(ident.startswith("x-") for ident in mine)


def test_keys_are_the_published_keys() -> None:
    assert _doc()["keys"] == upstream_document()["keys"]
    assert _doc()["schema"] == "ecpa-attestation-vectors/0.1"
    assert _doc()["test_only"] is True


def test_most_cases_run_at_the_published_now() -> None:
    at_now = sum(case["now"] == NOW for case in _cases())
    assert at_now >= 0.95 * len(_cases())


def test_strict_json_classes_are_covered_in_header_and_payload() -> None:
    """PROFILE §4: each class at step 4 (header) and at step 12 (payload)."""
    for step in (4, 12):
        codes = {c["expected"] for c in _cases() if c["step"] == step}
        assert codes >= {C.MALFORMED_JSON, C.DUPLICATE_KEY, C.UNSUPPORTED_VALUE}, step


def test_per_case_policy_and_trust_are_used() -> None:
    with_policy = [case for case in _cases() if "policy" in case]
    with_trust = [case for case in _cases() if "trust" in case]
    assert {c["expected"] for c in with_policy} >= {OK, C.NOT_YET_VALID, C.EXPIRED, C.INVALID_TIME}
    assert {c["expected"] for c in with_trust} >= {OK, C.TRUST_POLICY, C.UNKNOWN_KEY}
    for case in with_trust:
        ecpa.TrustStore.from_dict(case["trust"])  # every one loads


def test_binding_cases_share_one_fence_as_intended() -> None:
    """Nonces are accepted once; a replay repeats an accepted nonce; a refused case
    (binding mismatch included) leaves its nonce free for a later acceptance."""
    accepted: set[str] = set()
    refused: set[str] = set()
    freed = []
    for case in _cases():
        if case["binding"] is None:
            continue
        nonce = json.loads(b64d(case["payload_b64"]))["challenge_nonce"]
        if case["expected"] == OK:
            assert nonce not in accepted, case["id"]
            if nonce in refused:
                freed.append((nonce, case["id"]))
            accepted.add(nonce)
        elif case["expected"] == C.REPLAYED_NONCE:
            assert nonce in accepted, case["id"]
        else:
            refused.add(nonce)
    assert ("x-nonce-kept", "x-replay-kept-nonce-accepted") in freed
    mismatch = _by_id("x-replay-mismatch-keeps-nonce")
    assert mismatch["expected"] == C.BINDING_MISMATCH
    assert json.loads(b64d(mismatch["payload_b64"]))["challenge_nonce"] == "x-nonce-kept"


def test_document_fits_the_corpus_format() -> None:
    corpus_format = pytest.importorskip("ecpa.corpus.formats")
    corpus_format.AttestationVectors.model_validate(_doc())
    corpus_format.TrustStoreVectors.model_validate(trust_store_cases())


# --- (c) trust-store cases ----------------------------------------------------------------


def _trust_outcome(document: dict[str, Any]) -> str:
    try:
        ecpa.TrustStore.from_dict(document)
    except ecpa.EcpaError as exc:
        return exc.code.value
    return OK


@pytest.mark.parametrize(
    "case", [pytest.param(case, id=case["id"]) for case in trust_store_cases()["cases"]]
)
def test_trust_store_case(case: dict[str, Any]) -> None:
    assert list(case) == ["id", "why", "document", "expected"]
    assert case["why"].strip()
    assert "\n" not in case["why"]
    assert case["expected"] in (OK, C.TRUST_STORE_CONFIG)
    assert _trust_outcome(case["document"]) == case["expected"]


def test_trust_store_cases_cover_both_outcomes_uniquely() -> None:
    doc = trust_store_cases()
    assert doc["schema"] == "ecpa-trust-store-vectors/0.1"
    assert doc["test_only"] is True
    ids = [case["id"] for case in doc["cases"]]
    assert len(set(ids)) == len(ids)
    assert {case["expected"] for case in doc["cases"]} == {OK, C.TRUST_STORE_CONFIG}


# Ed25519 arithmetic, independent of the generator: the torsion points from [L]P.
P = 2**255 - 19
D = (-121665 * pow(121666, -1, P)) % P
L = 2**252 + 27742317777372353535851937790883648493
Point = tuple[int, int]


def _add(a: Point, b: Point) -> Point:
    (x1, y1), (x2, y2) = a, b
    t = D * x1 * x2 * y1 * y2 % P
    return (
        (x1 * y2 + y1 * x2) * pow(1 + t, -1, P) % P,
        (y1 * y2 + x1 * x2) * pow(1 - t, -1, P) % P,
    )


def _mul(k: int, point: Point) -> Point:
    result = (0, 1)
    while k:
        if k & 1:
            result = _add(result, point)
        point = _add(point, point)
        k >>= 1
    return result


def _point_with_y(y: int) -> Point | None:
    x2 = (y * y - 1) * pow(D * y * y + 1, -1, P) % P
    x = pow(x2, (P + 3) // 8, P)
    if x * x % P != x2:
        x = x * pow(2, (P - 1) // 4, P) % P
    return (x, y) if x * x % P == x2 else None


def _small_order_encodings() -> set[bytes]:
    """Every encoding of a point of order dividing 8, canonical or not (14 in all)."""
    for y in range(3, 100):  # pragma: no branch
        point = _point_with_y(y)
        if point is not None and _mul(4, torsion := _mul(L, point)) != (0, 1):
            break  # [L]P has order 8: its multiples are all eight torsion points
    points = {_mul(k, torsion) for k in range(8)}
    assert len(points) == 8
    encodings = set()
    for x, y in points:
        encodings.add((y | (x & 1) << 255).to_bytes(32, "little"))
        if x == 0:  # the sign bit set on x = 0: non-canonical
            encodings.add((y | 1 << 255).to_bytes(32, "little"))
        if y + P < 2**255:  # y + p: non-canonical, both sign bits
            encodings.update((y + P | s << 255).to_bytes(32, "little") for s in (0, 1))
    return encodings


def test_all_14_small_order_keys_are_refused_cases() -> None:
    expected = _small_order_encodings()
    assert len(expected) == 14
    assert set(small_order_keys().values()) == expected
    refused = {
        b64d(key["public_key_b64"])
        for case in trust_store_cases()["cases"]
        if case["expected"] == C.TRUST_STORE_CONFIG
        for key in case["document"].get("keys", [])
        if isinstance(key, dict) and "public_key_b64" in key
    }
    assert expected <= refused


@needs_shared
def test_small_order_keys_match_the_shared_list() -> None:
    shared = load_json(CONFORMANCE / "wycheproof" / "ed25519-small-order-keys.json")
    hexes = {entry["name"]: entry["public_key_hex"] for entry in shared["keys"]}
    assert {name: key.hex() for name, key in small_order_keys().items()} == hexes


# --- (d) determinism ----------------------------------------------------------------------


def _text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def test_generation_is_deterministic() -> None:
    assert _text(extended_document()) == _text(_doc())
    assert _text(trust_store_cases()) == _text(trust_store_cases())


def test_documents_are_plain_json() -> None:
    for doc in (_doc(), trust_store_cases()):
        assert json.loads(_text(doc)) == doc
