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

from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime.judge import history
from ecpa.runtime.judge.certified import MEMO_KEYS, launch_keys, launch_trust_store
from ecpa.runtime.judge.context import HISTORY_BUDGET_S, Judgement
from ecpa.runtime.judge.derive import verdict_launch
from ecpa.runtime.judge.memo import Memo, digest
from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.judge.sources import FUTURE_GRACE_S, judge_sources
from ecpa.runtime.judge.verdict import RuntimeStatus
from ecpa.runtime.model.enroll import LOG_NAME
from ecpa.runtime.model.enrollment import ENROLLMENTS_FILE, MAX_ENROLLMENTS_BYTES
from ecpa.runtime.model.host_journal import JOURNAL_SOURCE
from ecpa.runtime.model.launch import ExpectedLaunch, ended_from_bytes, launch_from_bytes
from ecpa.runtime.model.process import Liveness, ProcessIdentity
from ecpa.runtime.stores.operator import OperatorTrust, operator_trust
from ecpa.runtime.stores.replay import ReplayDb, open_fence
from ecpa.runtime.stores.store import EvidenceStore, LaunchRow
from ecpa.runtime.stores.stored_log import Prefetched, StoredLog

__all__ = ["REMOTE_NOTE", "status_from_store", "stored_certificates"]

REMOTE_NOTE = (
    "status from the evidence store: /proc of the launch's host not read; a process counts "
    "as alive while its newest signed heartbeat is within the heartbeat window; descent from "
    "the supervisor not checked; the supervisor as ecpa ship last saw it"
)


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
    store: EvidenceStore | None = None,
    row: LaunchRow | None = None,
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
    ``store``: a connection to ``dsn`` already open (a fleet's statuses share one), left
    open; ``row``: the launch's row already read with it (a fleet's judging reads it once,
    and carries the ``launch.json`` judged), else it is read here.

    Raises:
        EcpaError: ``ECPA_EVIDENCE_STORE`` when the store cannot be used or holds no such
            launch; ``ECPA_INVALID_INPUT`` for a stored ``launch.json`` that is not a 0.2
            launch; ``ATTESTATION_TRUST_STORE_CONFIG`` for a bad trust store, or none;
            ``ECPA_REPLAY_STORE`` for a replay database that cannot be used.
        ValueError: a ``row`` of another launch (a bug of the caller's, never an input).
    """
    if row is not None and row.launch_id != launch_id:
        raise ValueError(f"expected the row of launch {launch_id!r}, found {row.launch_id!r}")
    with ExitStack() as stack:
        if store is None:
            store = stack.enter_context(EvidenceStore(dsn, create=False))
        if row is None:
            row = store.launch(launch_id)
        if row is None:
            raise EcpaError(
                ErrorCode.EVIDENCE_STORE,
                f"expected launch {launch_id!r} in {store.where}, found none "
                "(`ecpa ship --launch DIR --db ...` stores it)",
            )
        where = f"launch {launch_id} in {store.where}"
        shipped = store.positions(launch_id)  # its logs and certificates, with their ends
        listed = list(shipped)
        clock_note = Reason(ReasonCode.CLOCK, f"now: {now}, as given")
        if now is None:
            now = store.server_now()
            clock_note = Reason(ReasonCode.CLOCK, f"now: {now}, the database server's clock")
        expected = _expected(row.launch_doc, where)
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
        claimed = launch_trust_store(row.trust_doc, f"trust store of {where}")
        judged = launch_keys(
            claimed,
            expected,
            launch_doc=row.launch_doc,
            certificates=stored_certificates(store, launch_id, listed),
            operator=found.store,
            operator_where=found.where,
        )
        keys = judged.reasons
        judgement = Judgement.under(
            judged,
            expected,
            now,
            history_budget_s=history_budget_s,
            save_checkpoints=save_checkpoints,
            max_idle=max_idle,
        )
        basis = history.trust_basis(judgement.trust_store)
        skipped: list[Reason] = []
        names = []
        for name in listed:
            if name.startswith(JOURNAL_SOURCE) or name == ENROLLMENTS_FILE:
                continue  # a host journal, shipped for the audit; the certificates
            if not LOG_NAME.fullmatch(name):
                text = f"stored log {name!r}: not a process log name, skipped"
                skipped.append(Reason(ReasonCode.SKIPPED, text))
                continue
            names.append(name)
        pre = Prefetched(store, launch_id, names, {n: p.end for n, p in shipped.items()})
        sources = [
            StoredLog(store, launch_id, n, pre.ends.get(n, 0), basis=basis, prefetched=pre)
            for n in names
        ]
        try:
            streams, notes = judge_sources(sources, judgement.fenced(open_fence(replay_db, stack)))
        finally:  # the checkpoints walked, in one statement: kept even if a later log failed
            unsaved = pre.save_all()
        notes.extend(Reason(ReasonCode.CHECKPOINT_NOT_SAVED, text) for text in unsaved)
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
    status = verdict_launch(
        streams.values(),
        judgement,
        liveness=alive,
        descends=None,
        supervisor=supervisor,
        skipped=[*skipped, *notes, Reason(ReasonCode.FROM_STORE, REMOTE_NOTE), clock_note],
    )
    status = status.with_keys(keys)  # as status_from_launch_dir: what decides first, a pass last
    if row.exit_doc is None:
        return status
    ended = Reason(ReasonCode.LAUNCH_ENDED, ended_from_bytes(row.exit_doc))
    return replace(status, effective=False, reasons=(ended, *status.reasons))


#: Each stored ``launch.json`` as parsed, by its bytes' SHA-256 and where it is (an
#: :class:`~ecpa.runtime.model.launch.ExpectedLaunch` is frozen), weighing as many as its
#: slots: a judging process of ``ecpa serve`` judges the same launches every refresh.
_LAUNCHES: Memo[tuple[bytes, str], ExpectedLaunch] = Memo("launch files", MEMO_KEYS)  # by digest


def _expected(data: bytes, where: str) -> ExpectedLaunch:
    """:func:`~ecpa.runtime.model.launch.launch_from_bytes` of ``data``, once for the same
    bytes while remembered (an error is raised each time, never remembered)."""
    key = (digest(data), where)
    found = _LAUNCHES.get(key)
    if found is None:
        found = launch_from_bytes(data, where)
        found = _LAUNCHES.put(key, found, len(found.slots))
    return found


def stored_certificates(
    store: EvidenceStore, launch_id: str, sources: list[str] | None = None
) -> bytes | EcpaError | None:
    """The shipped ``enrollments.jsonl``: its lines, each with its newline (None: none
    shipped), or why they are too many to read. ``sources``: the launch's stored logs
    (:meth:`~ecpa.runtime.stores.store.EvidenceStore.sources`), when already listed."""
    if ENROLLMENTS_FILE not in (store.sources(launch_id) if sources is None else sources):
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
