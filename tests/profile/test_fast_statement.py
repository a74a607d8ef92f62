"""The canonical-statement fast path (ecpa/profile/fast.py) against the full road of steps
12-17: whenever it answers, the full road accepts the same bytes with an equal statement;
whenever the full road would refuse, it does not answer. And sign's template writes exactly
the JCS bytes, with the statement the full road would check."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ecpa
from ecpa.errors import EcpaError
from ecpa.profile.fast import canonical_statement, statement_payload
from ecpa.profile.json.jcs import canonicalize, matches_canonical
from ecpa.profile.json.strict_json import parse_object
from ecpa.profile.statement import Statement, check_statement
from tests.profile.test_properties import VALID, payload_variants, signable_cases
from tests.support import statement


def full_road(payload: bytes, kid: str) -> Statement | None:
    """Steps 12-17 one by one; None when any of them refuses."""
    try:
        obj = parse_object(payload, what="payload")
        if not matches_canonical(payload, obj):
            return None
        return check_statement(obj, header_kid=kid)
    except EcpaError:
        return None


def same(fast: Statement, full: Statement) -> None:
    assert fast == full
    assert fast.to_dict() == full.to_dict()
    assert repr(fast) == repr(full)


def test_the_fast_path_answers_for_an_ordinary_statement() -> None:
    fast = canonical_statement(VALID.payload, statement()["kid"])
    full = full_road(VALID.payload, statement()["kid"])
    assert fast is not None
    assert full is not None
    same(fast, full)
    assert canonical_statement(VALID.payload, "another-kid") is None  # step 16 to the full road


@settings(max_examples=1500, deadline=None)
@given(payload=payload_variants(VALID.payload), kid=st.sampled_from(["test-key-1", "x"]))
def test_on_any_payload_the_fast_path_answers_only_as_the_full_road(
    payload: bytes, kid: str
) -> None:
    fast = canonical_statement(payload, kid)
    if fast is not None:
        full = full_road(payload, kid)
        assert full is not None, payload
        same(fast, full)


@settings(max_examples=1500, deadline=None)
@given(case=signable_cases())
def test_on_any_statement_both_paths_agree(case: tuple[dict[str, Any], int, Any]) -> None:
    doc, _, _ = case
    payload = canonicalize(doc)
    full = full_road(payload, doc["kid"])
    fast = canonical_statement(payload, doc["kid"])
    if fast is not None:
        assert full is not None
        same(fast, full)
    template = statement_payload(doc)
    if template is not None:
        written, checked = template
        assert written == payload  # the JCS bytes, byte for byte
        assert full is not None
        same(checked, full)


@settings(max_examples=500, deadline=None)
@given(
    member=st.sampled_from(sorted(statement())),
    value=st.one_of(
        st.booleans(),
        st.integers(-(2**60), 2**60),
        st.floats(),
        st.text(max_size=5),
        st.none(),
        st.lists(st.integers(), max_size=2),
    ),
)
def test_sign_template_never_takes_what_sign_refuses(member: str, value: Any) -> None:
    doc = {**statement(), member: value}
    try:
        signed = ecpa.sign(doc, ecpa.SigningKey.from_seed(bytes(32)))
    except EcpaError:
        assert statement_payload(doc) is None
        return
    template = statement_payload(doc)
    if template is not None:
        assert template[0] == signed.payload
        same(template[1], signed.statement)


STRING_MEMBERS = [k for k, v in statement().items() if isinstance(v, str)]


@settings(max_examples=400, deadline=None)
@given(
    member=st.sampled_from([*STRING_MEMBERS, "process.host", "process.role"]),
    injected=st.sampled_from(
        [
            '","kid":"other',
            'x","event":"y',
            '"',
            "\\",
            "\\u0022",
            "\n",
            "\ud800",  # a lone surrogate
            '"}',
            '","process":{"epoch":1',
        ]
    ),
)
def test_a_value_cannot_forge_the_templates_structure(member: str, injected: str) -> None:
    """Values are written into the template unescaped and the text is then held to the
    verify pattern: a value holding a quote, a backslash, a control character or a lone
    surrogate never passes, so sign takes the full road (and JCS escapes it, or refuses)."""
    doc = statement()
    if member.startswith("process."):
        doc["process"] = {
            **doc["process"],
            member.split(".")[1]: doc["process"][member[8:]] + injected,
        }
    else:
        doc[member] = doc[member] + injected
    assert statement_payload(doc) is None
    try:
        signed = ecpa.sign(doc, ecpa.SigningKey.from_seed(bytes(32)))
    except EcpaError:
        return
    assert signed.payload == canonicalize(doc)


def test_frozen_instance_builds_what_the_constructor_builds() -> None:
    """Verified and Signed are built by frozen_instance on the fast paths: equal to what
    their constructors build, as frozen, with the same fields and repr."""
    import dataclasses

    from ecpa.shapes.shape import frozen_instance

    signed = ecpa.sign(statement(), ecpa.SigningKey.from_seed(bytes(32)))
    built = ecpa.Signed(
        payload=signed.payload, detached_jws=signed.detached_jws, statement=signed.statement
    )
    assert signed == built
    assert repr(signed) == repr(built)
    assert dataclasses.asdict(signed) == dataclasses.asdict(built)
    values = {f.name: getattr(built, f.name) for f in dataclasses.fields(ecpa.Signed)}
    again = frozen_instance(ecpa.Signed, values)
    assert again == built
    with pytest.raises(dataclasses.FrozenInstanceError):
        again.payload = b""  # type: ignore[misc]


@settings(max_examples=1000, deadline=None)
@given(
    tail=st.text(alphabet="0123456789abcdefABCDEF g\t\u0661_", min_size=60, max_size=68),
    prefix=st.sampled_from(["sha256:", "SHA256:", "sha256 ", ""]),
)
def test_the_template_digest_check_is_the_digest_pattern(tail: str, prefix: str) -> None:
    """sign's template checks a digest by a round trip through bytes: exactly the values
    the pattern sha256:[0-9a-f]{64} takes (no uppercase, whitespace, other digits)."""
    import re

    from ecpa.profile.fast import _digests

    digest = re.compile(r"sha256:[0-9a-f]{64}")  # the oracle: the pattern of the profile

    good = "sha256:" + "0" * 64
    for value in (prefix + tail, "sha256:" + tail[:64], "sha256:" + tail[:64].lower()):
        expected = digest.fullmatch(value) is not None
        assert _digests(value) is expected, value
        assert _digests(good, value) is expected, value
        assert _digests(value, good) is expected, value


def test_the_template_takes_exactly_the_members() -> None:
    """The template counts the members and reads each by name: one renamed, added or
    removed (at the top or in process) takes the full road, which refuses it."""
    base = statement()
    renamed = {("issuer_" if k == "issuer" else k): v for k, v in base.items()}
    variants = [
        renamed,
        {**base, "extra": "x"},
        {k: v for k, v in base.items() if k != "event"},
        {**base, "process": {**base["process"], "extra": 1}},
        {**base, "process": {k: v for k, v in base["process"].items() if k != "role"}},
        {
            **base,
            "process": {("host_" if k == "host" else k): v for k, v in base["process"].items()},
        },
    ]
    for doc in variants:
        assert statement_payload(doc) is None
        with pytest.raises(EcpaError):
            ecpa.sign(doc, ecpa.SigningKey.from_seed(bytes(32)))
