"""The rules of a shape's members (:mod:`ecpa.shapes.shape`; a nested shape's is
:class:`ecpa.shapes.shape.Nested`): each checks one value
strictly, says what it expected and what it found, and writes its JSON Schema.

Strict means what PROFILE §2 and §5 ask: an integer is never a boolean, a string is never
a number, an array is a JSON array (a list or a tuple), never a set.
"""

from __future__ import annotations

import re
from typing import Any

from ecpa.profile.json.strict_json import MAX_SAFE_INTEGER

__all__ = [
    "ANY_TEXT",
    "COUNT",
    "TEXT",
    "Array",
    "Const",
    "Count",
    "Flag",
    "Line",
    "OneOf",
    "Rule",
    "Text",
    "Value",
    "shown",
]


class Rule:
    """The rule of one member's value."""

    expected: str = "a value"

    def check(self, value: Any, where: str, problems: list[str]) -> Any:
        """``value`` as the member holds it; on a problem, appended to ``problems``."""
        raise NotImplementedError

    def schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        """The member's JSON Schema (nested shapes go into ``defs``)."""
        raise NotImplementedError

    def _bad(self, value: Any, where: str, problems: list[str], expected: str = "") -> None:
        problems.append(
            f"member {where!r}: expected {expected or self.expected}; found {shown(value)}"
        )


def shown(value: Any) -> str:
    """``value`` as a message shows it: its repr, cut to 60 characters."""
    found = repr(value)
    return found if len(found) <= 60 else found[:57] + "..."


def _text(value: Any) -> Any:
    """A ``str`` subclass (a ``StrEnum``'s member) as the plain ``str`` it holds; any other
    value as it is."""
    return str.__str__(value) if isinstance(value, str) and type(value) is not str else value


def _encodable(value: str) -> bool:
    """Whether ``value`` is Unicode text, without a lone surrogate (JSON cannot carry one)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Text(Rule):
    """A string (never a number), of at least ``min_length`` code points."""

    def __init__(self, *, min_length: int = 1, pattern: str | None = None) -> None:
        self.min_length, self.pattern = min_length, pattern
        self._match = None
        if pattern is not None:  # ^...$ of the whole string: "$" never before a final "\n"
            if not (pattern.startswith("^") and pattern.endswith("$")):
                raise ValueError(f"expected a pattern anchored with ^ and $, found {pattern!r}")
            self._match = re.compile(pattern).fullmatch
            self.expected = f"a string matching {pattern}"
        elif min_length == 1:
            self.expected = "a non-empty string"
        else:
            self.expected = (
                f"a string of at least {min_length} characters" if min_length else "a string"
            )

    def check(self, value: Any, where: str, problems: list[str]) -> Any:
        value = _text(value)
        if (
            type(value) is not str
            or len(value) < self.min_length
            or (self._match is not None and self._match(value) is None)
        ):
            self._bad(value, where, problems)
        elif not _encodable(value):
            self._bad(value, where, problems, "a string without a lone surrogate")
        return value

    def schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "string"}
        if self.pattern is not None:
            out["pattern"] = self.pattern
        if self.min_length:
            out["minLength"] = self.min_length
        return out


class Const(Rule):
    """Exactly one string."""

    def __init__(self, value: str) -> None:
        self.value = value
        self.expected = repr(value)

    def check(self, value: Any, where: str, problems: list[str]) -> Any:
        value = _text(value)
        if type(value) is not str or value != self.value:
            self._bad(value, where, problems)
        return value

    def schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"const": self.value, "type": "string"}


class Line(Rule):
    """Printable text of 1 to ``max_length`` code points: no control character, line break
    or lone surrogate (``str.isprintable``), for text that goes into the environment and
    into statements."""

    def __init__(self, *, max_length: int = 1024) -> None:
        self.max_length = max_length
        self.expected = f"printable text of 1 to {max_length} characters"

    def check(self, value: Any, where: str, problems: list[str]) -> Any:
        value = _text(value)
        if (
            type(value) is not str
            or not 1 <= len(value) <= self.max_length
            or not value.isprintable()  # a lone surrogate is not printable either
        ):
            self._bad(value, where, problems)
        return value

    def schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"maxLength": self.max_length, "minLength": 1, "type": "string"}


class OneOf(Rule):
    """One of a few strings."""

    def __init__(self, *values: str) -> None:
        self.values = values
        self.expected = "one of " + ", ".join(repr(v) for v in values)

    def check(self, value: Any, where: str, problems: list[str]) -> Any:
        value = _text(value)
        if type(value) is not str or value not in self.values:
            self._bad(value, where, problems)
        return value

    def schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"enum": list(self.values), "type": "string"}


class Count(Rule):
    """An integer (never a boolean) in [``minimum``, ``maximum``]."""

    def __init__(self, *, minimum: int = 0, maximum: int = MAX_SAFE_INTEGER) -> None:
        self.minimum, self.maximum = minimum, maximum
        self.expected = f"an integer in [{minimum}, {maximum}]"

    def check(self, value: Any, where: str, problems: list[str]) -> Any:
        if isinstance(value, int) and type(value) not in (int, bool):
            value = int.__index__(value)  # an IntEnum's member: the plain int it holds
        if type(value) is not int or not self.minimum <= value <= self.maximum:
            self._bad(value, where, problems)
        return value

    def schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"maximum": self.maximum, "minimum": self.minimum, "type": "integer"}


class Flag(Rule):
    """true or false (never 0 or 1)."""

    expected = "a boolean"

    def check(self, value: Any, where: str, problems: list[str]) -> Any:
        if type(value) is not bool:
            self._bad(value, where, problems)
        return value

    def schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"type": "boolean"}


class Value(Rule):
    """A JSON object of any members (its rules are checked elsewhere, e.g. a JWK's)."""

    expected = "an object with string member names"

    def check(self, value: Any, where: str, problems: list[str]) -> Any:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            self._bad(value, where, problems)
            return value
        return dict(value)  # a copy of its own: the caller's dict may change later

    def schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"additionalProperties": True, "type": "object"}


class Array(Rule):
    """An array, each item by ``item``; ``unique``: no item twice; ``as_tuple``: held as a
    tuple (a frozen object's array), else as a list."""

    def __init__(
        self, item: Rule, *, min_items: int = 0, unique: bool = False, as_tuple: bool = False
    ) -> None:
        self.item, self.min_items, self.unique, self.as_tuple = item, min_items, unique, as_tuple
        self.expected = "an array" + (
            f" of at least {min_items} item" + "s" * (min_items != 1) if min_items else ""
        )

    def check(self, value: Any, where: str, problems: list[str]) -> Any:
        # A tuple is what a frozen object holds (taken only for such a member); a set or a
        # generator is no JSON array.
        kinds = (list, tuple) if self.as_tuple else list
        if not isinstance(value, kinds) or len(value) < self.min_items:
            self._bad(value, where, problems)
            return value
        before = len(problems)
        items = [self.item.check(item, f"{where}.{i}", problems) for i, item in enumerate(value)]
        if self.unique and len(problems) == before and len(set(items)) != len(items):
            dup = next(v for i, v in enumerate(items) if v in items[:i])
            problems.append(f"member {where!r}: expected unique items, found {shown(dup)} twice")
        return tuple(items) if self.as_tuple else items

    def schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"items": self.item.schema(defs), "type": "array"}
        if self.min_items:
            out["minItems"] = self.min_items
        if self.unique:
            out["uniqueItems"] = True
        return out


#: The rules most members have: a non-empty string, an integer in [0, 2**53-1].
TEXT = Text()
COUNT = Count()
#: Any string, "" included.
ANY_TEXT = Text(min_length=0)
