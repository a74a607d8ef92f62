"""The project's own corpus cases for PROFILE §3 steps 12-17 and §4: the payload read
strictly, its canonical form, the statement rules, schema and profile, kid agreement and
critical claims. Each case is validly signed over the payload it sends.
"""

from __future__ import annotations

from ecpa.corpus.generator.kit import (
    BASE,
    DELETE,
    MAX_SAFE,
    OK,
    XCase,
    dumps,
    entry,
    nested,
    splice,
    st,
    store,
)
from ecpa.errors import ErrorCode as E
from ecpa.profile.jcs import canonicalize

__all__ = ["payload_cases"]

GOOD = canonicalize(BASE)
BOM = b"\xef\xbb\xbf"
BIG = str(MAX_SAFE + 1).encode()
HEX = "0123456789abcdef" * 4
DUP = b'{"b":1,"b":2}'
KID = b'"kid":"test-key-1"'
ODD = "o/\u00e9\t\x1f\U0001f600"  # JCS: '/', 'é' and the emoji raw, \t and \u001f escaped
ODD_JCS = canonicalize(BASE | {"obligation": ODD})
ASTRAL = {"\U0001f600": 1, "\ue000": 2}  # JCS order: U+1F600 (D83D ...) before U+E000


def _objects(depth: int) -> bytes:
    return b'{"a":' * (depth - 1) + b"{}" + b"}" * (depth - 1)


_X = XCase


def _payload_json() -> list[XCase]:
    float_ordinal = splice(process__ordinal=b"1.5")
    # fmt: off
    return [
        _X("x-int-max-epoch", "positive", 12, OK,
           "process.epoch 2**53-1: the largest integer accepted",
           st(process__epoch=MAX_SAFE, challenge_nonce="x-nonce-max-epoch")),
        _X("x-words-in-strings", "positive", 12, OK,
           "obligation 'NaN', event 'Infinity', launch_id '-Infinity': words in strings are text",
           st(obligation="NaN", event="Infinity", launch_id="-Infinity",
              challenge_nonce="x-nonce-words")),
        _X("x-payload-empty", "payload-json", 12, E.MALFORMED_JSON, "payload of zero bytes", b""),
        _X("x-payload-truncated", "payload-json", 12, E.MALFORMED_JSON,
           "the base statement without its closing '}'", GOOD[:-1]),
        _X("x-payload-top-array", "payload-json", 12, E.MALFORMED_JSON,
           "the base statement inside an array: top level not an object", b"[" + GOOD + b"]"),
        _X("x-payload-top-null", "payload-json", 12, E.MALFORMED_JSON, "payload 'null'", b"null"),
        _X("x-payload-bom", "payload-json", 12, E.MALFORMED_JSON,
           "the base statement after a UTF-8 byte-order mark", BOM + GOOD),
        _X("x-payload-utf16", "payload-json", 12, E.MALFORMED_JSON,
           "the base statement in UTF-16LE", GOOD.decode().encode("utf-16-le")),
        _X("x-payload-utf32", "payload-json", 12, E.MALFORMED_JSON,
           "the base statement in UTF-32 with its BOM", GOOD.decode().encode("utf-32")),
        _X("x-payload-overlong-utf8", "payload-json", 12, E.MALFORMED_JSON,
           "obligation bytes C0 AF: an overlong (invalid) UTF-8 '/'",
           splice(obligation=b'"\xc0\xaf"')),
        _X("x-payload-encoded-surrogate", "payload-json", 12, E.MALFORMED_JSON,
           "obligation bytes ED A0 80: a UTF-8-encoded surrogate is invalid UTF-8",
           splice(obligation=b'"\xed\xa0\x80"')),
        _X("x-payload-duplicate-depth-1", "payload-json", 12, E.DUPLICATE_KEY,
           "member 'kid' twice at the top level (same value)",
           GOOD.replace(KID, KID + b"," + KID)),
        _X("x-payload-duplicate-depth-2", "payload-json", 12, E.DUPLICATE_KEY,
           "member 'host' twice in process",
           GOOD.replace(b'"host":"host-a"', b'"host":"host-a","host":"host-a"')),
        _X("x-payload-duplicate-depth-3", "payload-json", 12, E.DUPLICATE_KEY,
           "process.host {'x':1,'x':2}: a duplicate at depth 3",
           splice(process__host=b'{"x":1,"x":2}')),
        _X("x-payload-int-2**53", "payload-json", 12, E.UNSUPPORTED_VALUE,
           "process.ordinal 2**53", splice(process__ordinal=BIG)),
        _X("x-payload-int-minus-2**53", "payload-json", 12, E.UNSUPPORTED_VALUE,
           "process.ordinal -(2**53)", splice(process__ordinal=b"-" + BIG)),
        _X("x-payload-int-5000-digits", "payload-json", 12, E.UNSUPPORTED_VALUE,
           "process.ordinal a 5000-digit integer", splice(process__ordinal=b"9" * 5000)),
        _X("x-payload-1.0", "payload-json", 12, E.UNSUPPORTED_VALUE,
           "process.ordinal 1.0 (a fraction, however integral)",
           splice(process__ordinal=b"1.0")),
        _X("x-payload-1e3", "payload-json", 12, E.UNSUPPORTED_VALUE,
           "process.ordinal 1e3 (an exponent)", splice(process__ordinal=b"1e3")),
        _X("x-payload-minus-0.0", "payload-json", 12, E.UNSUPPORTED_VALUE,
           "process.ordinal -0.0", splice(process__ordinal=b"-0.0")),
        _X("x-payload-nan", "payload-json", 12, E.UNSUPPORTED_VALUE, "process.epoch NaN",
           splice(process__epoch=b"NaN")),
        _X("x-payload-infinity", "payload-json", 12, E.UNSUPPORTED_VALUE,
           "process.epoch Infinity", splice(process__epoch=b"Infinity")),
        _X("x-payload-minus-infinity", "payload-json", 12, E.UNSUPPORTED_VALUE,
           "process.epoch -Infinity", splice(process__epoch=b"-Infinity")),
        _X("x-payload-lone-high-surrogate", "payload-json", 12, E.UNSUPPORTED_VALUE,
           "obligation '\\ud800'", splice(obligation=b'"\\ud800"')),
        _X("x-payload-lone-low-surrogate", "payload-json", 12, E.UNSUPPORTED_VALUE,
           "event 'x\\udc00'", splice(event=b'"x\\udc00"')),
        _X("x-payload-lone-surrogate-name", "payload-json", 12, E.UNSUPPORTED_VALUE,
           "an extra first member named '\\ud800': step 12 before 13 and 14",
           b'{"\\ud800":1,' + GOOD[1:]),
        _X("x-payload-depth-33-arrays", "payload-json", 12, E.UNSUPPORTED_VALUE,
           "event 32 nested arrays: nesting 33 deep", splice(event=nested(32))),
        _X("x-payload-depth-33-objects", "payload-json", 12, E.UNSUPPORTED_VALUE,
           "process.host 31 nested objects: nesting 33 deep", splice(process__host=_objects(31))),
        _X("x-payload-depth-32-arrays", "statement-schema", 14, E.INVALID_STATEMENT,
           "event 31 nested arrays: 32 deep passes step 12, is no string at step 14",
           splice(event=nested(31))),
        _X("x-payload-minus-max-safe", "statement-schema", 14, E.INVALID_STATEMENT,
           "process.ordinal -(2**53-1): JSON accepts it, the statement (>= 0) does not",
           st(process__ordinal=-MAX_SAFE)),
        _X("x-payload-order-syntax-beats-float", "order", 12, E.MALFORMED_JSON,
           "process.ordinal 1.5, then the text ends early: syntax wins", float_ordinal[:-1]),
        _X("x-payload-order-top-array-beats-float", "order", 12, E.MALFORMED_JSON,
           "process.ordinal 1.5 in a statement wrapped in an array",
           b"[" + float_ordinal + b"]"),
        _X("x-payload-order-encoding-beats-dup", "order", 12, E.MALFORMED_JSON,
           "member 'kid' twice after a byte-order mark: encoding wins",
           BOM + GOOD.replace(KID, KID + b"," + KID)),
        _X("x-payload-order-float-before-dup-closes", "order", 12, E.UNSUPPORTED_VALUE,
           "process.host {'b':1,'b':2,'c':1.5}: the float is read before the object closes",
           splice(process__host=b'{"b":1,"b":2,"c":1.5}')),
        _X("x-payload-order-dup-closes-before-float", "order", 12, E.DUPLICATE_KEY,
           "process.host {'b':1,'b':2}, then process.ordinal 1.5: the duplicate comes first",
           splice(process__host=DUP, process__ordinal=b"1.5")),
        _X("x-payload-order-float-before-dup", "order", 12, E.UNSUPPORTED_VALUE,
           "process.epoch 1.5, then process.host {'b':1,'b':2}: the float comes first",
           splice(process__epoch=b"1.5", process__host=DUP)),
        _X("x-payload-order-dup-beats-earlier-depth", "order", 12, E.DUPLICATE_KEY,
           "event 40 deep, later a duplicate in process.host: class 2 beats class 3",
           splice(event=nested(40), process__host=DUP)),
        _X("x-payload-order-dup-beats-earlier-surrogate", "order", 12, E.DUPLICATE_KEY,
           "obligation '\\ud800', later a duplicate in process.host: class 2 beats class 3",
           splice(obligation=b'"\\ud800"', process__host=DUP)),
        _X("x-payload-order-depth-beats-noncanonical", "order", 12, E.UNSUPPORTED_VALUE,
           "event 33 deep after a leading space: class 3 beats the form (step 13)",
           b" " + splice(event=nested(32))),
        _X("x-order-12-13", "order", 12, E.DUPLICATE_KEY,
           "member 'kid' twice in a statement written with spaces",
           dumps(BASE).replace(b'"kid": "test-key-1"', b'"kid": "test-key-1", "kid": "x"')),
    ]
    # fmt: on


def _canonical_form() -> list[XCase]:
    # fmt: off
    return [
        _X("x-canonical-escapes", "positive", 13, OK,
           "obligation 'o/é\\t\\u001f' and an emoji: JCS escapes only the controls",
           st(obligation=ODD, challenge_nonce="x-nonce-canonical-escapes")),
        _X("x-noncanonical-spaces", "canonicalization", 13, E.NONCANONICAL_PAYLOAD,
           "the base statement, sorted, with ', ' and ': ' separators",
           dumps(BASE, sort_keys=True)),
        _X("x-noncanonical-unsorted", "canonicalization", 13, E.NONCANONICAL_PAYLOAD,
           "the base statement compact but in its written (unsorted) member order",
           dumps(BASE, separators=(",", ":"))),
        _X("x-noncanonical-escaped-letter", "canonicalization", 13, E.NONCANONICAL_PAYLOAD,
           "launch_id written 'l\\u0061unch-1'",
           GOOD.replace(b'"launch-1"', b'"l\\u0061unch-1"')),
        _X("x-noncanonical-escaped-slash", "canonicalization", 13, E.NONCANONICAL_PAYLOAD,
           "profile written 'ecpa-jcs-jws-eddsa\\/0.1'",
           GOOD.replace(b"eddsa/0.1", b"eddsa\\/0.1")),
        _X("x-noncanonical-minus-zero", "canonicalization", 13, E.NONCANONICAL_PAYLOAD,
           "process.ordinal written -0 (JCS writes 0)",
           GOOD.replace(b'"ordinal":0', b'"ordinal":-0')),
        _X("x-noncanonical-trailing-newline", "canonicalization", 13, E.NONCANONICAL_PAYLOAD,
           "the base statement and a newline", GOOD + b"\n"),
        _X("x-noncanonical-escaped-e-acute", "canonicalization", 13, E.NONCANONICAL_PAYLOAD,
           "the escapes case with 'é' written '\\u00e9'",
           ODD_JCS.replace("\u00e9".encode(), b"\\u00e9")),
        _X("x-noncanonical-uppercase-hex", "canonicalization", 13, E.NONCANONICAL_PAYLOAD,
           "the escapes case with '\\u001F' for '\\u001f'",
           ODD_JCS.replace(b"\\u001f", b"\\u001F")),
        _X("x-noncanonical-tab-escape", "canonicalization", 13, E.NONCANONICAL_PAYLOAD,
           "the escapes case with '\\u0009' for '\\t'", ODD_JCS.replace(b"\\t", b"\\u0009")),
        _X("x-noncanonical-surrogate-pair-escape", "canonicalization", 13,
           E.NONCANONICAL_PAYLOAD, "the escapes case with the emoji as '\\ud83d\\ude00'",
           ODD_JCS.replace("\U0001f600".encode(), b"\\ud83d\\ude00")),
        _X("x-jcs-utf16-order", "statement-schema", 14, E.INVALID_STATEMENT,
           "extra members U+1F600 and U+E000 in JCS (UTF-16) order: canonical, then refused",
           canonicalize(BASE | ASTRAL)),
        _X("x-noncanonical-code-point-order", "canonicalization", 13, E.NONCANONICAL_PAYLOAD,
           "the same members sorted by code point (U+E000 first), not by UTF-16 unit",
           dumps(dict(sorted((BASE | ASTRAL).items())), separators=(",", ":"),
                 ensure_ascii=False)),
        _X("x-order-13-14", "order", 13, E.NONCANONICAL_PAYLOAD,
           "issuer '' in a statement written with spaces: the form is checked first",
           dumps(st(issuer=""), sort_keys=True)),
    ]
    # fmt: on


def _statement() -> list[XCase]:
    k2 = {"kid": "test-key-2"}
    nfc, nfd = "kid-\u00e9", "kid-e\u0301"
    both = store(entry(kid=nfc), entry(kid=nfd))
    # fmt: off
    return [
        _X("x-statement-short-values", "positive", 14, OK,
           "one-character strings and digests using all 16 hex digits",
           st(plan_id="p", launch_id="l", plugin_id="g", obligation="o", event="e",
              artifact_digest="sha256:" + HEX, evidence_digest="sha256:" + HEX[::-1],
              process__host="h", process__role="r", process__start_identity="s",
              challenge_nonce="n")),
        _X("x-statement-missing-process", "statement-schema", 14, E.INVALID_STATEMENT,
           "process missing", st(process=DELETE)),
        _X("x-statement-missing-schema", "statement-schema", 14, E.INVALID_STATEMENT,
           "schema missing", st(schema=DELETE)),
        _X("x-statement-extra-capital-schema", "statement-schema", 14, E.INVALID_STATEMENT,
           "a 19th member 'Schema'", st(Schema="x")),
        _X("x-statement-empty-kid", "statement-schema", 14, E.INVALID_STATEMENT,
           "kid '' in the statement and the header", st(kid="")),
        _X("x-statement-null-event", "statement-schema", 14, E.INVALID_STATEMENT, "event null",
           st(event=None)),
        _X("x-statement-digest-uppercase", "statement-schema", 14, E.INVALID_STATEMENT,
           "evidence_digest in uppercase hex", st(evidence_digest="sha256:" + HEX.upper())),
        _X("x-statement-digest-63", "statement-schema", 14, E.INVALID_STATEMENT,
           "artifact_digest with 63 hex digits", st(artifact_digest="sha256:" + HEX[:63])),
        _X("x-statement-process-extra", "statement-schema", 14, E.INVALID_STATEMENT,
           "process has a 6th member 'pid'", st(process__pid=1)),
        _X("x-statement-process-missing-epoch", "statement-schema", 14, E.INVALID_STATEMENT,
           "process.epoch missing", st(process__epoch=DELETE)),
        _X("x-statement-epoch-false", "statement-schema", 14, E.INVALID_STATEMENT,
           "process.epoch false: a boolean is not an integer", st(process__epoch=False)),
        _X("x-statement-epoch-string", "statement-schema", 14, E.INVALID_STATEMENT,
           "process.epoch '7': a string is not an integer", st(process__epoch="7")),
        _X("x-statement-claims-string", "statement-schema", 14, E.INVALID_STATEMENT,
           "critical_claims 'x' (not an array)", st(critical_claims="x")),
        _X("x-statement-claims-number", "statement-schema", 14, E.INVALID_STATEMENT,
           "critical_claims [1]", st(critical_claims=[1])),
        _X("x-statement-claims-repeated-apart", "statement-schema", 14, E.INVALID_STATEMENT,
           "critical_claims ['x', 'y', 'x']: a repeat is step 14, not 17",
           st(critical_claims=["x", "y", "x"])),
        _X("x-statement-schema-number", "statement-schema", 14, E.INVALID_STATEMENT,
           "schema 1: a type error (§1) comes before the value check of step 15", st(schema=1)),
        _X("x-order-14-15", "order", 14, E.INVALID_STATEMENT, "issuer '' and schema 'x'",
           st(issuer="", schema="x")),
        _X("x-statement-profile-words", "positive", 15, OK,
           "event 'ecpa-jcs-jws-eddsa/0.2': only schema and profile name the profile",
           st(event="ecpa-jcs-jws-eddsa/0.2", challenge_nonce="x-nonce-profile-words")),
        _X("x-statement-schema-0.2", "statement-schema", 15, E.WRONG_PROFILE,
           "schema 'ecpa-attestation-statement/0.2'",
           st(schema="ecpa-attestation-statement/0.2")),
        _X("x-statement-schema-trust-store", "statement-schema", 15, E.WRONG_PROFILE,
           "schema 'ecpa-trust-store/0.1'", st(schema="ecpa-trust-store/0.1")),
        _X("x-statement-schema-empty", "statement-schema", 15, E.WRONG_PROFILE, "schema ''",
           st(schema="")),
        _X("x-statement-profile-0.2", "statement-schema", 15, E.WRONG_PROFILE,
           "profile 'ecpa-jcs-jws-eddsa/0.2'", st(profile="ecpa-jcs-jws-eddsa/0.2")),
        _X("x-statement-profile-uppercase", "statement-schema", 15, E.WRONG_PROFILE,
           "profile 'ECPA-JCS-JWS-EDDSA/0.1'", st(profile="ECPA-JCS-JWS-EDDSA/0.1")),
        _X("x-order-15-16", "order", 15, E.WRONG_PROFILE,
           "profile 'x', and statement kid test-key-1 under header kid test-key-2",
           st(profile="x"), header=k2, key=2),
        _X("x-kid-equal-decomposed", "positive", 16, OK,
           "statement and header kid 'kid-e\\u0301', trusted as written",
           st(kid=nfd, challenge_nonce="x-nonce-kid-nfd"), trust=both),
        _X("x-kid-mismatch", "key", 16, E.KEY_MISMATCH,
           "statement kid test-key-1, header kid test-key-2 (signed by it): both trusted",
           header=k2, key=2),
        _X("x-kid-mismatch-reverse", "key", 16, E.KEY_MISMATCH,
           "statement kid test-key-2, header kid test-key-1 (signed by it): both trusted",
           st(kid="test-key-2"), header={"kid": "test-key-1"}),
        _X("x-kid-mismatch-normalization", "key", 16, E.KEY_MISMATCH,
           "statement kid 'kid-\\u00e9', header kid 'kid-e\\u0301': both trusted, not equal",
           st(kid=nfc), header={"kid": nfd}, trust=both),
        _X("x-kid-mismatch-untrusted-statement-kid", "key", 16, E.KEY_MISMATCH,
           "statement kid test-key-9 (untrusted), header kid test-key-1: before the lookup",
           st(kid="test-key-9"), header={"kid": "test-key-1"}),
        _X("x-kid-mismatch-empty-header-kid", "key", 16, E.KEY_MISMATCH,
           "header kid '', statement kid test-key-1", header={"kid": ""}),
        _X("x-kid-mismatch-case", "key", 16, E.KEY_MISMATCH,
           "statement kid 'Test-Key-1', header kid test-key-1",
           st(kid="Test-Key-1"), header={"kid": "test-key-1"}),
        _X("x-order-16-17", "order", 16, E.KEY_MISMATCH,
           "header kid test-key-2 for statement kid test-key-1, and critical_claims ['x']",
           st(critical_claims=["x"]), header=k2, key=2),
        _X("x-claims-empty", "positive", 17, OK, "critical_claims []: the known set is empty",
           st(challenge_nonce="x-nonce-claims-empty")),
        _X("x-claim-exp", "claim", 17, E.UNKNOWN_CRITICAL_CLAIM, "critical_claims ['exp']",
           st(critical_claims=["exp"])),
        _X("x-claim-two", "claim", 17, E.UNKNOWN_CRITICAL_CLAIM, "critical_claims ['a', 'b']",
           st(critical_claims=["a", "b"])),
        _X("x-claim-empty-string", "claim", 17, E.UNKNOWN_CRITICAL_CLAIM,
           "critical_claims ['']", st(critical_claims=[""])),
        _X("x-claim-ecpa-profile", "claim", 17, E.UNKNOWN_CRITICAL_CLAIM,
           "critical_claims ['ecpa_profile'] (a header name)",
           st(critical_claims=["ecpa_profile"])),
        _X("x-order-17-18", "order", 17, E.UNKNOWN_CRITICAL_CLAIM,
           "critical_claims ['x'] and an untrusted issuer",
           st(critical_claims=["x"], issuer="urn:ecpa:issuer:unknown")),
    ]
    # fmt: on


def payload_cases() -> list[XCase]:
    """Steps 12-17 in step order."""
    return [*_payload_json(), *_canonical_form(), *_statement()]
