"""The compact form of an evidence record, read without the strict JSON reader.

A line as :func:`ecpa.runtime.model.evidence.record_line` writes it, or a bundle: the members in
that order, no whitespace, values in the base64url alphabet (``detached_jws`` also ``.``).
Such bytes are strict JSON (PROFILE §4) of an object of known, unique members with string
values, so the strict reader would return exactly these values. Split on ``"`` (no value in
these alphabets holds one), the line is its pieces: ``{``, then per member its name, ``:``,
its value and ``,`` (``}`` after the last). Anything else returns None and takes the strict
reader, which decides and names the error; the tests prove both agree on any bytes.
"""

from __future__ import annotations

__all__ = ["compact_members"]

_B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_JWS = _B64 + b"."
_PAYLOAD, _JWS_NAME, _HOST, _SCHEMA = (
    b"payload_b64",
    b"detached_jws",
    b"host_evidence_b64",
    b"schema",
)
#: The member names of each layout, by the number of pieces the line splits into.
_LAYOUTS = {
    9: ((_PAYLOAD, _JWS_NAME),),
    13: ((_SCHEMA, _PAYLOAD, _JWS_NAME), (_HOST, _PAYLOAD, _JWS_NAME)),
    17: ((_SCHEMA, _HOST, _PAYLOAD, _JWS_NAME),),
}
_COLONS = {n: [b":"] * ((n - 1) // 4) for n in _LAYOUTS}
_COMMAS = {n: [b","] * ((n - 1) // 4 - 1) for n in _LAYOUTS}


def compact_members(data: bytes, schema: bytes) -> tuple[bytes | None, bytes, bytes] | None:
    """(host_evidence_b64 or None, payload_b64, detached_jws) of a compact record whose
    ``schema``, when present, is ``schema``, each value checked in its alphabet; None for
    any other bytes."""
    parts = data.split(b'"')
    count = len(parts)
    layouts = _LAYOUTS.get(count)
    if layouts is None or parts[0] != b"{" or parts[-1] != b"}":
        return None
    if parts[2::4] != _COLONS[count] or parts[4:-1:4] != _COMMAS[count]:
        return None
    names = tuple(parts[1::4])
    if names not in layouts:
        return None
    values = parts[3::4]
    if names[0] == _SCHEMA:
        if values[0] != schema:
            return None
        values = values[1:]
    payload_b64, detached_jws = values[-2], values[-1]
    host_b64 = values[0] if len(values) == 3 else None
    if payload_b64.translate(None, _B64) or detached_jws.translate(None, _JWS):
        return None
    if host_b64 is not None and host_b64.translate(None, _B64):
        return None
    return host_b64, payload_b64, detached_jws
