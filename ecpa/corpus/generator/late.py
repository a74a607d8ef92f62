"""The project's own corpus cases for PROFILE §3 steps 18-25: trust lookup and policy, the
signature segment and signature, time, binding and replay.

The cases with a binding share one replay fence, in file order (PROFILE §3): every nonce
below is used by one case only, except in the ``x-replay-*`` sequences, which show that a
refused statement (binding mismatch, expired, bad signature) leaves its nonce unconsumed.
"""

from __future__ import annotations

from typing import Any

from ecpa.corpus.generator.kit import (
    ISSUER,
    KEYS,
    MAX_SAFE,
    NOW,
    OK,
    XCase,
    bind,
    entry,
    nonce_whose_signature_has,
    on_signature,
    on_signature_segment,
    st,
    store,
    with_trailing_bit,
)
from ecpa.errors import ErrorCode as E
from ecpa.profile import jws
from ecpa.profile.json.jcs import canonicalize

__all__ = ["late_cases"]

N = NOW
L = 2**252 + 27742317777372353535851937790883648493  # the order of the Ed25519 base point
OTHER = "urn:ecpa:issuer:other"
PAD = on_signature_segment(lambda s: s + "==")


def _s_plus_l(signature: bytes) -> bytes:
    """R || (S + L): the same signature in the malleable, non-canonical form."""
    s = int.from_bytes(signature[32:], "little") + L
    return signature[:32] + s.to_bytes(32, "little")


def _flip_last(signature: bytes) -> bytes:
    return signature[:-1] + bytes([signature[-1] ^ 0x80])


def _over_other_header(signature: bytes) -> bytes:
    """test-key-1's signature of the base payload under the test-key-2 header segment."""
    other = jws.encode_header("test-key-2")
    return KEYS[1].sign(jws.signing_input(other, canonicalize(st())))


def _times(observed: int, issued: int, expires: int, nonce: str | None = None) -> dict[str, Any]:
    changes: dict[str, Any] = {"observed_at": observed, "issued_at": issued, "expires_at": expires}
    if nonce is not None:
        changes["challenge_nonce"] = nonce
    return st(**changes)


_X = XCase


def _trust() -> list[XCase]:
    def window(start: int, end: int) -> dict[str, Any]:
        return store(entry(not_before=start, not_after=end))

    # fmt: off
    return [
        _X("x-trust-now-is-not-before", "positive", 18, OK, "now == the key's not_before",
           st(challenge_nonce="x-nonce-not-before"), trust=window(N, MAX_SAFE)),
        _X("x-trust-now-is-not-after", "positive", 18, OK, "now == the key's not_after",
           st(challenge_nonce="x-nonce-not-after"), trust=window(0, N)),
        _X("x-trust-one-second-window", "positive", 18, OK,
           "not_before == not_after == now", st(challenge_nonce="x-nonce-one-second"),
           trust=window(N, N)),
        _X("x-trust-subject-among-several", "positive", 18, OK,
           "subject listed second among the key's subjects",
           st(challenge_nonce="x-nonce-subjects"),
           trust=store(entry(subjects=["host-admin", "host-runtime"]))),
        _X("x-trust-not-yet", "trust-policy", 18, E.TRUST_POLICY,
           "now one second before the key's not_before", trust=window(N + 1, MAX_SAFE)),
        _X("x-trust-retired", "trust-policy", 18, E.TRUST_POLICY,
           "now one second after the key's not_after", trust=window(0, N - 1)),
        _X("x-trust-disabled", "trust-policy", 18, E.TRUST_POLICY,
           "the key's entry has enabled false", trust=store(entry(enabled=False))),
        _X("x-trust-disabled-key-2", "trust-policy", 18, E.TRUST_POLICY,
           "test-key-2 signs; its entry is disabled, test-key-1's is not",
           st(kid="test-key-2"), key=2,
           trust=store(entry(), entry(number=2, enabled=False))),
        _X("x-trust-subject-case", "trust-policy", 18, E.TRUST_POLICY,
           "subject 'Host-runtime'; the key lists 'host-runtime'", st(subject="Host-runtime")),
        _X("x-trust-unknown-kid", "key", 18, E.UNKNOWN_KEY,
           "kid test-key-3 (statement and header): no entry", st(kid="test-key-3")),
        _X("x-trust-kid-of-other-issuer", "key", 18, E.UNKNOWN_KEY,
           "test-key-2 is trusted for another issuer only", st(kid="test-key-2"), key=2,
           trust=store(entry(), entry(OTHER, 2))),
        _X("x-trust-issuer-case", "key", 18, E.UNKNOWN_KEY,
           "issuer in another case: names compare exactly", st(issuer=ISSUER.upper())),
        _X("x-trust-empty-store", "key", 18, E.UNKNOWN_KEY,
           "a trust store with no keys", trust=store()),
        _X("x-order-18-19", "order", 18, E.UNKNOWN_KEY,
           "an untrusted issuer and a padded signature segment",
           st(issuer="urn:ecpa:issuer:unknown"), after=PAD),
        _X("x-order-18-policy-19", "order", 18, E.TRUST_POLICY,
           "a disabled key and a padded signature segment", after=PAD,
           trust=store(entry(enabled=False))),
    ]
    # fmt: on


def _signature() -> list[XCase]:
    url = st(challenge_nonce=nonce_whose_signature_has("-_", "x-nonce-signature-alphabet"))
    # fmt: off
    return [
        _X("x-b64-sig-url-alphabet", "positive", 19, OK,
           "a signature segment holding both '-' and '_'", url),
        _X("x-b64-sig-pad-2", "base64url", 19, E.MALFORMED_JWS,
           "'==' appended to the signature segment", after=PAD),
        _X("x-b64-sig-space", "base64url", 19, E.MALFORMED_JWS,
           "a space inside the signature segment",
           after=on_signature_segment(lambda s: s[:40] + " " + s[40:])),
        _X("x-b64-sig-newline", "base64url", 19, E.MALFORMED_JWS,
           "a newline ending the signature segment",
           after=on_signature_segment(lambda s: s + "\n")),
        _X("x-b64-sig-4k+1", "base64url", 19, E.MALFORMED_JWS,
           "signature segment cut to length 4k+1", after=on_signature_segment(lambda s: s[:-1])),
        _X("x-b64-sig-trailing-bits", "base64url", 19, E.MALFORMED_JWS,
           "signature segment whose last character has a trailing bit set",
           after=on_signature_segment(with_trailing_bit)),
        _X("x-b64-sig-plus", "base64url", 19, E.MALFORMED_JWS,
           "the url-alphabet case's signature with '+' for '-'", url,
           after=on_signature_segment(lambda s: s.replace("-", "+"))),
        _X("x-b64-sig-non-ascii", "base64url", 19, E.MALFORMED_JWS,
           "an 'é' in place of a signature segment character",
           after=on_signature_segment(lambda s: s[:10] + "\u00e9" + s[11:])),
        _X("x-order-19-20", "order", 19, E.MALFORMED_JWS,
           "a wrong signature (bit flipped) and '==' after its segment",
           after=lambda parts: PAD(on_signature(_flip_last)(parts))),
        _X("x-sig-key-2", "positive", 20, OK,
           "a second valid signature: test-key-2 signs under kid test-key-2",
           st(kid="test-key-2", challenge_nonce="x-nonce-key-2-signs"), key=2),
        _X("x-sig-63-bytes", "signature", 20, E.INVALID_SIGNATURE,
           "the signature without its last byte (63 bytes)",
           after=on_signature(lambda s: s[:63])),
        _X("x-sig-65-bytes", "signature", 20, E.INVALID_SIGNATURE,
           "the signature and a zero byte (65 bytes)",
           after=on_signature(lambda s: s + b"\x00")),
        _X("x-sig-0-bytes", "signature", 20, E.INVALID_SIGNATURE,
           "an empty signature segment (0 bytes)", after=on_signature(lambda s: b"")),
        _X("x-sig-zeros", "signature", 20, E.INVALID_SIGNATURE, "64 zero bytes",
           after=on_signature(lambda s: bytes(64))),
        _X("x-sig-flip-last-bit", "signature", 20, E.INVALID_SIGNATURE,
           "the top bit of the last signature byte flipped", after=on_signature(_flip_last)),
        _X("x-sig-s-plus-l", "signature", 20, E.INVALID_SIGNATURE,
           "S replaced by S + L: the malleable, non-canonical form of the same signature",
           after=on_signature(_s_plus_l)),
        _X("x-sig-other-key", "signature", 20, E.INVALID_SIGNATURE,
           "test-key-2 signs under kid test-key-1", key=2),
        _X("x-sig-other-header", "signature", 20, E.INVALID_SIGNATURE,
           "signed over the test-key-2 header segment, sent with test-key-1's",
           after=on_signature(_over_other_header)),
        _X("x-order-20-21", "order", 20, E.INVALID_SIGNATURE,
           "test-key-2 signs under kid test-key-1, and issued_at is 9 s after now",
           st(issued_at=N + 9), key=2),
    ]
    # fmt: on


def _time() -> list[XCase]:
    skew: dict[str, int] = {"clock_skew": 5}
    age10_skew5 = {"max_observation_age": 10, "clock_skew": 5}
    # fmt: off
    return [
        _X("x-time-issued-now", "positive", 21, OK, "issued_at == now",
           _times(N - 2, N, N + 60, "x-nonce-issued-now")),
        _X("x-time-skew-issued-now+5", "positive", 21, OK, "issued_at == now + skew 5",
           _times(N - 2, N + 5, N + 60, "x-nonce-skew-issued"), policy=skew),
        _X("x-time-skew-observed-now+5", "positive", 21, OK,
           "observed_at == issued_at == now + skew 5",
           _times(N + 5, N + 5, N + 60, "x-nonce-skew-observed"), policy=skew),
        _X("x-time-issued-now+1", "freshness", 21, E.NOT_YET_VALID, "issued_at now + 1",
           _times(N - 2, N + 1, N + 60)),
        _X("x-time-observed-now+1", "freshness", 21, E.NOT_YET_VALID,
           "observed_at now + 1 (issued_at now)", _times(N + 1, N, N + 60)),
        _X("x-time-skew-issued-now+6", "freshness", 21, E.NOT_YET_VALID,
           "issued_at now + 6 with skew 5", _times(N - 2, N + 6, N + 60), policy=skew),
        _X("x-time-observed-max-safe", "freshness", 21, E.NOT_YET_VALID,
           "observed_at 2**53-1: a valid integer, far in the future",
           _times(MAX_SAFE, N - 1, N + 60)),
        _X("x-order-21-22", "order", 21, E.NOT_YET_VALID,
           "observed_at and issued_at now + 1, expires_at now - 1", _times(N + 1, N + 1, N - 1)),
        _X("x-time-expires-now", "positive", 22, OK, "expires_at == now is still valid",
           _times(N - 2, N - 1, N, "x-nonce-expires-now")),
        _X("x-time-skew-expires-now-5", "positive", 22, OK, "expires_at == now - skew 5",
           _times(N - 7, N - 6, N - 5, "x-nonce-skew-expires"), policy=skew),
        _X("x-time-now-max-safe", "positive", 22, OK,
           "now 2**53-1 and expires_at 2**53-1 (the key's not_after)",
           _times(MAX_SAFE - 2, MAX_SAFE - 1, MAX_SAFE, "x-nonce-max-now"), now=MAX_SAFE),
        _X("x-time-skew-expires-now-6", "freshness", 22, E.EXPIRED,
           "expires_at now - 6 with skew 5", _times(N - 8, N - 7, N - 6), policy=skew),
        _X("x-time-expired-at-zero", "freshness", 22, E.EXPIRED,
           "all three times 0", _times(0, 0, 0)),
        _X("x-order-22-23", "order", 22, E.EXPIRED,
           "expires_at now - 1 with a TTL of 997 s and an age of 999 s",
           _times(N - 999, N - 998, N - 1)),
        _X("x-time-all-equal", "positive", 23, OK, "observed_at == issued_at == expires_at == now",
           _times(N, N, N, "x-nonce-all-equal")),
        _X("x-time-all-zero-at-zero", "positive", 23, OK, "now 0 and all three times 0",
           _times(0, 0, 0, "x-nonce-zero"), now=0),
        _X("x-time-ttl-300", "positive", 23, OK, "expires_at - issued_at == max TTL 300",
           _times(N - 2, N - 1, N + 299, "x-nonce-ttl-300")),
        _X("x-time-ttl-60-of-60", "positive", 23, OK, "TTL 60 with max_ttl 60",
           _times(N - 2, N - 1, N + 59, "x-nonce-ttl-60"), policy={"max_ttl": 60}),
        _X("x-time-ttl-0-of-0", "positive", 23, OK, "TTL 0 with max_ttl 0",
           _times(N - 2, N, N, "x-nonce-ttl-0"), policy={"max_ttl": 0}),
        _X("x-time-age-300", "positive", 23, OK, "now - observed_at == max age 300",
           _times(N - 300, N - 1, N + 60, "x-nonce-age-300")),
        _X("x-time-skew-age-305", "positive", 23, OK, "observation age 305 == 300 + skew 5",
           _times(N - 305, N - 1, N + 60, "x-nonce-age-305"), policy=skew),
        _X("x-time-age-10-of-10", "positive", 23, OK, "age 10 with max_observation_age 10",
           _times(N - 10, N - 1, N + 60, "x-nonce-age-10"), policy={"max_observation_age": 10}),
        _X("x-time-skew-ttl-300", "positive", 23, OK, "TTL 300 with skew 5",
           _times(N - 2, N - 1, N + 299, "x-nonce-skew-ttl-300"), policy=skew),
        _X("x-time-age-15-of-10-skew-5", "positive", 23, OK,
           "age 15 == max_observation_age 10 + skew 5",
           _times(N - 15, N - 1, N + 60, "x-nonce-age-15"), policy=age10_skew5),
        _X("x-time-ttl-301", "freshness", 23, E.INVALID_TIME, "TTL 301, max 300",
           _times(N - 2, N - 1, N + 300)),
        _X("x-time-skew-ttl-301", "freshness", 23, E.INVALID_TIME,
           "TTL 301 with skew 5: skew does not widen the TTL", _times(N - 2, N - 1, N + 300),
           policy=skew),
        _X("x-time-ttl-61-of-60", "freshness", 23, E.INVALID_TIME, "TTL 61 with max_ttl 60",
           _times(N - 2, N - 1, N + 60), policy={"max_ttl": 60}),
        _X("x-time-ttl-1-of-0", "freshness", 23, E.INVALID_TIME, "TTL 1 with max_ttl 0",
           _times(N - 2, N, N + 1), policy={"max_ttl": 0}),
        _X("x-time-age-301", "freshness", 23, E.INVALID_TIME, "observation age 301, max 300",
           _times(N - 301, N - 1, N + 60)),
        _X("x-time-skew-age-306", "freshness", 23, E.INVALID_TIME,
           "observation age 306 with skew 5", _times(N - 306, N - 1, N + 60), policy=skew),
        _X("x-time-age-11-of-10", "freshness", 23, E.INVALID_TIME,
           "age 11 with max_observation_age 10", _times(N - 11, N - 1, N + 60),
           policy={"max_observation_age": 10}),
        _X("x-time-age-16-of-10-skew-5", "freshness", 23, E.INVALID_TIME,
           "age 16 with max_observation_age 10 and skew 5", _times(N - 16, N - 1, N + 60),
           policy=age10_skew5),
        _X("x-time-issued-after-expires", "freshness", 23, E.INVALID_TIME,
           "issued_at now + 3 after expires_at now + 2 (skew 5 passes steps 21-22)",
           _times(N - 10, N + 3, N + 2), policy=skew),
        _X("x-time-observed-after-issued", "freshness", 23, E.INVALID_TIME,
           "observed_at now - 1 after issued_at now - 2", _times(N - 1, N - 2, N + 60)),
    ]
    # fmt: on


def _binding_and_replay() -> list[XCase]:
    def mismatch(name: str, why: str, **changes: Any) -> XCase:
        nonce = f"x-nonce-mismatch-{name}"
        statement_changes = {k: v for k, v in changes.items() if not k.startswith("bind_")}
        binding_changes = {k[5:]: v for k, v in changes.items() if k.startswith("bind_")}
        return _X(f"x-bind-mismatch-{name}", "binding", 24, E.BINDING_MISMATCH, why,
                  st(challenge_nonce=nonce, **statement_changes),
                  binding=bind(nonce, **binding_changes))  # fmt: skip

    kept = "x-nonce-kept"
    # fmt: off
    return [
        _X("x-order-23-24", "order", 23, E.INVALID_TIME,
           "TTL 999 s and plan_id other than bound", _times(N - 2, N - 1, N + 998)
           | {"plan_id": "plan:other", "challenge_nonce": "x-nonce-23-24"},
           binding=bind("x-nonce-23-24")),
        _X("x-bind-exact", "binding", 24, OK, "all six values equal the binding",
           st(challenge_nonce="x-nonce-bind-exact"), binding=bind("x-nonce-bind-exact")),
        _X("x-bind-epoch-max-safe", "binding", 24, OK, "process.epoch 2**53-1, bound so",
           st(process__epoch=MAX_SAFE, challenge_nonce="x-nonce-bind-max"),
           binding=bind("x-nonce-bind-max", process_epoch=MAX_SAFE)),
        mismatch("plan_id", "plan_id other than bound; the nonce matches",
                 plan_id="plan:sha256:" + "9" * 64),
        mismatch("launch_id", "launch_id 'launch-2'; the binding says launch-1",
                 launch_id="launch-2"),
        mismatch("plugin_id", "plugin_id other than bound", plugin_id="plugin:sha256:" + "9" * 64),
        mismatch("artifact_digest", "the binding's artifact_digest in uppercase hex",
                 bind_artifact_digest="sha256:" + "3" * 63 + "A"),
        mismatch("process_epoch", "binding process_epoch 0: that is the ordinal, epoch is 7",
                 bind_process_epoch=0),
        mismatch("challenge_nonce", "the binding expects another nonce",
                 bind_challenge_nonce="x-nonce-expected"),
        _X("x-replay-mismatch-keeps-nonce", "replay", 24, E.BINDING_MISMATCH,
           "launch_id 'launch-2' with nonce x-nonce-kept: refused, the nonce not consumed",
           st(launch_id="launch-2", challenge_nonce=kept), binding=bind(kept)),
        _X("x-replay-kept-nonce-accepted", "replay", 25, OK,
           "x-nonce-kept, correctly bound, after the mismatch: first acceptance",
           st(challenge_nonce=kept), binding=bind(kept)),
        _X("x-replay-kept-nonce-again", "replay", 25, E.REPLAYED_NONCE,
           "the previous case again: x-nonce-kept was accepted", st(challenge_nonce=kept),
           binding=bind(kept)),
        _X("x-order-24-25", "order", 24, E.BINDING_MISMATCH,
           "launch_id 'launch-2' with the accepted nonce x-nonce-kept: binding is checked first",
           st(launch_id="launch-2", challenge_nonce=kept), binding=bind(kept)),
        _X("x-replay-other-statement", "replay", 25, E.REPLAYED_NONCE,
           "another statement (event 'invoked-again') with the accepted x-nonce-kept",
           st(event="invoked-again", challenge_nonce=kept), binding=bind(kept)),
        _X("x-replay-other-key", "replay", 25, E.REPLAYED_NONCE,
           "test-key-2 signs a statement with the accepted x-nonce-kept",
           st(kid="test-key-2", challenge_nonce=kept), key=2, binding=bind(kept)),
        _X("x-replay-expired-keeps-nonce", "replay", 22, E.EXPIRED,
           "an expired statement with x-nonce-late: refused, the nonce not consumed",
           _times(N - 70, N - 65, N - 5, "x-nonce-late"), binding=bind("x-nonce-late")),
        _X("x-replay-late-nonce-accepted", "replay", 25, OK,
           "x-nonce-late, fresh, after the expired case", st(challenge_nonce="x-nonce-late"),
           binding=bind("x-nonce-late")),
        _X("x-replay-bad-signature-keeps-nonce", "replay", 20, E.INVALID_SIGNATURE,
           "test-key-2 signs under kid test-key-1 with x-nonce-forged: the nonce not consumed",
           st(challenge_nonce="x-nonce-forged"), key=2, binding=bind("x-nonce-forged")),
        _X("x-replay-forged-nonce-accepted", "replay", 25, OK,
           "x-nonce-forged, validly signed, after the forgery",
           st(challenge_nonce="x-nonce-forged"), binding=bind("x-nonce-forged")),
    ]
    # fmt: on


def late_cases() -> list[XCase]:
    """Steps 18-25 in step order; the replay sequences in the order they must run."""
    return [*_trust(), *_signature(), *_time(), *_binding_and_replay()]
