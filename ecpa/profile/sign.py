"""The producer (PROFILE §6): validate, canonicalize, sign."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile import jws
from ecpa.profile.b64 import b64u_encode_ascii
from ecpa.profile.fast import statement_payload
from ecpa.profile.json.jcs import canonicalize, canonicalize_subset
from ecpa.profile.json.strict_json import MAX_DEPTH, parse_object
from ecpa.profile.keys import Ed25519Signer
from ecpa.profile.statement import Statement, check_statement

__all__ = ["Signed", "sign"]

_new = object.__new__
_set = object.__setattr__


@dataclass(frozen=True)
class Signed:
    """A signed statement: the canonical payload bytes and the detached compact JWS."""

    payload: bytes
    detached_jws: str
    statement: Statement


def sign(statement: Mapping[str, Any] | Statement, key: Ed25519Signer) -> Signed:
    """Sign a statement with ``key``; the header ``kid`` is the statement's ``kid``.

    The statement is checked as ``verify`` would check it (PROFILE §3 steps 1, 12-15 and
    17; step 16 holds by construction, the header ``kid`` being the statement's), so nothing
    is signed that a verifier must refuse. A Python ``float`` is refused even where JCS would
    write it as an integer: the statement's numbers are integers. The same statement and key
    always give the same bytes.

    Raises:
        EcpaError: ``ATTESTATION_INVALID_STATEMENT``, ``ATTESTATION_WRONG_PROFILE``,
            ``ATTESTATION_UNKNOWN_CRITICAL_CLAIM``, ``ATTESTATION_UNSUPPORTED_VALUE`` (a value
            JSON cannot carry) or ``ATTESTATION_TOO_LARGE``.
    """
    # The statement every honest caller gives, a plain dict, takes the template (_fast),
    # which reads each value once, so it needs no copy; anything else is copied first.
    data: Any = statement
    if type(statement) is not dict:
        if isinstance(statement, Statement):
            data = statement.to_dict()
        elif isinstance(statement, Mapping):
            data = dict(statement)
        else:
            raise EcpaError(
                ErrorCode.INVALID_STATEMENT,
                f"expected a statement object, found {type(statement).__name__}",
            )
    fast = statement_payload(data)
    if fast is not None:
        payload, checked = fast
        if len(payload) > jws.MAX_PAYLOAD_LENGTH:
            _check_size(payload)
    else:  # the full road walks the values more than once: on a copy of its own
        owned = data is not statement  # already a copy of its own
        payload, checked = _full_road(data if owned else dict(data))
    header_b64 = jws.encode_header(checked.kid)
    # The signing input, as jws.signing_input writes it (inlined: this is the hot path).
    signature = key.sign(b".".join((header_b64.encode("ascii"), b64u_encode_ascii(payload))))
    detached = f"{header_b64}..{b64u_encode_ascii(signature).decode('ascii')}"
    if len(detached) > jws.MAX_JWS_LENGTH:  # only a kid of thousands of characters gets here
        raise EcpaError(
            ErrorCode.TOO_LARGE,
            f"expected a JWS of at most {jws.MAX_JWS_LENGTH} characters, found {len(detached)}",
        )
    signed: Signed = _new(Signed)  # frozen_instance, inlined: this is the hot path
    _set(signed, "__dict__", {"payload": payload, "detached_jws": detached, "statement": checked})
    return signed


def _full_road(data: Any) -> tuple[bytes, Statement]:
    """Canonicalize, then parse the bytes to be signed and check them, not the caller's
    objects: what is checked is what is signed.

    One walk in the common case: a value of the JCS fast path's subset, nested at most
    MAX_DEPTH deep, holds no float and nothing too deep, so _refuse_floats would pass and
    canonicalize would give these very bytes. Anything else takes the full road.
    """
    subset = canonicalize_subset(data, max_depth=MAX_DEPTH)
    if subset is None:
        _refuse_floats(data)
        payload = canonicalize(data)
    else:
        payload = subset
    _check_size(payload)
    return payload, check_statement(_read_back(payload, from_subset=subset is not None))


def _check_size(payload: bytes) -> None:
    if len(payload) > jws.MAX_PAYLOAD_LENGTH:
        raise EcpaError(
            ErrorCode.TOO_LARGE,
            f"expected a payload of at most {jws.MAX_PAYLOAD_LENGTH} bytes, found {len(payload)}",
        )


def _read_back(payload: bytes, *, from_subset: bool) -> Any:
    """The payload parsed again, as the strict reader (PROFILE §4) returns it.

    Bytes from the JCS fast path are UTF-8 JSON of an object with unique member names,
    integers within ±(2**53-1), no float, constant or lone surrogate, nested at most
    MAX_DEPTH deep: none of the strict reader's checks can fail on them, and its hooks would
    build exactly what the plain C reader builds, so that reader is used.
    """
    if from_subset:
        return json.loads(payload.decode("utf-8"))
    return parse_object(payload, what="payload")


def _refuse_floats(value: Any) -> None:
    """A float would reach the payload as an integer (JCS writes 1.0 as 1) or as a fraction
    that verify refuses; either way it was not an integer statement. PROFILE §4.

    The walk is bounded by the strict reader's depth, so a value containing itself ends too.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, float):
            raise EcpaError(
                ErrorCode.UNSUPPORTED_VALUE, f"expected integers only, found the float {node!r}"
            )
        if isinstance(node, (Mapping, list, tuple)):
            if depth > MAX_DEPTH:
                raise EcpaError(
                    ErrorCode.UNSUPPORTED_VALUE,
                    f"expected nesting at most {MAX_DEPTH} deep, found deeper (or cyclic) values",
                )
            children = node.values() if isinstance(node, Mapping) else node
            stack.extend((child, depth + 1) for child in children)
