"""PROFILE §5: ``document_problems`` lists every problem of a trust store document, not just
the first, and agrees with ``TrustStore.from_dict``; ``read_document`` reads a file strictly
without checking its rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ecpa
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.trust import MAX_TRUST_STORE_BYTES, document_problems, read_document
from tests.support import KEY_2, trust_doc, trust_entry

SMALL_ORDER = "AQ" + "A" * 41  # the identity point, order 1
CONFIG = ErrorCode.TRUST_STORE_CONFIG


def from_dict_code(doc: Any) -> str:
    try:
        ecpa.TrustStore.from_dict(doc)
    except EcpaError as exc:
        return exc.code.value
    return "OK"


# --- document_problems -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        trust_doc(),
        trust_doc(trust_entry()),
        {"schema": "ecpa-trust-store/0.1", "keys": []},
        trust_doc(trust_entry(public_key_b64=None, public_key_jwk=KEY_2.public_key.to_jwk())),
        trust_doc(
            trust_entry(
                public_key_b64=None, public_key_pem=KEY_2.public_key.to_pem().decode("ascii")
            )
        ),
        # The same kid under two issuers, and two kids of one issuer, are distinct entries.
        trust_doc(trust_entry(), trust_entry(issuer="urn:other")),
        trust_doc(trust_entry(), trust_entry(kid="test-key-2")),
    ],
    ids=["default", "one-key", "no-keys", "jwk", "pem", "two-issuers", "two-kids"],
)
def test_valid_document_has_no_problems(doc: dict[str, Any]) -> None:
    assert document_problems(doc) == []
    assert from_dict_code(doc) == "OK"


def test_every_problem_is_reported() -> None:
    doc = {
        "schema": "ecpa-trust-store/0.2",
        "keys": [
            trust_entry(),
            trust_entry(),  # the (issuer, kid) of keys.0 again
            trust_entry(kid="small", public_key_b64=SMALL_ORDER),
            trust_entry(kid="no-subjects", subjects=[]),
            trust_entry(kid="window", not_before=10, not_after=9),
        ],
    }
    problems = document_problems(doc)
    assert len(problems) == 5
    assert sum("keys." not in p for p in problems) == 1  # the schema
    for index in range(1, 5):
        assert sum(p.startswith(f"keys.{index}:") for p in problems) == 1, index
    assert not any(p.startswith("keys.0:") for p in problems)
    assert from_dict_code(doc) == CONFIG


def test_one_entry_with_several_problems() -> None:
    # A duplicate that is also invalid: the duplicate and the first invalid thing are reported.
    doc = trust_doc(trust_entry(), trust_entry(public_key_b64=SMALL_ORDER))
    problems = document_problems(doc)
    assert len(problems) == 2
    assert all(p.startswith("keys.1:") for p in problems)


def test_duplicates_are_reported_each_time() -> None:
    doc = trust_doc(trust_entry(), trust_entry(), trust_entry())
    problems = document_problems(doc)
    assert [p.split(":")[0] for p in problems] == ["keys.1", "keys.2"]


@pytest.mark.parametrize(
    ("doc", "count"),
    [
        ({"keys": []}, 1),  # no schema
        ({"schema": "ecpa-trust-store/0.1"}, 1),  # no keys
        ({"schema": "ecpa-trust-store/0.1", "keys": {}}, 1),
        ({"schema": "ecpa-trust-store/0.1", "keys": None}, 1),
        ({}, 2),
        ({"schema": "ecpa-trust-store/0.1", "keys": [], "comment": "x"}, 1),
        ({"schema": 1, "keys": "k", "a": 1, "b": 2}, 3),
    ],
    ids=["no-schema", "no-keys", "keys-object", "keys-null", "empty", "extra", "all-wrong"],
)
def test_document_level_problems(doc: dict[str, Any], count: int) -> None:
    assert len(document_problems(doc)) == count
    assert from_dict_code(doc) == CONFIG


ENTRY_PROBLEMS = [
    ("not-an-object", "test-key-1"),
    ("null", None),
    ("empty-issuer", trust_entry(issuer="")),
    ("empty-kid", trust_entry(kid="")),
    ("no-subjects", trust_entry(subjects=[])),
    ("empty-subject", trust_entry(subjects=[""])),
    ("enabled-string", trust_entry(enabled="true")),
    ("window-bool", trust_entry(not_before=False)),
    ("window-negative", trust_entry(not_before=-1)),
    ("window-reversed", trust_entry(not_before=10, not_after=9)),
    ("window-too-big", trust_entry(not_after=2**53)),
    ("short-key", trust_entry(public_key_b64="AAAA")),
    ("small-order", trust_entry(public_key_b64=SMALL_ORDER)),
    ("key-not-base64url", trust_entry(public_key_b64="A" * 42 + "=")),
    ("two-key-forms", trust_entry(public_key_jwk=KEY_2.public_key.to_jwk())),
    ("no-key", trust_entry(public_key_b64=None)),
    ("unknown-member", trust_entry(comment="x")),
]


@pytest.mark.parametrize(
    "entry", [e for _, e in ENTRY_PROBLEMS], ids=[i for i, _ in ENTRY_PROBLEMS]
)
def test_entry_problem_is_reported_with_its_index(entry: Any) -> None:
    doc = trust_doc(trust_entry(kid="fine"), entry)
    problems = document_problems(doc)
    assert len(problems) == 1
    assert problems[0].startswith("keys.1:")
    assert from_dict_code(doc) == CONFIG


@pytest.mark.parametrize(
    ("entry", "count"),
    [
        (trust_entry(issuer="", kid="", enabled=1), 3),
        (trust_entry(subjects=[], public_key_b64=SMALL_ORDER), 2),
        (trust_entry(not_before=10, not_after=9, public_key_b64=SMALL_ORDER), 2),
        (trust_entry(enabled=None, public_key_b64="AAAA"), 2),
        pytest.param(
            trust_entry(subjects=[], not_before=10, not_after=9),
            2,
        ),
    ],
    ids=[
        "names-and-enabled",
        "subjects-and-key",
        "window-and-key",
        "enabled-and-key",
        "subjects-and-window",
    ],
)
def test_every_problem_of_one_entry_is_reported(entry: dict[str, Any], count: int) -> None:
    problems = document_problems(trust_doc(entry))
    assert len(problems) == count
    assert all(p.startswith("keys.0:") for p in problems)


@pytest.mark.parametrize(
    "entry",
    [trust_entry(issuer=["a"]), trust_entry(kid={"k": 1})],
    ids=["issuer-list", "kid-object"],
)
def test_entry_with_an_unhashable_issuer_or_kid_is_reported(entry: dict[str, Any]) -> None:
    problems = document_problems(trust_doc(entry))
    assert len(problems) == 1
    assert problems[0].startswith("keys.0:")


def test_from_dict_refuses_what_document_problems_reports() -> None:
    doc = {"store_schema": "ecpa-trust-store/0.1", "keys": [trust_entry()]}
    assert len(document_problems(doc)) == 2
    assert from_dict_code(doc) == CONFIG


# --- read_document ---------------------------------------------------------------------------


def read_code(path: Path) -> str:
    try:
        read_document(path)
    except EcpaError as exc:
        return exc.code.value
    return "OK"


def test_read_document_returns_the_plain_values(tmp_path: Path) -> None:
    path = tmp_path / "trust.json"
    path.write_text(json.dumps(trust_doc()), encoding="utf-8")
    assert read_document(path) == trust_doc()
    assert read_document(str(path)) == trust_doc()


def test_read_document_does_not_check_the_rules(tmp_path: Path) -> None:
    doc = {"schema": "other", "keys": [trust_entry(), trust_entry()], "extra": [1]}
    path = tmp_path / "trust.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert read_document(path) == doc
    assert len(document_problems(read_document(path))) == 3


def test_read_document_of_a_missing_file(tmp_path: Path) -> None:
    assert read_code(tmp_path / "missing.json") == CONFIG
    assert read_code(tmp_path / "no-such-dir" / "trust.json") == CONFIG


def test_read_document_of_a_directory(tmp_path: Path) -> None:
    assert read_code(tmp_path) == CONFIG


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not json",
        b'{"schema": "ecpa-trust-store/0.1", "keys": [',
        b"[]",
        b'"ecpa-trust-store/0.1"',
        b'{"schema": "a", "schema": "b"}',
        b'{"keys": [], "n": 1.5}',
        b'{"keys": [], "n": NaN}',
        b"\xef\xbb\xbf{}",
        b'{"schema": "\xff"}',
        json.dumps(trust_doc()).encode("utf-16"),
    ],
    ids=[
        "empty",
        "text",
        "truncated",
        "array",
        "string",
        "duplicate",
        "float",
        "nan",
        "bom",
        "utf8",
        "utf16",
    ],
)
def test_read_document_of_invalid_json(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "trust.json"
    path.write_bytes(content)
    assert read_code(path) == CONFIG


def test_read_document_over_the_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "trust.json"
    text = json.dumps(trust_doc()).encode()
    path.write_bytes(text[:-1] + b" " * (MAX_TRUST_STORE_BYTES - len(text)) + b"}")
    assert read_code(path) == "OK"  # exactly the limit
    path.write_bytes(text[:-1] + b" " * (MAX_TRUST_STORE_BYTES + 1 - len(text)) + b"}")
    assert read_code(path) == CONFIG


def test_trust_store_load_uses_the_same_reading(tmp_path: Path) -> None:
    path = tmp_path / "trust.json"
    path.write_bytes(b'{"schema": "ecpa-trust-store/0.1", "keys": [], "keys": []}')
    with pytest.raises(EcpaError) as info:
        ecpa.TrustStore.load(path)
    assert info.value.code == CONFIG
