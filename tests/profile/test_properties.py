"""Property-based tests (hypothesis) of the profile's invariants.

1. sign -> verify round trip for any statement the model accepts; sign is deterministic.
2. ``verify`` raises only ``EcpaError`` for any bytes at all (PROFILE §4, STYLE rule 1), and
   what it accepts re-canonicalizes to exactly the payload bytes.
3. The fast JSON reader (C scanner) and the iterative reference reader agree.
4. Strict base64url: round trip, and one text per byte string (PROFILE §3 step 3).
5. JCS: parse-back, idempotence, and an independent oracle for values without floats.
6. sign refuses deep and cyclic members, and verify an oversized bytes JWS, with an
   ``EcpaError`` (no RecursionError, no endless walk, sizes before decoding).

Example counts are set per test so that the whole file stays well under 40 s on two cores.
"""

from __future__ import annotations

import json
import signal
from functools import partial
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ecpa
from ecpa.errors import ErrorCode
from ecpa.profile.b64 import b64u_decode, b64u_encode
from ecpa.profile.json.strict_json import MAX_DEPTH, parse_object, parse_reference
from tests.support import (
    KEY_1,
    KEY_2,
    NOW,
    header_bytes,
    sign_raw,
    statement,
    store,
    trust_doc,
    trust_entry,
)

MAX_SAFE = 2**53 - 1

# --- helpers ---------------------------------------------------------------------------------


def same(a: Any, b: Any, *, ordered: bool = True) -> bool:
    """Type-aware equality: ``True != 1``, ``0 != False``, ``[] != ()``; optionally key order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        if ordered and list(a) != list(b):
            return False
        return a.keys() == b.keys() and all(same(a[k], b[k], ordered=ordered) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(
            same(x, y, ordered=ordered) for x, y in zip(a, b, strict=True)
        )
    return bool(a == b)


def depth(value: Any) -> int:
    """Container nesting depth as PROFILE §4 counts it (a top-level object is depth 1)."""
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def outcome(parser: Any, data: bytes | str) -> tuple[str, Any]:
    """("ok", value) or ("err", code); any exception other than EcpaError propagates."""
    try:
        return ("ok", parser(data, what="x"))
    except ecpa.EcpaError as exc:
        return ("err", exc.code)


def utf16_key(name: str) -> bytes:
    return name.encode("utf-16-be")


def jcs_oracle(value: Any) -> str:
    """RFC 8785 for values without floats, written independently of ``rfc8785``."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        out = ['"']
        for ch in value:
            if ch in '"\\':
                out.append("\\" + ch)
            elif ch in "\b\f\n\r\t":
                out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
            elif ord(ch) < 0x20:
                out.append(f"\\u{ord(ch):04x}")
            else:
                out.append(ch)
        out.append('"')
        return "".join(out)
    if isinstance(value, list):
        return "[" + ",".join(jcs_oracle(v) for v in value) + "]"
    items = sorted(value.items(), key=lambda kv: utf16_key(kv[0]))
    return "{" + ",".join(f"{jcs_oracle(k)}:{jcs_oracle(v)}" for k, v in items) + "}"


def keys_in_jcs_order(value: Any) -> bool:
    if isinstance(value, dict):
        names = list(value)
        return names == sorted(names, key=utf16_key) and all(
            keys_in_jcs_order(v) for v in value.values()
        )
    if isinstance(value, list):
        return all(keys_in_jcs_order(v) for v in value)
    return True


# --- strategies ------------------------------------------------------------------------------

# Characters JCS and the parsers treat specially: controls (escaped), quote and backslash,
# DEL (not escaped), U+2028/9, a BOM inside a string, a combining sequence (no normalization),
# and astral characters (UTF-16 surrogate pairs: they decide JCS key order).
TRICKY = (
    '\x00\x01\x08\x1f\x7f"\\/\b\f\n\r\t \u00e9e\u0301\u2028\u2029\ufeff\ue000\uffff'
    "\U0001f600\U00010000\U0010ffff"
)
# Any Unicode scalar value: surrogates excluded (UTF-8 cannot carry them).
CHARS = st.one_of(st.characters(codec="utf-8"), st.sampled_from(TRICKY))


def texts(min_size: int = 0, max_size: int = 24) -> st.SearchStrategy[str]:
    return st.text(CHARS, min_size=min_size, max_size=max_size)


NON_EMPTY = texts(min_size=1)
B64_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
DIGESTS = st.text("0123456789abcdef", min_size=64, max_size=64).map("sha256:".__add__)
SAFE_INTS = st.one_of(
    st.integers(0, MAX_SAFE), st.sampled_from([0, 1, MAX_SAFE - 1, MAX_SAFE, NOW])
)


@st.composite
def signable_cases(draw: st.DrawFn) -> tuple[dict[str, Any], int, ecpa.SigningKey]:
    """A statement the model accepts, a ``now`` inside its window, and a key."""
    observed = draw(SAFE_INTS)
    gap = draw(st.one_of(st.integers(0, 300), st.integers(0, MAX_SAFE)))
    issued = min(observed + gap, MAX_SAFE)
    expires = min(issued + draw(st.integers(0, 300)), MAX_SAFE)
    now = issued + draw(st.integers(0, expires - issued))
    names = st.one_of(NON_EMPTY, st.sampled_from(["test-key-1", "host-\u00e9", "host-e\u0301"]))
    doc = {
        "schema": ecpa.STATEMENT_SCHEMA,
        "profile": ecpa.PROFILE_ID,
        "issuer": draw(names),
        "kid": draw(names),
        "subject": draw(names),
        "plan_id": draw(NON_EMPTY),
        "launch_id": draw(NON_EMPTY),
        "plugin_id": draw(NON_EMPTY),
        "obligation": draw(NON_EMPTY),
        "event": draw(NON_EMPTY),
        "challenge_nonce": draw(NON_EMPTY),
        "artifact_digest": draw(DIGESTS),
        "evidence_digest": draw(DIGESTS),
        "process": {
            "host": draw(NON_EMPTY),
            "role": draw(NON_EMPTY),
            "start_identity": draw(NON_EMPTY),
            "ordinal": draw(SAFE_INTS),
            "epoch": draw(SAFE_INTS),
        },
        "observed_at": observed,
        "issued_at": issued,
        "expires_at": expires,
        "critical_claims": [],
    }
    return doc, now, draw(st.sampled_from([KEY_1, KEY_2]))


# --- 1. round trip ---------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(case=signable_cases())
def test_sign_then_verify_returns_the_statement(
    case: tuple[dict[str, Any], int, ecpa.SigningKey],
) -> None:
    doc, now, key = case
    signed = ecpa.sign(doc, key)
    again = ecpa.sign(json.loads(json.dumps(doc)), key)  # a fresh, equal dict
    assert (again.payload, again.detached_jws) == (signed.payload, signed.detached_jws)
    assert signed.payload == ecpa.canonicalize(doc)

    trust = ecpa.TrustStore.from_dict(
        trust_doc(
            trust_entry(
                issuer=doc["issuer"],
                kid=doc["kid"],
                subjects=[doc["subject"]],
                public_key_b64=key.public_key.to_b64(),
            )
        )
    )
    # The model puts no bound on issued_at - observed_at; the policy's observation age does.
    policy = ecpa.Policy(max_observation_age=max(300, now - doc["observed_at"]))
    binding = ecpa.Binding(
        plan_id=doc["plan_id"],
        launch_id=doc["launch_id"],
        plugin_id=doc["plugin_id"],
        artifact_digest=doc["artifact_digest"],
        process_epoch=doc["process"]["epoch"],
        challenge_nonce=doc["challenge_nonce"],
    )
    fence = ecpa.MemoryReplayFence()
    verified = ecpa.verify(
        signed.payload,
        signed.detached_jws,
        trust,
        now=now,
        policy=policy,
        binding=binding,
        replay=fence,
    )
    assert same(verified.statement.to_dict(), doc, ordered=False)
    assert same(signed.statement.to_dict(), doc, ordered=False)
    assert verified.payload == ecpa.canonicalize(doc)
    assert verified.header["kid"] == doc["kid"]

    with pytest.raises(ecpa.EcpaError) as replayed:
        ecpa.verify(
            signed.payload, signed.detached_jws, trust, now=now, policy=policy, replay=fence
        )
    assert replayed.value.code == ErrorCode.REPLAYED_NONCE


# --- 2. any bytes in, only EcpaError out -----------------------------------------------------

TRUST = store()
VALID = ecpa.sign(statement(), KEY_1)
HEADER = header_bytes()

# JSON-ish fragments spliced into payloads and headers.
FRAGMENTS = [
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e5",
    b"1.5",
    b"-0",
    b"01",
    b"9007199254740992",
    b"-9007199254740992",
    b"9" * 400,
    b"true",
    b"false",
    b"null",
    b'"\\ud800"',
    b"\\ud800",
    b"\\udc00\\ud800",
    b"\\ud83d\\ude00",
    b"\\u0000",
    b"\\u",
    b"\\",
    b'"',
    b"[" * 4,
    b"[" * (MAX_DEPTH + 1),
    b"[" * 3000,
    b"{" * 40,
    b"]",
    b"}",
    b",",
    b":",
    b'"kid":"test-key-1",',
    b'"issued_at":1,',
    b'"extra":1,',
    b"\xef\xbb\xbf",
    b"\x00",
    b"\xff",
    b"\xc3",
    b"\xc3\xa9",
    b"e\xcc\x81",
    b"\xed\xa0\x80",  # a UTF-8-encoded surrogate: invalid UTF-8
    b"\xf0\x9f\x98\x80",
    b" ",
    b"\t\n\r",
]


@st.composite
def mutations(draw: st.DrawFn, data: bytes) -> bytes:
    """1-4 edits of ``data``: bit flips, insertions, deletions and JSON-ish splices."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "splice", "overwrite"]))
        pos = draw(st.integers(0, len(buf)))
        if op == "flip" and buf:
            buf[min(pos, len(buf) - 1)] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete":
            del buf[pos : pos + draw(st.integers(1, 8))]
        elif op == "splice":
            buf[pos:pos] = draw(st.sampled_from(FRAGMENTS))
        else:
            fragment = draw(st.sampled_from(FRAGMENTS))
            buf[pos : pos + len(fragment)] = fragment
    return bytes(buf)


def reencodings(data: bytes) -> st.SearchStrategy[bytes]:
    """Whole-text transformations: BOM, UTF-16/32, whitespace, key order, duplicates."""
    text = data.decode("utf-8")
    obj = json.loads(text)
    reordered = json.dumps(dict(reversed(list(obj.items()))), ensure_ascii=False)
    return st.sampled_from(
        [
            b"\xef\xbb\xbf" + data,
            text.encode("utf-16"),
            text.encode("utf-16-le"),
            text.encode("utf-16-be"),
            text.encode("utf-32"),
            b" " + data,
            data + b"\n",
            json.dumps(obj).encode(),  # ASCII escapes and spaces: not canonical
            json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode(),
            reordered.encode(),
            b'{"kid":"test-key-1",' + data[1:],  # duplicate member, first position
            data[:-1] + b',"schema":"x"}',  # duplicate member, last position
            data[:-1] + b',"x":' + b"[" * 5000 + b"]" * 5000 + b"}",
        ]
    )


# Values that reach the checks after parsing: times around NOW, other keys and issuers,
# critical claims, wrong types, no-normalization look-alikes.
ODD_VALUES = st.one_of(
    st.sampled_from(
        [
            NOW - 301,
            NOW - 1,
            NOW,
            NOW + 1,
            NOW + 301,
            0,
            -1,
            MAX_SAFE,
            -MAX_SAFE,
            True,
            None,
            "",
            "test-key-2",
            "none",
            "host-e\u0301",
            "sha256:" + "A" * 64,
            "sha256:" + "a" * 64 + "\n",
            ["ecpa_profile"],
            ["x"],
            ["x", "x"],
            [],
            {},
        ]
    ),
    texts(max_size=8),
    st.integers(-MAX_SAFE, MAX_SAFE),
)


@st.composite
def member_edits(draw: st.DrawFn, data: bytes) -> bytes:
    """Canonical JSON of the object in ``data`` with 1-2 members replaced, added or removed."""
    obj = json.loads(data)
    for _ in range(draw(st.integers(1, 2))):
        target = obj
        if "process" in obj and isinstance(obj["process"], dict) and draw(st.booleans()):
            target = obj["process"]
        name = draw(st.sampled_from([*sorted(target), "extra"]))
        roll = draw(st.integers(0, 9))
        if roll == 0:
            target.pop(name, None)
        elif roll <= 2 or name not in target:
            target[name] = draw(ODD_VALUES)
        else:
            target[name] = draw(same_type_values(target[name]))
    return ecpa.canonicalize(obj)


def same_type_values(current: Any) -> st.SearchStrategy[Any]:
    """A value of the member's own JSON type: what passes step 14 and reaches later checks."""
    if isinstance(current, bool) or current is None:
        return ODD_VALUES
    if isinstance(current, int):
        return st.one_of(
            st.sampled_from([NOW - 301, NOW - 2, NOW - 1, NOW, NOW + 1, NOW + 60, NOW + 301]),
            SAFE_INTS,
        )
    if isinstance(current, str):
        return st.one_of(
            st.sampled_from(
                [
                    current + "x",
                    current.upper(),
                    "test-key-2",
                    "urn:ecpa:issuer:other",
                    "guest",
                    "ecpa-attestation-statement/0.2",
                    "ecpa-jcs-jws-eddsa/0.2",
                ]
            ),
            NON_EMPTY,
            DIGESTS,
        )
    if isinstance(current, list):
        return st.lists(st.sampled_from(["x", "ecpa_profile", ""]), max_size=2)
    return ODD_VALUES


def payload_variants(data: bytes) -> st.SearchStrategy[bytes]:
    return st.one_of(mutations(data), reencodings(data), member_edits(data))


JWS_CHARS = st.sampled_from(
    [*"AZaz09-_.=+/ \n", "\u00e9", "\U0001f600", "\x00", "\ufeff", "\uff21"]
)


@st.composite
def jws_mutations(draw: st.DrawFn, text: str) -> str:
    """1-3 character edits of a JWS text: base64url look-alikes, dots, padding, non-ASCII."""
    chars = list(text)
    for _ in range(draw(st.integers(1, 3))):
        pos = draw(st.integers(0, len(chars)))
        op = draw(st.sampled_from(["replace", "insert", "delete"]))
        if op == "replace" and pos < len(chars):
            chars[pos] = draw(JWS_CHARS)
        elif op == "insert":
            chars.insert(pos, draw(JWS_CHARS))
        else:
            del chars[pos : pos + draw(st.integers(1, 4))]
    return "".join(chars)


def check_verify(payload: bytes, jws: str | bytes) -> ecpa.Verified | None:
    """Verify; return the result or None on EcpaError. Any other exception fails the test."""
    try:
        verified = ecpa.verify(payload, jws, TRUST, now=NOW)
    except ecpa.EcpaError:
        return None
    # What verify accepts is its own canonical form: the bytes verified are the bytes parsed.
    assert verified.payload == payload
    assert ecpa.canonicalize(verified.statement.to_dict()) == payload
    return verified


@settings(max_examples=1000, deadline=None)
@given(
    payload=st.one_of(st.binary(max_size=256), st.just(VALID.payload)),
    jws=st.one_of(
        st.text(max_size=256),
        st.binary(max_size=256),
        st.just(VALID.detached_jws),
        # Shaped like a detached JWS, so that the segments themselves are decoded.
        st.builds("{}..{}".format, st.text(B64_CHARS, max_size=200), st.text(B64_CHARS)),
    ),
)
def test_verify_arbitrary_input_raises_only_ecpa_error(payload: bytes, jws: str | bytes) -> None:
    verified = check_verify(payload, jws)
    if verified is not None:
        text = jws if isinstance(jws, str) else jws.decode("latin-1")
        assert (payload, text) == (VALID.payload, VALID.detached_jws)


@settings(max_examples=1500, deadline=None)
@given(data=st.data())
def test_verify_mutated_valid_pair(data: st.DataObject) -> None:
    target = data.draw(
        st.sampled_from(
            ["payload", "jws", "payload-resigned", "members-resigned", "header-resigned"]
        )
    )
    if target == "members-resigned":
        # Canonical payloads with edited members reach the statement, trust and time checks.
        payload = data.draw(member_edits(VALID.payload))
        jws = sign_raw(HEADER, payload)
    elif target == "payload":
        # The original signature no longer covers the bytes: refused, never a crash.
        payload, jws = data.draw(payload_variants(VALID.payload)), VALID.detached_jws
    elif target == "jws":
        payload, jws = VALID.payload, data.draw(jws_mutations(VALID.detached_jws))
    elif target == "payload-resigned":
        # A valid signature over the mutated bytes reaches every check after step 12.
        payload = data.draw(payload_variants(VALID.payload))
        jws = sign_raw(HEADER, payload)
        if len(payload) <= 64 * 1024:
            # Steps 1-11 pass with the profile's header, so a payload the strict reader
            # refuses is refused by verify with the reader's code (step 12).
            parsed = outcome(parse_object, payload)
            assert parsed[0] == outcome(parse_reference, payload)[0]
            if parsed[0] == "err":
                with pytest.raises(ecpa.EcpaError) as refused:
                    ecpa.verify(payload, jws, TRUST, now=NOW)
                assert refused.value.code == parsed[1]
    else:
        payload = VALID.payload
        jws = sign_raw(data.draw(payload_variants(HEADER)), payload)
    verified = check_verify(payload, jws)
    if verified is not None and not target.endswith("resigned"):
        # Non-malleability: only the signed bytes themselves verify.
        assert (payload, jws) == (VALID.payload, VALID.detached_jws)


# --- 3. fast reader vs reference reader ------------------------------------------------------

TOKENS = [
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    '"',
    "\\",
    "\\u",
    "\\ud800",
    "\\udc00",
    "\\ud83d\\ude00",
    "\\u0041",
    "\\n",
    "NaN",
    "Infinity",
    "-Infinity",
    "-",
    "1.5",
    "1e3",
    "1E+3",
    "1.",
    "0",
    "-0",
    "01",
    "9007199254740991",
    "9007199254740992",
    "-9007199254740992",
    "1" * 30,
    "true",
    "false",
    "null",
    "tru",
    " ",
    "\t",
    "\n",
    "\r",
    "\u00e9",
    "\U0001f600",
    "\u2028",
    "\x01",
    '"a"',
    '"b"',
    '"a":',
    '"a":1',
    '"NaN"',
]

# Trees whose objects are lists of (name, value) pairs, so a name may repeat.
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.sampled_from([MAX_SAFE, -MAX_SAFE, MAX_SAFE + 1, -MAX_SAFE - 1, 10**400]),
    st.floats(),  # NaN and the infinities render as NaN / Infinity / -Infinity
    st.text(st.characters(), max_size=8),  # lone surrogates render as \udXXX escapes
)
NAMES = st.one_of(st.sampled_from(["a", "b", "NaN", "\u00e9", "\U0001f600"]), st.text(max_size=4))


def _tree_containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(st.tuples(NAMES, children), max_size=4).map(lambda pairs: ("obj", pairs)),
    )


TREES = st.recursive(SCALARS, _tree_containers, max_leaves=24)


def render(tree: Any, ascii_only: bool, space: str) -> str:
    if isinstance(tree, tuple):
        members = [
            f"{json.dumps(k, ensure_ascii=ascii_only)}:{space}{render(v, ascii_only, space)}"
            for k, v in tree[1]
        ]
        return "{" + f",{space}".join(members) + "}"
    if isinstance(tree, list):
        return "[" + f",{space}".join(render(v, ascii_only, space) for v in tree) + "]"
    return json.dumps(tree, ensure_ascii=ascii_only)


@st.composite
def json_texts(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["tree", "mutated-tree", "tokens", "object-tokens", "raw"]))
    if kind == "raw":
        return draw(st.binary(max_size=64))
    if kind in ("tree", "mutated-tree"):
        pairs = draw(st.lists(st.tuples(NAMES, TREES), max_size=5))
        top = draw(st.one_of(st.just(("obj", pairs)), TREES))
        text = render(top, draw(st.booleans()), draw(st.sampled_from(["", " ", "\n  "])))
        if kind == "mutated-tree":
            chars = list(text)
            for _ in range(draw(st.integers(1, 3))):
                pos = draw(st.integers(0, len(chars)))
                if draw(st.booleans()):
                    chars.insert(pos, draw(st.sampled_from(TOKENS)))
                else:
                    del chars[pos : pos + draw(st.integers(1, 3))]
            text = "".join(chars)
    else:
        text = "".join(draw(st.lists(st.sampled_from(TOKENS), max_size=30)))
        if kind == "object-tokens":
            text = "{" + text + "}"
    # Lone surrogates from unescaped output become CESU-8 bytes: invalid UTF-8.
    return text.encode("utf-8", "surrogatepass")


DEEP = 5000


@settings(max_examples=2000, deadline=None)
@given(data=json_texts())
@example(data=b'{"a":"\\ud800"}')
@example(data=b'{"a":"\\ud83d\\ude00"}')
@example(data=b'{"a":"\\ud83d\\u0041"}')
@example(data=b'{"a":"\\ud83d')
@example(data=b'{"a":{"x":1,"x":2},"b":NaN}')
@example(data=b'{"a":{"x":NaN,"x":2}}')
@example(data=b'{"x":1,"x":NaN}')
@example(data=b'{"a":"\\ud800","b":' + b"[" * 40 + b"]" * 40 + b"}")
@example(data=b'{"a":' + b"[" * 40 + b"]" * 40 + b',"b":"\\ud800"}')
@example(data=b'{"a":' + b"[" * 40 + b"]" * 40 + b',"b":NaN}')
@example(data=b'{"a":' + b"[" * DEEP + b"1.5" + b"]" * DEEP + b"}")
@example(data=b'{"a":' + b"[" * DEEP + b"]" * DEEP + b',"a":1}')
@example(data=b'{"a":1e400, "b": ' + b"[" * DEEP)
@example(data=b'{"n":' + b"1" * 5000 + b"}")
@example(data=b'{"n":-0,"m":' + b"9" * 17 + b"}")
@example(data=b'{"a":"NaN","b":"Infinity"}')
def test_fast_and_reference_readers_agree(data: bytes) -> None:
    fast = outcome(parse_object, data)
    reference = outcome(parse_reference, data)
    assert fast[0] == reference[0], (fast, reference)
    if fast[0] == "err":
        assert fast[1] == reference[1]
        return
    assert same(fast[1], reference[1])
    # An accepted text is ordinary JSON: the standard library reads the same value.
    assert same(json.loads(data), fast[1])
    assert depth(fast[1]) <= MAX_DEPTH


@pytest.mark.parametrize(
    ("text", "code"),
    [
        pytest.param("[" * DEEP, ErrorCode.MALFORMED_JSON, id="unclosed-arrays"),
        # A top level that is not an object is class 1, before the depth.
        pytest.param("[" * DEEP + "]" * DEEP, ErrorCode.MALFORMED_JSON, id="top-level-array"),
        pytest.param("[" * DEEP + "]" * DEEP + "x", ErrorCode.MALFORMED_JSON, id="extra-data"),
        pytest.param(
            '{"a":' + "[" * DEEP + "]" * DEEP + "}", ErrorCode.UNSUPPORTED_VALUE, id="deep-arrays"
        ),
        pytest.param(
            '{"a":' + "[" * DEEP + "]" * DEEP, ErrorCode.MALFORMED_JSON, id="deep-unclosed-object"
        ),
        pytest.param(
            '{"a":' + "[" * DEEP + "]" * DEEP + "}}",
            ErrorCode.MALFORMED_JSON,
            id="deep-extra-brace",
        ),
        pytest.param(
            '{"a":' + "[" * DEEP + "]" * (DEEP - 1) + "}",
            ErrorCode.MALFORMED_JSON,
            id="deep-mismatched-bracket",
        ),
        pytest.param(
            '{"a":' * DEEP + "1" + "}" * DEEP, ErrorCode.UNSUPPORTED_VALUE, id="deep-objects"
        ),
        pytest.param(
            '{"a":' * DEEP + "1" + "}" * DEEP + ",",
            ErrorCode.MALFORMED_JSON,
            id="deep-objects-trailing-comma",
        ),
        # Class 2 (a constant, a duplicate) wins over class 3 (depth), even met deep inside.
        pytest.param(
            '{"a":' * DEEP + "NaN" + "}" * DEEP, ErrorCode.UNSUPPORTED_VALUE, id="deep-nan"
        ),
        pytest.param(
            '{"a":' * DEEP + '{"b":1,"b":2}' + "}" * DEEP,
            ErrorCode.DUPLICATE_KEY,
            id="deep-duplicate",
        ),
        pytest.param(
            '{"a":' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}", None, id="depth-32"
        ),
        pytest.param(
            '{"a":' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}",
            ErrorCode.UNSUPPORTED_VALUE,
            id="depth-33",
        ),
        pytest.param(
            '{"a":' + "[" * 500 + "]" * 500 + "}",
            ErrorCode.UNSUPPORTED_VALUE,
            id="depth-501-within-c-recursion",
        ),
    ],
)
def test_deep_nesting_is_an_ecpa_error_not_a_recursion_error(
    text: str, code: ErrorCode | None
) -> None:
    data = text.encode()
    for parser in (parse_object, parse_reference):
        result = outcome(parser, data)  # a RecursionError would propagate and fail here
        assert result[0] == ("ok" if code is None else "err")
        if code is not None:
            assert result[1] == code
    if len(data) <= 64 * 1024:
        # The same text as a payload under a valid signature: verify refuses it cleanly.
        with pytest.raises(ecpa.EcpaError) as refused:
            ecpa.verify(data, sign_raw(HEADER, data), TRUST, now=NOW)
        if code is not None:
            assert refused.value.code == code


# --- 4. strict base64url ---------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(raw=st.binary(max_size=100))
def test_b64u_round_trip(raw: bytes) -> None:
    text = b64u_encode(raw)
    assert "=" not in text
    assert b64u_decode(text, what="x") == raw


@settings(max_examples=2000, deadline=None)
@given(
    text=st.one_of(
        st.text(B64_CHARS, max_size=24),  # mostly valid: trailing bits and lengths vary
        st.text(B64_CHARS + "=+/ \n\r\t.", max_size=24),
        st.text(st.characters(max_codepoint=127), max_size=24),
        st.text(max_size=12),  # non-ASCII: never base64url
    )
)
@example(text="QQ")
@example(text="QR")  # non-zero trailing bits
@example(text="QUE")
@example(text="QUF")
@example(text="Q")  # length 4k+1
@example(text="QQ==")
@example(text="QQ\n")
@example(text="\uff21\uff21")  # fullwidth letters
@example(text="\u0663\u0663")  # Arabic-Indic digits
def test_b64u_decode_is_strict_and_unique(text: str) -> None:
    kind, result = outcome(b64u_decode, text)
    if kind == "err":
        assert result == ErrorCode.MALFORMED_JWS
    else:
        assert b64u_encode(result) == text  # exactly one text decodes to these bytes


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=12))
def test_b64u_decode_reports_the_callers_code(text: str) -> None:
    kind, result = outcome(partial(b64u_decode, code=ErrorCode.INVALID_KEY), text)
    assert kind == "ok" or result == ErrorCode.INVALID_KEY


# --- 5. JCS ----------------------------------------------------------------------------------


def _json_containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    names = st.one_of(texts(max_size=6), st.sampled_from(TRICKY))
    return st.one_of(st.lists(children, max_size=4), st.dictionaries(names, children, max_size=4))


JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-MAX_SAFE, MAX_SAFE),
        st.sampled_from([0, -1, MAX_SAFE, -MAX_SAFE]),
        texts(max_size=12),
    ),
    _json_containers,
    max_leaves=24,
)


@settings(max_examples=1000, deadline=None)
@given(value=JSON_VALUES)
@example(value={"\ue000": 1, "\U0001f600": 2, "\uffff": 3})  # UTF-16 order, not code points
@example(value={"a": '\x7f\u2028\x00\x1f"\\/'})
@example(value={"n": [MAX_SAFE, -MAX_SAFE, 0, True, False, None]})
def test_jcs_parse_back_and_idempotence(value: Any) -> None:
    canonical = ecpa.canonicalize(value)
    assert canonical == jcs_oracle(value).encode("utf-8")
    back = json.loads(canonical)
    assert same(back, value, ordered=False)
    assert keys_in_jcs_order(back)
    assert ecpa.canonicalize(back) == canonical
    if isinstance(value, dict) and depth(value) <= MAX_DEPTH:
        for parser in (parse_object, parse_reference):
            parsed = parser(canonical, what="x")
            assert same(parsed, value, ordered=False)
            assert ecpa.canonicalize(parsed) == canonical


@settings(max_examples=200, deadline=None)
@given(
    value=st.one_of(
        st.sampled_from([MAX_SAFE + 1, -MAX_SAFE - 1, 10**400, float("nan"), float("inf")]),
        st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3),
        st.builds(lambda k: {k: 1}, st.one_of(st.integers(), st.none(), st.booleans())),
        st.builds(set),
        st.builds(bytes),
    ).flatmap(lambda bad: st.sampled_from([bad, [bad], {"a": bad}, {"a": [1, {"b": bad}]}]))
)
def test_jcs_refuses_with_ecpa_error(value: Any) -> None:
    with pytest.raises(ecpa.EcpaError) as refused:
        ecpa.canonicalize(value)
    assert refused.value.code == ErrorCode.UNSUPPORTED_VALUE


# --- 6. deep, cyclic and oversized inputs: an EcpaError, in bounded time ---------------------


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


def test_sign_refuses_a_deeply_nested_member_with_ecpa_error() -> None:
    # A RecursionError from rfc8785 never escapes through canonicalize.
    with pytest.raises(ecpa.EcpaError) as refused:
        ecpa.sign(statement(event=_nested(DEEP)), KEY_1)
    assert refused.value.code == ErrorCode.UNSUPPORTED_VALUE
    with pytest.raises(ecpa.EcpaError) as refused:
        ecpa.canonicalize(_nested(DEEP))
    assert refused.value.code == ErrorCode.UNSUPPORTED_VALUE


def _on_alarm(signum: int, frame: Any) -> None:
    raise TimeoutError("sign() did not return within 1 s")


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs POSIX interval timers")
def test_sign_refuses_a_cyclic_member_with_ecpa_error() -> None:
    # Refused within a second: sign's float check never walks a self-containing list forever.
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(ecpa.EcpaError) as refused:
            ecpa.sign(statement(event=cyclic), KEY_1)
        assert refused.value.code == ErrorCode.UNSUPPORTED_VALUE
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_sizes_come_before_decoding_a_bytes_jws() -> None:
    # PROFILE §3 step 1: a non-ASCII bytes JWS with an oversized payload is TOO_LARGE.
    with pytest.raises(ecpa.EcpaError) as refused:
        ecpa.verify(b"x" * (64 * 1024 + 1), b"\xff", TRUST, now=NOW)
    assert refused.value.code == ErrorCode.TOO_LARGE
