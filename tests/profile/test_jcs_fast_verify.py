"""verify and sign with the JCS fast path against the same calls through rfc8785 only.

``reference_jcs()`` closes both gates of the fast path (ecpa/jcs.py) and empties the header
cache, so every canonical form comes from ``rfc8785.dumps`` as without the fast path
(docs/adr/0001). On mutated evidence (the strategies of test_properties.py and
_fuzz_strategies.py, and member names around U+FFFF/U+10000) both give the same code and
detail, or accept the same statement;
on statements, sign gives the same bytes or the same refusal. The header cache (ecpa/jws.py)
is checked too: bounded, failures never kept, and what it hands out is a fresh copy.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
import rfc8785
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

import ecpa
from ecpa.profile import jws
from ecpa.profile import sign as sign_module
from ecpa.profile import verify as verify_module
from ecpa.profile.b64 import b64u_encode
from ecpa.profile.json import jcs
from tests import _fuzz_strategies as fuzz
from tests.profile.test_properties import (
    HEADER,
    VALID,
    jws_mutations,
    payload_variants,
    signable_cases,
)
from tests.support import KEY_1, KEY_2, NOW, sign_raw, statement, store

E = ecpa.ErrorCode
TRUST = store()
#: Names on both sides of the one place where code-point and UTF-16 order part.
WIDE_NAMES = ["\U00010000", "\uffff", "\ue000", "\U0001f600", "\ud7ff", "\U0010ffff", "z", ""]


@contextmanager
def reference_jcs() -> Iterator[None]:
    """Every canonical form through rfc8785: no fast bytes, no shortcut for names, and
    steps 12-17 one by one (no canonical-statement fast path, in verify or in sign)."""
    jws._checked_header_cached.cache_clear()
    try:
        with (
            mock.patch.object(jcs, "_subset_bytes", return_value=None),
            mock.patch.object(jcs, "_bmp_only", return_value=False),
            mock.patch.object(jcs, "_names_in_bmp", return_value=False),
            mock.patch.object(verify_module, "canonical_statement", return_value=None),
            mock.patch.object(sign_module, "statement_payload", return_value=None),
        ):
            yield
    finally:
        jws._checked_header_cached.cache_clear()


def verify_result(payload: bytes, text: str | bytes, trust: ecpa.TrustStore) -> tuple[Any, ...]:
    try:
        verified = ecpa.verify(payload, text, trust, now=NOW)
    except ecpa.EcpaError as exc:
        return (exc.code, exc.detail)
    return ("OK", verified.payload, verified.header, verified.statement)


def same_verdict(payload: bytes, text: str | bytes, trust: ecpa.TrustStore = TRUST) -> Any:
    fast = verify_result(payload, text, trust)
    with reference_jcs():
        slow = verify_result(payload, text, trust)
    assert fast == slow
    event(str(fast[0]))
    return fast[0]


def render(value: Any, form: str) -> bytes:
    """JCS bytes, or the same value sorted by code point, or ASCII-escaped (pairs)."""
    if form == "jcs":
        return rfc8785.dumps(value)
    compact = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=form == "ascii")
    return compact.encode("utf-8")


def test_the_switch_really_changes_the_path() -> None:
    with (
        mock.patch.object(jcs.rfc8785, "dumps", wraps=rfc8785.dumps) as dumps,
        mock.patch.object(
            verify_module, "check_statement", wraps=verify_module.check_statement
        ) as checks,
    ):
        ecpa.verify(VALID.payload, VALID.detached_jws, TRUST, now=NOW)
        assert dumps.call_count == 0  # ASCII evidence: the fast path throughout
        assert checks.call_count == 0  # steps 12-17 by the canonical-statement fast path
        with reference_jcs():
            ecpa.verify(VALID.payload, VALID.detached_jws, TRUST, now=NOW)
        assert dumps.call_count == 2  # the header (step 6) and the payload (step 13)
        assert checks.call_count == 1


# --- verify ----------------------------------------------------------------------------------


@settings(max_examples=1000, deadline=None)
@given(data=st.data())
def test_verify_gives_the_same_result_on_mutated_evidence(data: st.DataObject) -> None:
    target = data.draw(st.sampled_from(["payload", "header", "jws", "structure", "corpus"]))
    if target == "payload":
        payload = data.draw(payload_variants(VALID.payload))
        same_verdict(payload, sign_raw(HEADER, payload))
    elif target == "header":
        same_verdict(VALID.payload, sign_raw(data.draw(payload_variants(HEADER)), VALID.payload))
    elif target == "jws":
        same_verdict(VALID.payload, data.draw(jws_mutations(VALID.detached_jws)))
    elif target == "structure":
        payload, text = data.draw(st.sampled_from(fuzz.POSITIVES))
        header_bytes = fuzz.strict_b64u(text.split("..")[0])
        assert header_bytes is not None
        if data.draw(st.booleans()):
            payload = data.draw(fuzz.structure_edit(payload, header=False))[0]
        else:
            header_bytes = data.draw(fuzz.structure_edit(header_bytes, header=True))[0]
        same_verdict(payload, sign_raw(header_bytes, payload), fuzz.TRUST)
    else:  # the corpus's positives, the four-byte one included, untouched
        payload, text = data.draw(st.sampled_from(fuzz.POSITIVES))
        assert same_verdict(payload, text, fuzz.TRUST) == "OK"


def with_members(*names: str) -> dict[str, Any]:
    doc = statement()
    doc.update(dict.fromkeys(names, 1))
    return doc


@st.composite
def wide_member_payloads(draw: st.DrawFn) -> bytes:
    """A statement with extra members named around U+FFFF/U+10000, in one of three forms."""
    doc = statement()
    target = doc["process"] if draw(st.booleans()) else doc
    for name in draw(st.lists(st.sampled_from(WIDE_NAMES), min_size=1, max_size=3, unique=True)):
        target[name + draw(st.sampled_from(["", "a", "\U00010000"]))] = draw(
            st.sampled_from([1, "x", "\U0001f600", [], {"\uffff": 1, "\U00010000": 2}])
        )
    return render(doc, draw(st.sampled_from(["jcs", "code-points", "ascii"])))


@settings(max_examples=400, deadline=None)
@given(payload=wide_member_payloads())
@example(payload=render(with_members("\uffff", "\U00010000"), "code-points"))
@example(payload=render(with_members("\uffff", "\U00010000"), "jcs"))
@example(payload=render(with_members("\U00010000"), "ascii"))
def test_member_names_above_uffff(payload: bytes) -> None:
    # Canonical bytes reach the statement check (an extra member); any other order or an
    # escaped pair is refused at step 13. rfc8785 decides which, not ecpa.
    canonical = rfc8785.dumps(json.loads(payload)) == payload
    code = same_verdict(payload, sign_raw(HEADER, payload))
    assert code == (E.INVALID_STATEMENT if canonical else E.NONCANONICAL_PAYLOAD)


@settings(max_examples=200, deadline=None)
@given(
    kid=st.text(st.sampled_from(["\U00010000", "\uffff", "\ue000", "k", "\x7f"]), min_size=1),
    form=st.sampled_from(["jcs", "code-points", "ascii"]),
)
def test_header_kids_above_uffff(kid: str, form: str) -> None:
    header = {**json.loads(HEADER), "kid": kid}
    raw = render(header, form)
    code = same_verdict(VALID.payload, sign_raw(raw, VALID.payload))
    assert code == (E.KEY_MISMATCH if raw == rfc8785.dumps(header) else E.MALFORMED_JWS)


# --- sign ------------------------------------------------------------------------------------


class Seven(enum.IntEnum):
    SEVEN = 7


class Tag(str, enum.Enum):
    EVENT = "invoked"


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


ODD = st.sampled_from(
    [
        1.0,
        float("nan"),
        2**53,
        -1,
        Seven.SEVEN,
        Tag.EVENT,
        True,
        None,
        ("a", "b"),
        ["x", "x"],
        "\ud800",
        "\U0001f600",
        {"\uffff": 1, "\U00010000": 2},
        {1: "a"},
        _deep(31),
        _deep(32),
        b"x",
    ]
)


@st.composite
def odd_statements(draw: st.DrawFn) -> dict[str, Any]:
    doc = statement()
    for _ in range(draw(st.integers(1, 2))):
        name = draw(st.sampled_from([*sorted(doc), "process.epoch", "\U00010000", "extra"]))
        if name.startswith("process.") and isinstance(doc["process"], dict):
            doc["process"][name.removeprefix("process.")] = draw(ODD)
        elif name.startswith("process."):  # "process" itself was replaced by an odd value
            continue
        else:
            doc[name] = draw(ODD)
    return doc


def sign_result(doc: Any, key: ecpa.SigningKey) -> tuple[Any, ...]:
    try:
        signed = ecpa.sign(doc, key)
    except ecpa.EcpaError as exc:
        return (exc.code, exc.detail)
    return ("OK", signed.payload, signed.detached_jws, signed.statement)


@settings(max_examples=400, deadline=None)
@given(
    doc_key=st.one_of(
        signable_cases().map(lambda case: (case[0], case[2])),
        st.tuples(odd_statements(), st.sampled_from([KEY_1, KEY_2])),
    )
)
@example(doc_key=(statement(critical_claims=("a", "a")), KEY_1))
@example(doc_key=(statement(process__epoch=1.0), KEY_1))
@example(doc_key=(statement(event=_deep(40)), KEY_1))
def test_sign_gives_the_same_result(doc_key: tuple[dict[str, Any], ecpa.SigningKey]) -> None:
    doc, key = doc_key
    fast = sign_result(doc, key)
    with reference_jcs():
        slow = sign_result(doc, key)
    assert fast == slow
    event(str(fast[0]))


# --- the header cache ------------------------------------------------------------------------


def test_the_cache_hands_out_fresh_headers() -> None:
    first = ecpa.verify(VALID.payload, VALID.detached_jws, TRUST, now=NOW)
    first.header["kid"] = "changed"
    first.header["crit"].append("b64")
    again = ecpa.verify(VALID.payload, VALID.detached_jws, TRUST, now=NOW)
    assert again.header == json.loads(HEADER)
    assert again.header is not first.header


def test_the_cache_keeps_no_failure_and_stays_bounded() -> None:
    jws._checked_header_cached.cache_clear()
    bad = b64u_encode(HEADER.replace(b"EdDSA", b"HS256"))
    for _ in range(2):  # the same code, from the full checks, both times
        with pytest.raises(ecpa.EcpaError) as refused:
            jws.parse_header(bad)
        assert refused.value.code == E.WRONG_ALGORITHM
    assert jws._checked_header_cached.cache_info().currsize == 0
    long_kid = {**json.loads(HEADER), "kid": "k" * 900}
    segment = b64u_encode(rfc8785.dumps(long_kid))
    assert len(segment) > jws._HEADER_CACHE_MAX_SEGMENT
    assert jws.parse_header(segment)[1] == long_kid
    assert jws._checked_header_cached.cache_info().currsize == 0  # too long to keep
    for n in range(3 * jws._HEADER_CACHE_SIZE):
        jws.parse_header(b64u_encode(rfc8785.dumps({**long_kid, "kid": f"k{n}"})))
    assert jws._checked_header_cached.cache_info().currsize == jws._HEADER_CACHE_SIZE
