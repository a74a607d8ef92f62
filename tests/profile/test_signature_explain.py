"""A signature by another key of the statement's issuer: verification pays one signature
check and gives PROFILE §3 step 20's code; only ``ecpa verify``'s explanation, asked for
after the failure, tries the issuer's other keys (at most 8) to name the one that signed."""

from __future__ import annotations

import pytest

import ecpa
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile import keys
from ecpa.profile.verify import explain_signature_failure
from tests.support import ISSUER, NOW, statement


def _key(n: int) -> ecpa.SigningKey:
    return ecpa.SigningKey.from_seed(bytes([n]) * 32)


def _store(count: int) -> ecpa.TrustStore:
    entries = [
        {
            "issuer": ISSUER,
            "kid": f"key-{n}",
            "public_key_b64": _key(n).public_key.to_b64(),
            "subjects": ["host-runtime"],
            "enabled": True,
            "not_before": 0,
            "not_after": 2**53 - 1,
        }
        for n in range(1, count + 1)
    ]
    return ecpa.TrustStore.from_dict({"schema": ecpa.TRUST_STORE_SCHEMA, "keys": entries})


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = keys.VerifyKey.verify

    def counting(self: keys.VerifyKey, signature: bytes, message: bytes) -> None:
        calls.append(1)
        real(self, signature, message)

    monkeypatch.setattr(keys.VerifyKey, "verify", counting)
    return calls


def test_a_failing_signature_costs_one_check_on_the_verification_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = _store(9)
    signed = ecpa.sign(statement(kid="key-1"), _key(2))  # names key-1, signed by key-2
    calls = _counted(monkeypatch)
    with pytest.raises(EcpaError) as caught:
        ecpa.verify(signed.payload, signed.detached_jws, store, now=NOW)
    assert caught.value.code is ErrorCode.INVALID_SIGNATURE
    assert "key-2" not in caught.value.detail
    assert len(calls) == 1


def test_the_explanation_names_the_key_that_signed() -> None:
    store = _store(3)
    signed = ecpa.sign(statement(kid="key-1"), _key(3))
    with pytest.raises(EcpaError) as caught:
        ecpa.verify(signed.payload, signed.detached_jws, store, now=NOW)
    told = explain_signature_failure(caught.value, signed.payload, signed.detached_jws, store)
    assert told.code is ErrorCode.INVALID_SIGNATURE
    assert "'key-1' (the statement's)" in told.detail
    assert "'key-3' of the same issuer" in told.detail


def test_the_explanation_tries_at_most_8_other_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(20)
    signed = ecpa.sign(statement(kid="key-1"), _key(20))  # the 19th other key: not tried
    with pytest.raises(EcpaError) as caught:
        ecpa.verify(signed.payload, signed.detached_jws, store, now=NOW)
    calls = _counted(monkeypatch)
    told = explain_signature_failure(caught.value, signed.payload, signed.detached_jws, store)
    assert told is caught.value
    assert len(calls) == 8


def test_the_explanation_leaves_other_failures_and_unknown_signers_as_they_are() -> None:
    store = _store(2)
    other = EcpaError(ErrorCode.UNKNOWN_KEY, "no such key")
    signed = ecpa.sign(statement(kid="key-1"), _key(9))  # a key the store does not hold
    assert explain_signature_failure(other, signed.payload, signed.detached_jws, store) is other
    with pytest.raises(EcpaError) as caught:
        ecpa.verify(signed.payload, signed.detached_jws, store, now=NOW)
    told = explain_signature_failure(caught.value, signed.payload, signed.detached_jws, store)
    assert told is caught.value
    garbled = explain_signature_failure(caught.value, b"{", "not a jws", store)
    assert garbled is caught.value
