"""Cross-checks of the corpus against independent implementations.

ecpa writes and reads its own corpus, so a shared misreading of RFC 7515 or RFC 8785 would
pass every conformance test. Here two libraries that share no code with ecpa judge the
same bytes:

* joserfc, a JOSE implementation, verifies the JWS of every positive case in its attached
  form ``header.B64U(payload).signature`` (and in its detached form, RFC 7515 Appendix F)
  with the trust key as an OKP JWK, and refuses every signature-level negative;
* rfc8785, used directly, finds every positive payload already canonical.

The cases come from the generator (``upstream_document``), so they run without
``../shared``; the published file itself is checked the same way when it is there.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import rfc8785
from joserfc import jws as jose_jws
from joserfc.errors import (
    BadSignatureError,
    JoseError,
    MissingCritHeaderError,
    SecurityWarning,
    UnsupportedAlgorithmError,
    UnsupportedHeaderError,
)
from joserfc.jwk import OKPKey
from joserfc.registry import HeaderParameter

import ecpa
from ecpa.corpus.generator.upstream import upstream_document
from tests.support import (
    CONFORMANCE,
    KEY_1,
    b64d,
    code_of,
    header_bytes,
    load_json,
    needs_shared,
    sign_raw,
    statement,
)

try:  # the project's own cases, where this checkout has them
    from ecpa.corpus.generator.extended import extended_document
except ModuleNotFoundError as missing:
    if missing.name != "ecpa.corpus.generator.extended":
        raise  # the module is there but broken: fail loudly, never skip its cases
    extended_document = None

OK = "OK"
INVALID_SIGNATURE = ecpa.ErrorCode.INVALID_SIGNATURE.value
PUBLISHED = CONFORMANCE / "upstream-ecpa-0.1" / "attestation-vectors.json"

# joserfc as a strict verifier of this profile: EdDSA only (never "none", never HMAC), the
# profile's ``ecpa_profile`` known (it is listed in ``crit``), every other header member
# outside RFC 7515's registry refused. The size limits are raised to the profile's own
# (16 KiB JWS, 64 KiB payload), so that a long kid is judged on its signature.
JOSE = jose_jws.JWSRegistry(
    header_registry={"ecpa_profile": HeaderParameter("ECPA profile id", "str")},
    algorithms=["EdDSA"],
)
JOSE.max_header_length = 16 * 1024
JOSE.max_signature_length = 16 * 1024
JOSE.max_payload_length = 128 * 1024
# The same, but with joserfc's default algorithm policy (its "recommended" set).
JOSE_DEFAULT_ALGS = jose_jws.JWSRegistry(
    header_registry={"ecpa_profile": HeaderParameter("ECPA profile id", "str")}
)


def _b64(data: bytes) -> str:
    # Encoded here, not with ecpa.profile.b64: the attached form is built independently of ecpa.
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def jose_verify(
    compact: str, x: str, *, detached_payload: bytes | None = None
) -> jose_jws.CompactSignature:
    """joserfc's verdict on a compact JWS with the OKP public key ``x`` (base64url).

    Raises:
        JoseError: joserfc refuses it.
    """
    key = OKPKey.import_key({"kty": "OKP", "crv": "Ed25519", "x": x})
    with warnings.catch_warnings():
        # RFC 9864 deprecates the polymorphic "EdDSA" name; the profile fixes it.
        warnings.simplefilter("ignore", SecurityWarning)
        return jose_jws.deserialize_compact(compact, key, registry=JOSE, payload=detached_payload)


def _corpora() -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield "upstream", upstream_document()
    if extended_document is not None:
        yield "extended", extended_document()


def _keys(doc: Mapping[str, Any], case: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    trust = case.get("trust")
    return list(trust["keys"]) if isinstance(trust, Mapping) else list(doc["keys"])


def _parts(case: Mapping[str, Any]) -> tuple[bytes, str, str]:
    """(payload bytes, header segment, signature segment) of a case."""
    header, middle, signature = case["detached_jws"].split(".")
    assert middle == ""
    return b64d(case["payload_b64"]), header, signature


def _trust_key(doc: Mapping[str, Any], case: Mapping[str, Any]) -> str:
    """``public_key_b64`` of the entry for (statement issuer, header kid)."""
    payload, header, _ = _parts(case)
    issuer = json.loads(payload)["issuer"]
    kid = json.loads(b64d(header))["kid"]
    (entry,) = [e for e in _keys(doc, case) if (e["issuer"], e["kid"]) == (issuer, kid)]
    return str(entry["public_key_b64"])


def _cases(expected: str) -> list[Any]:
    return [
        pytest.param(doc, case, id=f"{name}:{case['id']}")
        for name, doc in _corpora()
        for case in doc["cases"]
        if case["expected"] == expected
    ]


POSITIVES = _cases(OK)
SIGNATURE_NEGATIVES = _cases(INVALID_SIGNATURE)


def test_the_corpora_have_cases_to_cross_check() -> None:
    assert len(POSITIVES) >= 10  # the published corpus alone has 10 positives
    assert len(SIGNATURE_NEGATIVES) >= 2


@pytest.mark.parametrize(("doc", "case"), POSITIVES)
def test_joserfc_verifies_every_positive(doc: Mapping[str, Any], case: Mapping[str, Any]) -> None:
    payload, header, signature = _parts(case)
    x = _trust_key(doc, case)
    attached = jose_verify(f"{header}.{_b64(payload)}.{signature}", x)
    assert attached.payload == payload
    assert attached.headers() == json.loads(b64d(header))
    # The same, detached as ecpa writes it (RFC 7515 Appendix F): joserfc re-inserts it.
    detached = jose_verify(case["detached_jws"], x, detached_payload=payload)
    assert detached.payload == payload


@pytest.mark.parametrize(("doc", "case"), POSITIVES)
def test_rfc8785_finds_every_positive_canonical(
    doc: Mapping[str, Any], case: Mapping[str, Any]
) -> None:
    payload, header, _ = _parts(case)
    assert rfc8785.dumps(json.loads(payload)) == payload
    # The protected header is JCS too (PROFILE §2), and it is the profile's header.
    parsed = json.loads(b64d(header))
    assert rfc8785.dumps(parsed) == b64d(header)
    assert {k: v for k, v in parsed.items() if k != "kid"} == {
        "alg": "EdDSA",
        "crit": ["ecpa_profile"],
        "ecpa_profile": "ecpa-jcs-jws-eddsa/0.1",
        "typ": "application/ecpa-attestation+jws",
    }


@pytest.mark.parametrize(("doc", "case"), SIGNATURE_NEGATIVES)
def test_joserfc_refuses_every_signature_negative(
    doc: Mapping[str, Any], case: Mapping[str, Any]
) -> None:
    payload, header, signature = _parts(case)
    attached = f"{header}.{_b64(payload)}.{signature}"
    # Refused with the key trusted for (issuer, kid): some cases are signed by another key
    # of the corpus under that kid, which is what makes them negatives.
    with pytest.raises(JoseError):
        jose_verify(attached, _trust_key(doc, case))


# --- header-level negatives whose header is still a JOSE header -----------------------------
#
# What joserfc (1.8, the registry above) does with the published header-level negatives,
# recorded when this file was written:
#   negative-wrong-alg (HS256)          UnsupportedAlgorithmError: not in algorithms=["EdDSA"]
#   negative-unknown-critical-header    UnsupportedHeaderError: crit names 'unknown'
#   negative-critical-parameter-missing MissingCritHeaderError: crit names ecpa_profile, absent
#   negative-base64-padding ('=')       DecodeError: joserfc's base64url is strict too
#   negative-standard-base64 ('/')      BadSignatureError: signature segment undecodable
#   negative-crit-nonstring (crit [1])  TypeError, a foreign exception out of joserfc's
#                                       crit check (joserfc's bug, not ecpa's; ecpa gives
#                                       ATTESTATION_UNKNOWN_CRITICAL_HEADER)
#   negative-wrong-type, -wrong-profile-header, -crit-empty, -crit-duplicate, -crit-missing:
#       ACCEPTED: the signature is valid and these are profile rules (typ, ecpa_profile,
#       crit exactly ["ecpa_profile"]), not JOSE ones. ecpa refuses each (steps 5-10).
# alg "none" (below; no published case has it): UnsupportedAlgorithmError, with or without
# a signature; with joserfc's default algorithm policy too ("not recommended"). The HS256
# forgeries keyed with the public key: UnsupportedAlgorithmError here; under the default
# policy, where HS256 is recommended, InvalidKeyTypeError (an OKP key is no HMAC key).


def _case(case_id: str) -> Mapping[str, Any]:
    (case,) = [c for c in upstream_document()["cases"] if c["id"] == case_id]
    return case


def _alg_none_forgeries() -> list[Any]:
    payload = ecpa.canonicalize(statement())
    none_header = _b64(header_bytes(alg="none"))
    hs256_header = _b64(header_bytes(alg="HS256"))
    signing_input = f"{hs256_header}.{_b64(payload)}".encode("ascii")
    # The algorithm-confusion forgery: HMAC keyed with the public key, as a verifier that
    # let the header choose the algorithm would check it.
    confusions = [
        (KEY_1.public_key.raw, "hs256-keyed-with-raw-public-key"),
        (KEY_1.public_key.to_b64().encode(), "hs256-keyed-with-jwk-x"),
    ]
    return [
        pytest.param(payload, none_header, "", id="alg-none-empty-signature"),
        pytest.param(
            payload, *sign_raw(header_bytes(alg="none"), payload).split(".."), id="alg-none-signed"
        ),
        *(
            pytest.param(
                payload,
                hs256_header,
                _b64(hmac.new(secret, signing_input, hashlib.sha256).digest()),
                id=name,
            )
            for secret, name in confusions
        ),
    ]


@pytest.mark.parametrize(("payload", "header", "signature"), _alg_none_forgeries())
def test_alg_none_and_hmac_confusion_refused_by_both(
    payload: bytes, header: str, signature: str
) -> None:
    assert code_of(payload, f"{header}..{signature}") == "ATTESTATION_WRONG_ALGORITHM"
    attached = f"{header}.{_b64(payload)}.{signature}"
    with pytest.raises(UnsupportedAlgorithmError):
        jose_verify(attached, KEY_1.public_key.to_b64())
    key = OKPKey.import_key(KEY_1.public_key.to_jwk())
    with pytest.raises(JoseError):  # joserfc's default algorithm policy refuses them too
        jose_jws.deserialize_compact(attached, key, registry=JOSE_DEFAULT_ALGS)


@pytest.mark.parametrize(
    ("case_id", "refusal"),
    [
        ("negative-signature-tamper", BadSignatureError),
        ("negative-payload-tamper", BadSignatureError),
        ("negative-wrong-alg", UnsupportedAlgorithmError),
        ("negative-unknown-critical-header", UnsupportedHeaderError),
        ("negative-critical-parameter-missing", MissingCritHeaderError),
    ],
)
def test_joserfc_refuses_the_jose_level_negatives(case_id: str, refusal: type[Exception]) -> None:
    case = _case(case_id)
    payload, header, signature = _parts(case)
    assert code_of(payload, case["detached_jws"]) == case["expected"]
    with pytest.raises(refusal):
        jose_verify(f"{header}.{_b64(payload)}.{signature}", KEY_1.public_key.to_b64())


# --- the published file itself ----------------------------------------------------------------


@needs_shared
def test_published_file_cross_checks_with_joserfc_and_rfc8785() -> None:
    doc = load_json(PUBLISHED)
    checked = {OK: 0, INVALID_SIGNATURE: 0}
    for case in doc["cases"]:
        if case["expected"] not in checked:
            continue
        payload, header, signature = _parts(case)
        attached = f"{header}.{_b64(payload)}.{signature}"
        if case["expected"] == OK:
            assert jose_verify(attached, _trust_key(doc, case)).payload == payload, case["id"]
            assert rfc8785.dumps(json.loads(payload)) == payload, case["id"]
        else:
            with pytest.raises(BadSignatureError):
                jose_verify(attached, _trust_key(doc, case))
        checked[case["expected"]] += 1
    assert checked == {OK: 10, INVALID_SIGNATURE: 2}
