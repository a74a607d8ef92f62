"""``ecpa status --db``: the derivation of ``runtime_effective`` from an evidence store, for a
launch running on another host (RUNTIME.md "Deriving runtime_effective", "Slots").

The lines are the ones ``ecpa ship`` copied, byte for byte, and each log is judged as ``ecpa
status --launch`` judges a file (:func:`ecpa.runtime.judge.sources.judge_sources`: decided
from its newest lines, its history walked from a checkpoint kept in the store). What cannot
be done from here is said in the reasons, never assumed away: ``/proc`` of the launch's host
is not read, so a process counts as alive while its newest signed heartbeat is within the
heartbeat window (a process that stopped is withdrawn when its last heartbeat ages out, not
the moment it dies), and descent from the supervisor is not checked. The supervisor counts
as alive while ``ecpa ship``, on its host, saw it alive within the heartbeat window. A
shipper that stops copying makes the heartbeats and the supervisor stale: the status turns
false, never true.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.strict_json import parse_object
from ecpa.profile.trust import TrustStore
from ecpa.profile.verify import DEFAULT_POLICY
from ecpa.runtime.judge import history
from ecpa.runtime.judge.certified import launch_keys
from ecpa.runtime.judge.derive import verdict_launch
from ecpa.runtime.judge.history import HISTORY_BUDGET_S
from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.judge.sources import FUTURE_GRACE_S, judge_sources
from ecpa.runtime.judge.stream import Stream
from ecpa.runtime.judge.verdict import RuntimeStatus
from ecpa.runtime.model.enroll import LOG_NAME
from ecpa.runtime.model.enrollment import ENROLLMENTS_FILE, MAX_ENROLLMENTS_BYTES
from ecpa.runtime.model.evidence import LogLine, parse_record
from ecpa.runtime.model.host_journal import JOURNAL_SOURCE
from ecpa.runtime.model.launch import ended_from_bytes, launch_from_bytes
from ecpa.runtime.model.process import Liveness, ProcessIdentity
from ecpa.runtime.stores.operator import OperatorTrust, operator_trust
from ecpa.runtime.stores.replay import ReplayDb, open_fence
from ecpa.runtime.stores.store import EvidenceStore, LaunchRow

__all__ = ["REMOTE_NOTE", "StoredLog", "status_from_store", "stored_certificates"]

REMOTE_NOTE = (
    "status from the evidence store: /proc of the launch's host not read; a process counts "
    "as alive while its newest signed heartbeat is within the heartbeat window; descent from "
    "the supervisor not checked; the supervisor as ecpa ship last saw it"
)
_PAGE = 500


class StoredLog:
    """A process log as the evidence store holds it (a
    :class:`~ecpa.runtime.judge.sources.LogSource`): its lines in file order, its checkpoint
    in ``ecpa_status_checkpoint``. A checkpoint holds while the line just before its offset
    is still the one it walked last (by hash): otherwise the history is walked again from
    the start."""

    def __init__(
        self, store: EvidenceStore, launch_id: str, name: str, end: int, *, basis: str, save: bool
    ) -> None:
        self.store = store
        self.launch_id = launch_id
        self.name = name
        self._end = end
        self._basis = basis
        self._save = save

    def _lines(self, sql: str, params: tuple[int, ...]) -> list[tuple[int, bytes]]:
        # ``sql`` is one of this class's constant clauses, never input.
        # The launch's day: its partition alone is read (pruned when the query runs).
        head = (
            "SELECT file_offset, line FROM ecpa_evidence WHERE (launch_id, launch_day) ="
            " (SELECT launch_id, day FROM ecpa_launch WHERE launch_id = %s) AND source = %s"
        )
        rows = self.store.query(head + sql, (self.launch_id, self.name, *params))
        return [(int(o), bytes(line)) for o, line in rows]

    def _newest(self, end: int, limit: int) -> list[tuple[int, bytes]]:
        return self._lines(" AND file_offset < %s ORDER BY file_offset DESC LIMIT %s", (end, limit))

    def _anchor(self, offset: int) -> str:
        if offset == 0:
            return hashlib.sha256(b"").hexdigest()
        before = self._newest(offset, 1)
        text = b"" if not before else str(before[0][0]).encode() + b":" + before[0][1]
        return hashlib.sha256(text).hexdigest()

    def load(self, launch_id: str, now: int) -> history.Checkpoint:
        fresh = history.Checkpoint(launch_id, 0, 0, 0, self._anchor(0), 0, Stream(name=self.name))
        try:
            rows = self.store.query(
                "SELECT doc FROM ecpa_reader_checkpoint"
                " WHERE reader = current_user AND launch_id = %s AND source = %s",
                (launch_id, self.name),
            )
        except EcpaError:  # no right to read it (yet): only a slower status
            return fresh
        try:
            doc = json.loads(rows[0][0]) if rows else None
        except (ValueError, RecursionError):  # any unusable checkpoint is a slower status
            doc = None
        if (
            not isinstance(doc, dict) or doc.get("basis") != self._basis
        ):  # walked under another trust store
            return fresh
        try:
            ck = history.checkpoint_from_dict(doc, self.name)
        except Exception:  # any unusable checkpoint is only a slower status
            return fresh
        holds = (
            ck.launch_id == launch_id
            and (ck.dev, ck.ino) == (0, 0)
            and 0 <= ck.offset <= self._end
            and ck.anchor == self._anchor(ck.offset)
            and ck.judged_at <= now
        )
        if not holds:
            return fresh
        ck.saved = True
        return ck

    def end(self) -> tuple[int, bytes]:
        return self._end, b""  # only complete lines are shipped

    def advance(
        self,
        ck: history.Checkpoint,
        walk: Callable[[Iterator[LogLine], Stream], None],
        *,
        end: int,
        deadline: float | None,
    ) -> bool:
        if ck.offset >= end:
            return True
        exhausted = False

        def lines() -> Iterator[LogLine]:
            nonlocal exhausted
            while True:
                page = self._lines(
                    " AND file_offset >= %s AND file_offset < %s ORDER BY file_offset LIMIT %s",
                    (ck.offset, end, _PAGE),
                )
                if not page:
                    exhausted = True
                    return
                for offset, raw in page:
                    number = ck.number + 1
                    line = raw[:-1] if raw.endswith(b"\r") else raw
                    try:
                        item = LogLine(number, parse_record(line), None)
                    except EcpaError as exc:
                        item = LogLine(number, None, exc)
                    newest = ck.stream.newest
                    yield item  # walked when the generator resumes
                    if ck.stream.newest is not newest:
                        ck.newest_offset = offset
                    ck.offset, ck.number = offset + 1, number
                    if history.STOP.is_set() or (
                        deadline is not None and time.monotonic() >= deadline
                    ):
                        return

        walk(lines(), ck.stream)
        if exhausted:  # to the end (a walk that stopped before a line leaves it for the next)
            ck.offset = end
        ck.anchor = self._anchor(ck.offset)
        return exhausted

    def newest_lines(self, end: int) -> list[tuple[int, bytes]]:
        found = self._newest(end, 64)
        return [(o, line[:-1] if line.endswith(b"\r") else line) for o, line in found]

    def line_at(self, offset: int) -> bytes | None:
        found = self._lines(" AND file_offset = %s", (offset,))
        return found[0][1].removesuffix(b"\r") if found else None

    def save(self, ck: history.Checkpoint) -> str | None:
        if not self._save:
            return None
        try:
            doc = json.dumps({**ck.to_dict(), "basis": self._basis}, separators=(",", ":"))
            self.store.query(  # the reader is the database role (row level security)
                "INSERT INTO ecpa_reader_checkpoint (launch_id, source, doc) VALUES (%s, %s, %s)"
                " ON CONFLICT (reader, launch_id, source) DO UPDATE SET doc = EXCLUDED.doc",
                (self.launch_id, self.name, doc),
            )
        except EcpaError as exc:
            return f"checkpoint of {self.name} not saved: {exc.detail}"
        ck.saved = True
        return None


def _trust(data: bytes, what: str) -> TrustStore:
    try:
        return TrustStore.from_dict(parse_object(data, what=what))
    except EcpaError as exc:
        if exc.code is ErrorCode.TRUST_STORE_CONFIG:
            raise
        raise EcpaError(ErrorCode.TRUST_STORE_CONFIG, exc.detail) from None


def status_from_store(
    dsn: str,
    launch_id: str,
    *,
    now: int | None = None,
    trust: Path | None = None,
    replay_db: ReplayDb = None,
    max_idle: int | None = None,
    history_budget_s: float | None = HISTORY_BUDGET_S,
    save_checkpoints: bool = True,
    max_abstain: int | None = None,
    operator: OperatorTrust | None = None,
) -> RuntimeStatus:
    """The status of launch ``launch_id`` from the evidence store at ``dsn`` (see the module's
    text), at ``now``: by default the database server's clock, the one that timed the
    supervisor checks ``ecpa ship`` stored, whatever this host's clock says. The shipped
    ``trust.json`` is trusted only as far as the shipped certificates, checked against the
    operator's trust store, back it (docs/keys.md): ``operator``, else the file ``trust``
    names, else :func:`~ecpa.runtime.stores.operator.operator_trust`'s. With
    ``save_checkpoints`` False (a ``now`` that is not the clock), the history checkpoints in
    the store are read but not replaced. A reader needs only to read the store (and to
    write ``ecpa_status_checkpoint``, or its statuses walk history afresh each time).

    Raises:
        EcpaError: ``ECPA_EVIDENCE_STORE`` when the store cannot be used or holds no such
            launch; ``ECPA_INVALID_INPUT`` for a stored ``launch.json`` that is not a 0.2
            launch; ``ATTESTATION_TRUST_STORE_CONFIG`` for a bad trust store, or none;
            ``ECPA_REPLAY_STORE`` for a replay database that cannot be used.
    """
    with ExitStack() as stack:
        store = stack.enter_context(EvidenceStore(dsn, create=False))
        row = store.launch(launch_id)
        if row is None:
            raise EcpaError(
                ErrorCode.EVIDENCE_STORE,
                f"expected launch {launch_id!r} in {store.where}, found none "
                "(`ecpa ship --launch DIR --db ...` stores it)",
            )
        where = f"launch {launch_id} in {store.where}"
        clock_note = Reason(ReasonCode.CLOCK, f"now: {now}, as given")
        if now is None:
            now = store.server_now()
            clock_note = Reason(ReasonCode.CLOCK, f"now: {now}, the database server's clock")
        expected = launch_from_bytes(row.launch_doc, where)
        if expected.launch_id != launch_id:  # another launch's files under this id
            raise EcpaError(
                ErrorCode.EVIDENCE_STORE,
                f"{where}: expected its launch.json of launch {launch_id!r}, found one of "
                f"{expected.launch_id!r}"[:300],
            )
        if max_abstain is not None:  # replaces the launch's max_abstain_s
            expected = replace(expected, max_abstain_s=max_abstain, judges_abstention=True)
        boss = expected.supervisor
        if expected.version != "0.2" or boss is None:
            raise EcpaError(
                ErrorCode.INVALID_INPUT, f"{where}: expected a 0.2 launch, found {expected.version}"
            )
        found = operator if operator is not None else operator_trust(trust)
        if row.trust_doc is None:
            raise EcpaError(
                ErrorCode.TRUST_STORE_CONFIG,
                f"expected a trust store shipped with {where}, found none",
            )
        claimed = _trust(row.trust_doc, f"trust store of {where}")
        judged = launch_keys(
            claimed,
            expected,
            launch_doc=row.launch_doc,
            certificates=stored_certificates(store, launch_id),
            operator=found.store,
            operator_where=found.where,
        )
        keys, trust_store = judged.reasons, judged.store
        expected = replace(expected, certified=judged.identities)
        basis = history.trust_basis(trust_store)
        save = save_checkpoints
        skipped: list[Reason] = []
        sources = []
        for name in store.sources(launch_id):
            if name.startswith(JOURNAL_SOURCE) or name == ENROLLMENTS_FILE:
                continue  # a host journal, shipped for the audit; the certificates
            if not LOG_NAME.fullmatch(name):
                text = f"stored log {name!r}: not a process log name, skipped"
                skipped.append(Reason(ReasonCode.SKIPPED, text))
                continue
            position = store.position(launch_id, name)
            end = 0 if position is None else position.end
            sources.append(StoredLog(store, launch_id, name, end, basis=basis, save=save))
        streams, notes = judge_sources(
            sources,
            trust_store,
            expected,
            now=now,
            fence=open_fence(replay_db, stack),
            policy=DEFAULT_POLICY,
            budget_s=history_budget_s,
        )
    heard: dict[ProcessIdentity, int] = {}
    for stream in streams.values():
        if stream.newest is not None:
            who, at = stream.newest.identity, stream.newest.statement.issued_at
            heard[who] = max(at, heard.get(who, at))
    window = expected.heartbeat_window_s

    def alive(identity: ProcessIdentity) -> Liveness:
        at = heard.get(identity)
        if at is None:
            return Liveness(False, f"process {identity.pid}: no signed heartbeat in the store")
        if at > now + FUTURE_GRACE_S:  # never evidence of life
            return Liveness(
                False,
                f"process {identity.pid} on {identity.host}: newest signed heartbeat dated "
                f"{at - now} s after now (a writer clock ahead is no evidence of life)",
            )
        text = (
            f"process {identity.pid} on {identity.host}: /proc not read (status from the "
            f"store); newest signed heartbeat {now - at} s old, window {window} s"
        )
        return Liveness(at >= now - window, text)

    supervisor = _supervisor(row, now, window)
    failing = tuple(r for r in keys if r.fails)
    status = verdict_launch(
        streams.values(),
        expected,
        now=now,
        liveness=alive,
        descends=None,
        supervisor=supervisor,
        max_idle=max_idle,
        skipped=[*skipped, *notes, Reason(ReasonCode.FROM_STORE, REMOTE_NOTE), clock_note],
    )
    status = replace(  # as status_from_launch_dir: what decides first, a pass last
        status,
        effective=status.effective and not failing,
        reasons=(*failing, *status.reasons, *(r for r in keys if not r.fails)),
    )
    if row.exit_doc is None:
        return status
    ended = Reason(ReasonCode.LAUNCH_ENDED, ended_from_bytes(row.exit_doc))
    return replace(status, effective=False, reasons=(ended, *status.reasons))


def stored_certificates(store: EvidenceStore, launch_id: str) -> bytes | EcpaError | None:
    """The shipped ``enrollments.jsonl``: its lines, each with its newline (None: none
    shipped), or why they are too many to read."""
    if ENROLLMENTS_FILE not in store.sources(launch_id):
        return None
    rows = store.query(
        "SELECT line FROM ecpa_evidence WHERE (launch_id, launch_day) ="
        " (SELECT launch_id, day FROM ecpa_launch WHERE launch_id = %s) AND source = %s"
        " ORDER BY file_offset LIMIT %s",
        (launch_id, ENROLLMENTS_FILE, MAX_ENROLLMENTS_BYTES // 1024),
    )
    data = b"".join(bytes(line) + b"\n" for (line,) in rows)
    if len(data) > MAX_ENROLLMENTS_BYTES:
        return EcpaError(
            ErrorCode.INVALID_INPUT,
            f"expected at most {MAX_ENROLLMENTS_BYTES} bytes of certificates, found more",
        )
    return data


def _supervisor(row: LaunchRow, now: int, window: int) -> Liveness:
    """The supervisor as ``ecpa ship`` last saw it on the launch's host: alive only if seen
    alive within the heartbeat window (a shipper that stopped looking makes it unknown,
    hence false)."""
    if row.exit_doc is not None:
        return Liveness(True, "recorded the launch's end")
    checked, alive = row.supervisor_checked_at, row.supervisor_alive
    if checked is None or alive is None:
        return Liveness(False, "never seen by ecpa ship")
    age = now - checked
    if age < -FUTURE_GRACE_S:  # RUNTIME.md "Clocks": a check from the future is no evidence
        return Liveness(
            False,
            f"supervisor check dated {-age} s after now (the clocks disagree: never evidence "
            "of life)",
        )
    seen = f"as ecpa ship saw it on {row.host} {age} s ago (window {window} s)"
    if not alive:
        return Liveness(False, f"{row.supervisor_reason}, {seen}")
    if age > window:
        return Liveness(False, f"not seen lately: alive {seen}")
    return Liveness(True, f"{row.supervisor_reason}, {seen}")
