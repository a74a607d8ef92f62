"""JSON Schemas of the statement and the trust-store document, generated from their shapes,
and of the corpus formats, generated from their pydantic models.

``schemas/`` holds the committed output; a test fails when the two drift apart.
Regenerate with ``python -m ecpa._schemas schemas``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ecpa._files import write_generated
from ecpa.corpus.formats import AttestationVectors, TrustStoreVectors
from ecpa.profile.statement import Statement
from ecpa.profile.trust import TrustStoreDocument
from ecpa.shapes.shape import Shaped

_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_MODELS: dict[str, tuple[type[BaseModel] | type[Shaped], str, str]] = {
    "statement.schema.json": (
        Statement,
        "ecpa-attestation-statement/0.1",
        "ECPA 0.1 statement (PROFILE §1). Not expressible here: schema and profile must equal "
        "'ecpa-attestation-statement/0.1' and 'ecpa-jcs-jws-eddsa/0.1' (a verifier reports "
        "ATTESTATION_WRONG_PROFILE otherwise), and critical_claims must be empty in 0.1.",
    ),
    "attestation-vectors.schema.json": (
        AttestationVectors,
        "ecpa-attestation-vectors/0.1",
        "A conformance corpus of ECPA 0.1 evidence (corpus/README.md): each case is verified "
        "at its 'now' with its policy (default 0/300/300) and the trust store of 'keys' (or "
        "its own 'trust'); cases with a binding also share one replay fence, in file order.",
    ),
    "trust-store-vectors.schema.json": (
        TrustStoreVectors,
        "ecpa-trust-store-vectors/0.1",
        "Trust-store loading cases (PROFILE §5): each document must load ('OK') or be refused "
        "with ATTESTATION_TRUST_STORE_CONFIG.",
    ),
    "trust-store.schema.json": (
        TrustStoreDocument,
        "ecpa-trust-store/0.1",
        "ECPA trust store (PROFILE §5). Not expressible here: exactly one key form per entry, "
        "not_before <= not_after, unique (issuer, kid), and no small-order or non-canonical "
        "Ed25519 key; loading checks all of these.",
    ),
}


def generate() -> dict[str, str]:
    """File name -> schema text (sorted keys, two-space indent, final newline)."""
    out: dict[str, str] = {}
    for name, (model, ident, description) in _MODELS.items():
        schema: dict[str, Any] = (
            model.json_schema()
            if issubclass(model, Shaped)
            else model.model_json_schema(by_alias=True)
        )
        schema = {
            "$schema": _DIALECT,
            "$id": f"urn:ecpa:schema:{ident}",
            **schema,
            "description": description,
        }
        out[name] = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return out


def write(directory: Path) -> list[Path]:
    """Write every schema into ``directory``; return the paths written."""
    return write_generated(directory, generate())


if __name__ == "__main__":  # pragma: no cover - a maintenance entry point
    for written in write(Path(sys.argv[1] if len(sys.argv) > 1 else "schemas")):
        print(written)
