"""The I/O edge of the audit (docs/audit.md): a launch directory's files read as ``ecpa status``
reads them (:func:`~ecpa.runtime.host.status.read_launch_dir`, no symlink, regular files,
private directories), every record of every process log verified as of its own
``issued_at`` (within its key's window, so a window closed when the launch ended does not
erase the past), then :func:`~ecpa.runtime.judge.audit.audit_report`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecpa._files import read_bounded
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.fence import MemoryReplayFence
from ecpa.profile.strict_json import parse_object
from ecpa.profile.trust import TrustStore
from ecpa.profile.verify import DEFAULT_POLICY
from ecpa.runtime.host.logs import open_process_logs
from ecpa.runtime.host.status import read_launch_dir
from ecpa.runtime.judge.audit import LaunchLife, audit_report
from ecpa.runtime.judge.records import check_record
from ecpa.runtime.judge.stream import Stream
from ecpa.runtime.judge.timeline import ProcessRecords
from ecpa.runtime.model.enroll import kid_of_log, parse_kid
from ecpa.runtime.model.evidence import LogLine, read_log
from ecpa.runtime.model.launch import MAX_LAUNCH_FILE_BYTES, ExpectedLaunch

__all__ = ["Audit", "audit_launch_dir", "issued_at_of", "records_of"]


@dataclass(frozen=True)
class Audit:
    """An audit's report, and the records it was made from (for a plot)."""

    report: dict[str, Any]
    processes: tuple[ProcessRecords, ...]


def issued_at_of(payload: bytes) -> int | None:
    """The ``issued_at`` a payload claims (None: not a JSON object with an integer there);
    the signature over it is checked after, at that time."""
    try:
        value = parse_object(payload, what="payload").get("issued_at")
    except EcpaError:
        return None
    return value if type(value) is int else None


def records_of(
    name: str, lines: list[LogLine], store: TrustStore, expected: ExpectedLaunch
) -> tuple[ProcessRecords, dict[str, int]]:
    """One log's records, each verified at its own ``issued_at`` (sequence numbers only
    grow, each nonce once), and the count of refused ones by code."""
    kid = kid_of_log(name)
    named = parse_kid(kid)
    proc = ProcessRecords(name, named[0] if named else None)
    stream = Stream(name=name)
    fence = MemoryReplayFence()
    for line in lines:
        if line.torn or (line.evidence is None and line.error is None):
            continue
        at = None if line.evidence is None else issued_at_of(line.evidence.payload)
        try:
            if line.evidence is None:
                assert line.error is not None
                raise line.error
            rec = check_record(
                line.evidence,
                store,
                expected,
                now=at if at is not None else 0,
                policy=DEFAULT_POLICY,
                file_kid=kid,
            )
            stream.accept(rec, fence)
        except EcpaError as exc:
            stream.refuse(line.number, exc)
            if at is not None:
                proc.refused_at.append(at)
            continue
        proc.accepted.append(rec)
    return proc, dict(stream.refused)


def _int_member(data: bytes, name: str, what: str) -> int | None:
    try:
        value = parse_object(data, what=what).get(name)
    except EcpaError:
        return None
    return value if type(value) is int else None


def audit_launch_dir(
    directory: Path,
    *,
    now: int,
    window: tuple[int | None, int | None] = (None, None),
) -> Audit:
    """The audit of the launch directory ``directory`` (``now`` matters only for a
    launch that has not ended: its life is judged up to ``now``).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a directory ``ecpa status`` would refuse, a
            ``launch.json`` without ``started_at``, or a 0.1 launch (no slots to audit);
            ``ATTESTATION_TRUST_STORE_CONFIG`` for an unusable ``trust.json``.
    """
    files = read_launch_dir(directory)
    expected = files.expected
    if expected.version == "0.1":
        raise EcpaError(ErrorCode.INVALID_INPUT, "expected a 0.2 launch to audit, found 0.1")
    launch_doc = read_bounded(
        directory / "launch.json", MAX_LAUNCH_FILE_BYTES, ErrorCode.INVALID_INPUT
    )
    started = _int_member(launch_doc, "started_at", "launch.json")
    if started is None:
        raise EcpaError(
            ErrorCode.INVALID_INPUT,
            f"expected an integer started_at in {directory / 'launch.json'}, found none",
        )
    ended_at = None
    if files.ended is not None:
        exit_doc = read_bounded(
            directory / "exit.json", MAX_LAUNCH_FILE_BYTES, ErrorCode.INVALID_INPUT
        )
        ended_at = _int_member(exit_doc, "ended_at", "exit.json")
    store = files.trust_store()
    logs = open_process_logs(directory / "evidence" / expected.launch_id)
    processes: list[ProcessRecords] = []
    refused: dict[str, int] = {}
    try:
        for name, fd in sorted(logs.fds.items()):
            with os.fdopen(os.dup(fd), "rb") as stream:
                proc, codes = records_of(name, list(read_log(stream)), store, expected)
            processes.append(proc)
            for code, count in codes.items():
                refused[code] = refused.get(code, 0) + count
    finally:
        logs.close()
    plan = {
        "plan_id": expected.plan_id,
        "plugin_id": expected.plugin_id,
        "artifact_digest": expected.artifact_digest,
    }
    life = LaunchLife(started, ended_at, files.ended)
    report = audit_report(
        processes, expected, life, now=now, window=window, refused=refused, plan=plan
    )
    return Audit(report, tuple(processes))
