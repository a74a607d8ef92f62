"""The generator of the published ECPA 0.1 corpus (STYLE rule 7).

Byte equality with ``../shared`` needs the shared data; the rest runs on a fresh clone.
"""

from __future__ import annotations

import json
from typing import Any

import ecpa
from ecpa.corpus.generator.upstream import RECIPES, SEEDS, upstream_document
from ecpa.corpus.runner import run_corpus
from tests.support import CONFORMANCE, b64d, needs_shared

UPSTREAM = CONFORMANCE / "upstream-ecpa-0.1" / "attestation-vectors.json"


def _text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _first_difference(got: dict[str, Any], want: dict[str, Any]) -> str:
    for name in [*want, *(name for name in got if name not in want)]:
        if name != "cases" and got.get(name) != want.get(name):
            return f"top-level member {name!r} differs"
    for index, (mine, theirs) in enumerate(zip(got["cases"], want["cases"], strict=False)):
        if list(mine) != list(theirs):
            return f"case {index} ({theirs.get('id')}): members {list(mine)} != {list(theirs)}"
        for name in theirs:
            if mine[name] != theirs[name]:
                return (
                    f"case {index} ({theirs.get('id')}), member {name!r}:\n"
                    f"  generated {mine[name]!r:.300}\n  published {theirs[name]!r:.300}"
                )
    if len(got["cases"]) != len(want["cases"]):
        return f"{len(got['cases'])} cases generated, {len(want['cases'])} published"
    return "same values; the JSON text differs (member order or formatting)"


@needs_shared
def test_generated_corpus_is_the_published_file_byte_for_byte() -> None:
    published = UPSTREAM.read_bytes()
    doc = upstream_document()
    generated = _text(doc).encode("utf-8")
    if generated != published:
        raise AssertionError(_first_difference(doc, json.loads(published)))


def test_generated_corpus_passes_its_own_run() -> None:
    """Every case gets its recorded code, positives included, in file order with one fence."""
    doc = upstream_document()
    assert len(doc["cases"]) == 56
    assert len({case["id"] for case in doc["cases"]}) == 56
    results = run_corpus(doc)
    failed = [(r.id, r.expected, r.got, r.detail) for r in results if not r.passed]
    assert failed == []
    assert sum(r.expected == "OK" for r in results) == 10


def test_positive_cases_are_what_the_producer_signs() -> None:
    """ecpa.sign, given each positive statement and its key, gives the same bytes."""
    keys = {f"test-key-{n}": ecpa.SigningKey.from_seed(seed) for n, seed in SEEDS.items()}
    positives = [case for case in upstream_document()["cases"] if case["expected"] == "OK"]
    for case in positives:
        payload = b64d(case["payload_b64"])
        statement = json.loads(payload)
        signed = ecpa.sign(statement, keys[statement["kid"]])
        assert (signed.payload, signed.detached_jws) == (payload, case["detached_jws"]), case["id"]


def test_generation_is_deterministic() -> None:
    assert _text(upstream_document()) == _text(upstream_document())


def test_every_recipe_says_in_one_line_what_it_holds() -> None:
    for recipe in RECIPES:
        assert recipe.why.strip(), recipe.id
        assert "\n" not in recipe.why, recipe.id
        assert recipe.id.startswith("positive-" if recipe.expected == "OK" else "negative-")
