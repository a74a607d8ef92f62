"""Mutation fuzzing of ``verify`` with hypothesis, at five levels (tests/_fuzz_strategies.py).

test_properties.py feeds arbitrary bytes and small edits and asserts that nothing foreign
escapes. Here valid evidence is mutated with intent, level by level, and where the profile
fixes the outcome of a defect the exact code is asserted, from an oracle written from
PROFILE §3/§4 rather than from ecpa:

1. raw bytes of a whole harness input (fuzz/verify_fuzz.py's format): ranges flipped,
   inserted, deleted, duplicated, moved;
2. the base64url text of both JWS segments: alphabet swaps, padding, truncation, non-ASCII;
3. the JSON structure of the payload and the header, re-signed validly so the deep checks
   are reached: members dropped, duplicated, reordered, added, retyped, nested;
4. numbers: ±(2**53-1), 2**53, -0, 1.0, 1e3, huge digit strings, and sign vs verify;
5. Unicode: NFC/NFD/NFKC/NFKD issuers, lone surrogate escapes, BOM, UTF-16/32 and other
   re-encodings.

Every case also checks that only ``ecpa.EcpaError`` escapes and that what is accepted is
its own canonical form and re-signs to the same JWS. The last test runs the atheris harness
over its seed corpus, with atheris or without it.

The example counts keep the whole file near 11 s on two cores (budget: 40 s).
"""

from __future__ import annotations

import importlib.util
import sys
import unicodedata
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

import ecpa
from tests._fuzz_strategies import (
    BASE_HEADER_B64,
    BASE_JWS,
    BASE_PAYLOAD,
    FREE_TEXT,
    NORMALIZABLE,
    NUMBER_LITERALS,
    NUMBER_MEMBERS,
    POSITIVES,
    REFUSED,
    SURROGATE_ESCAPES,
    TRUST,
    E,
    Lit,
    b64u,
    number_class,
    parsed,
    reencodings,
    render,
    strict_b64u,
    structure_edit,
    with_numbers,
)
from tests.support import KEY_1, KEY_2, NOW, ROOT, sign_raw, statement, trust_doc, trust_entry

KEYS = {"test-key-1": KEY_1, "test-key-2": KEY_2}
HARNESS_PATH = ROOT / "fuzz" / "verify_fuzz.py"
SEED_DIR = ROOT / "fuzz" / "seeds"


def verdict(payload: bytes, jws: str | bytes, trust: ecpa.TrustStore = TRUST) -> str:
    """Verify; return "OK" or the code. Any exception but EcpaError propagates and fails the
    test; an accepted input must be its own canonical form and re-sign to the same bytes."""
    try:
        verified = ecpa.verify(payload, jws, trust, now=NOW)
    except ecpa.EcpaError as exc:
        event(exc.code.value)  # the spread of codes: --hypothesis-show-statistics
        return exc.code.value
    event("OK")
    text = jws if isinstance(jws, str) else jws.decode("latin-1")
    assert ecpa.canonicalize(verified.statement.to_dict()) == payload
    again = ecpa.sign(verified.statement, KEYS[verified.header["kid"]])
    assert (again.payload, again.detached_jws) == (payload, text)
    return "OK"


def expect(code: E | None) -> str:
    return "OK" if code is None else code.value


def load_harness(*, hide_atheris: bool) -> ModuleType:
    """fuzz/verify_fuzz.py as a module (not a package); optionally as if atheris were absent."""
    saved = sys.modules.get("atheris")
    if hide_atheris:
        sys.modules["atheris"] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        spec = importlib.util.spec_from_file_location("verify_fuzz", HARNESS_PATH)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        if hide_atheris:
            if saved is None:
                del sys.modules["atheris"]
            else:
                sys.modules["atheris"] = saved


HARNESS = load_harness(hide_atheris=True)

# --- 1. raw bytes ----------------------------------------------------------------------------

BASES = [HARNESS.encode_input(p, j, as_text=i % 2 == 1) for i, (p, j) in enumerate(POSITIVES)]
INTERESTING = [b".", b"..", b"=", b"\x00", b"\xff", b"\xef\xbb\xbf", b"{", b'"', b"\\u", b"e"]


@st.composite
def byte_mutations(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """(original, mutated): 1-4 range edits of a harness input holding valid evidence."""
    original = draw(st.sampled_from(BASES))
    buf = bytearray(original)
    for _ in range(draw(st.integers(1, 4))):
        a = draw(st.integers(0, len(buf)))
        b = min(len(buf), a + draw(st.integers(1, 64)))
        op = draw(st.sampled_from(["flip", "insert", "delete", "duplicate", "move", "splice"]))
        if op == "flip" and a < b:
            mask = draw(st.integers(1, 255))
            buf[a:b] = bytes(x ^ mask for x in buf[a:b])
        elif op == "insert":
            buf[a:a] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del buf[a:b]
        elif op in ("duplicate", "move"):
            chunk = bytes(buf[a:b])
            if op == "move":
                del buf[a:b]
            at = draw(st.integers(0, len(buf)))
            buf[at:at] = chunk
        else:
            buf[a:a] = draw(st.sampled_from(INTERESTING))
    return original, bytes(buf)


@settings(max_examples=1500, deadline=None)
@given(case=byte_mutations())
def test_raw_byte_mutations(case: tuple[bytes, bytes]) -> None:
    original, mutated = case
    payload, jws = HARNESS.split_input(mutated)
    if verdict(payload, jws) == "OK":
        # Non-malleability: the head may switch str/bytes, nothing else may change.
        was_payload, was_jws = HARNESS.split_input(original)
        text = jws if isinstance(jws, str) else jws.decode("latin-1")
        was = was_jws if isinstance(was_jws, str) else was_jws.decode("latin-1")
        assert (payload, text) == (was_payload, was)


# --- 2. base64url text of the segments -------------------------------------------------------

LOOKALIKES = ["\u00e9", "\uff21", "\u0663", "\u212a", "\x00", "\ufeff", " ", "\n", "\u2024"]


@st.composite
def segment_mutations(draw: st.DrawFn) -> tuple[bytes, str, str]:
    """(payload, original JWS, mutated JWS) with 1-3 text edits of its segments."""
    payload, jws = draw(st.sampled_from(POSITIVES))
    segments = jws.split("..")
    for _ in range(draw(st.integers(1, 3))):
        which = draw(st.integers(0, 1))
        seg = segments[which]
        pos = draw(st.integers(0, max(0, len(seg) - 1)))
        op = draw(
            st.sampled_from(
                ["standard", "swap", "pad", "truncate", "case", "lookalike", "trailing", "drop"]
            )
        )
        if op == "standard":
            seg = seg.translate(str.maketrans("-_", "+/"))
        elif op == "swap":
            seg = seg[:pos] + draw(st.sampled_from("-_+/")) + seg[pos + 1 :]
        elif op == "pad":
            seg += "=" * draw(st.integers(1, 3))
        elif op == "truncate":
            seg = seg[: len(seg) - draw(st.integers(1, 4))]
        elif op == "case":
            seg = seg[:pos] + seg[pos : pos + 1].swapcase() + seg[pos + 1 :]
        elif op == "lookalike":
            seg = seg[:pos] + draw(st.sampled_from(LOOKALIKES)) + seg[pos:]
        elif op == "trailing":  # the same bytes, other unused low bits in the last character
            alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
            last = alphabet.index(seg[-1]) if seg and seg[-1] in alphabet else 0
            seg = seg[:-1] + alphabet[last ^ draw(st.integers(1, 3))]
        else:
            seg = seg[:pos] + seg[pos + 1 :]
        segments[which] = seg
    mutated = draw(
        st.sampled_from(
            [
                "..".join(segments),
                f"{segments[0]}.{b64u(payload)}.{segments[1]}",  # attached, not detached
                ".".join([segments[0], "", segments[1], ""]),
            ]
        )
    )
    return payload, jws, mutated


def segment_oracle(text: str, original: str) -> str | None:
    """The code PROFILE §3 steps 2, 3, 19 and 20 give; None when only "refused" is known."""
    parts = text.split(".")
    if len(parts) != 3 or parts[1]:
        return E.MALFORMED_JWS.value  # step 2
    header, signature = parts[0], parts[2]
    was_header, was_signature = original.split("..")
    if strict_b64u(header) is None:
        return E.MALFORMED_JWS.value  # step 3
    if header != was_header:
        return None  # other header bytes: some step from 4 on refuses them
    if strict_b64u(signature) is None:
        return E.MALFORMED_JWS.value  # step 19
    return E.INVALID_SIGNATURE.value if signature != was_signature else "OK"


@settings(max_examples=1200, deadline=None)
@given(case=segment_mutations(), as_bytes=st.booleans())
@example(case=(BASE_PAYLOAD, BASE_JWS, BASE_JWS + "="), as_bytes=False)
@example(case=(BASE_PAYLOAD, BASE_JWS, BASE_JWS[:-1]), as_bytes=True)
def test_base64_segment_mutations(case: tuple[bytes, str, str], as_bytes: bool) -> None:
    payload, original, mutated = case
    jws: str | bytes = mutated.encode("utf-8") if as_bytes else mutated
    got = verdict(payload, jws)
    seen = mutated.encode("utf-8").decode("latin-1") if as_bytes else mutated
    want = segment_oracle(seen, original)
    if want is None:
        assert got != "OK"
    else:
        assert got == want


# --- 3. JSON structure, re-signed ------------------------------------------------------------

HEADER = strict_b64u(BASE_HEADER_B64)
assert HEADER is not None


def test_the_renderer_reproduces_canonical_bytes() -> None:
    for payload, jws in POSITIVES:
        assert render(parsed(payload)) == payload
        assert render(parsed(strict_b64u(jws.split("..")[0]) or b"")) == strict_b64u(
            jws.split("..")[0]
        )


@settings(max_examples=1200, deadline=None)
@given(data=st.data(), target=st.sampled_from(["payload", "header"]))
def test_one_structural_defect_gives_its_code(data: st.DataObject, target: str) -> None:
    if target == "payload":
        payload, code = data.draw(structure_edit(BASE_PAYLOAD, header=False))
        jws = sign_raw(HEADER, payload)
    else:
        header, code = data.draw(structure_edit(HEADER, header=True))
        payload, jws = BASE_PAYLOAD, sign_raw(header, BASE_PAYLOAD)
    assert code != REFUSED  # one edit of the original: the profile fixes the code
    assert verdict(payload, jws) == expect(code)


@settings(max_examples=800, deadline=None)
@given(data=st.data(), edits=st.integers(1, 4))
def test_several_structural_defects_in_both(data: st.DataObject, edits: int) -> None:
    payload, header = BASE_PAYLOAD, HEADER
    for _ in range(edits):
        if data.draw(st.booleans()):
            payload = data.draw(structure_edit(payload, header=False))[0]
        else:
            header = data.draw(structure_edit(header, header=True))[0]
        if not payload.startswith(b"{") or not header.startswith(b"{"):
            break  # wrapped in an array: no object left to edit
    # Edits can cancel out (host "host-a" -> 7 -> "7" is a valid statement again, validly
    # signed): what is accepted must only be canonical and re-sign to the same JWS, which
    # verdict checks; and re-signing gives the profile's header, so the header is unchanged.
    if verdict(payload, sign_raw(header, payload)) == "OK":
        assert header == HEADER


# --- 4. numbers ------------------------------------------------------------------------------


@settings(max_examples=1200, deadline=None)
@given(
    literals=st.dictionaries(st.sampled_from(NUMBER_MEMBERS), NUMBER_LITERALS, min_size=1),
)
@example(literals={"process.ordinal": str(2**53 - 1)})
@example(literals={"process.epoch": str(2**53)})
@example(literals={"process.epoch": "-0"})
@example(literals={"expires_at": "1.0"})
@example(literals={"issued_at": "1e3"})
@example(literals={"observed_at": "9" * 400})
@example(literals={"observed_at": "-1", "expires_at": "NaN"})
@example(literals={"observed_at": "1.5", "expires_at": "01"})
def test_number_literals(literals: dict[str, str]) -> None:
    payload, code = with_numbers(literals)
    assert verdict(payload, sign_raw(HEADER, payload)) == expect(code)


NUMBER_VALUES = st.one_of(
    st.sampled_from([0, 1, 2**53 - 1, 2**53, -(2**53 - 1), -(2**53), -1, True, False]),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.sampled_from([1.0, 1e3, -0.0, 0.0, 2.0**53, float("nan"), float("inf")]),
)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = repr(value)  # 1.0, 1000.0, -0.0, 1e+16: never a JSON integer
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(text, text)
    return str(value)


@settings(max_examples=500, deadline=None)
@given(member=st.sampled_from(["process__ordinal", "process__epoch"]), value=NUMBER_VALUES)
def test_sign_refuses_the_numbers_verify_refuses(member: str, value: Any) -> None:
    try:
        signed = ecpa.sign(statement(**{member: value}), KEY_1)
        signed_code = "OK"
    except ecpa.EcpaError as exc:
        signed_code = exc.code.value
    tree = parsed(BASE_PAYLOAD)
    process = dict(tree)["process"]
    name = member.removeprefix("process__")
    process[[n for n, _ in process].index(name)] = (name, Lit(_literal(value)))
    payload = render(tree)
    assert verdict(payload, sign_raw(HEADER, payload)) == signed_code
    if signed_code == "OK":
        assert signed.payload == payload
        assert number_class(_literal(value)) == value


# --- 5. Unicode ------------------------------------------------------------------------------

FORMS = ("NFC", "NFD", "NFKC", "NFKD")


@settings(max_examples=400, deadline=None)
@given(name=NORMALIZABLE, trusted_form=st.sampled_from(FORMS), signed_form=st.sampled_from(FORMS))
@example(name="e\u0301", trusted_form="NFD", signed_form="NFC")
def test_issuers_are_never_normalized(name: str, trusted_form: str, signed_form: str) -> None:
    trusted = "urn:ecpa:issuer:" + unicodedata.normalize(trusted_form, name)
    issuer = "urn:ecpa:issuer:" + unicodedata.normalize(signed_form, name)
    trust = ecpa.TrustStore.from_dict(trust_doc(trust_entry(issuer=trusted)))
    signed = ecpa.sign(statement(issuer=issuer), KEY_1)
    want = "OK" if issuer == trusted else E.UNKNOWN_KEY.value
    assert verdict(signed.payload, signed.detached_jws, trust) == want


@settings(max_examples=500, deadline=None)
@given(member=st.sampled_from(["issuer", *FREE_TEXT]), escape=SURROGATE_ESCAPES, data=st.data())
def test_surrogate_escapes(member: str, escape: str, data: st.DataObject) -> None:
    prefix = f'"{member}":"'.encode()
    start = BASE_PAYLOAD.index(prefix) + len(prefix)
    end = BASE_PAYLOAD.index(b'"', start)
    at = data.draw(st.integers(start, end))
    payload = BASE_PAYLOAD[:at] + escape.encode("ascii") + BASE_PAYLOAD[at:]
    # Escapes read by Python's JSON reader, which keeps lone surrogates.
    chars = parsed(b'"' + escape.encode("ascii") + b'"')
    lone = any(0xD800 <= ord(c) <= 0xDFFF for c in chars)
    # A lone surrogate is refused (PROFILE §4); a valid pair is a character JCS writes raw.
    want = E.UNSUPPORTED_VALUE if lone else E.NONCANONICAL_PAYLOAD
    assert verdict(payload, sign_raw(HEADER, payload)) == want.value


TEXTS = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)


@settings(max_examples=500, deadline=None)
@given(
    member=st.sampled_from(FREE_TEXT),
    text=st.one_of(TEXTS, TEXTS.map(lambda t: t + "\U0001f600"), TEXTS.map("\u00e9".__add__)),
    bom_inside=st.booleans(),
    data=st.data(),
)
def test_unicode_reencodings(member: str, text: str, bom_inside: bool, data: st.DataObject) -> None:
    value = "\ufeff" + text if bom_inside else text  # a BOM inside a string is text
    payload = ecpa.canonicalize(statement(**{member: value}))
    assert verdict(payload, sign_raw(HEADER, payload)) == "OK"
    # Every other byte form of the same text is not UTF-8 JSON: step 12.
    form, other = data.draw(st.sampled_from(reencodings(payload.decode("utf-8"))))
    assert verdict(other, sign_raw(HEADER, other)) == E.MALFORMED_JSON.value, form
    # The same for the header: step 4.
    form, header = data.draw(st.sampled_from(reencodings(HEADER.decode("ascii"))))
    assert verdict(payload, sign_raw(header, payload)) == E.MALFORMED_JSON.value, form


# --- the atheris harness, without atheris ------------------------------------------------------


def _seed_files() -> list[Path]:
    return sorted(path for path in SEED_DIR.iterdir() if path.is_file())


@pytest.mark.parametrize("hide_atheris", [True, False], ids=["atheris-absent", "as-installed"])
def test_harness_runs_over_its_seeds(hide_atheris: bool) -> None:
    harness = load_harness(hide_atheris=hide_atheris)
    if hide_atheris:
        assert harness.atheris is None  # the import fell back; the harness still works
    files = _seed_files()
    # The committed seeds are exactly what the harness writes (no drift from the corpus).
    assert {path.name: path.read_bytes() for path in files} == harness.seed_inputs()
    assert len(files) >= 5
    for path in files:
        harness.TestOneInput(path.read_bytes())  # a crash would raise here
        expected = path.name.split(".", 1)[0]
        assert harness.check(path.read_bytes()) == expected, path.name
    assert any(path.name.startswith("OK.") for path in files)
