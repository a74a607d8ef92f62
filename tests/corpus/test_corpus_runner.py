"""``run_corpus`` over corpora in the published ECPA 0.1 format: the upstream corpus, and
small hand-made ones with per-case ``policy`` and ``trust``, bindings sharing one replay
fence in file order, and corpora that are not corpora."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import ecpa
from ecpa.corpus.runner import CaseResult, run_corpus
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.b64 import b64u_encode
from tests.support import (
    CONFORMANCE,
    KEY_1,
    KEY_2,
    NOW,
    binding,
    load_json,
    needs_shared,
    statement,
    trust_doc,
    trust_entry,
)

UPSTREAM = CONFORMANCE / "upstream-ecpa-0.1" / "attestation-vectors.json"
OK = "OK"
BINDING = binding().to_dict()  # the binding statement() satisfies


def case(
    ident: str,
    expected: str,
    *,
    key: ecpa.SigningKey = KEY_1,
    binding: dict[str, Any] | None = None,
    now: int = NOW,
    **changes: Any,
) -> dict[str, Any]:
    """A corpus case: ``statement(**changes)`` signed by ``key``."""
    signed = ecpa.sign(statement(**changes), key)
    return {
        "id": ident,
        "category": "hand-made",
        "payload_b64": b64u_encode(signed.payload),
        "detached_jws": signed.detached_jws,
        "now": now,
        "expected": expected,
        "binding": binding,
    }


def corpus(*cases: Any, keys: Any = None) -> dict[str, Any]:
    return {
        "schema": "ecpa-conformance-vectors/0.1",
        "test_only": True,
        "keys": [trust_entry()] if keys is None else keys,
        "cases": list(cases),
    }


def outcomes(results: list[CaseResult]) -> list[tuple[str, str]]:
    return [(r.id, r.got) for r in results]


# --- the upstream corpus ---------------------------------------------------------------------


@needs_shared
def test_upstream_corpus_passes() -> None:
    doc = load_json(UPSTREAM)
    results = run_corpus(doc)
    assert len(results) == 56
    assert [r.id for r in results] == [c["id"] for c in doc["cases"]]
    failed = [(r.id, r.expected, r.got) for r in results if not r.passed]
    assert failed == []
    assert all(r.detail == "" for r in results if r.got == OK)
    assert all(r.detail for r in results if r.got != OK)


@needs_shared
def test_upstream_corpus_twice_gives_the_same_results() -> None:
    # Each run has its own fence: the replay case replays within the run, not across runs.
    doc = load_json(UPSTREAM)
    assert outcomes(run_corpus(doc)) == outcomes(run_corpus(doc))


@needs_shared
def test_upstream_corpus_out_of_order_changes_the_replay_cases() -> None:
    doc = load_json(UPSTREAM)
    by_id = {c["id"]: c for c in doc["cases"]}
    replay = copy.deepcopy(doc)
    replay["cases"] = [by_id["negative-nonce-replay"], by_id["positive-replay-first"]]
    got = outcomes(run_corpus(replay))
    assert got == [
        ("negative-nonce-replay", OK),
        ("positive-replay-first", ErrorCode.REPLAYED_NONCE.value),
    ]


# --- a hand-made corpus ----------------------------------------------------------------------


def test_hand_made_corpus() -> None:
    results = run_corpus(
        corpus(
            case("good", OK),
            case("unknown-key", "ATTESTATION_UNKNOWN_KEY", key=KEY_2, kid="test-key-2"),
        )
    )
    assert results == [
        CaseResult("good", OK, OK, ""),
        CaseResult(
            "unknown-key", "ATTESTATION_UNKNOWN_KEY", "ATTESTATION_UNKNOWN_KEY", results[1].detail
        ),
    ]
    assert all(r.passed for r in results)


def test_a_case_that_does_not_get_its_code_is_reported_not_raised() -> None:
    results = run_corpus(corpus(case("wrong", "ATTESTATION_EXPIRED"), case("after", OK)))
    assert [(r.id, r.expected, r.got, r.passed) for r in results] == [
        ("wrong", "ATTESTATION_EXPIRED", OK, False),
        ("after", OK, OK, True),
    ]


def test_each_case_runs_at_its_own_now() -> None:
    results = run_corpus(
        corpus(
            case("expired", "ATTESTATION_EXPIRED", now=NOW + 61),
            case("early", "ATTESTATION_NOT_YET_VALID", now=NOW - 2),
            case("on-time", OK, now=NOW + 60),
        )
    )
    assert [r.passed for r in results] == [True, True, True]


TTL_61 = {"issued_at": NOW - 1, "expires_at": NOW + 60}


def test_per_case_policy() -> None:
    strict = {"clock_skew": 0, "max_ttl": 60, "max_observation_age": 300}
    skewed = {"clock_skew": 5, "max_ttl": 300, "max_observation_age": 300}
    ttl_61 = case("ttl-61-default", OK, **TTL_61)
    results = run_corpus(
        corpus(
            ttl_61,
            {
                **ttl_61,
                "id": "ttl-61-max-60",
                "expected": "ATTESTATION_INVALID_TIME",
                "policy": strict,
            },
            {**ttl_61, "id": "ttl-61-policy-null", "policy": None},
            {
                **ttl_61,
                "id": "ttl-61-policy-partial",
                "expected": "ATTESTATION_INVALID_TIME",
                "policy": {"max_ttl": 60},
            },
            case("expired-without-skew", "ATTESTATION_EXPIRED", now=NOW + 63),
            {**case("expired-within-skew", OK, now=NOW + 63), "policy": skewed},
        )
    )
    assert [(r.id, r.got) for r in results] == [
        ("ttl-61-default", OK),
        ("ttl-61-max-60", "ATTESTATION_INVALID_TIME"),
        ("ttl-61-policy-null", OK),
        ("ttl-61-policy-partial", "ATTESTATION_INVALID_TIME"),
        ("expired-without-skew", "ATTESTATION_EXPIRED"),
        ("expired-within-skew", OK),
    ]
    assert all(r.passed for r in results)


def test_per_case_policy_does_not_leak_into_the_next_case() -> None:
    strict = {"clock_skew": 0, "max_ttl": 60, "max_observation_age": 300}
    results = run_corpus(
        corpus(
            {**case("strict", "ATTESTATION_INVALID_TIME", **TTL_61), "policy": strict},
            case("default-again", OK, **TTL_61),
        )
    )
    assert [r.got for r in results] == ["ATTESTATION_INVALID_TIME", OK]


def test_per_case_trust_replaces_the_keys() -> None:
    only_key_2 = trust_doc(trust_entry(kid="test-key-2", public_key_b64=KEY_2.public_key.to_b64()))
    disabled = trust_doc(trust_entry(enabled=False))
    results = run_corpus(
        corpus(
            case("key-1-shared", OK),
            {**case("key-1-disabled", "ATTESTATION_TRUST_POLICY"), "trust": disabled},
            {**case("key-1-not-in-case-trust", "ATTESTATION_UNKNOWN_KEY"), "trust": only_key_2},
            {**case("key-2-in-case-trust", OK, key=KEY_2, kid="test-key-2"), "trust": only_key_2},
            case("key-2-not-shared", "ATTESTATION_UNKNOWN_KEY", key=KEY_2, kid="test-key-2"),
            {**case("key-1-trust-null", OK), "trust": None},
        )
    )
    assert [(r.id, r.got) for r in results] == [
        ("key-1-shared", OK),
        ("key-1-disabled", "ATTESTATION_TRUST_POLICY"),
        ("key-1-not-in-case-trust", "ATTESTATION_UNKNOWN_KEY"),
        ("key-2-in-case-trust", OK),
        ("key-2-not-shared", "ATTESTATION_UNKNOWN_KEY"),
        ("key-1-trust-null", OK),
    ]


@pytest.mark.parametrize(
    "trust",
    [
        {"schema": "ecpa-trust-store/0.2", "keys": [trust_entry()]},
        trust_doc(trust_entry(), trust_entry()),  # duplicated (issuer, kid)
        trust_doc(trust_entry(public_key_b64="AQ" + "A" * 41)),  # small order: the identity
        trust_doc(trust_entry(subjects=[])),
        trust_doc(trust_entry(not_before=10, not_after=9)),
        {"keys": [trust_entry()]},
        [trust_entry()],
        "trust.json",
    ],
    ids=[
        "schema",
        "duplicate",
        "small-order",
        "no-subjects",
        "window",
        "no-schema",
        "list",
        "string",
    ],
)
def test_broken_per_case_trust_is_the_case_result(trust: Any) -> None:
    results = run_corpus(
        corpus(
            {**case("broken-trust", "ATTESTATION_TRUST_STORE_CONFIG"), "trust": trust},
            case("next", OK),
        )
    )
    assert [(r.got, r.passed) for r in results] == [
        ("ATTESTATION_TRUST_STORE_CONFIG", True),
        (OK, True),
    ]
    assert results[0].detail


def test_bindings_share_one_fence_in_file_order() -> None:
    results = run_corpus(
        corpus(
            case("no-binding-first", OK),
            case("bound-first", OK, binding=BINDING),
            case("no-binding-after", OK),  # never touches the fence
            case("bound-replay", "REPLAYED_NONCE", binding=BINDING),
            case("no-binding-last", OK),
        )
    )
    assert [(r.id, r.got) for r in results] == [
        ("no-binding-first", OK),
        ("bound-first", OK),
        ("no-binding-after", OK),
        ("bound-replay", "REPLAYED_NONCE"),
        ("no-binding-last", OK),
    ]


def test_unbound_cases_do_not_record_their_nonces() -> None:
    results = run_corpus(
        corpus(
            case("unbound-1", OK),
            case("unbound-2", OK),
            case("bound", OK, binding=BINDING),
        )
    )
    assert [r.got for r in results] == [OK, OK, OK]


def test_a_refused_bound_case_does_not_consume_its_nonce() -> None:
    other_plan = {**BINDING, "plan_id": "plan:sha256:" + "9" * 64}
    results = run_corpus(
        corpus(
            case("binding-mismatch", "ATTESTATION_BINDING_MISMATCH", binding=other_plan),
            case("expired", "ATTESTATION_EXPIRED", binding=BINDING, now=NOW + 61),
            case("bound", OK, binding=BINDING),
            case("replay", "REPLAYED_NONCE", binding=BINDING),
        )
    )
    assert [r.got for r in results] == [
        "ATTESTATION_BINDING_MISMATCH",
        "ATTESTATION_EXPIRED",
        OK,
        "REPLAYED_NONCE",
    ]


def test_distinct_nonces_do_not_replay() -> None:
    second = {**BINDING, "challenge_nonce": "nonce-2"}
    results = run_corpus(
        corpus(
            case("first", OK, binding=BINDING),
            case("second", OK, binding=second, challenge_nonce="nonce-2"),
        )
    )
    assert [r.got for r in results] == [OK, OK]


def test_bound_case_with_per_case_trust_uses_the_shared_fence() -> None:
    results = run_corpus(
        corpus(
            case("shared-keys", OK, binding=BINDING),
            {**case("case-trust", "REPLAYED_NONCE", binding=BINDING), "trust": trust_doc()},
        )
    )
    assert [r.got for r in results] == [OK, "REPLAYED_NONCE"]


def test_empty_corpus() -> None:
    assert run_corpus(corpus()) == []
    assert run_corpus({"keys": [], "cases": []}) == []


# --- documents that are not corpora ----------------------------------------------------------


def _good() -> dict[str, Any]:
    return case("good", OK)


def _without(name: str) -> dict[str, Any]:
    c = _good()
    del c[name]
    return c


MALFORMED = [
    ("cases-missing", {"schema": "x", "keys": []}),
    ("cases-object", {"keys": [], "cases": {"good": _good()}}),
    ("cases-null", {"keys": [], "cases": None}),
    ("keys-missing", {"cases": [_good()]}),
    ("keys-object", {"keys": {}, "cases": [_good()]}),
    ("case-not-an-object", corpus(["good"])),
    ("case-null", corpus(None)),
    ("id-missing", corpus(_without("id"))),
    ("id-number", corpus({**_good(), "id": 1})),
    ("id-null", corpus({**_good(), "id": None})),
    ("expected-missing", corpus(_without("expected"))),
    ("expected-null", corpus({**_good(), "expected": None})),
    ("jws-missing", corpus(_without("detached_jws"))),
    ("jws-number", corpus({**_good(), "detached_jws": 5})),
    ("payload-missing", corpus(_without("payload_b64"))),
    ("payload-padded", corpus({**_good(), "payload_b64": _good()["payload_b64"] + "="})),
    ("payload-standard-b64", corpus({**_good(), "payload_b64": "ab+/"})),
    ("payload-4k+1", corpus({**_good(), "payload_b64": "abcde"})),
    ("payload-trailing-bits", corpus({**_good(), "payload_b64": "YR"})),
    ("now-missing", corpus(_without("now"))),
    ("now-true", corpus({**_good(), "now": True})),
    ("now-false", corpus({**_good(), "now": False})),
    ("now-string", corpus({**_good(), "now": str(NOW)})),
    ("now-float", corpus({**_good(), "now": float(NOW)})),
    ("binding-list", corpus({**_good(), "binding": list(BINDING.values())})),
    ("binding-string", corpus({**_good(), "binding": "nonce-1"})),
    ("binding-unknown-member", corpus({**_good(), "binding": {**BINDING, "extra": 1}})),
    ("binding-missing-member", corpus({**_good(), "binding": {"challenge_nonce": "nonce-1"}})),
    ("binding-epoch-string", corpus({**_good(), "binding": {**BINDING, "process_epoch": "7"}})),
    ("policy-list", corpus({**_good(), "policy": [0, 300, 300]})),
    ("policy-unknown-member", corpus({**_good(), "policy": {"max_age": 5}})),
    ("policy-negative", corpus({**_good(), "policy": {"clock_skew": -1}})),
    ("policy-bool", corpus({**_good(), "policy": {"max_ttl": True}})),
    ("bad-case-after-good-ones", corpus(_good(), _good(), {**_good(), "now": None})),
]


@pytest.mark.parametrize("doc", [d for _, d in MALFORMED], ids=[i for i, _ in MALFORMED])
def test_malformed_corpus(doc: dict[str, Any]) -> None:
    with pytest.raises(EcpaError) as info:
        run_corpus(doc)
    assert info.value.code == ErrorCode.INVALID_INPUT


@pytest.mark.parametrize(
    "keys",
    [
        [trust_entry(enabled="yes")],
        [trust_entry(), trust_entry()],
        [trust_entry(public_key_b64="AQ" + "A" * 41)],
        [trust_entry(public_key_b64="AAAA")],
        [trust_entry(issuer="")],
        [trust_entry(not_before=-1)],
        [trust_entry(extra=1)],
        ["test-key-1"],
    ],
    ids=[
        "enabled-string",
        "duplicate",
        "small-order",
        "short-key",
        "empty-issuer",
        "negative-window",
        "unknown-member",
        "string-entry",
    ],
)
def test_bad_keys(keys: list[Any]) -> None:
    with pytest.raises(EcpaError) as info:
        run_corpus(corpus(_good(), keys=keys))
    assert info.value.code == ErrorCode.TRUST_STORE_CONFIG
