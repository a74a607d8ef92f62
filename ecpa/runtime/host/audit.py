"""The I/O edge of the audit (docs/audit.md): a launch directory's files read as ``ecpa status``
reads them (:func:`~ecpa.runtime.host.status.read_launch_dir`, no symlink, regular files,
private directories), every record of every process log verified as of its own
``issued_at`` (within its key's window, so a window closed when the launch ended does not
erase the past), then :func:`~ecpa.runtime.judge.audit.audit_report`.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ecpa._files import open_regular
from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.profile.fence import MemoryReplayFence
from ecpa.profile.json.strict_json import parse_object
from ecpa.profile.trust import TrustStore
from ecpa.runtime.host.logs import open_process_logs
from ecpa.runtime.host.status import read_launch_dir
from ecpa.runtime.judge.audit import LaunchLife, audit_report
from ecpa.runtime.judge.certified import launch_keys
from ecpa.runtime.judge.context import Judgement
from ecpa.runtime.judge.reasons import Reason
from ecpa.runtime.judge.records import check_record
from ecpa.runtime.judge.stream import Stream
from ecpa.runtime.judge.timeline import ProcessRecords
from ecpa.runtime.model.counters import HostCounts
from ecpa.runtime.model.enroll import LOG_NAME, kid_of_log, parse_kid
from ecpa.runtime.model.evidence import LogLine, issued_at_of, read_log
from ecpa.runtime.model.host_binding import ProcessClaim
from ecpa.runtime.model.host_event import MAX_HOST_LINE
from ecpa.runtime.model.host_journal import (
    JOURNAL_DIR,
    JOURNAL_SOURCE,
    JournalCheck,
    check_journal,
)
from ecpa.runtime.model.launch import (
    ExpectedLaunch,
    ended_from_bytes,
    launch_from_bytes,
    time_member,
)
from ecpa.runtime.model.process import PROC, check_alive
from ecpa.runtime.stores.operator import OperatorTrust, operator_trust
from ecpa.runtime.stores.remote import stored_certificates
from ecpa.runtime.stores.store import EvidenceStore

__all__ = ["Audit", "audit_launch_dir", "audit_store", "issued_at_of", "records_of"]


@dataclass(frozen=True)
class Audit:
    """An audit's report, and the records it was made from (for a plot)."""

    report: dict[str, Any]
    processes: tuple[ProcessRecords, ...]

    @property
    def journal_mismatch(self) -> bool:
        """Whether a host journal disagrees with its process's signed accounts."""
        journals = self.report.get("host_journals") or {}
        return bool(journals.get("mismatches"))

    @property
    def untrusted(self) -> bool:
        """Whether a key of the launch is backed by no certificate the operator trusts."""
        return not self.report["keys"]["certified"]


def bounded_lines(stream: BinaryIO, limit: int = MAX_HOST_LINE) -> Iterator[bytes]:
    """The lines of ``stream``, each with its newline (a last one without is cut short),
    holding at most one line of ``limit`` bytes: a longer line is skipped through and given
    as one line no host event parser accepts."""
    while line := stream.readline(limit + 2):
        if len(line) > limit + 1 and not line.endswith(b"\n"):
            while (rest := stream.readline(1 << 16)) and not rest.endswith(b"\n"):
                pass
            yield b"\0 a line longer than a host event may be\n"
            continue
        yield line


def _accounts(proc: ProcessRecords) -> list[HostCounts]:
    return [r.counters.host for r in proc.accepted if r.counters.host is not None]


def _claim(proc: ProcessRecords, expected: ExpectedLaunch) -> ProcessClaim | None:
    """What each line of the process's journal must be bound to: the launch, and the
    process its accepted records name (None: it has none)."""
    if not proc.accepted:
        return None
    who = proc.accepted[0].identity
    return ProcessClaim(expected.plan_id, expected.launch_id, who.host, who.pid, who.start_ticks)


_MISSING = "no journal, but its records account for lines of one"


def journal_checks(
    logs_fd: int | None, processes: list[ProcessRecords], expected: ExpectedLaunch
) -> dict[str, JournalCheck | str]:
    """Each process's host journal (``host/<kid>.jsonl`` beside its log, in the directory
    open as ``logs_fd``) checked against its accepted records' host accounts; a process
    without one, whose records account for nothing, is left out; an unreadable journal is
    said as text."""
    out: dict[str, JournalCheck | str] = {}
    journals: int | None = None
    try:
        if logs_fd is not None:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                journals = os.open(JOURNAL_DIR, flags, dir_fd=logs_fd)
            except FileNotFoundError:
                journals = None
            except OSError as exc:
                return {p.name: f"journal directory unreadable: {exc.strerror}" for p in processes}
        for proc in processes:
            accounts = _accounts(proc)
            try:
                if journals is None:
                    raise FileNotFoundError
                os.stat(proc.name, dir_fd=journals, follow_symlinks=False)
            except FileNotFoundError:
                if any(a.journal_lines for a in accounts):
                    out[proc.name] = _MISSING
                continue
            except OSError as exc:
                out[proc.name] = f"journal unreadable: {exc.strerror}"
                continue
            try:
                with open_regular(proc.name, ErrorCode.INVALID_INPUT, dir_fd=journals) as fh:
                    out[proc.name] = check_journal(
                        bounded_lines(fh), accounts, claim=_claim(proc, expected)
                    )
            except EcpaError as exc:
                out[proc.name] = f"journal unreadable: {exc.detail}"
    finally:
        if journals is not None:
            os.close(journals)
    return out


def stored_journal_checks(
    db: EvidenceStore, expected: ExpectedLaunch, *, ended: bool
) -> Callable[[list[ProcessRecords]], dict[str, JournalCheck | str]]:
    """:func:`journal_checks` of the journals ``ecpa ship`` stored with launch
    ``expected`` (read now, checked when the records are): the same checks; a launch that
    has not ended may have lines not shipped yet at a journal's end (``partial``)."""
    stored: dict[str, list[bytes]] = {}
    launch_id = expected.launch_id
    for source in db.sources(launch_id):
        if source.startswith(JOURNAL_SOURCE):
            rows = db.query(
                "SELECT line FROM ecpa_evidence WHERE (launch_id, launch_day) ="
                " (SELECT launch_id, day FROM ecpa_launch WHERE launch_id = %s) AND source = %s "
                "ORDER BY file_offset",
                (launch_id, source),
            )
            stored[source.removeprefix(JOURNAL_SOURCE)] = [bytes(r[0]) + b"\n" for r in rows]

    def checks(processes: list[ProcessRecords]) -> dict[str, JournalCheck | str]:
        out: dict[str, JournalCheck | str] = {}
        for proc in processes:
            accounts = _accounts(proc)
            lines = stored.get(proc.name)
            if lines is None:
                if any(a.journal_lines for a in accounts):
                    out[proc.name] = _MISSING
                continue
            claim = _claim(proc, expected)
            out[proc.name] = check_journal(iter(lines), accounts, partial=not ended, claim=claim)
        return out

    return checks


def records_of(
    name: str, lines: list[LogLine], judgement: Judgement
) -> tuple[ProcessRecords, dict[str, int]]:
    """One log's records, each verified with the ``judgement``'s trust store, expected
    launch and policy at its own ``issued_at`` (sequence numbers only grow, each nonce once:
    a fence of the log's own), and the count of refused ones by code."""
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
            when = judgement.at(at if at is not None else 0)
            rec = check_record(line.evidence, when, file_kid=kid)
            stream.accept(rec, fence)
        except EcpaError as exc:
            stream.refuse(line.number, exc)
            if at is not None:
                proc.refused_at.append(at)
            continue
        proc.accepted.append(rec)
    return proc, dict(stream.refused)


def audit_launch_dir(
    directory: Path,
    *,
    now: int,
    window: tuple[int | None, int | None] = (None, None),
    proc_root: Path = PROC,
    operator: OperatorTrust | None = None,
) -> Audit:
    """The audit of the launch directory ``directory`` (``now`` matters only for a
    launch that has not ended: its life is judged up to ``now``), its keys trusted as
    ``ecpa status`` trusts them (``operator``: the operator's trust store, default
    :func:`~ecpa.runtime.stores.operator.operator_trust`'s).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a directory ``ecpa status`` would refuse, a
            ``launch.json`` without ``started_at``, or a 0.1 launch (no slots to audit);
            ``ATTESTATION_TRUST_STORE_CONFIG`` for an unusable ``trust.json``.
    """
    found = operator_trust() if operator is None else operator
    files = read_launch_dir(directory)
    expected = files.expected
    if expected.version == "0.1":
        raise EcpaError(ErrorCode.INVALID_INPUT, "expected a 0.2 launch to audit, found 0.1")
    judged = files.trusted(found)
    keys = judged.reasons
    judgement = Judgement.under(judged, expected, now)
    expected = judgement.expected
    logs = open_process_logs(directory / "evidence" / expected.launch_id)
    read: list[tuple[str, list[LogLine]]] = []
    try:
        for name, fd in sorted(logs.fds.items()):
            with os.fdopen(os.dup(fd), "rb") as stream:
                read.append((name, list(read_log(stream))))
        logs_fd = None if logs.dir_fd is None else os.dup(logs.dir_fd)
    finally:
        logs.close()
    try:
        life = _life(
            expected,
            files.launch_doc,
            files.ended_at,
            files.ended,
            where=str(directory / "launch.json"),
            supervisor_gone=files.ended is None
            and expected.supervisor is not None
            and not check_alive(expected.supervisor, proc_root=proc_root).alive,
        )
        return _from_parts(
            judgement,
            life,
            read,
            window=window,
            journals=lambda processes: journal_checks(logs_fd, processes, expected),
            keys=keys,
        )
    finally:
        if logs_fd is not None:
            os.close(logs_fd)


def _life(
    expected: ExpectedLaunch,
    launch_doc: bytes,
    ended_at: int | None,
    ended: str | None,
    *,
    where: str,
    supervisor_gone: bool,
) -> LaunchLife:
    """The launch's life as its files say (``launch_doc``: its ``launch.json``, read from
    ``where``).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a 0.1 launch (no slots to audit) or a
            ``launch.json`` without an integer ``started_at``.
    """
    if expected.version == "0.1":
        raise EcpaError(ErrorCode.INVALID_INPUT, "expected a 0.2 launch to audit, found 0.1")
    started = time_member(launch_doc, "started_at", "launch.json")
    if started is None:
        raise EcpaError(
            ErrorCode.INVALID_INPUT, f"expected an integer started_at in {where}, found none"
        )
    return LaunchLife(started, ended_at, ended, supervisor_gone and ended is None)


def _from_parts(
    judgement: Judgement,
    life: LaunchLife,
    logs: list[tuple[str, list[LogLine]]],
    *,
    window: tuple[int | None, int | None],
    journals: Callable[[list[ProcessRecords]], dict[str, JournalCheck | str]] | None = None,
    keys: Sequence[Reason] = (),
) -> Audit:
    """The audit of ``logs`` (each read whole) over ``life``: records checked under the
    ``judgement`` (:func:`records_of`), the report made at its ``now``."""
    expected = judgement.expected
    processes: list[ProcessRecords] = []
    refused: dict[str, int] = {}
    for name, lines in logs:
        proc, codes = records_of(name, lines, judgement)
        processes.append(proc)
        for code, count in codes.items():
            refused[code] = refused.get(code, 0) + count
    plan = {
        "plan_id": expected.plan_id,
        "plugin_id": expected.plugin_id,
        "artifact_digest": expected.artifact_digest,
    }
    report = audit_report(
        processes,
        expected,
        life,
        now=judgement.now,
        window=window,
        refused=refused,
        plan=plan,
        journals=None if journals is None else journals(processes),
        keys=keys,
    )
    return Audit(report, tuple(processes))


def audit_store(
    dsn: str,
    launch_id: str,
    *,
    now: int | None = None,
    window: tuple[int | None, int | None] = (None, None),
    operator: OperatorTrust | None = None,
) -> Audit:
    """The audit of launch ``launch_id`` in the evidence store at ``dsn`` (``now`` None:
    the database server's clock, which matters only for a launch that has not ended). The
    same report as :func:`audit_launch_dir` of the directory the store was filled from
    (``operator`` as there).

    Raises:
        EcpaError: ``ECPA_EVIDENCE_STORE`` for a store that cannot be used;
            ``ECPA_INVALID_INPUT`` for a launch it does not hold.
    """
    with EvidenceStore(dsn, create=False) as db:
        row = db.launch(launch_id)
        if row is None:
            raise invalid_input(f"expected launch {launch_id!r} in {db.where}, found none")
        where = f"launch {launch_id} in {db.where}"
        if row.trust_doc is None:
            raise EcpaError(
                ErrorCode.TRUST_STORE_CONFIG, f"expected a trust store shipped with {where}"
            )
        expected = launch_from_bytes(row.launch_doc, where)
        if expected.launch_id != launch_id:  # another launch's files under this id
            raise invalid_input(f"{where}: its launch.json is of {expected.launch_id!r}"[:300])
        claimed = TrustStore.from_dict(parse_object(row.trust_doc, what=f"trust store of {where}"))
        when = db.server_now() if now is None else now
        found = operator_trust() if operator is None else operator
        judged = launch_keys(
            claimed,
            expected,
            launch_doc=row.launch_doc,
            certificates=stored_certificates(db, launch_id),
            operator=found.store,
            operator_where=found.where,
        )
        keys = judged.reasons
        judgement = Judgement.under(judged, expected, when)
        expected = judgement.expected
        logs = []
        for name in sorted(db.sources(launch_id)):
            if not LOG_NAME.fullmatch(name):
                continue
            rows = db.query(
                "SELECT line FROM ecpa_evidence WHERE (launch_id, launch_day) ="
                " (SELECT launch_id, day FROM ecpa_launch WHERE launch_id = %s) AND source = %s "
                "ORDER BY file_offset",
                (launch_id, name),
            )
            data = b"".join(bytes(line) + b"\n" for (line,) in rows)
            logs.append((name, list(read_log(io.BytesIO(data)))))
        journals = stored_journal_checks(db, expected, ended=row.exit_doc is not None)
    ended = None if row.exit_doc is None else ended_from_bytes(row.exit_doc)
    life = _life(
        expected,
        row.launch_doc,
        None if row.exit_doc is None else time_member(row.exit_doc, "ended_at", "exit.json"),
        ended,
        where=where,
        supervisor_gone=row.supervisor_alive is False,
    )
    return _from_parts(judgement, life, logs, window=window, journals=journals, keys=keys)
