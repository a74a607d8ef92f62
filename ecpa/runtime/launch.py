"""The launch a manager starts: what its evidence must be bound to (RUNTIME.md).

A launch is described by ``launch.json`` (schema ``ecpa-launch/0.1``) in its launch
directory; :class:`ExpectedLaunch` is the part of it that every statement must match.
A :class:`Plan` (schema ``ecpa-plan/0.1``) is what the manager is asked to launch: the
plugin, its artifact digest, the issuer and the evidence cadence; :func:`launch_document`
is the ``launch.json`` of one launch of it.

Configuration files are strict JSON (PROFILE §4: UTF-8, no duplicate member, safe
integers), except that a number may carry a fraction: an emit interval of 0.2 s is
configuration, never signed, so JCS's number rules do not apply to it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ecpa._files import read_bounded
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile._json import MAX_SAFE_INTEGER, parse_object
from ecpa.profile.jcs import canonicalize
from ecpa.profile.statement import NonEmptyStr, SafeInt, Sha256Digest, describe_validation

__all__ = [
    "EXIT_SCHEMA",
    "LAUNCH_SCHEMA",
    "LAUNCH_SUBJECT",
    "PLAN_SCHEMA",
    "ExpectedLaunch",
    "Plan",
    "expected_from_dict",
    "launch_document",
    "launch_ended",
    "launch_from_file",
    "plan_from_bytes",
    "plan_from_dict",
]

LAUNCH_SCHEMA = "ecpa-launch/0.1"
#: ``exit.json``, written by ``ecpa run`` when the launched command has ended.
EXIT_SCHEMA = "ecpa-launch-exit/0.1"
PLAN_SCHEMA = "ecpa-plan/0.1"
#: The subject of every statement of a launch, and the only one its key may speak for.
LAUNCH_SUBJECT = "host-runtime"
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


_SURROGATE = re.compile("[\ud800-\udfff]")


_LAUNCH_EXTRA = ("schema", "issuer", "kid", "subject", "started_at", "emit_interval_s")


def launch_from_file(path: Path) -> ExpectedLaunch:
    """The expected launch from a ``launch.json`` (schema ``ecpa-launch/0.1``); its other
    members (issuer, kid, subject, started_at, emit_interval_s) are allowed and ignored.

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


def _printable(value: str) -> str:
    if not value.isprintable():  # it goes into the environment and into statements
        raise ValueError(f"expected printable text, found {value!r}")
    return value


_Text = Annotated[
    str, Field(strict=True, min_length=1, max_length=1024), AfterValidator(_printable)
]
_Seconds = Annotated[int, Field(strict=True, ge=1, le=MAX_SAFE_INTEGER)]
_MAX_INTERVAL_S = 86400


class _PlanDoc(BaseModel):
    model_config = _STRICT
    plan_id: _Text | None = None
    plugin_id: _Text
    artifact_digest: Sha256Digest
    issuer: _Text | None = None
    process_epoch: SafeInt = 1
    emit_interval_s: Annotated[int, Field(strict=True, ge=1, le=_MAX_INTERVAL_S)] = 1
    heartbeat_window_s: _Seconds | None = None
    max_duration_s: _Seconds = 86400


@dataclass(frozen=True)
class Plan:
    """What a manager launches (schema ``ecpa-plan/0.1``): the plugin and its artifact, who
    signs, and the evidence cadence. Build it with :func:`plan_from_dict`, which checks it."""

    plan_id: str
    plugin_id: str
    artifact_digest: str
    issuer: str
    process_epoch: int = 1
    emit_interval_s: int = 1
    heartbeat_window_s: int = 3
    max_duration_s: int = 86400

    def to_dict(self) -> dict[str, Any]:
        """The plan document, every member given (``plan_from_dict`` reads it back)."""
        return {"schema": PLAN_SCHEMA, **asdict(self)}


def plan_from_dict(doc: dict[str, Any], what: str, *, default_issuer: str) -> Plan:
    """A checked :class:`Plan` from a plan document (schema ``ecpa-plan/0.1``).

    Defaults: ``issuer`` ``default_issuer``, ``process_epoch`` 1, ``emit_interval_s`` 1
    (whole seconds, 1 to 86400), ``heartbeat_window_s``
    ``3 * emit_interval_s`` (given: at least the interval), ``max_duration_s``
    86400, and ``plan_id`` ``plan:sha256:`` + the SHA-256 of the RFC 8785 bytes of the
    document with every default filled in and without ``plan_id``.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming the member (unknown members included).
    """
    allowed = {"schema", *_PlanDoc.model_fields}
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise _bad(f"{what}: expected only the members {sorted(allowed)}, found {unknown}")
    if doc.get("schema") != PLAN_SCHEMA:
        raise _bad(f"{what}: expected member 'schema' {PLAN_SCHEMA!r}, found {doc.get('schema')!r}")
    try:
        parsed = _PlanDoc(**{k: v for k, v in doc.items() if k != "schema"})
    except ValidationError as exc:
        raise _bad(f"{what}: {describe_validation(exc, what)}") from None
    interval = parsed.emit_interval_s
    window = parsed.heartbeat_window_s
    if window is None:
        window = 3 * interval  # RUNTIME.md: default 3x the emit interval
    elif window < interval:  # a window shorter than the cadence makes every status stale
        raise _bad(
            f"{what}: expected member 'heartbeat_window_s' >= emit_interval_s "
            f"({interval}), found {window}"
        )
    resolved = Plan(
        plan_id="",
        plugin_id=parsed.plugin_id,
        artifact_digest=parsed.artifact_digest,
        issuer=parsed.issuer if parsed.issuer is not None else default_issuer,
        process_epoch=parsed.process_epoch,
        emit_interval_s=interval,
        heartbeat_window_s=window,
        max_duration_s=parsed.max_duration_s,
    )
    if parsed.plan_id is not None:
        return replace(resolved, plan_id=parsed.plan_id)
    content = {k: v for k, v in resolved.to_dict().items() if k != "plan_id"}
    digest = hashlib.sha256(canonicalize(content)).hexdigest()
    return replace(resolved, plan_id=f"plan:sha256:{digest}")


def plan_from_bytes(data: bytes, what: str, *, default_issuer: str) -> Plan:
    """:func:`plan_from_dict` over a plan file's bytes (strict JSON, PROFILE §4).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for JSON that is not a plan, naming the member.
    """
    try:
        doc = parse_object(data, what=what)
    except EcpaError as exc:
        raise _bad(f"{exc.code.value}: {exc.detail}") from None
    return plan_from_dict(doc, what, default_issuer=default_issuer)


def launch_document(
    plan: Plan, *, launch_id: str, challenge: str, kid: str, started_at: int
) -> dict[str, Any]:
    """The ``launch.json`` of one launch of ``plan`` (RUNTIME.md "Launch directory");
    :func:`launch_from_file` reads it back."""
    return {
        "schema": LAUNCH_SCHEMA,
        "plan_id": plan.plan_id,
        "launch_id": launch_id,
        "plugin_id": plan.plugin_id,
        "artifact_digest": plan.artifact_digest,
        "process_epoch": plan.process_epoch,
        "challenge": challenge,
        "issuer": plan.issuer,
        "kid": kid,
        "subject": LAUNCH_SUBJECT,
        "started_at": started_at,
        "emit_interval_s": plan.emit_interval_s,
        "heartbeat_window_s": plan.heartbeat_window_s,
    }


def launch_ended(path: Path) -> str | None:
    """Why the launch is over, from its ``exit.json`` (written by ``ecpa run`` when the
    command ended), or None when there is no such file. Never raises: an unreadable or
    malformed file still means the launch ended, and the reason says what is wrong with it.
    """
    if not path.exists():
        return None
    try:
        doc = parse_object(
            read_bounded(path, _MAX_CONFIG_BYTES, ErrorCode.INVALID_INPUT), what=str(path)
        )
    except EcpaError as exc:
        return f"launch ended ({path.name} unreadable: {exc.code.value})"
    ended, status = doc.get("ended_at"), doc.get("exit_status")
    if doc.get("schema") != EXIT_SCHEMA or type(ended) is not int or type(status) is not int:
        return f"launch ended ({path.name} not an {EXIT_SCHEMA} record)"
    how = f"exited with status {status}"
    if isinstance(doc.get("error"), str):
        how = f"could not start (status {status}): {doc['error']}"
    elif type(doc.get("signal")) is int:
        how = f"was killed by signal {doc['signal']} (status {status})"
    return f"launch ended at {ended}: the command {how}"
