"""The published ECPA 0.1 corpus, rebuilt from recipes (STYLE rule 7, PROFILE §3 last paragraph).

``upstream-ecpa-0.1/attestation-vectors.json`` is the corpus of the vLLM-HUST extension
manager. :func:`upstream_document` makes it again from one base statement and one recipe per
case, with this library's JCS, protected header, signing input and the TEST keys. Ed25519 is
deterministic, so the same recipe always gives the same bytes, and a test compares the result
with the published file byte for byte. Only statement values (ids, nonces, issuers, times) are
written here; every payload, header and signature is computed.

The keys are TEST ONLY: their seeds are public.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ecpa.errors import ErrorCode as E
from ecpa.profile import jws
from ecpa.profile.b64 import b64u_decode, b64u_encode
from ecpa.profile.json.jcs import canonicalize
from ecpa.profile.keys import SigningKey
from ecpa.profile.statement import PROFILE_ID, STATEMENT_SCHEMA

__all__ = ["upstream_document"]

VECTORS_SCHEMA = "ecpa-attestation-vectors/0.1"
NOW = 1_800_000_000  # every case runs at this time
MAX_SAFE = 2**53 - 1
SEEDS = {1: bytes(range(32)), 2: bytes(range(32, 64))}  # test-key-1, test-key-2: TEST ONLY
OK: Literal["OK"] = "OK"

ISSUER = "urn:ecpa:issuer:vllm-hust-host-a"
DECOMPOSED = "urn:ecpa:issuer:host-e\u0301"  # e + COMBINING ACUTE ACCENT
NFC = "urn:ecpa:issuer:host-\u00e9"  # the same text, precomposed: another issuer (PROFILE §1)
PAIR = "urn:ecpa:issuer:host-\U0001f600"  # outside the BMP: a surrogate pair in UTF-16
NONFINITE = "urn:ecpa:issuer:NaN-Infinity"  # the words are text inside a string (PROFILE §4)

#: The trust entries of the document's ``keys``: (issuer, key number).
TRUSTED = ((ISSUER, 1), (ISSUER, 2), (DECOMPOSED, 1), (NFC, 1), (PAIR, 1), (NONFINITE, 1))

# The valid statement every case starts from. The member order is the upstream generator's
# insertion order: JCS sorts it away, but the non-canonical and lone-surrogate payloads are
# ``json.dumps`` of this dict as written.
BASE: dict[str, Any] = {
    "schema": STATEMENT_SCHEMA,
    "profile": PROFILE_ID,
    "issuer": ISSUER,
    "kid": "test-key-1",
    "subject": "host-runtime",
    "plan_id": "plan:sha256:" + "1" * 64,
    "launch_id": "launch-1",
    "plugin_id": "plugin:sha256:" + "2" * 64,
    "artifact_digest": "sha256:" + "3" * 64,
    "process": {
        "host": "host-a",
        "role": "worker",
        "ordinal": 0,
        "start_identity": "start-0",
        "epoch": 7,
    },
    "obligation": "workers-invoked",
    "event": "invoked",
    "observed_at": NOW - 2,
    "issued_at": NOW - 1,
    "expires_at": NOW + 60,
    "challenge_nonce": "nonce-1",
    "evidence_digest": "sha256:" + "4" * 64,
    "critical_claims": [],
}

DELETE: Any = object()  # as a change: remove the member


def _st(**changes: Any) -> dict[str, Any]:
    """BASE with members replaced (``process__epoch=8`` for a member of ``process``)."""
    statement = copy.deepcopy(BASE)
    for name, value in changes.items():
        target, key = (
            (statement["process"], name.removeprefix("process__"))
            if name.startswith("process__")
            else (statement, name)
        )
        if value is DELETE:
            del target[key]
        else:
            target[key] = value
    return statement


def _dumps(value: Any, **options: Any) -> bytes:
    """Python's JSON text, for payloads JCS refuses to write or that must not be canonical."""
    return json.dumps(value, **options).encode("utf-8")


# After signing, a recipe may alter (payload bytes, header segment, signature segment).
_Parts = tuple[bytes, str, str]


def _flip_signature_bit(parts: _Parts) -> _Parts:
    payload, header, signature = parts
    raw = bytearray(b64u_decode(signature, what="signature"))
    raw[0] ^= 0x01
    return payload, header, b64u_encode(bytes(raw))


def _pad_header(parts: _Parts) -> _Parts:
    payload, header, signature = parts
    return payload, header + "=", signature


def _standard_alphabet(parts: _Parts) -> _Parts:
    payload, header, signature = parts
    return payload, header, signature.translate(str.maketrans("-_", "+/"))


def _swap_payload(payload: bytes) -> Callable[[_Parts], _Parts]:
    return lambda parts: (payload, parts[1], parts[2])


@dataclass(frozen=True)
class _Recipe:
    """How one case is made. ``why`` says in one line what the case holds; it stays here."""

    id: str
    category: str
    expected: E | Literal["OK"]
    why: str
    payload: dict[str, Any] | bytes = field(default_factory=_st)  # a dict is signed as JCS
    header: Mapping[str, Any] = field(default_factory=dict)  # header member changes
    key: int = 1
    binding_nonce: str | None = None  # a binding: BASE's values with this nonce
    after: Callable[[_Parts], _Parts] | None = None

    @property
    def kid(self) -> str:
        """The header ``kid``: the statement's; test-key-1 for payloads not a statement."""
        return str(self.payload["kid"]) if isinstance(self.payload, dict) else "test-key-1"


_R = _Recipe
# fmt: off
RECIPES: tuple[_Recipe, ...] = (
    _R("positive-ascii", "positive", OK, "the base statement, with the binding it satisfies",
       binding_nonce="nonce-1"),
    _R("positive-unicode-decomposed", "positive", OK,
       "issuer e+U+0301 is trusted as written, not normalized",
       _st(issuer=DECOMPOSED, challenge_nonce="nonce-unicode")),
    _R("positive-safe-integer-max", "positive", OK, "process.ordinal 2**53-1 is in range",
       _st(process__ordinal=MAX_SAFE, process__start_identity="start-max")),
    _R("positive-safe-integer-min", "positive", OK, "process.epoch 0 is in range",
       _st(process__epoch=0, process__start_identity="start-min")),
    _R("positive-key-rotation", "positive", OK, "the issuer's second key signs (kid test-key-2)",
       _st(kid="test-key-2", challenge_nonce="nonce-key-2"), key=2),
    _R("positive-unicode-nfc", "positive", OK, "issuer U+00E9 has its own trust entry",
       _st(issuer=NFC, challenge_nonce="nonce-unicode-nfc")),
    _R("positive-unicode-pair", "positive", OK, "issuer with a non-BMP character (4 UTF-8 bytes)",
       _st(issuer=PAIR, challenge_nonce="nonce-pair")),
    _R("positive-nonfinite-text", "positive", OK, "NaN and Infinity inside a string are text",
       _st(issuer=NONFINITE, challenge_nonce="nonce-nonfinite-text")),
    _R("positive-reordered-input", "positive", OK,
       "members given in reverse order canonicalize to the same payload",
       dict(reversed(_st(challenge_nonce="nonce-reordered").items())),
       binding_nonce="nonce-reordered"),
    _R("negative-payload-tamper", "tamper", E.INVALID_SIGNATURE,
       "event 'invoked' became 'Invoked' after signing",
       after=_swap_payload(canonicalize(_st(event="Invoked")))),
    _R("negative-signature-tamper", "tamper", E.INVALID_SIGNATURE,
       "lowest bit of the first signature byte flipped", after=_flip_signature_bit),
    _R("negative-wrong-kid", "key", E.UNKNOWN_KEY,
       "kid 'unknown' (statement and header) has no trust entry",
       _st(kid="unknown", challenge_nonce="nonce-unknown-key")),
    _R("negative-wrong-alg", "header", E.WRONG_ALGORITHM, "header alg HS256",
       header={"alg": "HS256"}),
    _R("negative-wrong-profile-header", "header", E.WRONG_PROFILE,
       "header ecpa_profile 'other'", header={"ecpa_profile": "other"}),
    _R("negative-wrong-type", "header", E.WRONG_TYPE, "header typ JWT", header={"typ": "JWT"}),
    _R("negative-unknown-critical-header", "header", E.UNKNOWN_CRITICAL_HEADER,
       "extra header member 'unknown', also listed in crit",
       header={"crit": ["ecpa_profile", "unknown"], "unknown": True}),
    _R("negative-unknown-critical-claim", "claim", E.UNKNOWN_CRITICAL_CLAIM,
       "critical_claims names 'future_claim', unknown in 0.1",
       _st(critical_claims=["future_claim"])),
    _R("negative-expired", "freshness", E.EXPIRED, "expires_at is one second before now",
       _st(expires_at=NOW - 1)),
    _R("negative-future", "freshness", E.NOT_YET_VALID,
       "observed_at and issued_at 10 s after now", _st(observed_at=NOW + 10, issued_at=NOW + 10)),
    _R("negative-plan-id-mismatch", "binding", E.BINDING_MISMATCH,
       "plan_id differs from the binding (and so does the nonce)",
       _st(plan_id="plan:other", challenge_nonce="nonce-mismatch-plan_id"),
       binding_nonce="nonce-1"),
    _R("negative-launch-id-mismatch", "binding", E.BINDING_MISMATCH,
       "launch_id differs from the binding (and so does the nonce)",
       _st(launch_id="launch-other", challenge_nonce="nonce-mismatch-launch_id"),
       binding_nonce="nonce-1"),
    _R("negative-plugin-id-mismatch", "binding", E.BINDING_MISMATCH,
       "plugin_id differs from the binding (and so does the nonce)",
       _st(plugin_id="plugin:other", challenge_nonce="nonce-mismatch-plugin_id"),
       binding_nonce="nonce-1"),
    _R("negative-artifact-digest-mismatch", "binding", E.BINDING_MISMATCH,
       "artifact_digest differs from the binding (and so does the nonce)",
       _st(artifact_digest="sha256:" + "9" * 64, challenge_nonce="nonce-mismatch-artifact_digest"),
       binding_nonce="nonce-1"),
    _R("negative-process-epoch-mismatch", "binding", E.BINDING_MISMATCH,
       "process.epoch 8, binding 7 (and the nonce differs too)",
       _st(process__epoch=8, challenge_nonce="nonce-mismatch-epoch"), binding_nonce="nonce-1"),
    _R("positive-replay-first", "replay", OK, "first use of nonce-replay is accepted",
       _st(challenge_nonce="nonce-replay"), binding_nonce="nonce-replay"),
    _R("negative-nonce-replay", "replay", E.REPLAYED_NONCE,
       "the previous case again: nonce-replay was already accepted",
       _st(challenge_nonce="nonce-replay"), binding_nonce="nonce-replay"),
    _R("negative-malformed-json", "json", E.MALFORMED_JSON, "payload '{' is not JSON", b"{"),
    _R("negative-duplicate-key", "json", E.DUPLICATE_KEY, "member 'a' twice in one object",
       b'{"a":1,"a":2}'),
    _R("negative-nan", "json", E.UNSUPPORTED_VALUE, "bare NaN as a value", b'{"x":NaN}'),
    _R("negative-float", "json", E.UNSUPPORTED_VALUE, "number with a fraction", b'{"x":1.5}'),
    _R("negative-noncanonical", "canonicalization", E.NONCANONICAL_PAYLOAD,
       "the base statement indented and unsorted, not JCS", _dumps(BASE, indent=1)),
    _R("negative-empty-issuer", "statement-schema", E.INVALID_STATEMENT, "issuer ''",
       _st(issuer="")),
    _R("negative-bad-evidence-digest", "statement-schema", E.INVALID_STATEMENT,
       "evidence_digest 'sha256:bad' lacks 64 hex digits", _st(evidence_digest="sha256:bad")),
    _R("negative-bad-artifact-digest", "statement-schema", E.INVALID_STATEMENT,
       "artifact_digest 'bad' lacks the sha256: prefix", _st(artifact_digest="bad")),
    _R("negative-negative-ordinal", "statement-schema", E.INVALID_STATEMENT,
       "process.ordinal -1", _st(process__ordinal=-1)),
    _R("negative-negative-time", "statement-schema", E.INVALID_STATEMENT, "observed_at -1",
       _st(observed_at=-1)),
    _R("negative-bool-time", "statement-schema", E.INVALID_STATEMENT,
       "issued_at true: a boolean is not an integer", _st(issued_at=True)),
    _R("negative-extra-property", "statement-schema", E.INVALID_STATEMENT,
       "a 19th member 'extra'", _st(extra="no")),
    _R("negative-missing-property", "statement-schema", E.INVALID_STATEMENT,
       "evidence_digest missing", _st(evidence_digest=DELETE)),
    _R("negative-wrong-field-type", "statement-schema", E.INVALID_STATEMENT,
       "event is the number 3", _st(event=3)),
    _R("negative-duplicate-critical-claims", "statement-schema", E.INVALID_STATEMENT,
       "critical_claims ['x', 'x'] repeats a claim", _st(critical_claims=["x", "x"])),
    _R("negative-safe-integer-overflow", "statement-schema", E.UNSUPPORTED_VALUE,
       "expires_at 2**53, otherwise JCS form (json.dumps: JCS refuses it)",
       _dumps(_st(expires_at=MAX_SAFE + 1), sort_keys=True, separators=(",", ":"))),
    _R("negative-time-order", "statement-schema", E.INVALID_TIME,
       "observed_at (now) after issued_at (now - 1)", _st(observed_at=NOW)),
    _R("negative-ttl", "statement-schema", E.INVALID_TIME,
       "expires_at - issued_at is 1001 s, max TTL 300", _st(expires_at=NOW + 1000)),
    _R("negative-observation-age", "statement-schema", E.INVALID_TIME,
       "observed 1000 s ago, max age 300", _st(observed_at=NOW - 1000)),
    _R("negative-authority-policy", "statement-schema", E.TRUST_POLICY,
       "subject 'external-service' is not among the key's subjects",
       _st(subject="external-service")),
    _R("negative-issuer-policy", "statement-schema", E.UNKNOWN_KEY,
       "issuer 'urn:ecpa:issuer:unknown' has no trust entry",
       _st(issuer="urn:ecpa:issuer:unknown")),
    _R("negative-bad-utf8", "unicode", E.MALFORMED_JSON, "byte 0xFF is not UTF-8",
       b'{"issuer":"\xff"}'),
    _R("negative-lone-surrogate", "unicode", E.UNSUPPORTED_VALUE,
       "issuer '\\ud800' (compact, unsorted: the surrogate wins over non-canonical form)",
       _dumps(_st(issuer="\ud800"), separators=(",", ":"))),
    _R("negative-crit-empty", "jose", E.UNKNOWN_CRITICAL_HEADER, "header crit []",
       header={"crit": []}),
    _R("negative-crit-duplicate", "jose", E.UNKNOWN_CRITICAL_HEADER,
       "header crit lists ecpa_profile twice", header={"crit": ["ecpa_profile"] * 2}),
    _R("negative-crit-nonstring", "jose", E.UNKNOWN_CRITICAL_HEADER, "header crit [1]",
       header={"crit": [1]}),
    _R("negative-crit-missing", "jose", E.UNKNOWN_CRITICAL_HEADER, "header without crit",
       header={"crit": DELETE}),
    _R("negative-critical-parameter-missing", "jose", E.UNKNOWN_CRITICAL_HEADER,
       "crit names ecpa_profile, which the header lacks", header={"ecpa_profile": DELETE}),
    _R("negative-base64-padding", "jose", E.MALFORMED_JWS,
       "one '=' appended to the header segment after signing", after=_pad_header),
    _R("negative-standard-base64", "jose", E.MALFORMED_JWS,
       "signature segment in the standard alphabet ('/' for '_')", after=_standard_alphabet),
)
# fmt: on

# Binding and replay are the coordinator's checks (PROFILE §3 steps 24-25), not the envelope's.
_LAYERS = {"binding": "coordinator-policy", "replay": "coordinator-policy"}


def _keys() -> dict[int, SigningKey]:
    return {number: SigningKey.from_seed(seed) for number, seed in SEEDS.items()}


def _trust_entry(issuer: str, number: int, key: SigningKey) -> dict[str, Any]:
    return {
        "issuer": issuer,
        "kid": f"test-key-{number}",
        "public_key_b64": key.public_key.to_b64(),
        "subjects": ["host-runtime"],
        "enabled": True,
        "not_before": 0,
        "not_after": MAX_SAFE,
    }


def _binding(nonce: str) -> dict[str, Any]:
    """The coordinator's expectation: BASE's bound values with ``nonce`` (PROFILE §3 step 24)."""
    return {
        "plan_id": BASE["plan_id"],
        "launch_id": BASE["launch_id"],
        "plugin_id": BASE["plugin_id"],
        "artifact_digest": BASE["artifact_digest"],
        "process_epoch": BASE["process"]["epoch"],
        "challenge_nonce": nonce,
    }


def _header_segment(recipe: _Recipe) -> str:
    header = jws.protected_header(recipe.kid)
    for name, value in recipe.header.items():
        if value is DELETE:
            del header[name]
        else:
            header[name] = value
    return b64u_encode(canonicalize(header))


def _case(recipe: _Recipe, keys: Mapping[int, SigningKey]) -> dict[str, Any]:
    """Sign the recipe's payload under its header with its key, validly, then alter it."""
    payload = recipe.payload if isinstance(recipe.payload, bytes) else canonicalize(recipe.payload)
    header = _header_segment(recipe)
    signature = b64u_encode(keys[recipe.key].sign(jws.signing_input(header, payload)))
    parts: _Parts = (payload, header, signature)
    if recipe.after is not None:
        parts = recipe.after(parts)
    payload, header, signature = parts
    return {
        "id": recipe.id,
        "category": recipe.category,
        "payload_b64": b64u_encode(payload),
        "detached_jws": f"{header}..{signature}",
        "now": NOW,
        "expected": str(recipe.expected),
        "binding": None if recipe.binding_nonce is None else _binding(recipe.binding_nonce),
        "layer": _LAYERS.get(recipe.category, "cryptographic-envelope"),
    }


def upstream_document() -> dict[str, Any]:
    """The published ECPA 0.1 corpus, rebuilt from :data:`RECIPES` in file order.

    ``json.dumps(doc, indent=2, ensure_ascii=False) + "\\n"`` gives the published bytes.
    Raises nothing: the recipes are fixed data, signed without the producer's checks.
    """
    keys = _keys()
    return {
        "schema": VECTORS_SCHEMA,
        "test_only": True,
        "keys": [_trust_entry(issuer, number, keys[number]) for issuer, number in TRUSTED],
        "cases": [_case(recipe, keys) for recipe in RECIPES],
    }
