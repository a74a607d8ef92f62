"""The launch a manager starts: what its evidence must be bound to (RUNTIME.md).

A launch is described by ``launch.json`` (schema ``ecpa-launch/0.2``; ``0.1`` still read) in
its launch directory; :class:`ExpectedLaunch` is the part of it that every statement must
match. A :class:`Plan` (schema ``ecpa-plan/0.2``; ``0.1`` still read) is what the manager is
asked to launch: the plugin, its artifact digest, the issuer, the evidence cadence and the
obligated :class:`Slot` s; :func:`launch_document` is the ``launch.json`` of one launch of it.
A 0.1 file means exactly one slot, ``scheduler.0``, and (for a launch) one shared launch key.

Launch files are strict JSON (PROFILE §4: UTF-8, no duplicate member, safe integers). Plans
are in :mod:`ecpa.runtime.model.plan`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from ecpa._files import read_bounded
from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.profile.json.strict_json import MAX_SAFE_INTEGER, parse_object
from ecpa.runtime.model.membership import Membership
from ecpa.runtime.model.process import ProcessIdentity
from ecpa.shapes.rules import COUNT, TEXT
from ecpa.shapes.shape import Shaped, ShapeError, member

__all__ = [
    "DEFAULT_SLOTS",
    "EXIT_SCHEMA",
    "HOST_EVIDENCE_MODES",
    "LAUNCH_SCHEMA",
    "LAUNCH_SCHEMA_01",
    "LAUNCH_SUBJECT",
    "MAX_LAUNCH_FILE_BYTES",
    "ExpectedLaunch",
    "Slot",
    "check_launch_id",
    "ended_from_bytes",
    "expected_from_dict",
    "launch_ended",
    "launch_from_bytes",
    "launch_from_file",
    "slots_from_list",
    "time_member",
]

LAUNCH_SCHEMA = "ecpa-launch/0.2"
LAUNCH_SCHEMA_01 = "ecpa-launch/0.1"
#: ``exit.json``, written by ``ecpa run`` when the launched command has ended.
EXIT_SCHEMA = "ecpa-launch-exit/0.1"
_SLOT_ROLE = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_MAX_ORDINAL = 65535
_MAX_SLOTS = 1024
#: The subject of every statement of a launch, and the only one its key may speak for.
LAUNCH_SUBJECT = "host-runtime"
_MAX_CONFIG_BYTES = 1 << 20
#: The largest launch.json, exit.json (or trust.json as shipped) read.
MAX_LAUNCH_FILE_BYTES = _MAX_CONFIG_BYTES


@dataclass(frozen=True, order=True)
class Slot:
    """A (role, ordinal) pair a scheduler process fills, such as ``scheduler.0`` (RUNTIME.md
    "Slots"). Roles are lowercase ``[a-z][a-z0-9_-]*`` (at most 64 characters, no dot, so
    ``<role>.<ordinal>`` reads back unambiguously); ordinals are 0 to 65535."""

    role: str
    ordinal: int

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or not _SLOT_ROLE.fullmatch(self.role):
            raise invalid_input(
                f"expected a slot role matching [a-z][a-z0-9_-]{{0,63}}, found {self.role!r}"
            )
        if type(self.ordinal) is not int or not 0 <= self.ordinal <= _MAX_ORDINAL:
            raise invalid_input(
                f"expected a slot ordinal within [0, {_MAX_ORDINAL}], found {self.ordinal!r}"
            )

    @property
    def name(self) -> str:
        """``<role>.<ordinal>``."""
        return f"{self.role}.{self.ordinal}"

    @classmethod
    def parse(cls, text: str) -> Slot:
        """A slot from ``<role>.<ordinal>`` (``scheduler.1``).

        Raises:
            EcpaError: ``ECPA_INVALID_INPUT`` naming what is wrong.
        """
        role, dot, ordinal = text.rpartition(".")
        if not dot or not (ordinal.isascii() and ordinal.isdigit()) or len(ordinal) > 5:
            raise invalid_input(
                f"expected a slot as <role>.<ordinal> (scheduler.0), found {text!r}"
            )
        return cls(role, int(ordinal))

    def to_dict(self) -> dict[str, Any]:
        """``{"role", "ordinal"}`` as plan and launch files carry it."""
        return {"role": self.role, "ordinal": self.ordinal}


#: The one slot of a 0.1 plan or launch, and the default of a 0.2 plan.
DEFAULT_SLOTS: tuple[Slot, ...] = (Slot("scheduler", 0),)


def slots_from_list(value: object, what: str) -> tuple[Slot, ...]:
    """The slots of a plan or launch document: a non-empty list of distinct
    ``{"role", "ordinal"}`` objects, in the order given.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming what is wrong.
    """
    if not isinstance(value, list) or not 1 <= len(value) <= _MAX_SLOTS:
        raise invalid_input(
            f"{what}: expected 'slots' as a list of 1 to {_MAX_SLOTS} slots, found {value!r}"
        )
    slots: dict[Slot, None] = {}  # in order; a set's lookup (a fleet's launch has thousands)
    for item in value:
        if not isinstance(item, dict) or set(item) != {"role", "ordinal"}:
            raise invalid_input(
                f"{what}: expected each slot as {{'role', 'ordinal'}}, found {item!r}"
            )
        slot = Slot(item["role"], item["ordinal"])
        if slot in slots:
            raise invalid_input(f"{what}: expected distinct slots, found {slot.name} twice")
        slots[slot] = None
    return tuple(slots)


@dataclass(frozen=True)
class ExpectedLaunch:
    """What a statement must carry to count for this launch.

    A 0.1 launch (``version`` ``"0.1"``) has one shared key and nonces ``<challenge>:<seq>``;
    a 0.2 launch has per-process keys enrolled by its ``supervisor`` (``ecpa run``), nonces
    ``<challenge>:<role>.<ordinal>:<pid>.<start_ticks>:<seq>`` and the obligated ``slots``.
    """

    plan_id: str
    launch_id: str
    plugin_id: str
    artifact_digest: str
    process_epoch: int
    challenge: str
    heartbeat_window_s: int = 3
    slots: tuple[Slot, ...] = DEFAULT_SLOTS
    version: str = "0.1"
    #: A slot whose plugin was called without selecting for longer than this is not covered.
    max_abstain_s: int = 30
    #: Whether the launch names ``max_abstain_s`` (``launch.json`` of ``ecpa run`` 0.3 on, or
    #: ``--max-abstain``): then a counters record that cannot show abstention (no
    #: ``last_selection_at``: 0.2) does not cover its slot.
    judges_abstention: bool = False
    supervisor: ProcessIdentity | None = None
    #: The supervisor's children from before the command (pid, start ticks): not members.
    excluded: frozenset[tuple[int, int]] = frozenset()
    #: ``"required"``: a slot is covered only on the host's own witness of its dispatches
    #: (docs/host-evidence.md); ``"off"``: on the plugin's reports.
    host_evidence: str = "off"
    #: The policy the host must have resolved (``module.Class``), or None: any.
    host_policy: str | None = None
    #: The process each certified key was enrolled for, by kid (docs/keys.md): a record
    #: signed with one must name exactly it. None: not known (a 0.1 launch, a bare log).
    certified: Mapping[str, ProcessIdentity] | None = field(default=None, compare=False)

    @cached_property
    def slot_set(self) -> frozenset[Slot]:
        """The obligated slots as a set: a record's slot is looked up once, not compared with
        each of a fleet launch's hundreds."""
        return frozenset(self.slots)

    @cached_property
    def slot_names(self) -> str:
        """The obligated slots' names in order, comma-separated: the slots as one string, to
        compare at once (a key of ``ecpa.runtime.judge.records``)."""
        return ",".join(slot.name for slot in self.slots)

    @property
    def membership(self) -> Membership | None:
        """Who belongs to a 0.2 launch (RUNTIME.md "Membership"); None without a supervisor."""
        if self.supervisor is None:
            return None
        return Membership(self.supervisor.pid, self.excluded)


class _LaunchDoc(Shaped):
    """The members of a launch file that make its :class:`ExpectedLaunch`."""

    plan_id: str = member(TEXT)
    launch_id: str = member(TEXT)
    plugin_id: str = member(TEXT)
    artifact_digest: str = member(TEXT)
    process_epoch: int = member(COUNT)
    challenge: str = member(TEXT)
    heartbeat_window_s: int = member(COUNT, default=3)
    max_abstain_s: int = member(COUNT, default=30)


def expected_from_dict(
    doc: dict[str, Any], what: str, *, extra: Iterable[str] = ()
) -> ExpectedLaunch:
    """An :class:`ExpectedLaunch` from a JSON object; ``extra`` names members allowed and
    ignored. Raises ``EcpaError`` (``ECPA_INVALID_INPUT``) naming what is wrong."""
    allowed = _LaunchDoc.__wire__ | set(extra)
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise invalid_input(f"{what}: expected only the members {sorted(allowed)}, found {unknown}")
    try:
        launch = _LaunchDoc.from_dict(
            {k: v for k, v in doc.items() if k in _LaunchDoc.__wire__}, what
        )
    except ShapeError as exc:
        raise invalid_input(f"{what}: {exc}") from None
    if launch.heartbeat_window_s == 0:  # a COUNT is already >= 0
        raise invalid_input(f"{what}: expected heartbeat_window_s >= 1, found 0")
    if launch.max_abstain_s == 0:
        raise invalid_input(f"{what}: expected max_abstain_s >= 1, found 0")
    return ExpectedLaunch(**launch.to_dict(), judges_abstention="max_abstain_s" in doc)


_LAUNCH_EXTRA = ("schema", "issuer", "kid", "subject", "started_at", "emit_interval_s")
_LAUNCH_EXTRA_02 = (
    "schema",
    "issuer",
    "subject",
    "started_at",
    "emit_interval_s",
    "max_duration_s",
    "slots",
    "supervisor",
    "enroll_socket",
    "excluded_children",
    "host_evidence",
    "host_policy",
)
#: What ``host_evidence`` may say (absent: ``"off"``).
HOST_EVIDENCE_MODES = ("off", "required")
_MAX_NAME_BYTES = 200


def check_launch_id(launch_id: str) -> str:
    """``launch_id`` if it can name a file and a directory: printable, no ``/``, not ``.``
    or ``..``, at most 200 bytes of UTF-8 (a NUL or a control character never reaches a path).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming what was found.
    """
    if (
        not launch_id.isprintable()
        or "/" in launch_id
        or launch_id in (".", "..")
        or len(launch_id.encode("utf-8", "replace")) > _MAX_NAME_BYTES
        or _SURROGATE.search(launch_id)
    ):
        raise invalid_input(f"expected a launch_id usable as a file name, found {launch_id!r}")
    return launch_id


_SURROGATE = re.compile("[\ud800-\udfff]")


def _supervisor(value: object, what: str) -> ProcessIdentity:
    if not isinstance(value, dict) or set(value) != {"host", "pid", "start_ticks", "boot_id"}:
        raise invalid_input(
            f"{what}: expected 'supervisor' as {{'host', 'pid', 'start_ticks', 'boot_id'}}, "
            f"found {value!r}"
        )
    host, pid, ticks, boot = value["host"], value["pid"], value["start_ticks"], value["boot_id"]
    if not (isinstance(host, str) and host and isinstance(boot, str) and boot):
        raise invalid_input(f"{what}: expected supervisor host and boot_id as non-empty strings")
    if type(pid) is not int or type(ticks) is not int or not (0 < pid <= MAX_SAFE_INTEGER):
        raise invalid_input(
            f"{what}: expected supervisor pid and start_ticks as integers, found {value!r}"
        )
    if not 0 <= ticks <= MAX_SAFE_INTEGER:
        raise invalid_input(f"{what}: expected supervisor start_ticks >= 0, found {ticks!r}")
    return ProcessIdentity(host, pid, ticks, boot)


def _excluded(value: object, what: str) -> frozenset[tuple[int, int]]:
    """``excluded_children`` of a launch.json: absent (none), or a list of
    ``{"pid", "start_ticks"}``."""
    if value is None:
        return frozenset()
    if not isinstance(value, list) or len(value) > _MAX_SLOTS * 64:
        raise invalid_input(
            f"{what}: expected 'excluded_children' as a list, found {value!r}"[:300]
        )
    found: set[tuple[int, int]] = set()
    for item in value:
        if not isinstance(item, dict) or set(item) != {"pid", "start_ticks"}:
            raise invalid_input(f"{what}: expected excluded children as {{'pid', 'start_ticks'}}")
        pid, ticks = item["pid"], item["start_ticks"]
        if type(pid) is not int or type(ticks) is not int:
            raise invalid_input(f"{what}: expected excluded pid and start_ticks as integers")
        if not (0 < pid <= MAX_SAFE_INTEGER and 0 <= ticks <= MAX_SAFE_INTEGER):
            raise invalid_input(f"{what}: expected an excluded pid >= 1 and start_ticks >= 0")
        found.add((pid, ticks))
    return frozenset(found)


def _host_evidence(doc: dict[str, Any], what: str) -> tuple[str, str | None]:
    """``host_evidence`` and ``host_policy`` of a 0.2 launch.json (absent: off, any)."""
    mode, policy = doc.get("host_evidence", "off"), doc.get("host_policy")
    if mode not in HOST_EVIDENCE_MODES:
        raise invalid_input(
            f"{what}: expected 'host_evidence' of {list(HOST_EVIDENCE_MODES)}, found {mode!r}"[:300]
        )
    if policy is not None and (type(policy) is not str or not policy.isprintable() or not policy):
        raise invalid_input(
            f"{what}: expected 'host_policy' as text or null, found {policy!r}"[:300]
        )
    return mode, policy


def launch_from_file(path: Path) -> ExpectedLaunch:
    """The expected launch from a ``launch.json``: schema ``ecpa-launch/0.2`` (slots, the
    supervisor's identity) or ``ecpa-launch/0.1`` (one slot, a shared key); other members
    (issuer, kid, subject, started_at, ...) are allowed and ignored. The file is read as
    :func:`ecpa._files.read_bounded` reads: a regular file, no symlink, at most 1 MiB.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when unreadable, not strict JSON or malformed.
    """
    data = read_bounded(path, _MAX_CONFIG_BYTES, ErrorCode.INVALID_INPUT)
    return launch_from_bytes(data, f"launch {path}")


def launch_from_bytes(data: bytes, what: str) -> ExpectedLaunch:
    """The expected launch from the bytes of a ``launch.json`` (see
    :func:`launch_from_file`); ``what`` names where they came from, in messages.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when not strict JSON or malformed.
    """
    if len(data) > _MAX_CONFIG_BYTES:
        raise invalid_input(
            f"{what}: expected at most {_MAX_CONFIG_BYTES} bytes, found {len(data)}"
        )
    try:
        doc = parse_object(data, what=what)
    except EcpaError as exc:
        raise invalid_input(f"{exc.code.value}: {exc.detail}") from None
    schema = doc.get("schema")
    if schema == LAUNCH_SCHEMA_01:
        expected = expected_from_dict(doc, what, extra=_LAUNCH_EXTRA)
    elif schema == LAUNCH_SCHEMA:
        base = expected_from_dict(doc, what, extra=_LAUNCH_EXTRA_02)
        mode, policy = _host_evidence(doc, what)
        expected = replace(
            base,
            version="0.2",
            host_evidence=mode,
            host_policy=policy,
            slots=slots_from_list(doc.get("slots"), what),
            supervisor=_supervisor(doc.get("supervisor"), what),
            excluded=_excluded(doc.get("excluded_children"), what),
        )
    else:
        raise invalid_input(
            f"{what}: expected schema {LAUNCH_SCHEMA!r} or {LAUNCH_SCHEMA_01!r}, found {schema!r}"
        )
    check_launch_id(expected.launch_id)
    return expected


def launch_ended(path: Path) -> str | None:
    """Why the launch is over, from its ``exit.json`` (written by ``ecpa run`` when the
    command ended), or None when there is no such file. Never raises: an unreadable or
    malformed file still means the launch ended, and the reason says what is wrong with it.
    """
    if not os.path.lexists(path):  # a dangling symlink is there too: read, and refused
        return None
    try:
        data = read_bounded(path, _MAX_CONFIG_BYTES, ErrorCode.INVALID_INPUT)
    except EcpaError as exc:
        return f"launch ended ({path.name} unreadable: {exc.code.value})"
    return ended_from_bytes(data, path.name)


def time_member(data: bytes, name: str, what: str) -> int | None:
    """The integer member ``name`` (``started_at`` of ``launch.json``, ``ended_at`` of
    ``exit.json``) of the JSON object in ``data``; None when it is not one, or not there."""
    try:
        value = parse_object(data, what=what).get(name)
    except EcpaError:
        return None
    return value if type(value) is int else None


def ended_from_bytes(data: bytes, name: str = "exit.json") -> str:
    """Why the launch is over, from the bytes of its ``exit.json`` (see
    :func:`launch_ended`); never raises."""
    try:
        doc = parse_object(data, what=name)
    except EcpaError as exc:
        return f"launch ended ({name} unreadable: {exc.code.value})"
    ended, status = doc.get("ended_at"), doc.get("exit_status")
    if doc.get("schema") != EXIT_SCHEMA or type(ended) is not int or type(status) is not int:
        return f"launch ended ({name} not an {EXIT_SCHEMA} record)"
    how = f"exited with status {status}"
    if isinstance(doc.get("error"), str):
        how = f"could not start (status {status}): {doc['error']}"
    elif type(doc.get("signal")) is int:
        how = f"was killed by signal {doc['signal']} (status {status})"
    return f"launch ended at {ended}: the command {how}"
