"""RFC 8785 (JSON Canonicalization Scheme) canonical bytes.

``rfc8785`` does the work; this module maps its errors onto :class:`~ecpa.EcpaError` so
that nothing foreign escapes the library.
"""

from __future__ import annotations

from typing import Any

import rfc8785

from ecpa.errors import EcpaError, ErrorCode

__all__ = ["canonicalize"]


def canonicalize(value: Any) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of a JSON value.

    ``value`` is made of ``dict`` (string keys), ``list``/``tuple``, ``str``, ``int``,
    ``float``, ``bool`` and ``None``.

    Raises:
        EcpaError: ``ATTESTATION_UNSUPPORTED_VALUE`` for what JCS cannot represent (an
            integer beyond ±(2**53-1), a non-finite float, a lone surrogate, a non-string
            key, a non-JSON type, or nesting too deep for it, a cycle included).
    """
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError, OverflowError) as exc:
        raise EcpaError(
            ErrorCode.UNSUPPORTED_VALUE,
            f"expected a value RFC 8785 can canonicalize, found one it cannot ({exc})",
        ) from None
    except RecursionError:  # rfc8785 recurses: a value nested too deep, or containing itself
        raise EcpaError(
            ErrorCode.UNSUPPORTED_VALUE,
            "expected a value RFC 8785 can canonicalize, found one nested too deep or cyclic",
        ) from None
