"""The fast path of PROFILE §3 steps 12-17 for the payload every honest signer writes.

One compiled pattern accepts only the canonical form (RFC 8785) of a statement that steps
12-17 accept: its 18 members in JCS order, strings without escapes or control characters,
integers written as JCS writes them, the two digests, the profile's constants, no critical
claims, and the statement's ``kid`` equal to the header's. Such bytes are strict JSON (one
object, unique member names, integers checked below 2**53, valid UTF-8, hence no lone
surrogate, nesting depth 2), are their own canonical form (JCS writes such strings raw and
members in this order), and hold a statement the model accepts, so the full path would
return the very same :class:`~ecpa.profile.statement.Statement`. Anything else (any escape,
another order, a wrong value) returns None and takes the full path, which decides and names
the failing check: no error code comes from here. The property tests prove both paths equal
on generated statements and on every corpus case.
"""

from __future__ import annotations

import re
from typing import Any

from ecpa.profile._json import MAX_SAFE_INTEGER
from ecpa.profile.statement import PROFILE_ID, STATEMENT_SCHEMA, Process, Statement

__all__ = ["canonical_statement"]

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
assert list(_MEMBERS) == sorted(_MEMBERS)
assert list(_PROCESS) == sorted(_PROCESS)
_STATEMENT = re.compile("\\{" + ",".join(f'"{k}":{v}' for k, v in _MEMBERS.items()) + "\\}")
_FIELDS = tuple(Statement.model_fields)
_PROCESS_FIELDS = tuple(Process.model_fields)
_new = object.__new__
_set = object.__setattr__


def _model(cls: type[Any], values: dict[str, Any]) -> Any:
    """A frozen pydantic model holding ``values``, which are already known valid: what
    ``model_validate`` would return, without its cost."""
    obj = _new(cls)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", set(values))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


def canonical_statement(payload: bytes, header_kid: str) -> Statement | None:
    """The statement of ``payload`` when it is the canonical form of a statement that
    steps 12-17 accept under ``header_kid`` (see the module's text); else None."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return None
    m = _STATEMENT.fullmatch(text)
    if m is None:
        return None
    (artifact, nonce, event, evidence, expires, issued, issuer, kid, launch, obligation,
     observed, plan, plugin, epoch, host, ordinal, role, start, subject) = m.groups()  # fmt: skip
    if kid != header_kid:  # step 16: the full path names it
        return None
    numbers = (int(expires), int(issued), int(observed), int(epoch), int(ordinal))
    if max(numbers) > MAX_SAFE_INTEGER:
        return None
    expires_at, issued_at, observed_at, epoch_n, ordinal_n = numbers
    return _statement(
        {
            "issuer": issuer,
            "kid": kid,
            "subject": subject,
            "plan_id": plan,
            "launch_id": launch,
            "plugin_id": plugin,
            "obligation": obligation,
            "event": event,
            "challenge_nonce": nonce,
            "artifact_digest": artifact,
            "evidence_digest": evidence,
            "observed_at": observed_at,
            "issued_at": issued_at,
            "expires_at": expires_at,
        },
        {
            "host": host,
            "role": role,
            "start_identity": start,
            "ordinal": ordinal_n,
            "epoch": epoch_n,
        },
    )


def _statement(values: dict[str, Any], process: dict[str, Any]) -> Statement:
    """The statement of values already known valid (the constants added)."""
    values["statement_schema"] = STATEMENT_SCHEMA
    values["profile"] = PROFILE_ID
    values["process"] = _model(Process, {k: process[k] for k in _PROCESS_FIELDS})
    values["critical_claims"] = ()
    result: Statement = _model(Statement, {k: values[k] for k in _FIELDS})  # field order
    return result


_PLAIN = re.compile(r'[^"\\\x00-\x1f]+')
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_STRINGS = (
    "challenge_nonce",
    "event",
    "issuer",
    "kid",
    "launch_id",
    "obligation",
    "plan_id",
    "plugin_id",
    "subject",
)
_INTS = ("expires_at", "issued_at", "observed_at")
_TOP = frozenset(_MEMBERS)
_PROC = frozenset(_PROCESS)


def _plain(value: object) -> bool:
    return type(value) is str and _PLAIN.fullmatch(value) is not None


def _safe(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


def statement_payload(data: dict[str, Any]) -> tuple[bytes, Statement] | None:
    """The JCS bytes and the statement of ``data`` when it is a statement the full path of
    ``sign`` accepts and writes with strings JCS leaves as they are (see the module's
    text): exact types (``str``, ``int``, never ``bool`` or a subclass), the 18 members,
    the constants, no critical claims. Anything else returns None and takes the full path,
    which canonicalizes, reads back and checks, and names the failing check."""
    if data.keys() != _TOP:
        return None
    process = data["process"]
    if type(process) is not dict or process.keys() != _PROC:
        return None
    claims = data["critical_claims"]
    if type(claims) not in (list, tuple) or claims:
        return None
    if data["schema"] != STATEMENT_SCHEMA or data["profile"] != PROFILE_ID:
        return None
    if type(data["schema"]) is not str or type(data["profile"]) is not str:
        return None
    if not all(_plain(data[k]) for k in _STRINGS):
        return None
    if not all(_plain(process[k]) for k in ("host", "role", "start_identity")):
        return None
    if not (all(_safe(data[k]) for k in _INTS) and _safe(process["ordinal"])):
        return None
    if not _safe(process["epoch"]):
        return None
    artifact, evidence = data["artifact_digest"], data["evidence_digest"]
    for digest in (artifact, evidence):
        if type(digest) is not str or _DIGEST.fullmatch(digest) is None:
            return None
    text = (
        f'{{"artifact_digest":"{artifact}","challenge_nonce":"{data["challenge_nonce"]}",'
        f'"critical_claims":[],"event":"{data["event"]}","evidence_digest":"{evidence}",'
        f'"expires_at":{data["expires_at"]},"issued_at":{data["issued_at"]},'
        f'"issuer":"{data["issuer"]}","kid":"{data["kid"]}","launch_id":"{data["launch_id"]}",'
        f'"obligation":"{data["obligation"]}","observed_at":{data["observed_at"]},'
        f'"plan_id":"{data["plan_id"]}","plugin_id":"{data["plugin_id"]}",'
        f'"process":{{"epoch":{process["epoch"]},"host":"{process["host"]}",'
        f'"ordinal":{process["ordinal"]},"role":"{process["role"]}",'
        f'"start_identity":"{process["start_identity"]}"}},'
        f'"profile":"{PROFILE_ID}","schema":"{STATEMENT_SCHEMA}","subject":"{data["subject"]}"}}'
    )
    try:
        payload = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the full path refuses it
        return None
    values = {k: data[k] for k in _STRINGS}
    values.update({k: data[k] for k in _INTS})
    values["artifact_digest"], values["evidence_digest"] = artifact, evidence
    proc = {k: process[k] for k in _PROCESS}
    return payload, _statement(values, proc)
