"""schemas/ is generated from the models; a test fails when the committed files drift."""

from __future__ import annotations

import json

import pytest

import ecpa
from ecpa._schemas import generate
from tests.support import ROOT, statement, trust_doc

SCHEMAS = ROOT / "schemas"


@pytest.mark.parametrize("name", sorted(generate()))
def test_committed_schema_matches_models(name: str) -> None:
    committed = (SCHEMAS / name).read_text(encoding="utf-8")
    assert committed == generate()[name], (
        f"schemas/{name} is stale: run `python -m ecpa._schemas schemas` and commit"
    )


#: Schemas written by hand, not generated from a model: the DLA bundle manifest's (its test
#: is tests/dla/test_dla_packaging.py).
HAND_WRITTEN = {"bundle-manifest-v1.schema.json"}


def test_no_stray_schema_files() -> None:
    assert {p.name for p in SCHEMAS.glob("*.schema.json")} == set(generate()) | HAND_WRITTEN


def test_schemas_name_every_member() -> None:
    st = json.loads(generate()["statement.schema.json"])
    assert set(st["required"]) == set(statement())
    assert st["additionalProperties"] is False
    ts = json.loads(generate()["trust-store.schema.json"])
    assert set(ts["required"]) == set(trust_doc())
    ecpa.TrustStore.from_dict(trust_doc())  # the example document is valid
