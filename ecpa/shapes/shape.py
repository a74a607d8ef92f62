"""Strict JSON object shapes, each defined once: a class lists its members with their rules,
and from that one list come its checks, its Python class (a frozen dataclass) and its JSON
Schema.

Strict means what PROFILE §2 and §5 ask: an integer is never a boolean, a string is never
a number, an object holds exactly its members. A problem is said as what was expected and
what was found, at its place (``member 'process.host': ...``).

The statement, the trust store, the policy, the binding and the runtime's launch and
counters records are shapes rather than pydantic models for start-up: ``ecpa verify`` and
``ecpa status`` would otherwise import and build pydantic (about 80 ms of a 150 ms command,
docs/performance.md). A pydantic model may still hold a shape as a member (the corpus
formats do): :meth:`Shaped.__get_pydantic_core_schema__` checks it with these rules.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ecpa.shapes.rules import Rule

if TYPE_CHECKING or sys.version_info < (3, 11):  # pragma: no cover - 3.10
    from typing_extensions import dataclass_transform
else:
    from typing import dataclass_transform

__all__ = ["Nested", "ShapeError", "Shaped", "frozen_instance", "member"]

_NO_DEFAULT: Any = dataclasses.MISSING
_S = TypeVar("_S", bound="Shaped")
_T = TypeVar("_T")


def frozen_instance(cls: type[_T], values: dict[str, Any]) -> _T:
    """An instance of the frozen dataclass ``cls`` (not slotted) holding ``values``, one
    per field in field order: what ``cls(**values)`` builds, in one assignment instead of
    one ``object.__setattr__`` per field, and without ``__post_init__``'s checks (for
    values already checked). The tests compare both."""
    obj: _T = object.__new__(cls)
    object.__setattr__(obj, "__dict__", values)
    return obj


class ShapeError(ValueError):
    """A document that does not have its shape; ``problems`` names each thing wrong."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems[0])
        self.problems = problems


class Nested(Rule):
    """An object of the shape ``cls``."""

    def __init__(self, cls: type[Shaped]) -> None:
        self.cls = cls
        self.expected = "an object"

    def check(self, value: Any, where: str, problems: list[str]) -> Any:
        if isinstance(value, self.cls):  # built by keyword, hence already checked
            return value
        return self.cls._checked(value, where, problems)

    def schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        name = self.cls.__name__
        if name not in defs:
            defs[name] = {}  # a place first: a shape that holds itself ends here
            defs[name] = self.cls._schema(defs)
        return {"$ref": f"#/$defs/{name}"}


@dataclasses.dataclass(frozen=True)
class _Member:
    rule: Rule
    wire: str | None
    default: Any
    nullable: bool


def member(
    rule: Rule, *, wire: str | None = None, default: Any = _NO_DEFAULT, nullable: bool = False
) -> Any:
    """One member of a :class:`Shaped` class: its rule; ``wire``: its JSON name when that is
    not the attribute's; ``default``: its value when absent; ``nullable``: null allowed."""
    return _Member(rule, wire, default, nullable)


@dataclasses.dataclass(frozen=True)
class _Field:
    attr: str
    wire: str
    rule: Rule
    default: Any
    nullable: bool


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(member,))
class Shaped:
    """The base of a shape: each subclass is a frozen dataclass of its members, built by
    keyword (``Policy(clock_skew=2)``)."""

    __fields__: ClassVar[tuple[_Field, ...]] = ()
    __wire__: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = {f.attr: f for f in cls.__fields__}  # a parent shape's members first
        for attr in inspect.get_annotations(cls):  # then the class's own, in their order
            spec = cls.__dict__.get(attr)
            if not isinstance(spec, _Member):
                continue
            fields[attr] = _Field(attr, spec.wire or attr, spec.rule, spec.default, spec.nullable)
            if spec.default is _NO_DEFAULT:
                delattr(cls, attr)
            else:
                setattr(cls, attr, spec.default)
        cls.__fields__ = tuple(fields.values())
        cls.__wire__ = frozenset(f.wire for f in cls.__fields__)
        dataclasses.dataclass(frozen=True, kw_only=True)(cls)

    def __post_init__(self) -> None:
        """Built by keyword (``Binding(plan_id=...)``): the same checks as from a document.
        Raises :class:`ShapeError`."""
        doc = {f.wire: getattr(self, f.attr) for f in self.__fields__}
        checked = type(self).from_dict(doc, type(self).__name__)
        object.__setattr__(self, "__dict__", checked.__dict__)  # values as the rules hold them

    def check_whole(self) -> str | None:
        """A rule across members, run when each member holds: the problem, or None."""
        return None

    @classmethod
    def from_dict(cls: type[_S], doc: Any, what: str) -> _S:
        """The object of ``doc`` (parsed JSON). Raises :class:`ShapeError` at the first
        problem; ``what`` names the document when the problem is the whole of it."""
        problems: list[str] = []
        obj = cls._checked(doc, "", problems, what)
        if problems:
            raise ShapeError(problems)
        return obj

    @classmethod
    def problems(cls, doc: Any, what: str) -> list[str]:
        """Every problem of ``doc``, not just the first (an empty list: it has the shape)."""
        problems: list[str] = []
        cls._checked(doc, "", problems, what)
        return problems

    @classmethod
    def _checked(cls: type[_S], doc: Any, where: str, problems: list[str], what: str = "") -> _S:
        if not isinstance(doc, dict):
            place = f"member {where!r}: " if where else f"{what}: " if what else ""
            problems.append(f"{place}expected an object, found {type(doc).__name__}")
            return None  # type: ignore[return-value]  # never returned: problems is not empty
        before = len(problems)
        values: dict[str, Any] = {}
        for f in cls.__fields__:
            at = f"{where}.{f.wire}" if where else f.wire
            if f.wire not in doc:
                if f.default is _NO_DEFAULT:
                    problems.append(f"expected member {at!r}, found it missing")
                values[f.attr] = f.default
                continue
            value = doc[f.wire]
            values[f.attr] = (
                None if value is None and f.nullable else f.rule.check(value, at, problems)
            )
        for name in doc:
            if name not in cls.__wire__:
                at = f"{where}.{name}" if where else name
                problems.append(f"expected only the specified members, found extra member {at!r}")
        if len(problems) > before:
            return None  # type: ignore[return-value]  # never returned: problems is not empty
        obj = frozen_instance(cls, values)  # checked above: no second pass by __post_init__
        whole = obj.check_whole()
        if whole is not None:
            problems.append(f"member {where!r}: {whole}" if where else f"{what}: {whole}")
        return obj

    def to_dict(self, *, omit_none: bool = False) -> dict[str, Any]:
        """The object as plain JSON values, under their wire names; ``omit_none``: without
        the members that are None (an absent optional member)."""
        out: dict[str, Any] = {}
        for f in self.__fields__:
            value = getattr(self, f.attr)
            if value is None and omit_none:
                continue
            out[f.wire] = _plain(value, omit_none)
        return out

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The shape's JSON Schema (draft 2020-12), nested shapes under ``$defs``."""
        defs: dict[str, Any] = {}
        schema = cls._schema(defs)
        return {"$defs": defs, **schema} if defs else schema

    @classmethod
    def _schema(cls, defs: dict[str, Any]) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        for f in cls.__fields__:
            one = f.rule.schema(defs)
            if f.nullable:
                one = {"anyOf": [one, {"type": "null"}]}
            if f.default is not _NO_DEFAULT:
                one["default"] = f.default
            if "$ref" not in one:  # as pydantic writes them
                one["title"] = f.wire.replace("_", " ").title()
            properties[f.wire] = one
        out: dict[str, Any] = {"additionalProperties": False}
        if cls.__doc__:
            out["description"] = _clean_doc(cls.__doc__)
        out["properties"] = properties
        required = [f.wire for f in cls.__fields__ if f.default is _NO_DEFAULT]
        if required:
            out["required"] = required
        out["title"] = cls.__name__
        out["type"] = "object"
        return out

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """A pydantic model may hold this shape: it is checked by the rules above."""
        from pydantic_core import core_schema  # only when a pydantic model holds a shape

        def parse(value: Any) -> Any:
            if isinstance(value, cls):
                return value
            return cls.from_dict(value, cls.__name__)  # a ShapeError is a ValueError

        return core_schema.no_info_plain_validator_function(
            parse,
            ref=f"{cls.__module__}.{cls.__qualname__}",
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda obj: obj.to_dict()
            ),
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, core: Any, handler: Any) -> dict[str, Any]:
        return cls.json_schema()


def _plain(value: Any, omit_none: bool) -> Any:
    if isinstance(value, Shaped):
        return value.to_dict(omit_none=omit_none)
    if isinstance(value, (list, tuple)):
        return [_plain(item, omit_none) for item in value]
    return value


def _clean_doc(text: str) -> str:
    """A docstring as pydantic writes it into a schema: common indentation removed."""
    import inspect

    return inspect.cleandoc(text)
