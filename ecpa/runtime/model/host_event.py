"""One event of the vLLM-HUST host's evidence (``vllm-hust-plugin-evidence/0.1``), defined once
for the sink that writes it and the audit that reads it back (docs/host-evidence.md).

The host (``vllm/plugins/evidence.py``) hands its evidence sink one dict per event: a policy
resolved by the scheduler's preemption controller (``scheduler_resolution``), one dispatch of
``select_victim`` (``scheduler_dispatch``, its outcome in ``detail``), or a plugin loader's
step (``loader_lifecycle``). :func:`host_line` is the line a journal holds, exactly as the
host's consumer writes it (``json.dumps`` with sorted keys, no spaces, no NaN);
:func:`parse_host_line` checks such a line at least as strictly as the consumer's
``parse_host_event`` (vLLM-HUST extension-manager, ``host_evidence.py``): the exact members,
their types, the identities that must agree, and ``event_id`` and ``dispatch_id`` recomputed
from the event's own members. Its refusals are :class:`HostEventRefused`, an
:class:`~ecpa.errors.EcpaError` carrying a :class:`HostEventCode`.

Pure: no clock, no I/O. What an event must also be to count for a launch and a process
(bound to it, host-assigned, of this process) is :mod:`~ecpa.runtime.model.host_binding`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NoReturn

from ecpa.runtime.model.host_ids import (
    HostEventCode,
    HostEventRefused,
    dispatch_id_of,
    event_id_of,
)

__all__ = [
    "DETAIL_PREFIX",
    "DISPATCH_OUTCOMES",
    "HOST_ENV_PREFIX",
    "HOST_EVENT_SCHEMA",
    "MAX_HOST_LINE",
    "RESOLVED_DETAIL",
    "SCHEDULER_ROLE",
    "SINK_TARGET",
    "HostEvent",
    "check_host_event",
    "host_line",
    "parse_host_line",
]

HOST_EVENT_SCHEMA = "vllm-hust-plugin-evidence/0.1"
#: The events and observation kinds of the 0.1 schema.
EVENTS = frozenset({"discovered", "resolved", "invoked", "failed", "skipped"})
KINDS = frozenset({"loader_lifecycle", "scheduler_resolution", "scheduler_dispatch"})
#: The outcomes of one ``select_victim`` call, as the host's controller writes them in
#: ``detail`` (``engine-core.scheduler:<outcome>``).
DISPATCH_OUTCOMES = ("selected", "abstained", "invalid", "exception")
DETAIL_PREFIX = "engine-core.scheduler:"
#: The ``detail`` of a policy the controller validated (its ``resolved`` event).
RESOLVED_DETAIL = DETAIL_PREFIX + "protocol-validated"
#: The role the host binds to an engine-core scheduler process (its data-parallel rank is
#: the ordinal).
SCHEDULER_ROLE = "engine-core-scheduler"
#: ``VLLM_ECPA_EVIDENCE_SINK`` as ``ecpa run`` sets it: ecpa's sink
#: (:func:`ecpa.observer.host_sink.deliver`).
SINK_TARGET = "ecpa.observer.host_sink:deliver"
#: The variables of the host's evidence ``ecpa run`` sets for the command's tree (the sink,
#: strict mode, the plan and the launch), and the prefix of every one it refuses to inherit.
HOST_ENV_PREFIX = "VLLM_ECPA_"
#: The largest integer a host event member may hold: the host's values are 64-bit
#: (``time.time_ns()`` until 2262, pids, counters); its seconds stay below 2**53.
MAX_HOST_INT = 2**63 - 1
#: The longest line taken: a real event is about 1 KB; anything near this is not one.
MAX_HOST_LINE = 8192

_MEMBERS = frozenset(
    {
        "schema",
        "event_id",
        "event",
        "observation_kind",
        "entry_point",
        "process",
        "observed_at_ns",
        "delivery_attempt",
        "plan_id",
        "launch_id",
        "binding_status",
        "occurrence_id",
        "controller_instance_id",
        "invocation_seq",
        "dispatch_id",
        "plugin_id",
        "artifact_digest",
        "identity_status",
        "detail",
    }
)
_ENTRY = frozenset({"group", "name", "value"})
_PROCESS = frozenset({"host", "role", "ordinal", "pid", "start_identity", "process_epoch"})
_PROCESS_ASSIGNED = _PROCESS | {"assignment_source"}
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class HostEvent:
    """A host event that passed :func:`parse_host_line`, with the bytes it was read from."""

    raw: bytes
    event_id: str
    event: str
    kind: str
    #: The entry point's group and name (a preemption policy: the policy's class,
    #: ``module.Class``, as the host names it).
    group: str
    policy: str
    host: str
    role: str
    ordinal: int
    pid: int
    start_ticks: int
    process_epoch: int
    #: ``"host"``, ``"environment"``, or None (an event of a host before the member).
    assignment_source: str | None
    observed_at_ns: int
    delivery_attempt: int
    plan_id: str | None
    launch_id: str | None
    controller: str | None
    #: The dispatch sequence number (``invocation_seq``), or None.
    seq: int | None
    detail: str | None

    @property
    def outcome(self) -> str | None:
        """A dispatch's outcome (``selected``, ...), None for another kind or detail."""
        if self.kind != "scheduler_dispatch" or self.detail is None:
            return None
        outcome = self.detail.removeprefix(DETAIL_PREFIX)
        return outcome if outcome in DISPATCH_OUTCOMES and outcome != self.detail else None


def host_line(event: Any) -> bytes:
    """The journal line of ``event`` (without its newline): the host's consumer's form,
    ``json.dumps(event, sort_keys=True, separators=(",", ":"), allow_nan=False)``, ASCII.

    Raises:
        HostEventRefused: ``NOT_JSON`` when JSON has no form for it (NaN, infinity, a set,
            a key that is not a string, a cycle).
    """
    try:
        text = json.dumps(event, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        _refuse(HostEventCode.NOT_JSON, f"expected an event JSON can carry, found: {exc}"[:200])
    return text.encode("ascii")


def _refuse(code: HostEventCode, detail: str) -> NoReturn:
    raise HostEventRefused(code, detail)


def _malformed(detail: str) -> NoReturn:
    raise HostEventRefused(HostEventCode.MALFORMED, detail)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        _malformed("expected each member once, found one twice")
    return out


def _no_constant(name: str) -> NoReturn:
    _refuse(HostEventCode.NOT_JSON, f"expected no {name} in a host event")


def _text(value: Any, name: str) -> str:
    if type(value) is not str or not value:
        _malformed(f"expected {name} as a non-empty string, found {value!r}"[:200])
    return value


def _maybe_text(value: Any, name: str) -> str | None:
    return None if value is None else _text(value, name)


def _count(value: Any, name: str, *, minimum: int = 0) -> int:
    if type(value) is not int or not minimum <= value <= MAX_HOST_INT:
        _malformed(f"expected {name} as an integer in [{minimum}, 2**63-1], found {value!r}"[:200])
    return value


def _digest(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if type(value) is not str or len(value) != 64 or not set(value) <= _HEX:
        _malformed(f"expected {name} as 64 lowercase hex digits or null, found {value!r}"[:200])
    return value


def _bounded(raw: bytes) -> None:
    if len(raw) > MAX_HOST_LINE:
        _refuse(
            HostEventCode.TOO_LARGE,
            f"expected a line of at most {MAX_HOST_LINE} bytes, found {len(raw)}",
        )


def _load(raw: bytes) -> dict[str, Any]:
    _bounded(raw)
    try:
        text = raw.decode("utf-8")
        value = json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except HostEventRefused:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        _malformed(f"expected a JSON object, found: {exc}"[:200])
    if type(value) is not dict:
        _malformed(f"expected a JSON object, found {type(value).__name__}")
    return value


def _check_strings(value: Any) -> None:
    """No lone surrogate anywhere (JSON escapes can write one; UTF-8 cannot carry it); a walk
    with a stack of its own, so that no depth of nesting exhausts Python's."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    _malformed("expected Unicode text, found a lone surrogate")
        elif kind is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)


def parse_host_line(raw: bytes) -> HostEvent:
    """The host event on one journal line (without its newline), checked: strict JSON (no
    member twice, no NaN), the 0.1 schema's exact members, an event and kind it has, every
    type, the start identity naming the pid, a binding both present or both absent and
    matching ``binding_status``, the identities each kind requires, ``dispatch_id`` and
    ``event_id`` recomputed, and no plugin identity invented.

    Raises:
        HostEventRefused: ``TOO_LARGE``, ``NOT_JSON``, ``MALFORMED``, ``UNKNOWN_KIND``,
            ``DISPATCH_ID`` or ``EVENT_ID``, saying what was expected and found.
    """
    return check_host_event(_load(raw), raw)


def check_host_event(doc: dict[str, Any], raw: bytes) -> HostEvent:
    """:func:`parse_host_line`'s checks on ``doc``, the value ``raw`` was written from
    (``raw == host_line(doc)``), without parsing ``raw`` again: every check takes only
    JSON's own types, exactly (``dict``, ``str``, ``int``, ``None``; never a subclass, a
    float, a list where a member wants one of those), so a value that passes them reads
    back from ``raw`` as itself, and one that fails them would fail as read back, or is
    refused for a type JSON would have changed (a ``str`` subclass, say).

    Raises:
        HostEventRefused: as :func:`parse_host_line`.
    """
    _bounded(raw)
    if set(doc) != _MEMBERS:
        missing, extra = sorted(_MEMBERS - set(doc)), sorted(set(doc) - _MEMBERS)
        _malformed(f"expected the 0.1 members, found missing {missing}, extra {extra}"[:300])
    if type(doc["schema"]) is not str or doc["schema"] != HOST_EVENT_SCHEMA:
        _malformed(f"expected schema {HOST_EVENT_SCHEMA!r}, found {doc['schema']!r}"[:200])
    event, kind = doc["event"], doc["observation_kind"]
    if type(event) is not str or type(kind) is not str or event not in EVENTS or kind not in KINDS:
        _refuse(
            HostEventCode.UNKNOWN_KIND,
            f"expected an event of {sorted(EVENTS)} and a kind of {sorted(KINDS)}, found "
            f"{doc['event']!r}, {doc['observation_kind']!r}"[:300],
        )
    if b"\\ud" in raw or b"\\uD" in raw:  # a surrogate can only come escaped
        _check_strings(doc)
    entry, process = doc["entry_point"], doc["process"]
    if type(entry) is not dict or set(entry) != _ENTRY:
        _malformed(f"expected entry_point with members {sorted(_ENTRY)}")
    if type(process) is not dict or set(process) not in (_PROCESS, _PROCESS_ASSIGNED):
        _malformed(f"expected process with members {sorted(_PROCESS)} (+ assignment_source)")
    for name in ("event_id", "identity_status"):
        _text(doc[name], name)
    group, policy = _text(entry["group"], "group"), _text(entry["name"], "name")
    _text(entry["value"], "entry_point value")
    host, role = _text(process["host"], "host"), _text(process["role"], "role")
    start_identity = _text(process["start_identity"], "start_identity")
    source = process.get("assignment_source")
    if "assignment_source" in process and (
        type(source) is not str or source not in ("host", "environment")
    ):
        _malformed(f"expected assignment_source 'host' or 'environment', found {source!r}"[:200])
    ordinal = _count(process["ordinal"], "ordinal")
    pid = _count(process["pid"], "pid")
    epoch = _count(process["process_epoch"], "process_epoch")
    observed = _count(doc["observed_at_ns"], "observed_at_ns")
    attempt = _count(doc["delivery_attempt"], "delivery_attempt", minimum=1)
    prefix = f"pid:{pid}:start_ticks:"
    ticks = start_identity.removeprefix(prefix)
    if (
        ticks == start_identity
        or not (ticks.isascii() and ticks.isdigit())
        or len(ticks) > 20
        or ticks != str(int(ticks))  # as the host writes it: no leading zero
    ):
        _malformed(f"expected start_identity {prefix}<ticks>, found {start_identity!r}"[:200])
    plan_id = _maybe_text(doc["plan_id"], "plan_id")
    launch_id = _maybe_text(doc["launch_id"], "launch_id")
    detail = _maybe_text(doc["detail"], "detail")
    controller = _maybe_text(doc["controller_instance_id"], "controller_instance_id")
    status = doc["binding_status"]
    if type(status) is not str or status not in ("bound", "unbound"):
        _malformed(f"expected binding_status 'bound' or 'unbound', found {status!r}"[:200])
    if (plan_id is None) != (launch_id is None):
        _malformed("expected plan_id and launch_id both present or both null")
    if (plan_id is not None) != (status == "bound"):
        _malformed(f"expected binding_status to match the binding, found {status!r}")
    occurrence = doc["occurrence_id"]
    if occurrence is not None and not (
        (type(occurrence) is int and occurrence >= 1) or (type(occurrence) is str and occurrence)
    ):
        _malformed(
            f"expected occurrence_id a positive integer, a string or null, found {occurrence!r}"[
                :200
            ]
        )
    seq = doc["invocation_seq"]
    if seq is not None:
        _count(seq, "invocation_seq", minimum=1)
    dispatch_id = _digest(doc["dispatch_id"], "dispatch_id")
    if kind == "loader_lifecycle":
        if any(x is not None for x in (occurrence, controller, seq, dispatch_id)):
            _malformed("expected a loader lifecycle event without scheduler identities")
    elif kind == "scheduler_resolution":
        if (
            doc["event"] != "resolved"
            or controller is None
            or occurrence != f"controller:{controller}"
            or seq is not None
            or dispatch_id is not None
        ):
            _malformed("expected a resolution as resolved, occurrence controller:<id>, no seq")
    else:
        if doc["event"] != "invoked" or controller is None or type(occurrence) is not int:
            _malformed("expected a dispatch as invoked, with a controller and an occurrence")
        if seq != occurrence:
            _malformed(f"expected invocation_seq {occurrence}, found {seq!r}")
        if dispatch_id != dispatch_id_of(doc):
            _refuse(HostEventCode.DISPATCH_ID, "expected dispatch_id recomputed from the event")
    if doc["event_id"] != event_id_of(doc):
        _refuse(HostEventCode.EVENT_ID, "expected event_id recomputed from the event")
    if doc["plugin_id"] is not None or doc["artifact_digest"] is not None:
        _malformed("expected plugin_id and artifact_digest null (the host does not know them)")
    return HostEvent(
        raw=raw,
        event_id=doc["event_id"],
        event=doc["event"],
        kind=kind,
        group=group,
        policy=policy,
        host=host,
        role=role,
        ordinal=ordinal,
        pid=pid,
        start_ticks=int(ticks),
        process_epoch=epoch,
        assignment_source=source,
        observed_at_ns=observed,
        delivery_attempt=attempt,
        plan_id=plan_id,
        launch_id=launch_id,
        controller=controller,
        seq=seq,
        detail=detail,
    )
