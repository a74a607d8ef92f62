"""The verifier: PROFILE §3, every check in its order, the first failure wins."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile import jws
from ecpa.profile.fast import canonical_statement
from ecpa.profile.fence import ReplayFence
from ecpa.profile.json.jcs import matches_canonical
from ecpa.profile.json.strict_json import parse_object
from ecpa.profile.statement import Statement, check_statement
from ecpa.profile.trust import TrustedKey, TrustStore
from ecpa.shapes.rules import COUNT, TEXT
from ecpa.shapes.shape import Shaped, frozen_instance, member

__all__ = [
    "Binding",
    "Policy",
    "Verified",
    "check_clock",
    "explain_signature_failure",
    "verify",
    "verify_encoded",
]


class Policy(Shaped):
    """Time policy, in whole seconds (PROFILE §3 steps 21-23). Defaults: 0, 300, 300."""

    clock_skew: int = member(COUNT, default=0)
    max_ttl: int = member(COUNT, default=300)
    max_observation_age: int = member(COUNT, default=300)


class Binding(Shaped):
    """The six values a statement must carry to count for this launch (PROFILE §3 step 24)."""

    plan_id: str = member(TEXT)
    launch_id: str = member(TEXT)
    plugin_id: str = member(TEXT)
    artifact_digest: str = member(TEXT)
    process_epoch: int = member(COUNT)
    challenge_nonce: str = member(TEXT)

    def mismatches(self, statement: Statement) -> list[str]:
        """Names of the binding values ``statement`` does not carry."""
        found = {
            "plan_id": statement.plan_id,
            "launch_id": statement.launch_id,
            "plugin_id": statement.plugin_id,
            "artifact_digest": statement.artifact_digest,
            "process_epoch": statement.process.epoch,
            "challenge_nonce": statement.challenge_nonce,
        }
        return [name for name, value in found.items() if getattr(self, name) != value]


DEFAULT_POLICY = Policy()


@dataclass(frozen=True)
class Verified:
    """A statement that passed every check, beside the exact bytes it was verified from."""

    statement: Statement
    payload: bytes
    header: dict[str, Any]
    trusted_key: TrustedKey


def _as_bytes(payload: Any) -> bytes:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, (bytearray, memoryview)):
        return bytes(payload)
    raise TypeError(f"payload must be bytes, not {type(payload).__name__}")


def _as_text(detached_jws: Any) -> str | bytes:
    if isinstance(detached_jws, (str, bytes)):
        return detached_jws
    if isinstance(detached_jws, (bytearray, memoryview)):
        return bytes(detached_jws)
    raise TypeError(f"detached_jws must be str or bytes, not {type(detached_jws).__name__}")


def _text_of(raw: bytes) -> str:
    # Latin-1 maps each byte to one character and never fails: a non-ASCII byte then fails
    # strict base64url at the step of the segment it is in (3 or 19), exactly as the same
    # character would in a str, so bytes and text input give the same codes.
    return raw.decode("latin-1")


def _check_times(st: Statement, now: int, policy: Policy) -> None:
    skew = policy.clock_skew
    if st.issued_at > now + skew or st.observed_at > now + skew:  # step 21
        which = "issued_at" if st.issued_at > now + skew else "observed_at"
        raise EcpaError(
            ErrorCode.NOT_YET_VALID,
            f"expected {which} <= now + skew = {now + skew}, found {getattr(st, which)}",
        )
    if st.expires_at < now - skew:  # step 22: expires_at == now is still valid
        raise EcpaError(
            ErrorCode.EXPIRED,
            f"expected expires_at >= now - skew = {now - skew}, found {st.expires_at}",
        )
    if not st.observed_at <= st.issued_at <= st.expires_at:  # step 23
        raise EcpaError(
            ErrorCode.INVALID_TIME,
            "expected observed_at <= issued_at <= expires_at, found "
            f"{st.observed_at}, {st.issued_at}, {st.expires_at}",
        )
    if st.expires_at - st.issued_at > policy.max_ttl:
        raise EcpaError(
            ErrorCode.INVALID_TIME,
            f"expected expires_at - issued_at <= max TTL {policy.max_ttl}, "
            f"found {st.expires_at - st.issued_at}",
        )
    if now - st.observed_at > policy.max_observation_age + skew:
        raise EcpaError(
            ErrorCode.INVALID_TIME,
            f"expected now - observed_at <= max observation age + skew = "
            f"{policy.max_observation_age + skew}, found {now - st.observed_at}",
        )


def check_clock(
    statement: Statement, trusted: TrustedKey, now: int, policy: Policy = DEFAULT_POLICY
) -> None:
    """The checks of PROFILE §3 that read the clock, in their order: step 18's after the
    lookup (``trusted`` enabled for the subject, ``now`` in its window) and steps 21-23.
    For a statement that passed every other check with ``trusted`` at another time (a
    verification remembered): whichever of these fails first is the first check
    :func:`verify` fails at ``now``, as every other check reads only the bytes and the key.

    Raises:
        EcpaError: ``ATTESTATION_TRUST_POLICY`` or the codes of steps 21-23.
    """
    trusted.check(statement.subject, now)
    _check_times(statement, now, policy)


def verify(
    payload: bytes,
    detached_jws: str,
    trust_store: TrustStore,
    *,
    now: int,
    policy: Policy = DEFAULT_POLICY,
    binding: Binding | None = None,
    replay: ReplayFence | None = None,
) -> Verified:
    """Verify a detached JWS over ``payload`` by PROFILE §3 at time ``now`` (Unix seconds).

    ``binding``, when given, must match the statement (step 24); ``replay``, when given,
    accepts each ``challenge_nonce`` once and records it only when everything else passed.

    Returns:
        :class:`Verified`, holding the statement and the exact payload bytes.

    Raises:
        EcpaError: the code of the first failed check, for any input bytes at all.
        TypeError: ``payload`` is not bytes, ``detached_jws`` not str or bytes, ``now`` not int.
    """
    return verify_encoded(payload, None, detached_jws, trust_store, now, policy, binding, replay)


def verify_encoded(
    payload: bytes,
    payload_b64: bytes | None,
    detached_jws: str,
    trust_store: TrustStore,
    now: int,
    policy: Policy,
    binding: Binding | None,
    replay: ReplayFence | None,
) -> Verified:
    """:func:`verify`, given also ``payload_b64``: the payload's strict base64url as ASCII
    bytes when the caller holds it already (a record just decoded from that very text,
    whose strictness makes it the one encoding of ``payload``), else None. Not for text of
    any other origin: the signature is checked over it, the statement read from ``payload``.
    """
    payload = _as_bytes(payload)
    text = _as_text(detached_jws)
    if not isinstance(now, int) or isinstance(now, bool):
        raise TypeError(f"now must be an int (Unix seconds), not {type(now).__name__}")
    jws.check_sizes(text, payload)  # step 1, before any decoding or parsing
    if isinstance(text, bytes):
        text = _text_of(text)
    header_b64, signature_b64 = jws.split_detached(text)  # step 2
    _, header = jws.parse_header(header_b64)  # steps 3-11
    kid: str = header["kid"]
    # Steps 12-17 at once for the canonical form of a valid statement (ecpa.profile.fast);
    # anything else takes them one by one, and the first that fails names the code.
    statement = canonical_statement(payload, kid)
    if statement is None:
        obj = parse_object(payload, what="payload")  # step 12
        if not matches_canonical(payload, obj):  # step 13: bytes == JCS(parsed), as rfc8785
            raise EcpaError(
                ErrorCode.NONCANONICAL_PAYLOAD,
                "expected the payload bytes to be their own RFC 8785 canonical form, "
                "found other bytes",
            )
        statement = check_statement(obj, header_kid=kid)  # steps 14-17
    trusted = trust_store.lookup(statement.issuer, kid)  # step 18
    if trusted is None:
        raise EcpaError(
            ErrorCode.UNKNOWN_KEY,
            f"expected a trusted key for issuer {statement.issuer!r} and kid {kid!r}, found none",
        )
    trusted.check(statement.subject, now)
    signature = jws.signature_bytes(signature_b64)  # step 19
    if payload_b64 is None:
        signing_input = jws.signing_input(header_b64, payload)
    else:
        signing_input = b".".join((header_b64.encode("ascii"), payload_b64))
    trusted.key.verify(signature, signing_input)  # step 20
    _check_times(statement, now, policy)  # steps 21-23
    if binding is not None and (  # step 24: the six values at once, then each by name
        binding.plan_id,
        binding.launch_id,
        binding.plugin_id,
        binding.artifact_digest,
        binding.process_epoch,
        binding.challenge_nonce,
    ) != (
        statement.plan_id,
        statement.launch_id,
        statement.plugin_id,
        statement.artifact_digest,
        statement.process.epoch,
        statement.challenge_nonce,
    ):
        wrong = binding.mismatches(statement)
        if wrong:
            raise EcpaError(
                ErrorCode.BINDING_MISMATCH,
                f"expected the statement bound to this launch, found other {', '.join(wrong)}",
            )
    if replay is not None:  # step 25: recorded atomically with acceptance, nothing after
        replay.check_and_record(statement.challenge_nonce, expires_at=statement.expires_at)
    return frozen_instance(
        Verified,
        {"statement": statement, "payload": payload, "header": header, "trusted_key": trusted},
    )


#: Other keys of the statement's issuer tried when step 20 fails, to name the one that signed.
_OTHER_KEYS_TRIED = 8


def explain_signature_failure(
    failed: EcpaError, payload: bytes, detached_jws: str, store: TrustStore
) -> EcpaError:
    """For a person reading ``ecpa verify``'s answer, never on a judging path: ``failed``,
    unless it is PROFILE §3 step 20's ``ATTESTATION_INVALID_SIGNATURE`` and another key
    ``store`` trusts for the statement's issuer made the signature (a statement naming one
    kid, signed with the key of another), which the detail then names beside the statement's
    kid; the code is the same. At most :data:`_OTHER_KEYS_TRIED` other keys are tried.
    Never raises."""
    if failed.code is not ErrorCode.INVALID_SIGNATURE:
        return failed
    try:
        header_b64, signature_b64 = jws.split_detached(detached_jws)
        _, header = jws.parse_header(header_b64)
        kid = header["kid"]
        issuer = parse_object(payload, what="payload").get("issuer")
        signature = jws.signature_bytes(signature_b64)
    except EcpaError:
        return failed
    signing_input = jws.signing_input(header_b64, payload)
    trusted = store.lookup(issuer, kid) if isinstance(issuer, str) else None
    others = (t for t in store if t.entry.issuer == issuer and t is not trusted)
    for other in itertools.islice(others, _OTHER_KEYS_TRIED):
        try:
            other.key.verify(signature, signing_input)
        except EcpaError:
            continue
        return EcpaError(
            ErrorCode.INVALID_SIGNATURE,
            f"expected a signature by the key of kid {kid!r} (the statement's), found one by "
            f"the key of kid {other.entry.kid!r} of the same issuer",
        )
    return failed
