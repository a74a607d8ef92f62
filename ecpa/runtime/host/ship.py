"""``ecpa ship``: copy a launch's evidence into the evidence store
(:mod:`ecpa.runtime.stores.store`), every complete line exactly once, resuming after a
restart where the last commit stopped.

A pass reads the launch directory as ``ecpa status`` does (private directories, no symlink,
regular files only, each log opened relative to its directory), stores ``launch.json``,
``trust.json`` and ``exit.json``, the manager's certificates (``enrollments.jsonl``, as a
log of that name), then each process log from its shipped position to its
last complete line, in transactions of at most :data:`BATCH_LINES` lines that also move the
position. A line still being written (no newline yet) waits for the next pass. A log
replaced by another file (another inode), shorter than what was shipped, or rewritten in
place (the bytes before its shipped end no longer hash as they did) is not copied again: it
is reported, and what was stored stays. Each pass also records whether the supervisor
(``ecpa run``) is alive on this host, for a status from the store. Following (not
``once``), passes repeat every ``interval`` seconds until the launch has ended
(``exit.json``) or its supervisor is gone, and everything before that is stored, or until
``stop()`` says so; a store that goes away meanwhile is waited for.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ecpa._files import check_private_dir, open_regular, read_bounded
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.trust import MAX_TRUST_STORE_BYTES
from ecpa.runtime.host.logs import open_process_logs
from ecpa.runtime.judge.reasons import ReasonCode
from ecpa.runtime.model.enrollment import ENROLLMENTS_FILE
from ecpa.runtime.model.host_journal import JOURNAL_DIR, JOURNAL_SOURCE
from ecpa.runtime.model.launch import MAX_LAUNCH_FILE_BYTES, launch_from_bytes
from ecpa.runtime.model.process import Liveness, ProcessIdentity, check_alive
from ecpa.runtime.stores.store import ANCHOR_BYTES, MAX_STORED_LINE, EvidenceStore, Position

__all__ = ["BATCH_BYTES", "BATCH_LINES", "ShipReport", "ship_launch"]

#: Lines (and bytes) per transaction: a shipper killed mid-copy loses at most one batch of
#: work, never a line (the batch is stored whole or not at all).
BATCH_LINES = 1000
BATCH_BYTES = 4 << 20
_NEWLINES = re.compile(rb"(?:[ \t\r\f\v]*\n)+")  # blank lines, CRLF and spaces included
#: A following pass ships logs for at most this long before it records the supervisor's
#: liveness (which a status from the store needs within the heartbeat window), whatever
#: the logs hold; the rest waits for the next pass.
PASS_BUDGET_S = 0.5
_CHUNK = 1 << 20


@dataclass
class ShipReport:
    """What a run of ``ecpa ship`` did."""

    launch_id: str = ""
    stored: int = 0
    passes: int = 0
    logs: int = 0
    ended: bool = False
    supervisor_gone: bool = False
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def _read_optional(path: Path, limit: int = MAX_LAUNCH_FILE_BYTES) -> bytes | None:
    if not os.path.lexists(path):
        return None
    return read_bounded(path, limit, ErrorCode.INVALID_INPUT)


def _complete_lines(
    fd: int, start: int, size: int, max_lines: int = BATCH_LINES, max_bytes: int = BATCH_BYTES
) -> tuple[list[tuple[int, bytes]], int]:
    """Complete lines of ``fd`` from ``start`` (a line boundary) before ``size``, at most
    ``max_lines`` lines and (but for the first line) ``max_bytes`` bytes: (offset, line
    without its newline) each, blank lines skipped; and the offset
    just after the last complete line taken. A line longer than a record may be is kept
    cut to :data:`~ecpa.runtime.stores.store.MAX_STORED_LINE` bytes (still refused as too large)."""
    lines: list[tuple[int, bytes]] = []
    taken = 0
    pos = line_at = off = start
    head = bytearray()  # the current line's first bytes
    while off < size and len(lines) < max_lines and taken < max_bytes:
        chunk = os.pread(fd, min(_CHUNK, size - off), off)
        if not chunk:
            break
        i = 0
        while len(lines) < max_lines and taken < max_bytes:
            if not head:  # a run of empty lines, passed at C speed (each byte counted)
                run = _NEWLINES.match(chunk, i)
                if run is not None:
                    taken += run.end() - i
                    i = run.end()
                    pos = line_at = off + i
                    continue
            nl = chunk.find(b"\n", i)
            room = MAX_STORED_LINE - len(head)
            if room > 0:
                head += chunk[i : (nl if nl >= 0 else len(chunk))][:room]
            if nl < 0:
                break
            if head.strip():
                lines.append((line_at, bytes(head)))
            taken += len(head) + 1  # blank lines count toward the batch's bytes too
            pos = line_at = off + nl + 1
            head = bytearray()
            i = nl + 1
        off += len(chunk)
    return lines, pos


def ship_launch(
    directory: Path,
    store: EvidenceStore,
    *,
    once: bool = False,
    interval: float = 0.5,
    stop: Callable[[], bool] = lambda: False,
    report: ShipReport | None = None,
    liveness: Callable[[ProcessIdentity], Liveness] = check_alive,
    clock: Callable[[], int] | None = None,
) -> ShipReport:
    """Copy the launch in ``directory`` into ``store`` (see the module's text).
    ``liveness`` says whether the supervisor is alive (this host's ``/proc``), ``clock``
    when that was seen: by default the database server's clock, which every reader of the
    store judges by, whatever this host's clock says (tests give their own).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a launch directory that cannot be read as one
            (or a 0.1 launch: one shared log, nothing per process to ship);
            ``ECPA_EVIDENCE_STORE`` when the store cannot be used or holds another launch
            under this launch's id.
    """
    report = report if report is not None else ShipReport()
    sent: tuple[bytes | None, bytes | None] | None = None
    while True:
        try:
            budget = None if once else PASS_BUDGET_S
            sent, done = _pass(directory, store, report, stop, sent, liveness, clock, budget)
        except EcpaError as exc:
            # Following, a store that went away (a restart, a network cut) is waited for;
            # anything else, or --once, ends the run.
            if once or exc.code is not ErrorCode.EVIDENCE_STORE or not store.transient:
                raise
            report.note(f"store unavailable, retrying: {exc.detail}")
            sent = None
            done = False
        if done or once or stop():
            return report
        deadline = time.monotonic() + interval
        while time.monotonic() < deadline and not stop():
            time.sleep(min(0.05, interval))
        if stop():
            return report


def _pass(
    directory: Path,
    store: EvidenceStore,
    report: ShipReport,
    stop: Callable[[], bool],
    sent: tuple[bytes | None, bytes | None] | None,
    liveness: Callable[[ProcessIdentity], Liveness],
    clock: Callable[[], int] | None,
    budget: float | None = None,
) -> tuple[tuple[bytes | None, bytes | None], bool]:
    """One pass; what was stored of the launch's files, and whether following is over.
    With ``budget`` (seconds), the logs are shipped for at most that long, then the
    supervisor check is stored all the same (the rest of the logs at the next pass)."""
    deadline = None if budget is None else time.monotonic() + budget
    check_private_dir(directory, ErrorCode.INVALID_INPUT, what="launch directory")
    launch_doc = read_bounded(
        directory / "launch.json", MAX_LAUNCH_FILE_BYTES, ErrorCode.INVALID_INPUT
    )
    expected = launch_from_bytes(launch_doc, f"launch {directory / 'launch.json'}")
    boss = expected.supervisor
    if expected.version != "0.2" or boss is None:
        raise EcpaError(
            ErrorCode.INVALID_INPUT,
            f"expected a 0.2 launch directory (one log per process) at {directory}, "
            f"found a {expected.version} launch",
        )
    report.launch_id = expected.launch_id
    try:
        exit_doc = _read_optional(directory / "exit.json")
    except EcpaError:  # an end that cannot be read is still an end (a status says so)
        exit_doc = b""
    # The supervisor is checked before the logs are read: if it is gone, every line its
    # processes wrote is on disk when they are shipped below.
    seen = liveness(boss)
    trust_doc = _read_optional(directory / "trust.json", MAX_TRUST_STORE_BYTES)
    if sent is None:  # the launch is its shipper's before any of its lines is stored
        store.claim_launch(expected.launch_id, boss.host, launch_doc)
    # The certificates after trust.json was read: ecpa run certifies a key before it lists
    # it, so every key of the trust.json stored has its certificate stored first.
    _ship_certificates(directory, expected.launch_id, store, report, stop)
    if sent != (trust_doc, exit_doc):
        store.put_launch(expected.launch_id, boss.host, launch_doc, trust_doc, exit_doc)
    evidence = directory / "evidence"
    if os.path.lexists(evidence):
        check_private_dir(evidence, ErrorCode.INVALID_INPUT, what="evidence directory")
    logs = evidence / expected.launch_id
    # The host's journals first: a record never accounts for a line written after it, so
    # what is stored of a journal is never behind the records stored after it.
    complete = _ship_logs(
        logs / JOURNAL_DIR, expected.launch_id, store, report, stop, deadline, JOURNAL_SOURCE
    )
    complete &= _ship_logs(logs, expected.launch_id, store, report, stop, deadline)
    # What a status from the store relies on: as fresh as the lines just shipped.
    now_seen = liveness(boss) if seen.alive else seen
    checked = None if clock is None else clock()
    store.note_supervisor(expected.launch_id, now_seen.alive, now_seen.reason, checked)
    report.passes += 1
    if not complete:  # out of time: the logs go on at the next pass, whatever else holds
        return (trust_doc, exit_doc), False
    if exit_doc is not None:  # ended, and everything written before the end is stored
        report.ended = True
        return (trust_doc, exit_doc), True
    if not seen.alive:  # killed without recording its end: nothing more will come
        report.note(f"supervisor not alive and no exit.json: {seen.reason}")
        report.supervisor_gone = True
        return (trust_doc, exit_doc), True
    return (trust_doc, exit_doc), False


def _ship_certificates(
    directory: Path,
    launch_id: str,
    store: EvidenceStore,
    report: ShipReport,
    stop: Callable[[], bool],
) -> None:
    """Ship ``enrollments.jsonl`` (when there is one) as the source of that name."""
    path = directory / ENROLLMENTS_FILE
    if not os.path.lexists(path):
        return
    with open_regular(path, ErrorCode.INVALID_INPUT) as stream:
        _ship_fds({ENROLLMENTS_FILE: stream.fileno()}, launch_id, store, report, stop, None)


def _ship_logs(
    directory: Path,
    launch_id: str,
    store: EvidenceStore,
    report: ShipReport,
    stop: Callable[[], bool],
    deadline: float | None,
    prefix: str = "",
) -> bool:
    """Ship every log of the launch in ``directory`` (the host's journals: each stored as
    ``prefix`` + its name); False when ``deadline`` came first."""
    logs = open_process_logs(directory, quiet="refused-" if prefix else None)
    try:
        for skipped in logs.skipped:
            if skipped.code is not ReasonCode.NO_EVIDENCE_DIR:
                report.note(skipped.text)
        if not prefix:
            report.logs = max(report.logs, len(logs.fds))
        fds = {prefix + name: fd for name, fd in logs.fds.items()}
        return _ship_fds(fds, launch_id, store, report, stop, deadline)
    finally:
        logs.close()


def _ship_fds(
    fds: dict[str, int],
    launch_id: str,
    store: EvidenceStore,
    report: ShipReport,
    stop: Callable[[], bool],
    deadline: float | None,
) -> bool:
    """Ship the logs ``fds`` (source name: open descriptor) from their stored positions,
    together: each batch takes the new lines of as many logs as fit in one (a fleet's
    shipper follows hundreds of logs, a line or two each a pass) and stores them, and moves
    their positions, in one transaction. False when ``deadline`` came first."""
    pending = {name: os.fstat(fd) for name, fd in sorted(fds.items())}
    while pending and not stop():
        stored_at = store.positions(launch_id, list(pending))
        parts: list[tuple[str, Position, list[tuple[int, bytes]], Position]] = []
        room_lines, room_bytes = BATCH_LINES, BATCH_BYTES
        for name, st in list(pending.items()):
            if room_lines <= 0 or room_bytes <= 0:
                break
            fd = fds[name]
            at = stored_at.get(name) or Position(st.st_dev, st.st_ino, 0)
            size = os.fstat(fd).st_size
            refused = _refused(name, at, st, size, fd)
            if refused is not None:
                report.note(refused)
                del pending[name]
                continue
            lines, end = _complete_lines(fd, at.end, size, room_lines, room_bytes)
            if end == at.end:  # nothing new and complete: shipped up to its end
                del pending[name]
                continue
            room_lines -= len(lines)
            room_bytes -= end - at.end
            parts.append((name, at, lines, Position(st.st_dev, st.st_ino, end, _anchor(fd, end))))
        if not parts:
            break
        for stored in store.ship_logs(launch_id, parts):
            report.stored += stored or 0  # None: another shipper moved it, read it again
        if deadline is not None and time.monotonic() >= deadline:
            return False  # at least one batch a pass: always some progress
    return True


def _refused(name: str, at: Position, st: os.stat_result, size: int, fd: int) -> str | None:
    """Why the log ``name`` is not shipped from ``at`` (another file, shorter than shipped,
    rewritten in place), or None."""
    if (at.dev, at.ino) != (st.st_dev, st.st_ino):
        return (
            f"{name}: expected the file shipped before (device {at.dev}, inode {at.ino}), "
            f"found another (device {st.st_dev}, inode {st.st_ino}): not shipped"
        )
    if size < at.end:
        return f"{name}: expected at least the {at.end} bytes shipped, found {size}: not shipped"
    if _anchor(fd, at.end) != at.anchor:
        return (
            f"{name}: expected the bytes shipped before offset {at.end} unchanged, "
            "found them rewritten in place: not shipped"
        )
    return None


def _anchor(fd: int, end: int) -> bytes:
    start = max(0, end - ANCHOR_BYTES)
    return hashlib.sha256(os.pread(fd, end - start, start)).digest()
