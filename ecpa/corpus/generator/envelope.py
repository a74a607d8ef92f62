"""The project's own corpus cases for PROFILE §3 steps 1-11 and §4 (in the header): sizes,
the JWS form, strict base64url, the protected header read strictly and its values.

Every case is validly signed over the bytes it sends, so only its named defect (or, in the
``x-order-*`` cases, the first of its two named defects) can refuse it.
"""

from __future__ import annotations

from collections.abc import Callable

from ecpa.corpus.generator.kit import (
    BASE,
    DELETE,
    MAX_SAFE,
    OK,
    XCase,
    compact,
    dumps,
    entry,
    hdr,
    kid_for_header_length,
    nested,
    on_signature_segment,
    st,
    store,
    with_trailing_bit,
)
from ecpa.errors import ErrorCode as E
from ecpa.profile.b64 import b64u_encode
from ecpa.profile.json.jcs import canonicalize

__all__ = ["envelope_cases"]

GOOD = canonicalize(BASE)
HEADER = canonicalize(hdr())
BOM = b"\xef\xbb\xbf"
KID = b'"kid":"test-key-1"'
BIG = str(MAX_SAFE + 1).encode()
DIGITS_5000 = b"9" * 5000
URL_KID = "???>"  # its header segment holds both '-' and '_'


def _kid_header(literal: bytes) -> bytes:
    """The canonical header with the kid's value replaced by raw JSON text."""
    return HEADER.replace(KID, b'"kid":' + literal)


def _insert(text: str, char: str) -> str:
    middle = len(text) // 2
    return text[:middle] + char + text[middle:]


def _replace_at(text: str, index: int, char: str) -> str:
    return text[:index] + char + text[index + 1 :]


def _wire(old: str, new: str) -> Callable[[str, bytes], str]:
    return lambda text, payload: text.replace(old, new)


def _attached(text: str, payload: bytes) -> str:
    return text.replace("..", f".{b64u_encode(payload)}.")


def _payload_of_length(length: int, nonce: str) -> dict[str, object]:
    base = len(canonicalize(st(obligation="", challenge_nonce=nonce)))
    return st(obligation="o" * (length - base), challenge_nonce=nonce)


def _long_kid(length: int, nonce: str) -> tuple[dict[str, object], dict[str, object]]:
    """A statement whose kid makes the JWS ``length`` characters, and a store trusting it."""
    kid = kid_for_header_length(length - 88)  # 2 dots and an 86-character signature
    return st(kid=kid, challenge_nonce=nonce), store(entry(kid=kid))


def _kid_case(ident: str, step: int, why: str, kid: str) -> XCase:
    """A positive signed under an unusual (string) kid that a per-case store trusts."""
    return XCase(
        ident, "positive", step, OK, why,
        st(kid=kid, challenge_nonce=f"x-nonce-{ident}"),
        trust=store(entry(kid=kid)),
    )  # fmt: skip


_X = XCase


def _size_and_form() -> list[XCase]:
    # No valid JWS has 16385 characters: its header segment would be 4k+1 long. So the
    # 16385 case is the 16384 one plus a character, and 16386 is the smallest valid one over.
    p16384, t16384 = _long_kid(16384, "x-nonce-jws-16384")
    p16386, t16386 = _long_kid(16386, "x-nonce-jws-16386")
    garbage = b"\xff{[" * 21846  # 65538 bytes of invalid UTF-8 and broken JSON
    # fmt: off
    return [
        _X("x-size-jws-16384", "positive", 1, OK,
           "JWS of exactly 16384 characters (a long kid): the largest accepted", p16384,
           trust=t16384),
        _X("x-size-jws-16385", "size", 1, E.TOO_LARGE,
           "the 16384-character JWS with one 'A' appended: 16385 characters", p16384,
           after=on_signature_segment(lambda s: s + "A"), trust=t16384),
        _X("x-size-jws-16386", "size", 1, E.TOO_LARGE,
           "a validly signed JWS of 16386 characters (kid one byte longer)", p16386,
           trust=t16386),
        _X("x-size-payload-65536", "positive", 1, OK,
           "payload of exactly 65536 bytes (a long obligation): the largest accepted",
           _payload_of_length(65536, "x-nonce-payload-65536")),
        _X("x-size-payload-65537", "size", 1, E.TOO_LARGE,
           "a validly signed statement of 65537 bytes",
           _payload_of_length(65537, "x-nonce-payload-65537")),
        _X("x-order-1-12", "order", 1, E.TOO_LARGE,
           "65538 bytes of invalid UTF-8 as payload: the size is checked before any parsing",
           garbage),
        _X("x-order-1-2", "order", 1, E.TOO_LARGE,
           "the base JWS padded with '.' to 16385 characters: too long and thousands of parts",
           wire=lambda text, payload: text.ljust(16385, ".")),
        _X("x-parts-detached", "positive", 2, OK,
           "exactly three parts, the middle one empty: the detached form itself",
           st(challenge_nonce="x-nonce-detached")),
        _X("x-parts-one", "jws-form", 2, E.MALFORMED_JWS, "no '.' at all: one part",
           wire=_wire("..", "")),
        _X("x-parts-two", "jws-form", 2, E.MALFORMED_JWS, "'header.signature': two parts",
           wire=_wire("..", ".")),
        _X("x-parts-four", "jws-form", 2, E.MALFORMED_JWS, "a trailing '.': four parts",
           wire=lambda text, payload: text + "."),
        _X("x-parts-four-middle", "jws-form", 2, E.MALFORMED_JWS,
           "'header...signature': four parts", wire=_wire("..", "...")),
        _X("x-parts-empty-text", "jws-form", 2, E.MALFORMED_JWS, "the empty text: one part",
           wire=lambda text, payload: ""),
        _X("x-attached-payload", "jws-form", 2, E.MALFORMED_JWS,
           "the payload attached as the middle part (a plain compact JWS)", wire=_attached),
        _X("x-order-2-3", "order", 2, E.MALFORMED_JWS,
           "two parts and a padded header segment: the part count is checked first",
           hseg=lambda s: s + "=", wire=_wire("..", ".")),
    ]
    # fmt: on


def _base64url() -> list[XCase]:
    url = store(entry(kid=URL_KID))
    rem3 = store(entry(kid="test-key-10"))
    # fmt: off
    return [
        _kid_case("x-b64-header-url-alphabet", 3,
                  "kid '???>' puts both '-' and '_' in the header segment", URL_KID),
        _kid_case("x-b64-header-rem-3", 3,
                  "header segment of length 4k+3 (kid test-key-10), zero trailing bits",
                  "test-key-10"),
        _kid_case("x-b64-header-rem-0", 3,
                  "header segment of length 4k (kid test-key-100): no trailing bits at all",
                  "test-key-100"),
        _X("x-b64-header-pad-2", "base64url", 3, E.MALFORMED_JWS,
           "'==' appended to the header segment (signed as sent)", hseg=lambda s: s + "=="),
        _X("x-b64-header-space", "base64url", 3, E.MALFORMED_JWS,
           "a space inside the header segment", hseg=lambda s: _insert(s, " ")),
        _X("x-b64-header-newline", "base64url", 3, E.MALFORMED_JWS,
           "a newline ending the header segment", hseg=lambda s: s + "\n"),
        _X("x-b64-header-4k+1", "base64url", 3, E.MALFORMED_JWS,
           "header segment cut to length 4k+1", hseg=lambda s: s[:-1]),
        _X("x-b64-header-trailing-bits", "base64url", 3, E.MALFORMED_JWS,
           "header segment (4k+2) whose last character has a trailing bit set",
           hseg=with_trailing_bit),
        _X("x-b64-header-trailing-bits-rem-3", "base64url", 3, E.MALFORMED_JWS,
           "header segment (4k+3, kid test-key-10) whose last character has a trailing bit set",
           st(kid="test-key-10"), hseg=with_trailing_bit, trust=rem3),
        _X("x-b64-header-plus", "base64url", 3, E.MALFORMED_JWS,
           "kid '???>' header segment with '+' for '-' (standard alphabet)", st(kid=URL_KID),
           hseg=lambda s: s.replace("-", "+"), trust=url),
        _X("x-b64-header-slash", "base64url", 3, E.MALFORMED_JWS,
           "kid '???>' header segment with '/' for '_' (standard alphabet)", st(kid=URL_KID),
           hseg=lambda s: s.replace("_", "/"), trust=url),
        _X("x-b64-header-non-ascii", "base64url", 3, E.MALFORMED_JWS,
           "an 'é' in place of the header segment's 11th character",
           hseg=lambda s: _replace_at(s, 10, "\u00e9")),
        _X("x-b64-header-star", "base64url", 3, E.MALFORMED_JWS,
           "a '*' in place of a header segment character", hseg=lambda s: _replace_at(s, 10, "*")),
        _X("x-order-3-4", "order", 3, E.MALFORMED_JWS,
           "header '{' (not JSON) with its segment padded: base64url is checked first",
           header=b"{", hseg=lambda s: s + "="),
    ]
    # fmt: on


def _header_json() -> list[XCase]:
    swapped = HEADER.replace(b'"typ":"application/ecpa-attestation+jws"', b'"typ":1.5')
    # fmt: off
    return [
        _kid_case("x-header-kid-nan-word", 4, "kid 'NaN': the word inside a string is text",
                  "NaN"),
        _X("x-header-empty", "header-json", 4, E.MALFORMED_JSON,
           "empty header segment: zero bytes are not JSON", header=b""),
        _X("x-header-truncated", "header-json", 4, E.MALFORMED_JSON,
           "the canonical header without its closing '}'", header=HEADER[:-1]),
        _X("x-header-top-array", "header-json", 4, E.MALFORMED_JSON,
           "the header object inside an array: top level not an object",
           header=b"[" + HEADER + b"]"),
        _X("x-header-top-string", "header-json", 4, E.MALFORMED_JSON,
           "header '\"EdDSA\"': top level a string", header=b'"EdDSA"'),
        _X("x-header-bom", "header-json", 4, E.MALFORMED_JSON,
           "the canonical header after a UTF-8 byte-order mark", header=BOM + HEADER),
        _X("x-header-utf16", "header-json", 4, E.MALFORMED_JSON,
           "the canonical header in UTF-16LE", header=HEADER.decode().encode("utf-16-le")),
        _X("x-header-invalid-utf8", "header-json", 4, E.MALFORMED_JSON,
           "kid 'test-key-\\xff': byte 0xFF is not UTF-8", header=_kid_header(b'"test-key-\xff"')),
        _X("x-header-duplicate-alg", "header-json", 4, E.DUPLICATE_KEY,
           "member 'alg' twice (same value)",
           header=HEADER.replace(b'"alg":"EdDSA"', b'"alg":"EdDSA","alg":"EdDSA"')),
        _X("x-header-kid-1.0", "header-json", 4, E.UNSUPPORTED_VALUE, "kid 1.0 (a fraction)",
           header=_kid_header(b"1.0")),
        _X("x-header-kid-1e3", "header-json", 4, E.UNSUPPORTED_VALUE, "kid 1e3 (an exponent)",
           header=_kid_header(b"1e3")),
        _X("x-header-kid-nan", "header-json", 4, E.UNSUPPORTED_VALUE, "kid NaN (bare)",
           header=_kid_header(b"NaN")),
        _X("x-header-kid-infinity", "header-json", 4, E.UNSUPPORTED_VALUE,
           "kid -Infinity (bare)", header=_kid_header(b"-Infinity")),
        _X("x-header-kid-2**53", "header-json", 4, E.UNSUPPORTED_VALUE, "kid 2**53",
           header=_kid_header(BIG)),
        _X("x-header-kid-minus-2**53", "header-json", 4, E.UNSUPPORTED_VALUE, "kid -(2**53)",
           header=_kid_header(b"-" + BIG)),
        _X("x-header-kid-5000-digits", "header-json", 4, E.UNSUPPORTED_VALUE,
           "kid a 5000-digit integer", header=_kid_header(DIGITS_5000)),
        _X("x-header-kid-lone-high-surrogate", "header-json", 4, E.UNSUPPORTED_VALUE,
           "kid '\\ud800': a lone surrogate", header=_kid_header(b'"\\ud800"')),
        _X("x-header-kid-lone-low-surrogate", "header-json", 4, E.UNSUPPORTED_VALUE,
           "kid 'k\\udc00': a lone low surrogate", header=_kid_header(b'"k\\udc00"')),
        _X("x-header-kid-depth-33", "header-json", 4, E.UNSUPPORTED_VALUE,
           "kid 32 nested arrays: nesting 33 deep", header=_kid_header(nested(32))),
        _X("x-header-order-syntax-beats-dup", "order", 4, E.MALFORMED_JSON,
           "member 'alg' twice, then the text ends early: syntax wins",
           header=HEADER.replace(b'"alg":"EdDSA"', b'"alg":"EdDSA","alg":"EdDSA"')[:-1]),
        _X("x-header-order-top-array-beats-float", "order", 4, E.MALFORMED_JSON,
           "typ 1.5 in a header wrapped in an array: the top level wins",
           header=b"[" + swapped + b"]"),
        _X("x-header-order-float-before-dup-closes", "order", 4, E.UNSUPPORTED_VALUE,
           "kid {'a':1,'a':2,'b':1.5}: the float is read before the object closes",
           header=_kid_header(b'{"a":1,"a":2,"b":1.5}')),
        _X("x-header-order-dup-closes-before-float", "order", 4, E.DUPLICATE_KEY,
           "kid {'a':1,'a':2}, then typ 1.5: the duplicate's object closes first",
           header=swapped.replace(KID, b'"kid":{"a":1,"a":2}')),
        _X("x-header-order-surrogate-beats-noncanonical", "order", 4, E.UNSUPPORTED_VALUE,
           "kid '\\ud800' after a space: the surrogate (step 4) beats the form (step 6)",
           header=HEADER.replace(KID, b'"kid": "\\ud800"')),
        _X("x-order-4-5", "order", 4, E.DUPLICATE_KEY,
           "member 'alg' twice and an extra member 'x': the strict read comes first",
           header=canonicalize(hdr(x=1)).replace(b'"alg":"EdDSA"', b'"alg":"EdDSA","alg":"EdDSA"')),
    ]
    # fmt: on


def _header_members() -> list[XCase]:
    jwk = {"crv": "Ed25519", "kty": "OKP", "x": "A" * 43}
    # fmt: off
    return [
        _kid_case("x-header-kid-b64", 5,
                  "kid 'b64' names an RFC 7797 parameter but adds no member", "b64"),
        _X("x-header-extra-b64", "header", 5, E.UNKNOWN_CRITICAL_HEADER,
           "an extra member b64 false (RFC 7797), crit unchanged", header={"b64": False}),
        _X("x-header-extra-b64-in-crit", "header", 5, E.UNKNOWN_CRITICAL_HEADER,
           "b64 false listed in crit, as RFC 7797 asks",
           header={"b64": False, "crit": ["b64", "ecpa_profile"]}),
        _X("x-header-extra-jwk", "header", 5, E.UNKNOWN_CRITICAL_HEADER,
           "an embedded 'jwk' member offering its own key", header={"jwk": jwk}),
        _X("x-header-missing-kid", "header", 5, E.UNKNOWN_CRITICAL_HEADER,
           "header without kid", header={"kid": DELETE}),
        _X("x-header-missing-alg", "header", 5, E.UNKNOWN_CRITICAL_HEADER,
           "header without alg", header={"alg": DELETE}),
        _X("x-header-missing-typ", "header", 5, E.UNKNOWN_CRITICAL_HEADER,
           "header without typ", header={"typ": DELETE}),
        _X("x-header-renamed-kid", "header", 5, E.UNKNOWN_CRITICAL_HEADER,
           "'KID' in place of 'kid'", header={"kid": DELETE, "KID": "test-key-1"}),
        _X("x-header-empty-object", "header", 5, E.UNKNOWN_CRITICAL_HEADER,
           "header {}: no member at all", header=b"{}"),
        _X("x-order-5-6", "order", 5, E.UNKNOWN_CRITICAL_HEADER,
           "an extra member 'x' in a header with spaces: the member set is checked first",
           header=dumps(hdr(x=1))),
        _kid_case("x-header-canonical-escapes", 6,
                  "kid 'k/\u00e9\\t\\u001f': JCS writes '/' and 'é' raw, escapes the controls",
                  "k/\u00e9\t\x1f"),
        _X("x-header-noncanonical-spaces", "header", 6, E.MALFORMED_JWS,
           "the header members with ', ' and ': ' separators", header=dumps(hdr())),
        _X("x-header-noncanonical-order", "header", 6, E.MALFORMED_JWS,
           "the header members in reverse order",
           header=dumps(dict(reversed(hdr().items())), separators=(",", ":"))),
        _X("x-header-noncanonical-escaped-letter", "header", 6, E.MALFORMED_JWS,
           "alg written '\\u0045dDSA'", header=HEADER.replace(b'"EdDSA"', b'"\\u0045dDSA"')),
        _X("x-header-noncanonical-escaped-slash", "header", 6, E.MALFORMED_JWS,
           "typ written 'application\\/...'", header=HEADER.replace(b"n/e", b"n\\/e")),
        _X("x-header-noncanonical-escaped-e-acute", "header", 6, E.MALFORMED_JWS,
           "kid 'kid-\u00e9' written with '\\u00e9'", st(kid="kid-\u00e9"),
           header=compact(hdr("kid-\u00e9")), trust=store(entry(kid="kid-\u00e9"))),
        _X("x-header-noncanonical-newline", "header", 6, E.MALFORMED_JWS,
           "the canonical header and a newline", header=HEADER + b"\n"),
        _X("x-order-6-7", "order", 6, E.MALFORMED_JWS,
           "alg 'none' in a header with spaces: canonical form is checked first",
           header=dumps(hdr(alg="none"))),
    ]
    # fmt: on


def _header_values() -> list[XCase]:
    # fmt: off
    return [
        _kid_case("x-alg-kid-none", 7, "kid 'none': only the alg member names the algorithm",
                  "none"),
        _X("x-alg-none", "header", 7, E.WRONG_ALGORITHM, "alg 'none' (validly signed all the same)",
           header={"alg": "none"}),
        _X("x-alg-none-unsigned", "header", 7, E.WRONG_ALGORITHM,
           "alg 'none' and an empty signature segment", header={"alg": "none"},
           after=on_signature_segment(lambda s: "")),
        _X("x-alg-hs256", "header", 7, E.WRONG_ALGORITHM,
           "alg 'HS256' (a MAC: algorithm confusion)", header={"alg": "HS256"}),
        _X("x-alg-ed25519", "header", 7, E.WRONG_ALGORITHM, "alg 'Ed25519' (not the JOSE name)",
           header={"alg": "Ed25519"}),
        _X("x-alg-es256", "header", 7, E.WRONG_ALGORITHM, "alg 'ES256'", header={"alg": "ES256"}),
        _X("x-alg-lowercase", "header", 7, E.WRONG_ALGORITHM, "alg 'eddsa'",
           header={"alg": "eddsa"}),
        _X("x-alg-null", "header", 7, E.WRONG_ALGORITHM, "alg null", header={"alg": None}),
        _X("x-order-7-8", "order", 7, E.WRONG_ALGORITHM, "alg 'HS256' and typ 'JWT'",
           header={"alg": "HS256", "typ": "JWT"}),
        _kid_case("x-typ-kid-jwt", 8, "kid 'JWT': only the typ member is the type", "JWT"),
        _X("x-typ-short", "header", 8, E.WRONG_TYPE,
           "typ 'ecpa-attestation+jws' (without 'application/')",
           header={"typ": "ecpa-attestation+jws"}),
        _X("x-typ-uppercase", "header", 8, E.WRONG_TYPE,
           "typ 'application/ecpa-attestation+JWS'",
           header={"typ": "application/ecpa-attestation+JWS"}),
        _X("x-typ-empty", "header", 8, E.WRONG_TYPE, "typ ''", header={"typ": ""}),
        _X("x-typ-number", "header", 8, E.WRONG_TYPE, "typ 1", header={"typ": 1}),
        _X("x-order-8-9", "order", 8, E.WRONG_TYPE, "typ 'JOSE' and crit []",
           header={"typ": "JOSE", "crit": []}),
        _kid_case("x-crit-kid-ecpa-profile", 9,
                  "kid 'ecpa_profile': the name crit lists, as a kid value", "ecpa_profile"),
        _X("x-crit-b64", "header", 9, E.UNKNOWN_CRITICAL_HEADER, "crit ['b64']",
           header={"crit": ["b64"]}),
        _X("x-crit-extra", "header", 9, E.UNKNOWN_CRITICAL_HEADER, "crit ['ecpa_profile', 'kid']",
           header={"crit": ["ecpa_profile", "kid"]}),
        _X("x-crit-uppercase", "header", 9, E.UNKNOWN_CRITICAL_HEADER, "crit ['ECPA_PROFILE']",
           header={"crit": ["ECPA_PROFILE"]}),
        _X("x-crit-string", "header", 9, E.UNKNOWN_CRITICAL_HEADER,
           "crit 'ecpa_profile' (a string, not an array)", header={"crit": "ecpa_profile"}),
        _X("x-crit-null", "header", 9, E.UNKNOWN_CRITICAL_HEADER, "crit null",
           header={"crit": None}),
        _X("x-crit-object", "header", 9, E.UNKNOWN_CRITICAL_HEADER,
           "crit {'ecpa_profile': true}", header={"crit": {"ecpa_profile": True}}),
        _X("x-order-9-10", "order", 9, E.UNKNOWN_CRITICAL_HEADER,
           "crit ['b64'] and ecpa_profile 'other'",
           header={"crit": ["b64"], "ecpa_profile": "other"}),
        _kid_case("x-profile-kid-profile-0.2", 10,
                  "kid 'ecpa-jcs-jws-eddsa/0.2': only ecpa_profile names the profile",
                  "ecpa-jcs-jws-eddsa/0.2"),
        _X("x-profile-0.2", "header", 10, E.WRONG_PROFILE, "ecpa_profile 'ecpa-jcs-jws-eddsa/0.2'",
           header={"ecpa_profile": "ecpa-jcs-jws-eddsa/0.2"}),
        _X("x-profile-trailing-space", "header", 10, E.WRONG_PROFILE,
           "ecpa_profile with a trailing space",
           header={"ecpa_profile": "ecpa-jcs-jws-eddsa/0.1 "}),
        _X("x-profile-empty", "header", 10, E.WRONG_PROFILE, "ecpa_profile ''",
           header={"ecpa_profile": ""}),
        _X("x-profile-number", "header", 10, E.WRONG_PROFILE, "ecpa_profile 1 (a number)",
           header={"ecpa_profile": 1}),
        _X("x-order-10-11", "order", 10, E.WRONG_PROFILE, "ecpa_profile 'other' and kid 1",
           header={"ecpa_profile": "other", "kid": 1}),
        _kid_case("x-kid-zero-string", 11, "kid '0': a string, however short", "0"),
        _X("x-kid-number", "header", 11, E.UNKNOWN_KEY, "header kid 1", header={"kid": 1}),
        _X("x-kid-null", "header", 11, E.UNKNOWN_KEY, "header kid null", header={"kid": None}),
        _X("x-kid-true", "header", 11, E.UNKNOWN_KEY, "header kid true", header={"kid": True}),
        _X("x-kid-array", "header", 11, E.UNKNOWN_KEY, "header kid ['test-key-1']",
           header={"kid": ["test-key-1"]}),
        _X("x-kid-object", "header", 11, E.UNKNOWN_KEY, "header kid {'id': 'test-key-1'}",
           header={"kid": {"id": "test-key-1"}}),
        _X("x-kid-max-safe", "header", 11, E.UNKNOWN_KEY,
           "header kid 2**53-1: JSON accepts the integer, step 11 refuses it",
           header={"kid": MAX_SAFE}),
        _X("x-kid-minus-max-safe", "header", 11, E.UNKNOWN_KEY,
           "header kid -(2**53-1): JSON accepts the integer, step 11 refuses it",
           header={"kid": -MAX_SAFE}),
        _X("x-kid-depth-32", "header", 11, E.UNKNOWN_KEY,
           "header kid 31 nested arrays: 32 deep is accepted by JSON, not a string",
           header=_kid_header(nested(31))),
        _X("x-order-11-12", "order", 11, E.UNKNOWN_KEY, "header kid 1 and payload '{'",
           b"{", header={"kid": 1}),
    ]
    # fmt: on


def envelope_cases() -> list[XCase]:
    """Steps 1-11 in step order."""
    return [
        *_size_and_form(),
        *_base64url(),
        *_header_json(),
        *_header_members(),
        *_header_values(),
    ]
