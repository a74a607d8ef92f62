"""Mutation strategies and independent oracles for tests/profile/test_fuzz.py.

Every strategy starts from VALID evidence and breaks it at one level: raw bytes, the
base64url text of the JWS segments, the JSON structure of the payload or header, a number,
or the Unicode encoding. Where PROFILE §3/§4 fixes the outcome of a single defect, the
strategy also returns the code it must give, computed here from the profile's rules and not
from ecpa's code: the structure is rendered with ``rfc8785`` directly, base64url strictness
and JSON number grammar are spelled out below.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Literal

import rfc8785
from hypothesis import strategies as st

import ecpa
from ecpa.corpus.generator.upstream import upstream_document

E = ecpa.ErrorCode
MAX_SAFE = 2**53 - 1
MAX_DEPTH = 32  # PROFILE §4: a top-level object is depth 1
NOW = 1_800_000_000
B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

CORPUS = upstream_document()
TRUST = ecpa.TrustStore.from_dict({"schema": ecpa.TRUST_STORE_SCHEMA, "keys": CORPUS["keys"]})


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def strict_b64u(text: str) -> bytes | None:
    """PROFILE §3 step 3 as written: the bytes, or None for text that is not strict."""
    if not set(text) <= B64_ALPHABET or len(text) % 4 == 1:
        return None
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return raw if b64u(raw) == text else None


def _case_parts(case: dict[str, Any]) -> tuple[bytes, str]:
    payload_b64 = case["payload_b64"]
    return base64.urlsafe_b64decode(payload_b64 + "=" * (-len(payload_b64) % 4)), str(
        case["detached_jws"]
    )


#: (payload, detached JWS) of every positive of the published corpus: the starting points.
POSITIVES = [_case_parts(c) for c in CORPUS["cases"] if c["expected"] == "OK"]
BASE_PAYLOAD, BASE_JWS = POSITIVES[0]  # positive-ascii, test-key-1
BASE_HEADER_B64 = BASE_JWS.split("..")[0]


# --- JSON trees whose objects may repeat names and whose numbers may be any literal --------


class Obj(list):  # type: ignore[type-arg]
    """An object as (name, value) pairs in text order: names may repeat."""


class Lit(str):
    """A number (or any token) written as this literal text."""

    __slots__ = ()


def to_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return Obj((name, to_tree(v)) for name, v in value.items())
    if isinstance(value, list):
        return [to_tree(v) for v in value]
    return value


def render(tree: Any) -> bytes:
    """Compact JSON text of a tree; canonical (RFC 8785) for a canonical tree."""
    if isinstance(tree, Obj):
        members = (rfc8785.dumps(name) + b":" + render(v) for name, v in tree)
        return b"{" + b",".join(members) + b"}"
    if isinstance(tree, list):
        return b"[" + b",".join(render(v) for v in tree) + b"]"
    if isinstance(tree, Lit):
        return tree.encode("utf-8")
    return rfc8785.dumps(tree)


def depth(tree: Any) -> int:
    if isinstance(tree, Obj):
        return 1 + max((depth(v) for _, v in tree), default=0)
    if isinstance(tree, list):
        return 1 + max((depth(v) for v in tree), default=0)
    return 0


def jcs_key(pair: tuple[str, Any]) -> bytes:
    return pair[0].encode("utf-16-be")


def parsed(data: bytes) -> Any:
    return to_tree(json.loads(data))


# --- level 3: structure of the payload and the header --------------------------------------

#: The header member whose value is wrong decides the code (PROFILE §3 steps 7-11).
HEADER_VALUE_CODES = {
    "alg": E.WRONG_ALGORITHM,
    "typ": E.WRONG_TYPE,
    "crit": E.UNKNOWN_CRITICAL_HEADER,
    "ecpa_profile": E.WRONG_PROFILE,
    "kid": E.UNKNOWN_KEY,  # step 11: a kid that is not a string
}


def other_type_values(current: Any) -> st.SearchStrategy[Any]:
    """A value of another JSON type than ``current`` (booleans are not integers)."""
    if isinstance(current, str):
        choices: list[Any] = [7, 0, True, False, None, [], Obj(), [current]]
    elif isinstance(current, bool) or current is None:
        choices = [0, "x", []]
    elif isinstance(current, int):
        choices = [str(current), True, False, None, [], Obj(), [current]]
    elif isinstance(current, list):
        choices = ["ecpa_profile", "", 0, None, True, Obj()]
    else:  # an object
        choices = [[], "x", 0, None, False]
    return st.sampled_from(choices)


def _wrap(value: Any, shells: list[bool]) -> Any:
    for as_object in shells:
        value = Obj([("v", value)]) if as_object else [value]
    return value


#: The outcome of an edit of an already edited text: refused, the code not predicted.
REFUSED = "refused"


@st.composite
def structure_edit(
    draw: st.DrawFn, data: bytes, *, header: bool
) -> tuple[bytes, E | Literal["refused"] | None]:
    """One structural defect in an object text, and the code it must give when the text was
    the canonical original (None: the text is unchanged and must verify)."""
    tree = parsed(data)
    container = tree
    if not header and isinstance(dict(tree).get("process"), Obj) and draw(st.booleans()):
        container = dict(tree)["process"]  # the same Obj, edited in place
    ops = ["drop", "duplicate", "reorder", "add", "retype", "nest", "wrap"]
    op = draw(st.sampled_from(ops if container else ["add", "wrap"]))
    index = draw(st.integers(0, max(0, len(container) - 1)))
    name, value = container[index] if container else ("", None)
    if op == "drop":
        del container[index]
        code = E.UNKNOWN_CRITICAL_HEADER if header else E.INVALID_STATEMENT  # step 5 / 14
    elif op == "duplicate":
        twin = draw(st.one_of(st.just(value), other_type_values(value)))
        container.insert(draw(st.integers(0, len(container))), (name, twin))
        code = E.DUPLICATE_KEY  # step 4 / 12: before any canonical-form check
    elif op == "reorder":
        order = draw(st.permutations(list(container)))
        canonical = list(container) == list(order)
        container[:] = order
        if canonical:
            return render(tree), None
        code = E.MALFORMED_JWS if header else E.NONCANONICAL_PAYLOAD  # step 6 / 13
    elif op == "add":
        names = {n for n, _ in container}
        extra = draw(st.sampled_from(["extra", "", "Kid", "kid ", "\u00e9", "b64", "zip"]))
        if extra in names:
            extra += "_"
        container.append((extra, draw(st.sampled_from([1, "x", True, None, []]))))
        container.sort(key=jcs_key)
        code = E.UNKNOWN_CRITICAL_HEADER if header else E.INVALID_STATEMENT
    elif op in ("retype", "nest"):
        if op == "retype":
            container[index] = (name, draw(other_type_values(value)))
        else:
            shells = draw(st.lists(st.booleans(), min_size=1, max_size=40))
            container[index] = (name, _wrap(value, shells))
        if depth(tree) > MAX_DEPTH:
            code = E.UNSUPPORTED_VALUE  # step 4 / 12: nesting deeper than 32
        elif header:
            code = HEADER_VALUE_CODES.get(name, REFUSED)
        else:
            code = E.INVALID_STATEMENT
    else:  # wrap the whole object
        if draw(st.booleans()):
            return render([tree]), E.MALFORMED_JSON  # a top level that is not an object
        tree = Obj([("statement", tree)])
        code = E.UNKNOWN_CRITICAL_HEADER if header else E.INVALID_STATEMENT
    return render(tree), code


# --- level 4: numbers ------------------------------------------------------------------------

NUMBER_MEMBERS = ("observed_at", "issued_at", "expires_at", "process.ordinal", "process.epoch")
JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")

NUMBER_LITERALS = st.one_of(
    st.sampled_from(
        [
            str(MAX_SAFE),
            str(-MAX_SAFE),
            str(MAX_SAFE + 1),
            str(-MAX_SAFE - 1),
            str(MAX_SAFE - 1),
            "0",
            "-0",
            "1.0",
            "1e3",
            "1E3",
            "1e-0",
            "0.0",
            "-0.0",
            "1e400",
            "9" * 400,
            "1" + "0" * 16,
            "0" * 3,
            "01",
            "-",
            "1.",
            ".5",
            "+1",
            "0x10",
            "NaN",
            "Infinity",
            "-Infinity",
            "infinity",
            "-NaN",
        ]
    ),
    st.integers(-(2**60), 2**60).map(str),
    st.integers(NOW - 400, NOW + 400).map(str),
    st.from_regex(r"-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,3})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
    st.text("0123456789-+.eE", min_size=1, max_size=10),
)


def number_class(literal: str) -> E | int:
    """PROFILE §4 for one number literal: the code it gives, or its integer value."""
    if literal in ("NaN", "Infinity", "-Infinity"):
        return E.UNSUPPORTED_VALUE  # class 2: a constant
    if not JSON_NUMBER.fullmatch(literal):
        return E.MALFORMED_JSON  # class 1: not JSON
    if not re.fullmatch(r"-?[0-9]+", literal) or abs(int(literal)) > MAX_SAFE:
        return E.UNSUPPORTED_VALUE  # class 2: a fraction, an exponent, out of range
    return int(literal)


def time_code(observed: int, issued: int, expires: int) -> E | None:
    """PROFILE §3 steps 21-23 at NOW with the default policy (skew 0, TTL 300, age 300)."""
    if issued > NOW or observed > NOW:
        return E.NOT_YET_VALID
    if expires < NOW:
        return E.EXPIRED
    if not observed <= issued <= expires or expires - issued > 300 or NOW - observed > 300:
        return E.INVALID_TIME
    return None


def with_numbers(literals: dict[str, str]) -> tuple[bytes, E | None]:
    """BASE_PAYLOAD with numeric members written as ``literals``, and the code it gives."""
    tree = parsed(BASE_PAYLOAD)
    for member, literal in literals.items():
        container, name = tree, member
        if member.startswith("process."):
            container, name = dict(tree)["process"], member.removeprefix("process.")
        container[[n for n, _ in container].index(name)] = (name, Lit(literal))
    classes = {m: number_class(lit) for m, lit in literals.items()}
    found = set(classes.values())
    # Class 1 wins over class 2 wherever they are; then the canonical form, then §1.
    for code in (E.MALFORMED_JSON, E.UNSUPPORTED_VALUE):
        if code in found:
            return render(tree), code
    if any(literals[m] != str(v) for m, v in classes.items()):  # "-0": integer 0, not JCS
        return render(tree), E.NONCANONICAL_PAYLOAD
    if any(isinstance(v, int) and v < 0 for v in found):
        return render(tree), E.INVALID_STATEMENT
    times = json.loads(render(tree))
    return render(tree), time_code(times["observed_at"], times["issued_at"], times["expires_at"])


# --- level 5: Unicode ------------------------------------------------------------------------

#: Letters with precomposed forms, combining marks, compatibility characters.
NORMALIZABLE = st.text(
    st.sampled_from(
        "aeAE\u00e9\u00c5\u1e69\u0301\u0323\u030a\u0307\ufb01\u2126\u212b\u00b5\u1100\u1161"
    ),
    min_size=1,
    max_size=6,
)
SURROGATE_ESCAPES = st.one_of(
    st.sampled_from(["\\ud800", "\\udfff", "\\udc00\\ud800", "\\ud83d\\ude00", "\\uD83D\\uDE00"]),
    st.integers(0xD800, 0xDFFF).map("\\u{:04x}".format),
    st.tuples(st.integers(0xD800, 0xDFFF), st.integers(0xD800, 0xDFFF)).map(
        lambda pair: "\\u{:04x}\\u{:04X}".format(*pair)
    ),
)
#: String members any non-empty text may fill (no lookup, pattern or binding depends on them).
FREE_TEXT = ("event", "obligation", "plan_id", "launch_id", "plugin_id", "challenge_nonce")


def cesu8(text: str) -> bytes:
    """CESU-8: characters outside the BMP as two 3-byte surrogates (invalid UTF-8)."""

    def pair(c: str) -> str:
        v = ord(c) - 0x10000
        return chr(0xD800 + (v >> 10)) + chr(0xDC00 + (v & 0x3FF))

    split = "".join(pair(c) if ord(c) > 0xFFFF else c for c in text)
    return split.encode("utf-8", "surrogatepass")


def reencodings(text: str) -> list[tuple[str, bytes]]:
    """Other byte forms of a JSON text; every one of them is ATTESTATION_MALFORMED_JSON."""
    out = [
        ("bom", b"\xef\xbb\xbf" + text.encode("utf-8")),
        ("utf-16", text.encode("utf-16")),
        ("utf-16-le", text.encode("utf-16-le")),
        ("utf-16-be", text.encode("utf-16-be")),
        ("utf-32", text.encode("utf-32")),
        ("utf-32-be", text.encode("utf-32-be")),
        ("overlong-colon", text.encode("utf-8").replace(b":", b"\xc0\xba", 1)),
    ]
    if any(ord(c) > 0xFFFF for c in text):
        out.append(("cesu-8", cesu8(text)))
    if any(0x80 <= ord(c) < 0x100 for c in text) and all(ord(c) < 0x100 for c in text):
        latin1 = text.encode("latin-1")
        try:  # "\xe1\x80\x80" in Latin-1 is valid UTF-8 for another text: not a re-encoding
            latin1.decode("utf-8")
        except UnicodeDecodeError:
            out.append(("latin-1", latin1))
    return out
