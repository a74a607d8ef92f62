"""What a manager is asked to launch: a :class:`Plan` (schema ``ecpa-plan/0.3``; ``0.2`` and
``0.1`` still read): the plugin, its artifact digest, the issuer, the evidence cadence, the
obligated slots (RUNTIME.md "Slots") and whether the host's own evidence is required
(docs/host-evidence.md).

Plan files are strict JSON (PROFILE §4: UTF-8, no duplicate member, safe integers).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, replace
from typing import Any

from ecpa.errors import EcpaError, invalid_input
from ecpa.profile.json.jcs import canonicalize
from ecpa.profile.json.strict_json import parse_object
from ecpa.runtime.model.counters import DIGEST_PATTERN
from ecpa.runtime.model.launch import (
    DEFAULT_SLOTS,
    LAUNCH_SCHEMA,
    LAUNCH_SUBJECT,
    Slot,
    slots_from_list,
)
from ecpa.runtime.model.process import ProcessIdentity
from ecpa.shapes.rules import COUNT, Count, Line, OneOf, Rule, Text
from ecpa.shapes.shape import Shaped, ShapeError, member

__all__ = [
    "MAX_EMIT_INTERVAL_S",
    "PLAN_SCHEMA",
    "PLAN_SCHEMA_01",
    "PLAN_SCHEMA_02",
    "Plan",
    "launch_document",
    "plan_from_bytes",
    "plan_from_dict",
]

PLAN_SCHEMA = "ecpa-plan/0.3"
PLAN_SCHEMA_02 = "ecpa-plan/0.2"
PLAN_SCHEMA_01 = "ecpa-plan/0.1"
#: What each older schema lacks, besides ``schema`` itself.
_NOT_IN = {
    PLAN_SCHEMA_02: ("host_evidence", "host_policy"),
    PLAN_SCHEMA_01: ("host_evidence", "host_policy", "slots", "max_abstain_s"),
}
#: The longest statement lifetime (RUNTIME.md: ``expires_at - issued_at`` <= 300).
MAX_TTL_S = 300
#: At most a third of the longest lifetime: a statement issued every interval then always
#: outlives the wait for the next one, with room for one lost record.
MAX_EMIT_INTERVAL_S = MAX_TTL_S // 3
_TEXT = Line(max_length=1024)  # it goes into the environment and into statements
_SECONDS = Count(minimum=1)


class _List(Rule):
    """A JSON array, its items as they are (the slots: :func:`slots_from_list` checks them,
    as it does a launch's)."""

    expected = "an array"

    def check(self, value: Any, where: str, problems: list[str]) -> Any:
        if not isinstance(value, list):
            self._bad(value, where, problems)
            return value
        return list(value)  # a copy of its own: the caller's list may change later

    def schema(self, defs: dict[str, Any]) -> dict[str, Any]:
        return {"items": {}, "type": "array"}


class _PlanDoc(Shaped):
    """The members of a plan file as written (``schema`` apart); a member absent or null
    gets its default when the :class:`Plan` is resolved."""

    plan_id: str | None = member(_TEXT, default=None, nullable=True)
    plugin_id: str = member(_TEXT)
    artifact_digest: str = member(Text(pattern=DIGEST_PATTERN))
    issuer: str | None = member(_TEXT, default=None, nullable=True)
    process_epoch: int = member(COUNT, default=1)
    emit_interval_s: int = member(Count(minimum=1, maximum=MAX_EMIT_INTERVAL_S), default=1)
    heartbeat_window_s: int | None = member(_SECONDS, default=None, nullable=True)
    max_duration_s: int = member(_SECONDS, default=86400)
    max_abstain_s: int = member(_SECONDS, default=30)
    slots: list[Any] | None = member(_List(), default=None, nullable=True)
    host_evidence: str = member(OneOf("off", "required"), default="off")
    host_policy: str | None = member(_TEXT, default=None, nullable=True)


@dataclass(frozen=True)
class Plan:
    """What a manager launches (schema ``ecpa-plan/0.3``): the plugin and its artifact, who
    signs, the evidence cadence, the obligated slots, and whether the host's evidence is
    required. Build it with :func:`plan_from_dict`, which checks it."""

    plan_id: str
    plugin_id: str
    artifact_digest: str
    issuer: str
    process_epoch: int = 1
    emit_interval_s: int = 1
    heartbeat_window_s: int = 3
    max_duration_s: int = 86400
    #: How long a slot's plugin may be called without selecting before the slot stops being
    #: covered (RUNTIME.md "Round 3": idle is not abstaining).
    max_abstain_s: int = 30
    slots: tuple[Slot, ...] = DEFAULT_SLOTS
    #: ``"required"``: plugin reports alone never give ``runtime_effective``; each slot
    #: needs the host's own witness of its dispatches. ``"off"``: the plugin's reports.
    host_evidence: str = "off"
    #: The policy the host must have resolved (``module.Class``, as the host names it), or
    #: None (any).
    host_policy: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The plan document (schema ``ecpa-plan/0.3``), every member given
        (``plan_from_dict`` reads it back)."""
        doc = {k: v for k, v in asdict(self).items() if k != "slots"}
        return {"schema": PLAN_SCHEMA, **doc, "slots": [s.to_dict() for s in self.slots]}


def plan_from_dict(doc: dict[str, Any], what: str, *, default_issuer: str) -> Plan:
    """A checked :class:`Plan` from a plan document (schema ``ecpa-plan/0.3``; ``0.2``: no
    ``host_evidence`` or ``host_policy``, host evidence off; ``ecpa-plan/0.1``: also no
    ``slots``, the one slot ``scheduler.0``).

    Defaults: ``issuer`` ``default_issuer``, ``process_epoch`` 1, ``emit_interval_s`` 1
    (whole seconds, 1 to 100: a third of the longest statement lifetime, 300 s),
    ``heartbeat_window_s`` ``3 * emit_interval_s`` (given: at least the interval),
    ``max_duration_s`` 86400, ``max_abstain_s`` 30 (0.2 plans on), ``slots``
    ``[{"role": "scheduler", "ordinal": 0}]``, ``host_evidence`` ``"off"``, ``host_policy``
    null, and ``plan_id`` ``plan:sha256:`` + the SHA-256 of the RFC 8785 bytes of the
    document with every default filled in and without ``plan_id`` (for a 0.1 or 0.2 plan:
    its own form, so its ``plan_id`` is the one it always had).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming the member (unknown members included).
    """
    schema = doc.get("schema")
    if schema not in (PLAN_SCHEMA, PLAN_SCHEMA_02, PLAN_SCHEMA_01):
        raise invalid_input(
            f"{what}: expected member 'schema' {PLAN_SCHEMA!r} (or {PLAN_SCHEMA_02!r}, "
            f"{PLAN_SCHEMA_01!r}), found {schema!r}"
        )
    allowed = {"schema", *_PlanDoc.__wire__} - set(_NOT_IN.get(schema, ()))
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise invalid_input(f"{what}: expected only the members {sorted(allowed)}, found {unknown}")
    try:
        parsed = _PlanDoc.from_dict({k: v for k, v in doc.items() if k != "schema"}, what)
    except ShapeError as exc:
        raise invalid_input(f"{what}: {exc}") from None
    slots = DEFAULT_SLOTS if parsed.slots is None else slots_from_list(parsed.slots, what)
    interval = parsed.emit_interval_s
    window = parsed.heartbeat_window_s
    if window is None:
        window = 3 * interval  # RUNTIME.md: default 3x the emit interval
    elif window < interval:  # a window shorter than the cadence makes every status stale
        raise invalid_input(
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
        max_abstain_s=parsed.max_abstain_s,
        slots=slots,
        host_evidence=parsed.host_evidence,
        host_policy=parsed.host_policy,
    )
    if parsed.plan_id is not None:
        return replace(resolved, plan_id=parsed.plan_id)
    content = {k: v for k, v in resolved.to_dict().items() if k != "plan_id"}
    if schema != PLAN_SCHEMA:  # the same plan_id an older plan always had
        content = {k: v for k, v in content.items() if k not in _NOT_IN[schema]}
        content["schema"] = schema
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
        raise invalid_input(f"{exc.code.value}: {exc.detail}") from None
    return plan_from_dict(doc, what, default_issuer=default_issuer)


def launch_document(
    plan: Plan,
    *,
    launch_id: str,
    challenge: str,
    started_at: int,
    supervisor: ProcessIdentity,
    enroll_socket: str = "enroll.sock",
    excluded: frozenset[tuple[int, int]] = frozenset(),
) -> dict[str, Any]:
    """The ``launch.json`` (schema ``ecpa-launch/0.2``) of one launch of ``plan``
    (RUNTIME.md "Launch directory", "Slots", "Process keys", "Membership");
    :func:`launch_from_file` reads it back. ``supervisor`` is ``ecpa run``'s own identity,
    ``excluded`` the children it had before the command started (pid, start ticks): never
    part of the launch."""
    return {
        "schema": LAUNCH_SCHEMA,
        "plan_id": plan.plan_id,
        "launch_id": launch_id,
        "plugin_id": plan.plugin_id,
        "artifact_digest": plan.artifact_digest,
        "process_epoch": plan.process_epoch,
        "challenge": challenge,
        "issuer": plan.issuer,
        "subject": LAUNCH_SUBJECT,
        "started_at": started_at,
        "emit_interval_s": plan.emit_interval_s,
        "heartbeat_window_s": plan.heartbeat_window_s,
        "max_duration_s": plan.max_duration_s,
        "max_abstain_s": plan.max_abstain_s,
        "slots": [s.to_dict() for s in plan.slots],
        "host_evidence": plan.host_evidence,
        "host_policy": plan.host_policy,
        "supervisor": {
            "host": supervisor.host,
            "pid": supervisor.pid,
            "start_ticks": supervisor.start_ticks,
            "boot_id": supervisor.boot_id,
        },
        "enroll_socket": enroll_socket,
        "excluded_children": [
            {"pid": pid, "start_ticks": ticks} for pid, ticks in sorted(excluded)
        ],
    }
