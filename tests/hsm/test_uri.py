"""PKCS#11 URIs (RFC 7512) read exactly: what is taken, what is refused and why, and that
nothing but ``ECPA_INVALID_KEY`` ever comes out of the parser."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecpa.errors import EcpaError, ErrorCode
from ecpa.hsm import Pkcs11Uri, is_pkcs11_uri, parse_pkcs11_uri
from ecpa.hsm.uri import MAX_URI_CHARS, pin_file_of

SECRET = "s3cret-4471"  # a PIN typed where it does not belong: never in a message


def refused(text: str) -> EcpaError:
    with pytest.raises(EcpaError) as caught:
        parse_pkcs11_uri(text)
    assert caught.value.code is ErrorCode.INVALID_KEY
    return caught.value


def test_the_rfc_examples_ecpa_can_apply_parse() -> None:
    uri = parse_pkcs11_uri(
        "pkcs11:token=The%20Software%20PKCS%2311%20Softtoken;manufacturer=Snake%20Oil,%20Inc.;"
        "model=1.0;object=my-certificate;type=cert;id=%69%95%3E%5C%F4%BD%EC%91;serial="
        "?pin-source=file:/etc/token_pin"
    )
    assert uri.token == "The Software PKCS#11 Softtoken"
    assert uri.manufacturer == "Snake Oil, Inc."
    assert (uri.model, uri.object, uri.object_type, uri.serial) == (
        "1.0",
        "my-certificate",
        "cert",
        "",
    )
    assert uri.object_id == bytes.fromhex("69953e5cf4bdec91")
    assert uri.pin_file == "/etc/token_pin"
    uri = parse_pkcs11_uri(
        "pkcs11:object=my-sign-key;type=private?module-name=mypkcs11&module-path=/mnt/libmypkcs11.so.1"
    )
    assert (uri.module_name, uri.module_path) == ("mypkcs11", "/mnt/libmypkcs11.so.1")
    uri = parse_pkcs11_uri("pkcs11:library-version=7;slot-id=3;library-description=x;id=%01")
    assert (uri.library_version, uri.slot_id, uri.object_id) == ((7, 0), 3, b"\x01")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pkcs11:", True),
        ("PKCS11:object=a", True),  # RFC 3986 §3.1: a scheme in any case
        ("Pkcs11:", True),
        ("pkcs11", False),
        ("xpkcs11:object=a", False),
        ("pkcs11;object=a", False),
        ("p\u212acs11:object=a", False),  # KELVIN SIGN lower-cases to 'k': not ASCII, not ours
        ("./pkcs11:object=a", False),  # how a key file of that name is given
        ("", False),
    ],
)
def test_what_is_a_pkcs11_uri(text: str, expected: bool) -> None:
    assert is_pkcs11_uri(text) is expected


def test_names_and_type_are_read_in_any_case_as_abnf_literals_are() -> None:
    uri = parse_pkcs11_uri("PKCS11:Object=a;TYPE=Private?MODULE-PATH=/m.so")
    assert (uri.object, uri.object_type, uri.module_path) == ("a", "private", "/m.so")


@pytest.mark.parametrize(
    "text",
    [
        f"pkcs11:object=a?pin-value={SECRET}",
        f"pkcs11:object=a?module-path=/m.so&PIN-VALUE={SECRET}",
        f"pkcs11:object=a;pin-value={SECRET}",  # in the path, where it does not belong either
        f"pkcs11:object=a?pin-source=/p&pin-value={SECRET}",
        f"pkcs11:object=a?pin-value={SECRET}%zz",  # refused before its value is read
    ],
)
def test_pin_value_is_refused_and_never_echoed(text: str) -> None:
    err = refused(text)
    assert "pin-value" in err.detail
    assert "pin-source" in err.detail
    assert "ECPA_PKCS11_PIN" in err.detail
    assert SECRET not in err.detail


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("pkcs11:object=a;object=b", "'object' once"),
        ("pkcs11:object=a;Object=b", "'object' once"),
        ("pkcs11:id=%01;id=%01", "'id' once"),
        ("pkcs11:object=a?module-path=/a.so&module-path=/b.so", "'module-path' once"),
        ("pkcs11:object=a?pin-source=/a&pin-source=/a", "'pin-source' once"),
    ],
)
def test_an_attribute_given_twice_is_refused(text: str, said: str) -> None:
    assert said in refused(text).detail


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("pkcs11:object=%", "'%'"),
        ("pkcs11:object=%4", "'%4'"),
        ("pkcs11:object=%zz", "'%zz'"),
        ("pkcs11:object=%4g", "'%4g'"),
        ("pkcs11:id=%%41", "'%%4'"),
        ("pkcs11:object=a?module-path=/m%2", "'%2'"),
        ("pkcs11:object=%C3%28", "UTF-8"),  # an invalid UTF-8 sequence in a text attribute
        ("pkcs11:object=a%00b", "NUL"),
    ],
)
def test_bad_escapes_are_refused(text: str, said: str) -> None:
    assert said in refused(text).detail


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("pkcs11:", "neither"),
        ("pkcs11:token=t", "neither"),
        ("pkcs11:?module-path=/m.so", "neither"),
        ("pkcs11:object=a;", "between two ';'"),
        ("pkcs11:;object=a", "between two ';'"),
        ("pkcs11:object=a?module-path=/m.so&", "between two '&'"),
        ("pkcs11:object", "no '='"),
        ("pkcs11:obj ect=a", "letters, digits"),
        ("pkcs11:object=a b", "' '"),
        ("pkcs11:object=a#b", "'#'"),
        ("pkcs11:object=a/b", "'/'"),  # '/' is no pk11-pchar
        ("pkcs11:object=é", "UTF-8 bytes"),
        ("pkcs11:object=a?module-path=/a;b.so", "';'"),  # ';' is no pk11-qchar
        ("pkcs11:object=a;x-vendor=1", "'x-vendor'"),
        ("pkcs11:object=a;vendor=1", "'vendor'"),
        ("pkcs11:object=a?x-hint=1", "'x-hint'"),
        ("pkcs11:object=a;module-path=/m.so", "in the query"),
        ("pkcs11:object=a?token=t", "in the path"),
        ("pkcs11:object=a;type=secret", "type="),
        ("pkcs11:object=a;type=%70rivate", "type="),  # a literal: no escapes
        ("pkcs11:object=a;slot-id=-1", "slot-id"),
        ("pkcs11:object=a;slot-id=18446744073709551616", "slot-id"),
        ("pkcs11:object=a;slot-id=" + "9" * 40, "slot-id"),
        ("pkcs11:object=a;library-version=1.", "library-version"),
        ("pkcs11:object=a;library-version=256", "library-version"),
        ("pkcs11:object=a?module-path=lib.so", "absolute"),
        ("pkcs11:object=a?module-path=", "empty"),
        ("pkcs11:object=a?module-name=/lib/x", "without a directory"),
        ("pkcs11:object=a?pin-source=%7C/bin/cat", "command"),
        ("pkcs11:object=a?pin-source=|/bin/cat", "command"),
        ("pkcs11:object=a?pin-source=https://pin.example/", "'https'"),
        ("pkcs11:object=a?pin-source=file://pin.example/p", "'pin.example'"),
        ("pkcs11:object=a?pin-source=file:p", "relative"),
        ("x" * 10, "starting with 'pkcs11:'"),
        ("pkcs11:object=" + "a" * MAX_URI_CHARS, f"at most {MAX_URI_CHARS}"),
    ],
)
def test_what_ecpa_refuses_and_says(text: str, said: str) -> None:
    assert said in refused(text).detail


@pytest.mark.parametrize(
    ("source", "path"),
    [
        ("/run/pin", "/run/pin"),
        ("pin.txt", "pin.txt"),
        ("./a:b", "./a:b"),
        ("file:/run/pin", "/run/pin"),
        ("file:///run/pin", "/run/pin"),
        ("FILE://LOCALHOST/run/pin", "/run/pin"),
    ],
)
def test_pin_source_is_a_file_as_rfc_8089_writes_it(source: str, path: str) -> None:
    assert pin_file_of(source) == path
    assert parse_pkcs11_uri(f"pkcs11:object=a?pin-source={source}").pin_file == path


#: Characters that matter to the grammar, often, among any others.
_TRICKY = st.sampled_from([*";?&=%/|:#@ 0aAfF9-_.~\x00é\u212a", "%4", "%C3", "%00"])
_TEXTS = st.text(max_size=60) | st.lists(_TRICKY | st.text(max_size=3), max_size=25).map("".join)
_NAMES = st.sampled_from(
    [
        "token",
        "object",
        "id",
        "type",
        "serial",
        "slot-id",
        "library-version",
        "module-path",
        "module-name",
        "pin-source",
        "pin-value",
        "x-v",
        "Object",
        "",
    ]
)


@st.composite
def _uris(draw: st.DrawFn) -> str:
    def attributes(separator: str) -> str:
        pairs = draw(st.lists(st.tuples(_NAMES, _TEXTS), max_size=5))
        return separator.join(f"{name}={value}" for name, value in pairs)

    query = "?" + attributes("&") if draw(st.booleans()) else ""
    return draw(st.sampled_from(["pkcs11:", "PKCS11:", ""])) + attributes(";") + query


@settings(max_examples=600, deadline=None)
@given(_TEXTS | _uris())
def test_any_text_is_a_uri_or_refused_with_invalid_key(text: str) -> None:
    outcome: Pkcs11Uri | ErrorCode
    try:
        outcome = parse_pkcs11_uri(text)
    except EcpaError as exc:
        outcome = exc.code
    if isinstance(outcome, Pkcs11Uri):
        assert parse_pkcs11_uri(outcome.to_uri()) == outcome
    else:
        assert outcome is ErrorCode.INVALID_KEY


_LABELS = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=40)
_ABSOLUTE = _LABELS.map(lambda text: "/" + text)


@st.composite
def _parsed(draw: st.DrawFn) -> Pkcs11Uri:
    def maybe(strategy: st.SearchStrategy[Any]) -> Any:
        return draw(st.none() | strategy)

    object_id = maybe(st.binary(max_size=20))
    return Pkcs11Uri(
        token=maybe(_LABELS),
        manufacturer=maybe(_LABELS),
        serial=maybe(_LABELS),
        model=maybe(_LABELS),
        library_manufacturer=maybe(_LABELS),
        library_description=maybe(_LABELS),
        library_version=maybe(st.tuples(st.integers(0, 255), st.integers(0, 255))),
        slot_description=maybe(_LABELS),
        slot_manufacturer=maybe(_LABELS),
        slot_id=maybe(st.integers(0, 2**64 - 1)),
        object=draw(_LABELS) if object_id is None else maybe(_LABELS),
        object_type=maybe(st.sampled_from(["public", "private", "cert", "secret-key", "data"])),
        object_id=object_id,
        module_name=maybe(_LABELS.filter(lambda text: text and "/" not in text)),
        module_path=maybe(_ABSOLUTE),
        pin_source=maybe(_ABSOLUTE),
    )


@settings(max_examples=400, deadline=None)
@given(_parsed())
def test_every_uri_round_trips_through_its_percent_encoding(uri: Pkcs11Uri) -> None:
    text = uri.to_uri()
    assert text.isascii()
    assert parse_pkcs11_uri(text) == uri


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40), st.booleans())
def test_an_id_is_its_escapes_bytes_in_either_case_of_hex(data: bytes, upper: bool) -> None:
    escaped = "".join(f"%{b:02X}" if upper else f"%{b:02x}" for b in data)
    assert parse_pkcs11_uri(f"pkcs11:id={escaped}").object_id == data
