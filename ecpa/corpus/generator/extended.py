"""The project's own corpus, beside the published one (STYLE rule 7, PROFILE §3-§5).

:func:`extended_document` gives ``attestation-vectors-extended.json``: new cases in the
published case format, each with a one-line ``why`` and the PROFILE §3 ``step`` it is about,
some with their own ``policy`` or ``trust`` store. Every step 1-25 has negatives and a
positive on its boundary; ``x-order-*`` cases hold the defects of two adjacent steps and
expect the first one's code. :func:`trust_store_cases` gives ``trust-store-vectors.json``
(PROFILE §5). Both are deterministic: TEST seeds, fixed times, no random source.

The recipes live in ``_corpus_ext_envelope`` (steps 1-11), ``_corpus_ext_payload``
(12-17) and ``_corpus_ext_late`` (18-25); ``_corpus_ext_kit`` builds and signs them. The
keys are TEST ONLY: their seeds are public.
"""

from __future__ import annotations

from typing import Any

from ecpa.corpus.generator.envelope import envelope_cases
from ecpa.corpus.generator.kit import KEYS, XCase, build
from ecpa.corpus.generator.late import late_cases
from ecpa.corpus.generator.payload import payload_cases
from ecpa.corpus.generator.trust_cases import trust_store_cases
from ecpa.corpus.generator.upstream import TRUSTED, VECTORS_SCHEMA, _trust_entry

__all__ = ["extended_cases", "extended_document", "trust_store_cases"]


def extended_cases() -> list[XCase]:
    """Every recipe, in file order (the replay sequences depend on it)."""
    return [*envelope_cases(), *payload_cases(), *late_cases()]


def extended_document() -> dict[str, Any]:
    """The project's attestation cases, in the published format plus ``why`` and ``step``.

    ``keys`` are the published corpus's six entries; a case with ``trust`` uses that store
    instead. Raises nothing: the recipes are fixed data, signed without the producer's checks.
    """
    return {
        "schema": VECTORS_SCHEMA,
        "test_only": True,
        "keys": [_trust_entry(issuer, number, KEYS[number]) for issuer, number in TRUSTED],
        "cases": [build(case) for case in extended_cases()],
    }
