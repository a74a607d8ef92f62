"""PyJWT as a second JOSE stack that shares no code with ecpa (docs/conformance.md).

PyJWT is the JOSE library most Python users already have. Three checks:

* every positive of both corpora (and of the published file, when ``../shared`` is there),
  its payload reattached as a compact JWS, verifies under PyJWT, with ``ecpa_profile``
  declared as a supported critical header (a ``PyJWS`` subclass: PyJWT refuses a ``crit``
  member it does not know, as RFC 7515 §4.1.11 asks);
* PyJWT signing the JCS payload bytes with the profile's header (sorted keys, compact, its
  JSON encoder told to write UTF-8 as JCS does) produces ecpa.sign's header and signature
  byte for byte, for hypothesis-generated statements (Ed25519 is deterministic);
* the documented difference: PyJWT (through OpenSSL) accepts a JWS signed under a
  small-order public key, which ecpa refuses to load at all (ECPA_INVALID_KEY).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import ecpa
from tests.corpus.test_crosscheck import POSITIVES, _parts, _trust_key
from tests.support import CONFORMANCE, SEED_1, SEED_2, load_json, needs_shared

PUBLISHED = CONFORMANCE / "upstream-ecpa-0.1" / "attestation-vectors.json"
TYP = "application/ecpa-attestation+jws"


class EcpaJWS(jwt.PyJWS):
    """PyJWT's JWS, told that ``ecpa_profile`` is a critical header it understands."""

    _supported_crit = {*jwt.PyJWS._supported_crit, "ecpa_profile"}  # noqa: RUF012


class Utf8Encoder(json.JSONEncoder):
    """PyJWT's header encoder writing UTF-8 (as JCS does), not ``\\uXXXX`` escapes."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["ensure_ascii"] = False
        super().__init__(**kwargs)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def pyjwt_verify(compact: str, public_key_b64: str) -> dict[str, Any]:
    key = Ed25519PublicKey.from_public_bytes(_unb64(public_key_b64))
    result: dict[str, Any] = EcpaJWS().decode_complete(compact, key=key, algorithms=["EdDSA"])
    return result


@pytest.mark.parametrize(("doc", "case"), POSITIVES)
def test_pyjwt_verifies_every_positive(doc: Mapping[str, Any], case: Mapping[str, Any]) -> None:
    payload, header, signature = _parts(case)
    decoded = pyjwt_verify(f"{header}.{_b64(payload)}.{signature}", _trust_key(doc, case))
    assert decoded["payload"] == payload
    assert decoded["header"] == json.loads(_unb64(header))
    assert decoded["header"]["crit"] == ["ecpa_profile"]


def test_pyjwt_alone_refuses_the_profile_header() -> None:
    """Without the subclass, PyJWT refuses the critical ``ecpa_profile``: the subclass is
    what makes the check above meaningful, not a PyJWT that ignores ``crit``."""
    doc, case = POSITIVES[0].values
    payload, header, signature = _parts(case)
    key = Ed25519PublicKey.from_public_bytes(_unb64(_trust_key(doc, case)))
    with pytest.raises(jwt.InvalidTokenError, match="ecpa_profile"):
        jwt.PyJWS().decode_complete(
            f"{header}.{_b64(payload)}.{signature}", key=key, algorithms=["EdDSA"]
        )


@needs_shared
def test_pyjwt_verifies_every_positive_of_the_published_file() -> None:
    doc = load_json(PUBLISHED)
    positives = [c for c in doc["cases"] if c["expected"] == "OK"]
    assert len(positives) == 10
    for case in positives:
        payload, header, signature = _parts(case)
        compact = f"{header}.{_b64(payload)}.{signature}"
        assert pyjwt_verify(compact, _trust_key(doc, case))["payload"] == payload, case["id"]


# --- PyJWT signs as ecpa signs -----------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=24)
DIGEST = st.text("0123456789abcdef", min_size=64, max_size=64).map("sha256:".__add__)
INTS = st.integers(0, 2**53 - 1)


@st.composite
def statements(draw: st.DrawFn) -> dict[str, Any]:
    observed = draw(INTS)
    issued = min(observed + draw(st.integers(0, 300)), 2**53 - 1)
    return {
        "schema": ecpa.STATEMENT_SCHEMA,
        "profile": ecpa.PROFILE_ID,
        **{
            name: draw(TEXT)
            for name in (
                "issuer",
                "kid",
                "subject",
                "plan_id",
                "launch_id",
                "plugin_id",
                "obligation",
                "event",
                "challenge_nonce",
            )
        },
        "artifact_digest": draw(DIGEST),
        "evidence_digest": draw(DIGEST),
        "process": {
            "host": draw(TEXT),
            "role": draw(TEXT),
            "start_identity": draw(TEXT),
            "ordinal": draw(INTS),
            "epoch": draw(INTS),
        },
        "observed_at": observed,
        "issued_at": issued,
        "expires_at": min(issued + draw(st.integers(0, 300)), 2**53 - 1),
        "critical_claims": [],
    }


@settings(max_examples=300, deadline=None)
@given(statement=statements(), seed=st.sampled_from([SEED_1, SEED_2]))
def test_pyjwt_signs_jcs_bytes_as_ecpa_does(statement: dict[str, Any], seed: bytes) -> None:
    signed = ecpa.sign(statement, ecpa.SigningKey.from_seed(seed))
    compact = EcpaJWS().encode(
        signed.payload,  # the JCS bytes, as they are
        Ed25519PrivateKey.from_private_bytes(seed),
        algorithm="EdDSA",
        headers={
            "crit": ["ecpa_profile"],
            "ecpa_profile": ecpa.PROFILE_ID,
            "kid": statement["kid"],
            "typ": TYP,
        },
        json_encoder=Utf8Encoder,
        sort_headers=True,
    )
    header, payload, signature = compact.split(".")
    assert _unb64(payload) == signed.payload
    assert f"{header}..{signature}" == signed.detached_jws  # header and signature, byte for byte


# --- the documented difference: small-order keys ------------------------------------------------

IDENTITY = bytes([1]) + bytes(31)  # the neutral point: order 1


def test_pyjwt_accepts_a_forgery_under_a_small_order_key_that_ecpa_refuses_to_load() -> None:
    """Under the neutral point as public key, R = the neutral point and S = 0 satisfy the
    verification equation for every message: PyJWT (OpenSSL) accepts that "signature".
    ecpa refuses such a key in a trust store and as a VerifyKey (PROFILE §5)."""
    header = _b64(json.dumps({"alg": "EdDSA", "kid": "k", "typ": TYP}).encode())
    forged = f"{header}.{_b64(b'any payload at all')}.{_b64(IDENTITY + bytes(32))}"
    decoded = jwt.PyJWS().decode_complete(
        forged, key=Ed25519PublicKey.from_public_bytes(IDENTITY), algorithms=["EdDSA"]
    )
    assert decoded["payload"] == b"any payload at all"
    with pytest.raises(ecpa.EcpaError) as err:
        ecpa.VerifyKey.from_bytes(IDENTITY)
    assert err.value.code is ecpa.ErrorCode.INVALID_KEY
