"""In-process rows: ``ecpa.verify``, ``ecpa.sign`` and ``ecpa.canonicalize`` against the bare
primitive each one wraps, on the corpus case ``positive-ascii`` (signed with the TEST ONLY
seed ``bytes(range(32))``, test-key-1 of the published corpus).

* verify: the full profile (size limits, header, strict JSON, JCS check, statement, trust
  store, signature, times, binding) over one bare Ed25519 verification of the same signing
  input, by ``cryptography`` and, when PyNaCl is importable, by libsodium;
* sign: the producer (statement checks, JCS, header, signature) over one bare Ed25519
  signature of the same signing input by ``cryptography``;
* canonicalize: RFC 8785 bytes of the statement, over ``rfc8785.dumps``; the two must give
  the same bytes, or the row is not printed at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

import ecpa
from bench.paired import Row, paired_calls
from ecpa.profile.b64 import b64u_decode, b64u_encode

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus" / "ecpa-0.1" / "attestation-vectors.json"
CASE_ID = "positive-ascii"
TEST_SEED = bytes(range(32))  # test-key-1 of the published corpus: TEST ONLY

VERIFY_TARGET, VERIFY_STRETCH = 1.0, 0.8
SIGN_TARGET = 1.5
JCS_TARGET = 0.25  # ours / rfc8785: at least 4 times faster


class Case:
    """The corpus case, decoded once: everything a row needs, outside the timed calls."""

    def __init__(self) -> None:
        doc = json.loads(CORPUS.read_text(encoding="utf-8"))
        [case] = [c for c in doc["cases"] if c["id"] == CASE_ID]
        self.store = ecpa.TrustStore.from_dict(
            {"schema": ecpa.TRUST_STORE_SCHEMA, "keys": doc["keys"]}
        )
        self.payload = b64u_decode(case["payload_b64"], what="payload")
        self.jws: str = case["detached_jws"]
        self.now: int = case["now"]
        self.binding = ecpa.Binding(**case["binding"]) if case.get("binding") else None
        self.statement: dict[str, Any] = json.loads(self.payload)
        header_b64, _, signature_b64 = self.jws.split(".")
        self.signing_input = f"{header_b64}.{b64u_encode(self.payload)}".encode("ascii")
        self.signature = b64u_decode(signature_b64, what="signature")
        self.key = ecpa.SigningKey.from_seed(TEST_SEED)
        private = Ed25519PrivateKey.from_private_bytes(TEST_SEED)
        self.private = private
        self.public: Ed25519PublicKey = private.public_key()
        # The case must be what these rows claim: ecpa.sign reproduces it, ecpa.verify takes it.
        signed = ecpa.sign(self.statement, self.key)
        assert (signed.payload, signed.detached_jws) == (self.payload, self.jws), CASE_ID
        self.verify()

    def verify(self) -> ecpa.Verified:
        return ecpa.verify(self.payload, self.jws, self.store, now=self.now, binding=self.binding)


def _nacl_verify(case: Case) -> Callable[[], object] | None:
    try:
        from nacl.signing import VerifyKey  # PyNaCl: optional
    except ImportError:
        return None
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key = VerifyKey(case.public.public_bytes(Encoding.Raw, PublicFormat.Raw))
    key.verify(case.signing_input, case.signature)
    return lambda: key.verify(case.signing_input, case.signature)


def micro_rows(rounds: int, seconds: float) -> list[Row]:
    """The in-process rows: verify (vs cryptography, vs libsodium), sign, canonicalize."""
    case = Case()
    rows = []

    def bare_verify() -> None:
        case.public.verify(case.signature, case.signing_input)

    m = paired_calls(bare_verify, case.verify, rounds=rounds, seconds=seconds)
    rows.append(
        Row(
            "ecpa.verify",
            "cryptography Ed25519 verify",
            m.base,
            m.ours,
            "us",
            m.ratio,
            m.spread,
            f"<= {VERIFY_TARGET:.2f} (stretch <= {VERIFY_STRETCH:.2f})",
            m.ratio <= VERIFY_TARGET,
            f"corpus {CASE_ID}, full profile with binding; stretch "
            + ("met" if m.ratio <= VERIFY_STRETCH else "not met"),
        )
    )
    nacl = _nacl_verify(case)
    if nacl is None:
        rows.append(
            Row("ecpa.verify", "libsodium verify", 0.0, 0.0, "us", 0.0, (0.0, 0.0), "-", None,
                "skipped: PyNaCl is not importable")
        )  # fmt: skip
    else:
        m = paired_calls(nacl, case.verify, rounds=rounds, seconds=seconds)
        rows.append(
            Row(
                "ecpa.verify",
                "libsodium verify (PyNaCl)",
                m.base,
                m.ours,
                "us",
                m.ratio,
                m.spread,
                "- (info)",
                None,
                "the fastest bare primitive at hand: what is left is the profile's own cost",
            )
        )
    m = paired_calls(
        lambda: case.private.sign(case.signing_input),
        lambda: ecpa.sign(case.statement, case.key),
        rounds=rounds,
        seconds=seconds,
    )
    rows.append(
        Row(
            "ecpa.sign",
            "cryptography Ed25519 sign",
            m.base,
            m.ours,
            "us",
            m.ratio,
            m.spread,
            f"<= {SIGN_TARGET:.2f}",
            m.ratio <= SIGN_TARGET,
        )
    )
    statement = case.statement
    assert ecpa.canonicalize(statement) == rfc8785.dumps(statement), "JCS bytes differ"
    m = paired_calls(
        lambda: rfc8785.dumps(statement),
        lambda: ecpa.canonicalize(statement),
        rounds=rounds,
        seconds=seconds,
    )
    rows.append(
        Row(
            "ecpa.canonicalize",
            "rfc8785.dumps",
            m.base,
            m.ours,
            "us",
            m.ratio,
            m.spread,
            f"<= {JCS_TARGET:.2f} (>= {1 / JCS_TARGET:.0f}x faster)",
            m.ratio <= JCS_TARGET,
            "same bytes checked before timing",
        )
    )
    return rows
