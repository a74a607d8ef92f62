"""The launch a manager starts: what its evidence must be bound to (RUNTIME.md).

A launch is described by ``launch.json`` (schema ``ecpa-launch/0.1``) in its launch
directory; :class:`ExpectedLaunch` is the part of it that every statement must match.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ecpa._files import read_bounded
from ecpa._json import parse_object
from ecpa.errors import EcpaError, ErrorCode
from ecpa.statement import NonEmptyStr, SafeInt, describe_validation

__all__ = ["LAUNCH_SCHEMA", "ExpectedLaunch", "expected_from_dict", "launch_from_file"]

LAUNCH_SCHEMA = "ecpa-launch/0.1"
_MAX_CONFIG_BYTES = 1 << 20
_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True)


@dataclass(frozen=True)
class ExpectedLaunch:
    """What a statement must carry to count for this launch; nonces are ``<challenge>:<seq>``."""

    plan_id: str
    launch_id: str
    plugin_id: str
    artifact_digest: str
    process_epoch: int
    challenge: str
    heartbeat_window_s: int = 3


def _bad(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.INVALID_INPUT, detail)


class _LaunchDoc(BaseModel):
    model_config = _STRICT
    plan_id: NonEmptyStr
    launch_id: NonEmptyStr
    plugin_id: NonEmptyStr
    artifact_digest: NonEmptyStr
    process_epoch: SafeInt
    challenge: NonEmptyStr
    heartbeat_window_s: SafeInt = 3


def expected_from_dict(
    doc: dict[str, Any], what: str, *, extra: Iterable[str] = ()
) -> ExpectedLaunch:
    """An :class:`ExpectedLaunch` from a JSON object; ``extra`` names members allowed and
    ignored. Raises ``EcpaError`` (``ECPA_INVALID_INPUT``) naming what is wrong."""
    allowed = set(_LaunchDoc.model_fields) | set(extra)
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise _bad(f"{what}: expected only the members {sorted(allowed)}, found {unknown}")
    try:
        launch = _LaunchDoc(**{k: v for k, v in doc.items() if k in _LaunchDoc.model_fields})
    except ValidationError as exc:
        raise _bad(f"{what}: {describe_validation(exc, what)}") from None
    if launch.heartbeat_window_s == 0:  # SafeInt is already >= 0
        raise _bad(f"{what}: expected heartbeat_window_s >= 1, found 0")
    return ExpectedLaunch(**launch.model_dump())


_LAUNCH_EXTRA = ("schema", "issuer", "kid", "subject", "started_at", "emit_interval_s")


def launch_from_file(path: Path) -> ExpectedLaunch:
    """The expected launch from a ``launch.json`` (schema ``ecpa-launch/0.1``).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when unreadable, not strict JSON or malformed.
    """
    data = read_bounded(path, _MAX_CONFIG_BYTES, ErrorCode.INVALID_INPUT)
    try:
        doc = parse_object(data, what=f"launch {path}")
    except EcpaError as exc:
        raise _bad(f"{exc.code.value}: {exc.detail}") from None
    if doc.get("schema") != LAUNCH_SCHEMA:
        raise _bad(f"launch {path}: expected schema {LAUNCH_SCHEMA!r}, found {doc.get('schema')!r}")
    expected = expected_from_dict(doc, f"launch {path}", extra=_LAUNCH_EXTRA)
    if "/" in expected.launch_id or expected.launch_id in (".", ".."):  # names the log file
        raise _bad(f"expected a launch_id usable as a file name, found {expected.launch_id!r}")
    return expected
