"""PROFILE §3 steps 21-25 (time, binding, replay) and the order of steps 13-25: a payload
with the defects of two consecutive steps gets the code of the first.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import ecpa
from tests._checks_helpers import (
    GOOD,
    OK,
    SSEG,
    C,
    code,
    signed,
)
from tests.support import (
    KEY_1,
    KEY_2,
    NOW,
    binding,
    code_of,
    header_bytes,
    payload_of,
    sign_raw,
    statement,
    store,
    trust_entry,
)

# --- steps 21-23: time -------------------------------------------------------------------

N = NOW
TIME_CASES = [
    # (id, observed_at, issued_at, expires_at, policy, expected)
    ("issued-eq-now", N - 2, N, N + 60, {}, OK),
    ("issued-now+1", N - 2, N + 1, N + 60, {}, C.NOT_YET_VALID),
    ("observed-now+1", N + 1, N, N + 60, {}, C.NOT_YET_VALID),
    ("both-now+1", N + 1, N + 1, N + 60, {}, C.NOT_YET_VALID),
    ("all-eq-now", N, N, N, {}, OK),
    ("expires-eq-now", N - 2, N - 1, N, {}, OK),
    ("expires-now-1", N - 3, N - 2, N - 1, {}, C.EXPIRED),
    ("ttl-300", N - 2, N - 1, N + 299, {}, OK),
    ("ttl-301", N - 2, N - 1, N + 300, {}, C.INVALID_TIME),
    ("age-300", N - 300, N - 1, N + 60, {}, OK),
    ("age-301", N - 301, N - 1, N + 60, {}, C.INVALID_TIME),
    ("observed-gt-issued", N - 1, N - 2, N + 60, {}, C.INVALID_TIME),
    # clock skew 5
    ("skew-issued-now+5", N - 2, N + 5, N + 60, {"clock_skew": 5}, OK),
    ("skew-issued-now+6", N - 2, N + 6, N + 60, {"clock_skew": 5}, C.NOT_YET_VALID),
    ("skew-observed-now+5", N + 5, N + 5, N + 60, {"clock_skew": 5}, OK),
    ("skew-observed-now+6", N + 6, N + 5, N + 60, {"clock_skew": 5}, C.NOT_YET_VALID),
    ("skew-expires-now-5", N - 7, N - 6, N - 5, {"clock_skew": 5}, OK),
    ("skew-expires-now-6", N - 8, N - 7, N - 6, {"clock_skew": 5}, C.EXPIRED),
    ("skew-age-305", N - 305, N - 1, N + 60, {"clock_skew": 5}, OK),
    ("skew-age-306", N - 306, N - 1, N + 60, {"clock_skew": 5}, C.INVALID_TIME),
    ("skew-ttl-300", N - 2, N - 1, N + 299, {"clock_skew": 5}, OK),
    ("skew-ttl-301", N - 2, N - 1, N + 300, {"clock_skew": 5}, C.INVALID_TIME),
    ("skew-issued-gt-expires", N - 10, N + 3, N - 2, {"clock_skew": 5}, C.INVALID_TIME),
    ("skew-issued-eq-expires", N - 10, N + 3, N + 3, {"clock_skew": 5}, OK),
    ("skew-observed-gt-issued", N + 2, N + 1, N + 60, {"clock_skew": 5}, C.INVALID_TIME),
    # other TTL and observation age
    ("ttl60-60", N - 2, N - 1, N + 59, {"max_ttl": 60}, OK),
    ("ttl60-61", N - 2, N - 1, N + 60, {"max_ttl": 60}, C.INVALID_TIME),
    ("ttl600-600", N - 2, N - 1, N + 599, {"max_ttl": 600}, OK),
    ("ttl600-601", N - 2, N - 1, N + 600, {"max_ttl": 600}, C.INVALID_TIME),
    ("ttl0-0", N - 2, N, N, {"max_ttl": 0}, OK),
    ("ttl0-1", N - 2, N, N + 1, {"max_ttl": 0}, C.INVALID_TIME),
    ("age10-10", N - 10, N - 1, N + 60, {"max_observation_age": 10}, OK),
    ("age10-11", N - 11, N - 1, N + 60, {"max_observation_age": 10}, C.INVALID_TIME),
    ("age1000-1000", N - 1000, N - 1, N + 60, {"max_observation_age": 1000}, OK),
    ("age1000-1001", N - 1001, N - 1, N + 60, {"max_observation_age": 1000}, C.INVALID_TIME),
    ("age10-skew5-15", N - 15, N - 1, N + 60, {"max_observation_age": 10, "clock_skew": 5}, OK),
    (
        "age10-skew5-16",
        N - 16,
        N - 1,
        N + 60,
        {"max_observation_age": 10, "clock_skew": 5},
        C.INVALID_TIME,
    ),
]


@pytest.mark.parametrize(
    ("observed", "issued", "expires", "policy", "expected"),
    [pytest.param(*c[1:], id=c[0]) for c in TIME_CASES],
)
def test_time(
    observed: int, issued: int, expires: int, policy: dict[str, int], expected: str
) -> None:
    st = statement(observed_at=observed, issued_at=issued, expires_at=expires)
    assert code(st, policy=ecpa.Policy(**policy)) == expected


# --- step 24: binding --------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"plan_id": "plan:sha256:" + "9" * 64}, id="plan_id"),
        pytest.param({"launch_id": "launch-2"}, id="launch_id"),
        pytest.param({"plugin_id": "plugin:sha256:" + "9" * 64}, id="plugin_id"),
        pytest.param({"artifact_digest": "sha256:" + "9" * 64}, id="artifact_digest"),
        pytest.param({"artifact_digest": "sha256:" + "3" * 63 + "A"}, id="artifact_digest-case"),
        pytest.param({"process_epoch": 8}, id="process_epoch"),
        pytest.param({"process_epoch": 0}, id="process_epoch-is-not-ordinal"),
        pytest.param({"challenge_nonce": "nonce-2"}, id="challenge_nonce"),
    ],
)
def test_binding_mismatch(changes: dict[str, Any]) -> None:
    assert code(statement()) == OK
    assert code(statement(), binding=binding()) == OK
    assert code(statement(), binding=binding(**changes)) == C.BINDING_MISMATCH


def test_binding_mismatch_beats_replay_and_does_not_consume_the_nonce() -> None:
    fence = ecpa.MemoryReplayFence()
    payload, jws = signed(statement())
    wrong = binding(plan_id="plan:other")
    assert code_of(payload, jws, binding=wrong, replay=fence) == C.BINDING_MISMATCH
    assert "nonce-1" not in fence
    assert code_of(payload, jws, binding=binding(), replay=fence) == OK
    assert code_of(payload, jws, binding=wrong, replay=fence) == C.BINDING_MISMATCH
    assert code_of(payload, jws, binding=binding(), replay=fence) == C.REPLAYED_NONCE


# --- step 25: replay ---------------------------------------------------------------------


def test_replay_accepts_a_nonce_once() -> None:
    fence = ecpa.MemoryReplayFence()
    payload, jws = signed(statement())
    assert code_of(payload, jws, replay=fence) == OK
    assert "nonce-1" in fence
    assert code_of(payload, jws, replay=fence) == C.REPLAYED_NONCE
    other, other_jws = signed(statement(challenge_nonce="nonce-2"))
    assert code_of(other, other_jws, replay=fence) == OK
    # a fresh statement (another event) with an accepted nonce is still a replay
    again, again_jws = signed(statement(event="invoked-again"))
    assert code_of(again, again_jws, replay=fence) == C.REPLAYED_NONCE


@pytest.mark.parametrize(
    ("st", "trust", "key", "expected"),
    [
        pytest.param(
            statement(observed_at=N - 70, issued_at=N - 65, expires_at=N - 5),
            None,
            KEY_1,
            C.EXPIRED,
            id="expired",
        ),
        pytest.param(statement(issued_at=N + 9), None, KEY_1, C.NOT_YET_VALID, id="future"),
        pytest.param(statement(expires_at=N + 900), None, KEY_1, C.INVALID_TIME, id="ttl"),
        pytest.param(statement(), None, KEY_2, C.INVALID_SIGNATURE, id="bad-signature"),
        pytest.param(
            statement(), store(trust_entry(enabled=False)), KEY_1, C.TRUST_POLICY, id="disabled-key"
        ),
        pytest.param(statement(issuer="urn:x"), None, KEY_1, C.UNKNOWN_KEY, id="unknown-key"),
    ],
)
def test_refused_statement_leaves_nonce_unconsumed(
    st: dict[str, Any], trust: ecpa.TrustStore | None, key: ecpa.SigningKey, expected: str
) -> None:
    fence = ecpa.MemoryReplayFence()
    assert code(st, trust, key=key, replay=fence, binding=binding()) == expected
    assert len(fence) == 0
    assert code(statement(), replay=fence, binding=binding()) == OK
    assert code(statement(), replay=fence, binding=binding()) == C.REPLAYED_NONCE


# --- the order of steps 13-25 ------------------------------------------------------------


def _ladder() -> list[Any]:
    disabled = store(trust_entry(enabled=False))
    bad_sig = SSEG + "=="
    return [
        # (id, payload, jws, trust, kwargs, expected)
        pytest.param(
            json.dumps(statement(issuer=""), sort_keys=True).encode(),
            None,
            None,
            {},
            C.NONCANONICAL_PAYLOAD,
            id="13-before-14",
        ),
        pytest.param(
            payload_of(statement(issuer="", schema="x")),
            None,
            None,
            {},
            C.INVALID_STATEMENT,
            id="14-before-15",
        ),
        pytest.param(
            payload_of(statement(schema="x", kid="test-key-2")),
            None,
            None,
            {},
            C.WRONG_PROFILE,
            id="15-before-16",
        ),
        pytest.param(
            payload_of(statement(kid="test-key-2", critical_claims=["x"])),
            None,
            None,
            {},
            C.KEY_MISMATCH,
            id="16-before-17",
        ),
        pytest.param(
            payload_of(statement(critical_claims=["x"], issuer="urn:x")),
            None,
            None,
            {},
            C.UNKNOWN_CRITICAL_CLAIM,
            id="17-before-18",
        ),
        pytest.param(
            payload_of(statement(issuer="urn:x")),
            bad_sig,
            None,
            {},
            C.UNKNOWN_KEY,
            id="18-unknown-before-19",
        ),
        pytest.param(GOOD, bad_sig, disabled, {}, C.TRUST_POLICY, id="18-policy-before-19"),
        pytest.param(GOOD, "AAAA==", None, {}, C.MALFORMED_JWS, id="19-before-20"),
        pytest.param(
            payload_of(statement(issued_at=N + 9)),
            "AAAA",
            None,
            {},
            C.INVALID_SIGNATURE,
            id="20-before-21",
        ),
        pytest.param(
            payload_of(statement(observed_at=N + 1, issued_at=N + 1, expires_at=N - 1)),
            None,
            None,
            {},
            C.NOT_YET_VALID,
            id="21-before-22",
        ),
        pytest.param(
            payload_of(statement(observed_at=N - 999, issued_at=N - 998, expires_at=N - 1)),
            None,
            None,
            {},
            C.EXPIRED,
            id="22-before-23",
        ),
        pytest.param(
            payload_of(statement(expires_at=N + 999, plan_id="plan:x")),
            None,
            None,
            {"binding": binding()},
            C.INVALID_TIME,
            id="23-before-24",
        ),
    ]


@pytest.mark.parametrize(("payload", "sseg", "trust", "kwargs", "expected"), _ladder())
def test_steps_in_order(
    payload: bytes,
    sseg: str | None,
    trust: ecpa.TrustStore | None,
    kwargs: dict[str, Any],
    expected: str,
) -> None:
    """Each payload has the defect of one step and of the next one: the first wins."""
    jws = sign_raw(header_bytes(), payload)
    if sseg is not None:
        jws = jws.partition("..")[0] + ".." + sseg
    assert code_of(payload, jws, trust, **kwargs) == expected
