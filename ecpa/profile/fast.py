"""The fast path of PROFILE §3 steps 12-17 for the payload every honest signer writes.

One compiled pattern accepts only the canonical form (RFC 8785) of a statement that steps
12-17 accept: its 18 members in JCS order, strings without escapes or control characters,
integers written as JCS writes them, the two digests, the profile's constants, no critical
claims, and the statement's ``kid`` equal to the header's. Such bytes are strict JSON (one
object, unique member names, integers checked below 2**53, valid UTF-8, hence no lone
surrogate, nesting depth 2), are their own canonical form (JCS writes such strings raw and
members in this order), and hold a statement the shape accepts, so the full path would
return the very same :class:`~ecpa.profile.statement.Statement`. Anything else (any escape,
another order, a wrong value) returns None and takes the full path, which decides and names
the failing check: no error code comes from here. The property tests prove both paths equal
on generated statements and on every corpus case.
"""

from __future__ import annotations

import re
from typing import Any

from ecpa.profile.json.strict_json import MAX_SAFE_INTEGER
from ecpa.profile.statement import PROFILE_ID, STATEMENT_SCHEMA, Process, Statement

__all__ = ["canonical_statement", "statement_payload"]

_S = r'"([^"\\\x00-\x1f]+)"'  # a non-empty string JCS writes as it is
_I = r"(0|[1-9][0-9]{0,15})"  # an integer as JCS writes it (checked <= 2**53-1 below)
_D = r'"(sha256:[0-9a-f]{64})"'
#: The members in JCS order (ASCII names: code point order is UTF-16 order), each with the
#: form of its value; the groups come out in this order.
_PROCESS = {"epoch": _I, "host": _S, "ordinal": _I, "role": _S, "start_identity": _S}
_MEMBERS = {
    "artifact_digest": _D,
    "challenge_nonce": _S,
    "critical_claims": r"\[\]",
    "event": _S,
    "evidence_digest": _D,
    "expires_at": _I,
    "issued_at": _I,
    "issuer": _S,
    "kid": _S,
    "launch_id": _S,
    "obligation": _S,
    "observed_at": _I,
    "plan_id": _S,
    "plugin_id": _S,
    "process": "\\{" + ",".join(f'"{k}":{v}' for k, v in _PROCESS.items()) + "\\}",
    "profile": '"' + re.escape(PROFILE_ID) + '"',
    "schema": '"' + re.escape(STATEMENT_SCHEMA) + '"',
    "subject": _S,
}


def _require(holds: bool, what: str) -> None:
    """An invariant of this module, checked at import whatever ``-O`` says: a broken build
    (the fast path out of step with the shapes), never bad input."""
    if not holds:
        raise RuntimeError(f"ecpa.profile.fast: expected {what}")


# The patterns are written from the shapes' own members: one definition, checked here.
_require(list(_MEMBERS) == sorted(_MEMBERS), "the statement's members in JCS order")
_require(list(_PROCESS) == sorted(_PROCESS), "the process members in JCS order")
_require(set(_MEMBERS) == Statement.__wire__, "the statement pattern's members = Statement's")
_require(set(_PROCESS) == Process.__wire__, "the process pattern's members = Process's")
_STATEMENT = re.compile("\\{" + ",".join(f'"{k}":{v}' for k, v in _MEMBERS.items()) + "\\}")
_FIELDS = tuple(f.attr for f in Statement.__fields__)
_PROCESS_FIELDS = tuple(f.attr for f in Process.__fields__)
_new = object.__new__
_set = object.__setattr__


def canonical_statement(payload: bytes, header_kid: str) -> Statement | None:
    """The statement of ``payload`` when it is the canonical form of a statement that
    steps 12-17 accept under ``header_kid`` (see the module's text); else None."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return _matched_statement(text, header_kid)


def _matched_statement(text: str, header_kid: str) -> Statement | None:
    m = _STATEMENT.fullmatch(text)
    if m is None:
        return None
    (artifact, nonce, event, evidence, expires, issued, issuer, kid, launch, obligation,
     observed, plan, plugin, epoch, host, ordinal, role, start, subject) = m.groups()  # fmt: skip
    if kid != header_kid:  # step 16: the full path names it
        return None
    expires_at, issued_at, observed_at = int(expires), int(issued), int(observed)
    epoch_n, ordinal_n = int(epoch), int(ordinal)
    if max(expires_at, issued_at, observed_at, epoch_n, ordinal_n) > MAX_SAFE_INTEGER:
        return None
    return _statement(
        issuer, kid, subject, plan, launch, plugin, obligation, event, nonce, artifact,
        evidence, host, role, start, ordinal_n, epoch_n, observed_at, issued_at, expires_at,
    )  # fmt: skip


def _statement(
    issuer: str, kid: str, subject: str, plan_id: str, launch_id: str, plugin_id: str,
    obligation: str, event: str, challenge_nonce: str, artifact_digest: str,
    evidence_digest: str, host: str, role: str, start_identity: str, ordinal: int,
    epoch: int, observed_at: int, issued_at: int, expires_at: int,
) -> Statement:  # fmt: skip
    """The statement of values already known valid, the constants added: its fields and
    its process's in the shapes' order (checked below, once, at import)."""
    # What Statement.from_dict would return for values already known valid, without its cost.
    process = _new(Process)
    _set(
        process,
        "__dict__",
        {
            "host": host,
            "role": role,
            "start_identity": start_identity,
            "ordinal": ordinal,
            "epoch": epoch,
        },
    )
    result: Statement = _new(Statement)
    _set(
        result,
        "__dict__",
        {
            "statement_schema": STATEMENT_SCHEMA,
            "profile": PROFILE_ID,
            "issuer": issuer,
            "kid": kid,
            "subject": subject,
            "plan_id": plan_id,
            "launch_id": launch_id,
            "plugin_id": plugin_id,
            "obligation": obligation,
            "event": event,
            "challenge_nonce": challenge_nonce,
            "artifact_digest": artifact_digest,
            "evidence_digest": evidence_digest,
            "process": process,
            "observed_at": observed_at,
            "issued_at": issued_at,
            "expires_at": expires_at,
            "critical_claims": (),
        },
    )
    return result


_SAMPLE = _statement(
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", 0, 0, 0, 0, 0
)
_require(tuple(_SAMPLE.__dict__) == _FIELDS, "a built statement's fields in the shape's order")
_require(
    tuple(_SAMPLE.process.__dict__) == _PROCESS_FIELDS,
    "a built process's fields in the shape's order",
)

#: The ASCII characters JCS writes escaped: the controls, the quote and the backslash.
_JCS_ESCAPES = bytes(range(0x20)) + b'"\\'


def _digests(*values: object) -> bool:
    """Whether each value is ``sha256:`` and 64 lowercase hex digits, as the pattern's ``_D`` says:
    only such text survives the round trip through bytes (no uppercase, no whitespace)."""
    for value in values:
        if type(value) is not str or len(value) != 71 or not value.startswith("sha256:"):
            return False
    hexdigits = "".join([value[7:] for value in values])  # type: ignore[index]
    try:
        return bytes.fromhex(hexdigits).hex() == hexdigits
    except ValueError:
        return False


def statement_payload(data: dict[str, Any]) -> tuple[bytes, Statement] | None:
    """The JCS bytes and the statement of ``data`` when it is a statement the full path of
    ``sign`` accepts and writes with strings JCS leaves as they are (see the module's
    text); else None, and the full path, which canonicalizes, reads back and checks,
    decides and names the failing check.

    Taken here: the 18 members and the process's 5, strings of type ``str`` (never a
    subclass), non-empty, printable (no control character: nothing JCS escapes; a rarer
    non-printable character takes the full path), without a quote or a backslash, and
    without a lone surrogate; integers of type ``int`` (never ``bool``) within
    [0, 2**53-1]; the two digests; the constants; no critical claims. Each value is read
    once: the text and the statement returned hold the very same values, so what is
    checked is what is signed, even if ``data`` changes meanwhile."""
    # Exactly the members: as many as the names, each of them read below (a KeyError).
    if len(data) != len(_MEMBERS):
        return None
    try:  # a member missing, or removed meanwhile by another thread: the full path
        process = data["process"]
        if type(process) is not dict or len(process) != len(_PROCESS):
            return None
        claims = data["critical_claims"]
        if type(claims) not in (list, tuple) or claims:
            return None
        issuer, kid, subject = data["issuer"], data["kid"], data["subject"]
        plan, launch, plugin = data["plan_id"], data["launch_id"], data["plugin_id"]
        obligation, event, nonce = data["obligation"], data["event"], data["challenge_nonce"]
        artifact, evidence = data["artifact_digest"], data["evidence_digest"]
        host, role, start = process["host"], process["role"], process["start_identity"]
        ordinal, epoch = process["ordinal"], process["epoch"]
        observed, issued, expires = data["observed_at"], data["issued_at"], data["expires_at"]
        schema, profile = data["schema"], data["profile"]
    except KeyError:
        return None
    strings = (issuer, kid, subject, plan, launch, plugin, obligation, event, nonce, host,
               role, start)  # fmt: skip
    if not (
        type(issuer) is type(kid) is type(subject) is type(plan) is type(launch) is str
        and type(plugin) is type(obligation) is type(event) is type(nonce) is str
        and type(host) is type(role) is type(start) is str
        and all(strings)
    ):
        return None
    joined = "".join(strings)
    if joined.isascii():  # one pass of a table in C over the bytes, for what JCS escapes
        ascii_bytes = joined.encode("ascii")
        if len(ascii_bytes.translate(None, _JCS_ESCAPES)) != len(ascii_bytes):
            return None
    elif not joined.isprintable() or '"' in joined or "\\" in joined:
        return None  # (a rarer non-printable character takes the full path)
    if not type(ordinal) is type(epoch) is type(observed) is type(issued) is type(expires) is int:
        return None
    numbers = (ordinal, epoch, observed, issued, expires)
    if min(numbers) < 0 or max(numbers) > MAX_SAFE_INTEGER:
        return None
    if type(schema) is not str or schema != STATEMENT_SCHEMA:
        return None
    if type(profile) is not str or profile != PROFILE_ID:
        return None
    if not _digests(artifact, evidence):
        return None
    text = (
        f'{{"artifact_digest":"{artifact}","challenge_nonce":"{nonce}",'
        f'"critical_claims":[],"event":"{event}","evidence_digest":"{evidence}",'
        f'"expires_at":{expires},"issued_at":{issued},"issuer":"{issuer}","kid":"{kid}",'
        f'"launch_id":"{launch}","obligation":"{obligation}","observed_at":{observed},'
        f'"plan_id":"{plan}","plugin_id":"{plugin}","process":{{"epoch":{epoch},'
        f'"host":"{host}","ordinal":{ordinal},"role":"{role}",'
        f'"start_identity":"{start}"}},"profile":"{PROFILE_ID}",'
        f'"schema":"{STATEMENT_SCHEMA}","subject":"{subject}"}}'
    )
    try:
        payload = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the full path refuses it
        return None
    statement = _statement(
        issuer, kid, subject, plan, launch, plugin, obligation, event, nonce, artifact,
        evidence, host, role, start, ordinal, epoch, observed, issued, expires,
    )  # fmt: skip
    return payload, statement
