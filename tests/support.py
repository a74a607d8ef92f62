"""Shared test helpers: TEST keys, statements, raw signing of arbitrary bytes."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import ecpa
from ecpa.profile.b64 import b64u_encode

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CONFORMANCE = SHARED / "conformance"

#: Skip a test when ../shared is absent (a user's fresh clone has none).
needs_shared = pytest.mark.skipif(
    not CONFORMANCE.is_dir(), reason="../shared/conformance is not beside the repository"
)

SEED_1 = bytes(range(32))  # test-key-1 of the published corpus (TEST ONLY)
SEED_2 = bytes(range(32, 64))  # test-key-2
KEY_1 = ecpa.SigningKey.from_seed(SEED_1)
KEY_2 = ecpa.SigningKey.from_seed(SEED_2)

ISSUER = "urn:ecpa:issuer:vllm-hust-host-a"
NOW = 1_800_000_000
HEADER_B64_KEY_1 = (
    "eyJhbGciOiJFZERTQSIsImNyaXQiOlsiZWNwYV9wcm9maWxlIl0sImVjcGFfcHJvZmlsZSI6ImVjcGEtamNzLWp3cy1l"
    "ZGRzYS8wLjEiLCJraWQiOiJ0ZXN0LWtleS0xIiwidHlwIjoiYXBwbGljYXRpb24vZWNwYS1hdHRlc3RhdGlvbitqd3Mi"
    "fQ"
)


def b64d(text: str) -> bytes:
    """Lenient base64url decoding, for reading test data only."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def statement(**changes: Any) -> dict[str, Any]:
    """A valid statement at NOW for test-key-1; keyword arguments replace members
    (``process__epoch=3`` replaces a member of ``process``)."""
    st: dict[str, Any] = {
        "schema": "ecpa-attestation-statement/0.1",
        "profile": "ecpa-jcs-jws-eddsa/0.1",
        "issuer": ISSUER,
        "kid": "test-key-1",
        "subject": "host-runtime",
        "plan_id": "plan:sha256:" + "1" * 64,
        "launch_id": "launch-1",
        "plugin_id": "plugin:sha256:" + "2" * 64,
        "obligation": "workers-invoked",
        "event": "invoked",
        "challenge_nonce": "nonce-1",
        "artifact_digest": "sha256:" + "3" * 64,
        "evidence_digest": "sha256:" + "4" * 64,
        "process": {
            "host": "host-a",
            "role": "worker",
            "start_identity": "start-0",
            "ordinal": 0,
            "epoch": 7,
        },
        "observed_at": NOW - 2,
        "issued_at": NOW - 1,
        "expires_at": NOW + 60,
        "critical_claims": [],
    }
    st = copy.deepcopy(st)
    for name, value in changes.items():
        if name.startswith("process__"):
            st["process"][name.removeprefix("process__")] = value
        elif value is DELETE:
            del st[name]
        else:
            st[name] = value
    return st


DELETE = object()


def binding(**changes: Any) -> ecpa.Binding:
    """The binding that :func:`statement` satisfies; keyword arguments replace values."""
    values: dict[str, Any] = {
        "plan_id": "plan:sha256:" + "1" * 64,
        "launch_id": "launch-1",
        "plugin_id": "plugin:sha256:" + "2" * 64,
        "artifact_digest": "sha256:" + "3" * 64,
        "process_epoch": 7,
        "challenge_nonce": "nonce-1",
    }
    values.update(changes)
    return ecpa.Binding(**values)


def trust_entry(**changes: Any) -> dict[str, Any]:
    """A trust-store entry for test-key-1 of ISSUER; keyword arguments replace members."""
    entry: dict[str, Any] = {
        "issuer": ISSUER,
        "kid": "test-key-1",
        "public_key_b64": KEY_1.public_key.to_b64(),
        "subjects": ["host-runtime"],
        "enabled": True,
        "not_before": 0,
        "not_after": 2**53 - 1,
    }
    entry.update(changes)
    return entry


def trust_doc(*entries: dict[str, Any]) -> dict[str, Any]:
    """A trust-store document; by default test-key-1 and test-key-2 of ISSUER."""
    if not entries:
        entries = (
            trust_entry(),
            trust_entry(kid="test-key-2", public_key_b64=KEY_2.public_key.to_b64()),
        )
    return {"schema": "ecpa-trust-store/0.1", "keys": list(entries)}


def store(*entries: dict[str, Any]) -> ecpa.TrustStore:
    return ecpa.TrustStore.from_dict(trust_doc(*entries))


def header_bytes(**changes: Any) -> bytes:
    """Canonical header bytes for test-key-1; keyword arguments replace or add members."""
    header: dict[str, Any] = {
        "alg": "EdDSA",
        "crit": ["ecpa_profile"],
        "ecpa_profile": "ecpa-jcs-jws-eddsa/0.1",
        "kid": "test-key-1",
        "typ": "application/ecpa-attestation+jws",
    }
    for name, value in changes.items():
        if value is DELETE:
            del header[name]
        else:
            header[name] = value
    return ecpa.canonicalize(header)


def sign_raw(header: bytes | str, payload: bytes, key: ecpa.SigningKey = KEY_1) -> str:
    """A detached JWS with a *valid* signature over arbitrary header and payload bytes,
    so that tests can reach late checks with defects the signer would refuse.
    ``header`` is raw bytes (encoded here) or an already-encoded segment."""
    header_b64 = header if isinstance(header, str) else b64u_encode(header)
    signature = key.sign(f"{header_b64}.{b64u_encode(payload)}".encode("ascii"))
    return f"{header_b64}..{b64u_encode(signature)}"


def payload_of(st: dict[str, Any]) -> bytes:
    """Canonical payload bytes of a statement dict (no statement checks)."""
    return ecpa.canonicalize(st)


def code_of(
    payload: bytes, jws: str | bytes, trust: ecpa.TrustStore | None = None, **kwargs: Any
) -> str:
    """Verify and return "OK" or the error code, as the corpus records it."""
    kwargs.setdefault("now", NOW)
    try:
        ecpa.verify(payload, jws, trust if trust is not None else store(), **kwargs)
    except ecpa.EcpaError as exc:
        return exc.code.value
    return "OK"


def write_secret(path: Path, data: bytes | str) -> Path:
    """A secret's file as its owner keeps it (a key, a passphrase): mode 0600."""
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    path.chmod(0o600)
    return path


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def codes(reasons: Iterable[Any]) -> list[str]:
    """The codes of a status's reasons, in order: ``Reason`` objects, or the objects
    ``ecpa status --json`` writes for them."""
    return [r["code"] if isinstance(r, dict) else r.code.value for r in reasons]


def texts(reasons: Iterable[Any]) -> list[str]:
    """The texts of a status's reasons, in order (as :func:`codes` takes them)."""
    return [r["text"] if isinstance(r, dict) else r.text for r in reasons]


def check_reasons(status: Any) -> set[str]:
    """The codes a ``RuntimeStatus`` gives, after checking what every status must say:
    each code is defined; ``effective`` exactly when no launch-level reason fails, a slot
    covered exactly when none of its reasons fails; ``slot`` set only at the launch level,
    on a reason whose text names that slot."""
    from ecpa.runtime.judge.reasons import Reason, ReasonCode

    seen: set[str] = set()
    assert status.reasons, "a status always has reasons"
    for reason in status.reasons:
        assert isinstance(reason, Reason), reason
        assert ReasonCode(reason.code.value) is reason.code
        assert reason.slot is None or reason.text.startswith(f"slot {reason.slot}: "), reason
        seen.add(reason.code.value)
    assert status.effective is not any(r.fails for r in status.reasons), status.reasons
    for slot in status.slots:
        for reason in slot.reasons:
            assert ReasonCode(reason.code.value) is reason.code
            assert reason.slot is None, reason
            seen.add(reason.code.value)
        assert slot.covered is not any(r.fails for r in slot.reasons), slot
    return seen
