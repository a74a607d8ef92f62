"""Shapes (ecpa.shapes.shape, ecpa.shapes.rules): strict members, problems in words, the
same checks by keyword as from a document, a round trip through JSON values, the schema
and the bridge into a pydantic model that holds one."""

from __future__ import annotations

import enum
import json
import re
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from ecpa.profile.statement import Process, Statement
from ecpa.profile.trust import TrustEntry, TrustStore, TrustStoreDocument
from ecpa.profile.verify import Binding, Policy
from ecpa.runtime.model.counters import Counters
from ecpa.shapes.rules import ANY_TEXT, COUNT, TEXT, Array, Const, Count, Flag, Text, Value
from ecpa.shapes.shape import Nested, Shaped, ShapeError, member
from tests.support import statement as statement_dict


class Inner(Shaped):
    """An inner object."""

    name: str = member(TEXT)
    size: int = member(Count(minimum=1, maximum=9))


class Outer(Shaped):
    """An outer object."""

    kind: str = member(Const("outer/1"), wire="schema")
    inner: Inner = member(Nested(Inner))
    tags: tuple[str, ...] = member(Array(ANY_TEXT, unique=True, as_tuple=True))
    flag: bool = member(Flag(), default=False)
    extra: dict[str, Any] | None = member(Value(), default=None, nullable=True)

    def check_whole(self) -> str | None:
        return None if self.inner.size != 7 or self.flag else "expected flag with size 7"


GOOD = {"schema": "outer/1", "inner": {"name": "a", "size": 3}, "tags": ["x", ""]}


def problems(doc: Any) -> list[str]:
    return Outer.problems(doc, "outer")


def test_a_document_of_the_shape_round_trips() -> None:
    obj = Outer.from_dict(GOOD, "outer")
    assert (obj.kind, obj.inner, obj.tags, obj.flag, obj.extra) == (
        "outer/1",
        Inner(name="a", size=3),
        ("x", ""),
        False,
        None,
    )
    assert obj.to_dict() == {**GOOD, "flag": False, "extra": None}
    assert obj.to_dict(omit_none=True) == {**GOOD, "flag": False}
    assert Outer.from_dict(json.loads(json.dumps(obj.to_dict())), "outer") == obj
    with pytest.raises(AttributeError):
        obj.flag = True  # type: ignore[misc]  # frozen


def _inner(**change: Any) -> dict[str, Any]:
    return {"inner": {"name": "a", "size": 3, **change}}


_NO_NAME: dict[str, Any] = {"inner": {"size": 3}}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_inner(size=True), "member 'inner.size': expected an integer in [1, 9]; found True"),
        (_inner(size=10), "member 'inner.size': expected an integer in [1, 9]; found 10"),
        (_inner(size=3.0), "member 'inner.size': expected an integer in [1, 9]; found 3.0"),
        (_inner(name=""), "member 'inner.name': expected a non-empty string; found ''"),
        (_inner(name=5), "member 'inner.name': expected a non-empty string; found 5"),
        (_NO_NAME, "expected member 'inner.name', found it missing"),
        (_inner(x=1), "expected only the specified members, found extra member 'inner.x'"),
        ({"inner": [1]}, "member 'inner': expected an object, found list"),
        ({"schema": "outer/2"}, "member 'schema': expected 'outer/1'; found 'outer/2'"),
        ({"tags": ["x", "x"]}, "member 'tags': expected unique items, found 'x' twice"),
        ({"tags": {"x"}}, "member 'tags': expected an array; found {'x'}"),
        ({"tags": [1]}, "member 'tags.0': expected a string; found 1"),
        ({"flag": 1}, "member 'flag': expected a boolean; found 1"),
        ({"extra": []}, "member 'extra': expected an object with string member names; found []"),
        (_inner(size=7), "outer: expected flag with size 7"),
    ],
)
def test_each_problem_is_said_at_its_place(change: dict[str, Any], said: str) -> None:
    doc = {**GOOD, **change}
    assert problems(doc) == [said]
    with pytest.raises(ShapeError) as caught:
        Outer.from_dict(doc, "outer")
    assert str(caught.value) == said


def test_every_problem_is_listed_members_first_then_extras_and_no_whole_check() -> None:
    doc = {"zz": 1, "schema": 1, "tags": [1], "inner": {"name": "a", "size": 7}}
    assert problems(doc) == [
        "member 'schema': expected 'outer/1'; found 1",
        "member 'tags.0': expected a string; found 1",
        "expected only the specified members, found extra member 'zz'",
    ]
    assert problems([]) == ["outer: expected an object, found list"]
    assert problems(GOOD) == []


def test_null_only_where_a_member_may_be_null() -> None:
    assert problems({**GOOD, "extra": None}) == []
    assert problems({**GOOD, "flag": None}) == ["member 'flag': expected a boolean; found None"]


def test_built_by_keyword_it_is_checked_the_same() -> None:
    with pytest.raises(ShapeError, match="member 'size': expected an integer in"):
        Inner(name="a", size=0)
    with pytest.raises(ShapeError, match="member 'clock_skew'"):
        Policy(clock_skew=-1)
    with pytest.raises(ShapeError, match="member 'max_ttl'"):
        Policy(max_ttl=True)
    with pytest.raises(ShapeError, match="member 'plan_id'"):
        Binding(
            plan_id="",
            launch_id="l",
            plugin_id="p",
            artifact_digest="d",
            process_epoch=1,
            challenge_nonce="n",
        )
    with pytest.raises(ShapeError, match="expected exactly one of public_key_b64"):
        TrustEntry(issuer="i", kid="k", subjects=["s"], enabled=True, not_before=0, not_after=1)
    with pytest.raises(ShapeError, match=r"^Outer: expected flag with size 7$"):
        Outer(kind="outer/1", inner=Inner(name="a", size=7), tags=())
    built = Outer(kind="outer/1", inner=Inner(name="a", size=7), tags=["t"], flag=True)  # type: ignore[arg-type]
    assert built.tags == ("t",)  # an array is held as its rule says
    assert Policy() == Policy(clock_skew=0, max_ttl=300, max_observation_age=300)


def test_a_pattern_is_the_whole_string() -> None:
    digest = "sha256:" + "0" * 64
    rule = next(f.rule for f in Statement.__fields__ if f.attr == "artifact_digest")
    said: list[str] = []
    for value in (digest, digest + "\n", "x" + digest, digest.upper()):
        rule.check(value, "artifact_digest", said)
    assert len(said) == 3
    with pytest.raises(ValueError, match="anchored"):
        Text(pattern="sha256:")


def test_the_statement_and_its_wire_names() -> None:
    doc = statement_dict()
    st_ = Statement.from_dict(doc, "statement")
    assert st_.statement_schema == doc["schema"]
    assert isinstance(st_.process, Process)
    assert st_.to_dict() == doc
    assert Statement.__wire__ == set(doc)
    assert Counters.__wire__ >= {"schema", "process"}
    assert "schema_" not in Counters.__wire__


def test_the_trust_store_drops_absent_key_forms() -> None:
    entry = {
        "issuer": "i",
        "kid": "k",
        "public_key_b64": "A" * 43,
        "subjects": ["s"],
        "enabled": True,
        "not_before": 0,
        "not_after": 1,
    }
    doc = {"schema": "ecpa-trust-store/0.1", "keys": [entry]}
    assert TrustStoreDocument.from_dict(doc, "document").to_dict(omit_none=True) == doc
    assert TrustStoreDocument.problems(
        {**doc, "keys": [{**entry, "subjects": []}]}, "document"
    ) == ["member 'keys.0.subjects': expected an array of at least 1 item; found []"]


class HoldsShapes(BaseModel):
    binding: Binding | None = None
    policy: Policy = Policy()


def test_a_pydantic_model_may_hold_a_shape() -> None:
    held = HoldsShapes.model_validate({"binding": None, "policy": {"max_ttl": 5}})
    assert held.policy == Policy(max_ttl=5)
    with pytest.raises(ValidationError, match="member 'max_ttl': expected an integer"):
        HoldsShapes.model_validate({"policy": {"max_ttl": "5"}})
    assert HoldsShapes(policy=Policy(max_ttl=5)).model_dump(mode="json")["policy"]["max_ttl"] == 5
    schema = HoldsShapes.model_json_schema()
    assert schema["$defs"]["Policy"] == Policy.json_schema()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _from_dict_agrees_with_problems(shape: type[Shaped], doc: Any) -> None:
    """``from_dict`` raises exactly the problems ``problems`` lists, or, when there are
    none, returns an object whose JSON values are ``doc``."""
    listed = shape.problems(doc, "doc")
    assert all(isinstance(p, str) and p for p in listed)
    if listed:
        with pytest.raises(ShapeError) as caught:
            shape.from_dict(doc, "doc")
        assert caught.value.problems == listed
    else:
        assert shape.from_dict(doc, "doc").to_dict() == doc


@given(JSON | st.fixed_dictionaries({}, optional=dict.fromkeys(statement_dict(), JSON)))
def test_any_json_value_gives_a_statement_or_a_shape_error(doc: Any) -> None:
    _from_dict_agrees_with_problems(Statement, doc)


@given(st.dictionaries(st.sampled_from(["size", "name", "x"]), JSON, max_size=3))
def test_problems_is_empty_exactly_when_from_dict_succeeds(doc: dict[str, Any]) -> None:
    _from_dict_agrees_with_problems(Inner, doc)


def test_the_rules_say_what_they_expect() -> None:
    assert TEXT.expected == "a non-empty string"
    assert COUNT.expected == "an integer in [0, 9007199254740991]"
    assert ANY_TEXT.expected == "a string"
    assert Text(min_length=2).expected == "a string of at least 2 characters"


class Kind(str, enum.Enum):
    A = "a"


class Size(enum.IntEnum):
    THREE = 3


def test_subclasses_of_str_int_and_dict_are_taken_as_the_plain_values_they_hold() -> None:
    """As the pydantic models took them (strict mode takes subclasses): an enum's member
    is held as its plain value, never as the enum."""
    inner = Inner.from_dict(OrderedDict(name=Kind.A, size=Size.THREE), "inner")
    assert (type(inner.name), type(inner.size)) == (str, int)
    assert inner == Inner(name="a", size=3) == Inner(name=Kind.A, size=Size.THREE)
    subclassed = type("S", (str,), {})("outer/1")
    assert Outer.from_dict({**GOOD, "schema": subclassed}, "o").kind == "outer/1"


def test_what_json_cannot_carry_is_refused() -> None:
    assert problems({**GOOD, "inner": {"name": "\ud800", "size": 3}}) == [
        "member 'inner.name': expected a string without a lone surrogate; found '\\ud800'"
    ]
    assert problems({**GOOD, "extra": {1: "x"}}) == [
        "member 'extra': expected an object with string member names; found {1: 'x'}"
    ]
    said = "member 'subjects': expected an array of at least 1 item; found ('s',)"
    with pytest.raises(ShapeError, match=re.escape(said)):
        TrustEntry(issuer="i", kid="k", subjects=("s",), enabled=True, not_before=0, not_after=1)  # type: ignore[arg-type]
    assert Outer.from_dict({**GOOD, "tags": ("x",)}, "o").tags == ("x",)  # held as a tuple


def test_an_object_member_is_a_copy_of_its_own() -> None:
    given_jwk = {"kty": "OKP"}
    outer = Outer.from_dict({**GOOD, "extra": given_jwk}, "outer")
    given_jwk["kty"] = "RSA"
    assert outer.extra == {"kty": "OKP"}


def test_a_shape_derived_from_a_shape_keeps_its_members() -> None:
    class Wider(Inner):
        colour: str = member(TEXT, default="red")

    assert [f.attr for f in Wider.__fields__] == ["name", "size", "colour"]
    assert Wider.from_dict({"name": "a", "size": 3}, "w").to_dict() == {
        "name": "a",
        "size": 3,
        "colour": "red",
    }
    with pytest.raises(ShapeError, match="member 'size'"):
        Wider(name="a", size=0)


def test_the_trust_store_writes_no_null_for_an_absent_key_form() -> None:
    from tests.support import trust_doc

    doc = trust_doc()
    assert "public_key_jwk" not in json.dumps(TrustStore.from_dict(doc).to_dict())
    assert TrustStore.from_dict(doc).to_dict() == doc
