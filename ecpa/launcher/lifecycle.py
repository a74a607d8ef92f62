"""A launch's lifecycle, for ``ecpa status --json`` (docs/runtime.md, "Lifecycle"): four stages,
each ``{"state": bool, "detail": str}``, the detail saying what was checked.

- ``installed``: the DLA bundle's distribution is installed (found as
  :func:`~ecpa.launcher.plan.bundle_manifest` finds it) and the SHA-256 of its manifest
  bytes still equals the launch's ``artifact_digest`` (a launch of another plugin: false);
- ``configured``: the plan selects the component: the launch obligates at least one slot
  for its plugin (the launch's slots, not the host's configuration files);
- ``enabled``: the launch is bound to its plan: its ``plan_id``, ``plugin_id`` and
  ``artifact_digest`` were read and are well formed (the records the derivation accepted
  carry exactly these: the detail counts them);
- ``runtime_effective``: the verdict of the derivation.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecpa._files import read_bounded
from ecpa.errors import EcpaError, ErrorCode
from ecpa.launcher.plan import BUNDLE_NAME, DEFAULT_PLUGIN_ID, bundle_manifest
from ecpa.profile.json.strict_json import parse_object
from ecpa.runtime import MAX_LAUNCH_FILE_BYTES, EvidenceStore, RuntimeStatus, SlotStatus

__all__ = [
    "STAGES",
    "Manifest",
    "Stage",
    "launch_dir_binding",
    "lifecycle",
    "once",
    "status_document",
    "store_binding",
]

STAGES = ("installed", "configured", "enabled", "runtime_effective")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class Stage:
    state: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "detail": self.detail}


def _text(binding: Mapping[str, Any] | None, name: str) -> str | None:
    value = None if binding is None else binding.get(name)
    return value if isinstance(value, str) and value else None


#: Where the installed bundle's manifest is read: :func:`~ecpa.launcher.plan.bundle_manifest`,
#: or one reading shared by many documents (:func:`once`).
Manifest = Callable[[], tuple[str, bytes]]


def once(read: Manifest) -> Manifest:
    """``read``, called at most once: its answer (or its error) given again to every later
    call. A refresh that documents many launches reads the installed bundle once, not once a
    launch (each reading scans every installed distribution's entry points)."""
    kept: list[tuple[str, bytes] | EcpaError] = []

    def again() -> tuple[str, bytes]:
        if not kept:
            try:
                kept.append(read())
            except EcpaError as exc:
                kept.append(exc)
        found = kept[0]
        if isinstance(found, EcpaError):
            raise EcpaError(found.code, found.detail)
        return found

    return again


def _installed(plugin_id: str | None, digest: str | None, manifest: Manifest) -> Stage:
    if plugin_id != DEFAULT_PLUGIN_ID:
        return Stage(
            False,
            f"the launch's plugin {plugin_id!r} is not the {BUNDLE_NAME} bundle's "
            f"plugin {DEFAULT_PLUGIN_ID!r}: its installation is not known here",
        )
    try:
        where, data = manifest()
    except EcpaError as exc:
        return Stage(False, f"bundle not installed or not usable: {exc.detail}")
    installed = "sha256:" + hashlib.sha256(data).hexdigest()
    if installed != digest:
        return Stage(
            False,
            f"installed manifest {where} has digest {installed}, the launch's "
            f"artifact_digest is {digest}: another build than the one launched",
        )
    return Stage(True, f"installed manifest {where} has the launch's artifact_digest {digest}")


def _configured(plugin_id: str | None, status: RuntimeStatus) -> Stage:
    slots = [slot.slot for slot in status.slots]
    if plugin_id is None or not slots:
        return Stage(False, f"the launch obligates no slot for plugin {plugin_id!r}")
    return Stage(
        True,
        f"the launch's plan obligates {len(slots)} slot(s) for {plugin_id}: {', '.join(slots)} "
        "(checked: the launch's slots, not the host's configuration)",
    )


def _enabled(binding: Mapping[str, Any] | None, status: RuntimeStatus) -> Stage:
    if binding is None:
        return Stage(False, "the launch's binding (launch.json) could not be read")
    names = ("plan_id", "plugin_id", "artifact_digest")
    missing = [name for name in names if _text(binding, name) is None]
    if missing:
        return Stage(False, f"the launch's binding lacks {', '.join(missing)}")
    digest = _text(binding, "artifact_digest")
    if not _DIGEST.fullmatch(digest or ""):
        return Stage(False, f"the launch's artifact_digest {digest!r} is not sha256:<64 hex>")
    return Stage(
        True,
        f"the launch is bound to plan {_text(binding, 'plan_id')} (plugin "
        f"{_text(binding, 'plugin_id')}, artifact {digest}); {status.accepted} accepted "
        "record(s) carry this binding",
    )


def lifecycle(
    binding: Mapping[str, Any] | None,
    status: RuntimeStatus,
    *,
    manifest: Manifest = bundle_manifest,
) -> dict[str, Stage]:
    """The four stages of the launch whose ``launch.json`` (or binding) is ``binding``
    (None: it could not be read) and whose derivation is ``status``, the installed bundle
    read by ``manifest``; never raises for a missing or broken bundle (the stage is false
    and says why)."""
    plugin_id = _text(binding, "plugin_id")
    first = next((reason.text for reason in status.reasons), "no reasons")
    covered = sum(slot.covered for slot in status.slots)
    verdict = f"coverage {covered}/{len(status.slots)} slots; {first}"
    return {
        "installed": _installed(plugin_id, _text(binding, "artifact_digest"), manifest),
        "configured": _configured(plugin_id, status),
        "enabled": _enabled(binding, status),
        "runtime_effective": Stage(status.effective, verdict),
    }


def _slot_json(slot: SlotStatus) -> dict[str, Any]:
    proc = slot.process
    return {
        "slot": slot.slot,
        "covered": slot.covered,
        "process": None
        if proc is None
        else {
            "host": proc.host,
            "pid": proc.pid,
            "start_ticks": proc.start_ticks,
            "boot_id": proc.boot_id,
        },
        "kid": slot.kid,
        "newest_seq": slot.newest_seq,
        "age_s": slot.age_s,
        "last_dispatch_at": slot.last_dispatch_at,
        "counters": slot.counters,
        "source": slot.source,
        "host": slot.host_json(),
        "reasons": [reason.to_dict() for reason in slot.reasons],
    }


def status_document(
    status: RuntimeStatus,
    binding: Mapping[str, Any] | None,
    *,
    manifest: Manifest = bundle_manifest,
) -> dict[str, Any]:
    """The document ``ecpa status --json`` prints (docs/cli.md), ``ecpa serve`` serves and
    ``ecpa launches`` summarizes: the derivation ``status`` of the launch whose
    ``launch.json`` (or binding) is ``binding``, with its :func:`lifecycle` (the installed
    bundle read by ``manifest``)."""
    stages = lifecycle(binding, status, manifest=manifest)
    covered = sum(s.covered for s in status.slots)
    return {
        "runtime_effective": status.effective,
        "effective": status.effective,
        "now": status.now,
        "version": status.version,
        "coverage": {"covered": covered, "slots": len(status.slots)},
        "reasons": [reason.to_dict() for reason in status.reasons],
        "slots": [_slot_json(slot) for slot in status.slots],
        "accepted": status.accepted,
        "refused": status.refused,
        "torn": status.torn,
        "last_seq": status.last_seq,
        "gaps": [list(gap) for gap in status.gaps],
        "newest": status.newest.to_dict() if status.newest else None,
        "counters": status.counters,
        "lifecycle": {name: stage.to_dict() for name, stage in stages.items()},
    }


def _parsed(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        return parse_object(data, what="launch.json")
    except EcpaError:
        return None


def launch_dir_binding(directory: Path) -> dict[str, Any] | None:
    """The ``launch.json`` of a launch directory (None: it cannot be read as JSON)."""
    try:
        data = read_bounded(
            directory / "launch.json", MAX_LAUNCH_FILE_BYTES, ErrorCode.INVALID_INPUT
        )
    except EcpaError:
        return None
    return _parsed(data)


def store_binding(dsn: str, launch_id: str) -> dict[str, Any] | None:
    """The ``launch.json`` of launch ``launch_id`` in the evidence store at ``dsn`` (None:
    not there, or not JSON).

    Raises:
        EcpaError: ``ECPA_EVIDENCE_STORE`` when the store cannot be used.
    """
    with EvidenceStore(dsn, create=False) as store:
        row = store.launch(launch_id)
    return None if row is None else _parsed(row.launch_doc)
