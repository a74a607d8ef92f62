"""The I/O edge of the derivation (RUNTIME.md "Deriving runtime_effective"): read a launch's
files, ask ``/proc``, and call the pure :mod:`ecpa.runtime.judge.derive` with one
:class:`~ecpa.runtime.judge.context.Judgement` per status (the trust store, the launch,
``now``, the fence and the limits it judges with); where ``/proc`` is, this host's name and
where a durable fence is kept stay here, at the edge. A launch directory's own files
(``launch.json``, ``exit.json``, ``trust.json``) are read once and in one place
(:func:`read_launch_dir`), then parsed; its process logs are
:mod:`ecpa.runtime.host.logs`'s.

Everything is read as the writer writes it: no symlink followed, nothing but regular files
(``ecpa._files.open_regular``), and a launch directory or evidence directory that another
user owns or that group or others may write is refused, naming the path and its mode (like
ssh's StrictModes): whoever can write there can write the trust store too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from ecpa._files import check_private_dir, open_regular, read_bounded
from ecpa._text import iso_utc
from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.profile.trust import MAX_TRUST_STORE_BYTES, TrustStore
from ecpa.runtime.host.logs import judge_logs, open_process_logs
from ecpa.runtime.judge import history
from ecpa.runtime.judge.certified import LaunchKeys, launch_keys, launch_trust_store
from ecpa.runtime.judge.context import HISTORY_BUDGET_S, Judgement
from ecpa.runtime.judge.derive import derive_log, verdict_launch
from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.judge.verdict import RuntimeStatus
from ecpa.runtime.model.enroll import log_name
from ecpa.runtime.model.enrollment import ENROLLMENTS_FILE, MAX_ENROLLMENTS_BYTES
from ecpa.runtime.model.evidence import read_log
from ecpa.runtime.model.launch import (
    MAX_LAUNCH_FILE_BYTES,
    ExpectedLaunch,
    ended_from_bytes,
    launch_from_bytes,
    time_member,
)
from ecpa.runtime.model.process import PROC, Liveness, ProcessIdentity, check_alive
from ecpa.runtime.stores.operator import OperatorTrust, operator_trust
from ecpa.runtime.stores.replay import ReplayDb, open_fence

__all__ = [
    "LaunchDir",
    "interruptible",
    "read_launch_dir",
    "status_from_files",
    "status_from_launch_dir",
]


def _interrupted(signum: int, frame: object) -> None:
    del signum, frame
    history.STOP.set()


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM and SIGINT stop the history walks at a line boundary while the block runs
    (the main thread only; RUNTIME.md "Bounded work": what was walked is saved); the
    previous handlers come back after it. ``history.STOP`` says whether it happened."""
    history.STOP.clear()
    previous: dict[signal.Signals, object] = {}
    if threading.current_thread() is threading.main_thread():
        for name in (signal.SIGTERM, signal.SIGINT):
            previous[name] = signal.signal(name, _interrupted)
    try:
        yield
    finally:
        for name, handler in previous.items():
            signal.signal(name, handler)  # type: ignore[arg-type]


@dataclass(frozen=True)
class LaunchDir:
    """What a launch directory says, as read at one moment."""

    directory: Path
    expected: ExpectedLaunch
    #: How the launch ended (``exit.json``), or None while it runs.
    ended: str | None
    #: ``trust.json``'s bytes, or why they could not be read (raised by :meth:`trust_store`,
    #: where the caller decides: an ended launch reports it as a reason).
    trust: bytes | EcpaError
    #: ``exit.json``'s ``ended_at`` (None: not ended, or no such integer there).
    ended_at: int | None = None
    #: ``launch.json``'s bytes, as read.
    launch_doc: bytes = b""
    #: ``enrollments.jsonl``'s bytes (None: no such file), or why they could not be read.
    certificates: bytes | EcpaError | None = None

    def trust_store(self) -> TrustStore:
        """``trust.json`` as it is, backed by nothing: what the launch directory claims.

        Raises:
            EcpaError: ``ATTESTATION_TRUST_STORE_CONFIG`` for an unreadable or invalid store.
        """
        if isinstance(self.trust, EcpaError):
            raise self.trust
        return launch_trust_store(self.trust, str(self.directory / "trust.json"))

    def trusted(self, operator: OperatorTrust) -> LaunchKeys:
        """The keys of ``trust.json`` that the manager's certificates, checked against the
        ``operator``'s trust store, back (:func:`~ecpa.runtime.judge.certified.launch_keys`),
        and the reasons that say so or why not.

        Raises:
            EcpaError: ``ATTESTATION_TRUST_STORE_CONFIG`` for an unreadable or invalid
                ``trust.json``.
        """
        return launch_keys(
            self.trust_store(),
            self.expected,
            launch_doc=self.launch_doc,
            certificates=self.certificates,
            operator=operator.store,
            operator_where=operator.where,
        )


def read_launch_dir(directory: Path) -> LaunchDir:
    """The launch directory ``directory`` (see the module's text).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a launch or evidence directory of another user
            or writable by group or others, or a ``launch.json`` that is unreadable or not
            one. An unreadable ``exit.json`` still means the launch ended (the reason says
            what is wrong with it); an unreadable ``trust.json`` is kept for
            :meth:`LaunchDir.trust_store`.
    """
    check_private_dir(directory, ErrorCode.INVALID_INPUT, what="launch directory")
    launch_file, exit_file = directory / "launch.json", directory / "exit.json"
    launch = read_bounded(launch_file, MAX_LAUNCH_FILE_BYTES, ErrorCode.INVALID_INPUT)
    ended_bytes: bytes | str | None = None
    if os.path.lexists(exit_file):  # a dangling symlink is there too: read, and refused
        try:
            ended_bytes = read_bounded(exit_file, MAX_LAUNCH_FILE_BYTES, ErrorCode.INVALID_INPUT)
        except EcpaError as exc:
            ended_bytes = f"launch ended ({exit_file.name} unreadable: {exc.code.value})"
    evidence = directory / "evidence"
    if os.path.lexists(evidence):
        check_private_dir(evidence, ErrorCode.INVALID_INPUT, what="evidence directory")
    trust: bytes | EcpaError
    try:
        trust = read_bounded(
            directory / "trust.json", MAX_TRUST_STORE_BYTES, ErrorCode.TRUST_STORE_CONFIG
        )
    except EcpaError as exc:
        trust = exc
    certificates: bytes | EcpaError | None = None
    if os.path.lexists(directory / ENROLLMENTS_FILE):
        try:
            certificates = read_bounded(
                directory / ENROLLMENTS_FILE, MAX_ENROLLMENTS_BYTES, ErrorCode.INVALID_INPUT
            )
        except EcpaError as exc:
            certificates = exc
    expected = launch_from_bytes(launch, f"launch {launch_file}")
    name = os.path.basename(os.path.realpath(directory))  # ecpa run names it after its launch
    if expected.version != "0.1" and expected.launch_id != name:
        found = f"found one of {expected.launch_id!r} (another launch's files)"[:200]
        raise invalid_input(f"expected in {directory} the launch.json of {name!r}, {found}")
    ended_at = None
    if isinstance(ended_bytes, bytes):
        ended: str | None = ended_from_bytes(ended_bytes, exit_file.name)
        ended_at = time_member(ended_bytes, "ended_at", exit_file.name)
    else:
        ended = ended_bytes
    return LaunchDir(directory, expected, ended, trust, ended_at, launch, certificates)


def status_from_files(
    evidence_log: Path,
    trust: Path,
    expected: ExpectedLaunch,
    *,
    now: int,
    proc_root: Path = PROC,
    host: str | None = None,
    replay_db: ReplayDb = None,
    max_idle: int | None = None,
) -> RuntimeStatus:
    """:func:`~ecpa.runtime.judge.derive.derive` over the log at ``evidence_log`` with the trust
    store at ``trust``, liveness from ``proc_root`` (``host`` defaults to this host's name).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a log that is not a readable regular file;
            ``ATTESTATION_TRUST_STORE_CONFIG`` for a bad trust store; ``ECPA_REPLAY_STORE``
            for a replay database that cannot be used.
    """
    judgement = Judgement(TrustStore.load(trust), expected, now, max_idle=max_idle)
    return _derive_file(
        evidence_log, judgement, proc_root=proc_root, host=host, replay_db=replay_db
    )


def _derive_file(
    evidence_log: Path,
    judgement: Judgement,
    *,
    proc_root: Path,
    host: str | None,
    replay_db: ReplayDb,
) -> RuntimeStatus:
    """:func:`~ecpa.runtime.judge.derive.derive_log` over the log at ``evidence_log``, its
    fence the one ``replay_db`` names (opened after the log), liveness from ``proc_root``."""
    with ExitStack() as stack:
        stream = stack.enter_context(open_regular(evidence_log, ErrorCode.INVALID_INPUT))
        lines = read_log(stream)
        return derive_log(
            lines,
            judgement.fenced(open_fence(replay_db, stack)),
            liveness=partial(check_alive, proc_root=proc_root, host=host),
        )


def status_from_launch_dir(
    directory: Path,
    *,
    now: int,
    proc_root: Path = PROC,
    host: str | None = None,
    replay_db: ReplayDb = None,
    max_idle: int | None = None,
    history_budget_s: float | None = HISTORY_BUDGET_S,
    max_abstain: int | None = None,
    save_checkpoints: bool = True,
    operator: OperatorTrust | None = None,
) -> RuntimeStatus:
    """The status of a launch directory written by ``ecpa run``; ``max_abstain`` (seconds)
    replaces the launch's ``max_abstain_s``. Its keys are trusted only as far as the
    manager's certificates, checked against the ``operator``'s trust store (default:
    :func:`~ecpa.runtime.stores.operator.operator_trust`), back them (docs/keys.md): a key
    nothing backs, or no operator store, makes the status false and says why. With
    ``save_checkpoints`` False (a ``now`` that is not the clock) the history checkpoints are
    read but not replaced: history judged as of a past time (records then not yet valid)
    must not stand in for the present.

    0.2 (``launch.json`` with slots and the supervisor): ``trust.json`` and one log per
    process in ``evidence/<launch_id>/``, each slot decided by :func:`derive_launch`, with
    the supervisor's liveness and each process's descent from it. 0.1: the one log
    ``evidence/<launch_id>.jsonl`` by the 0.1 rules, and reasons that say which 0.2 checks
    could not be made. Once the launch has ended (``exit.json``) the status is false,
    whatever the evidence says (even none), and the first reason says how it ended.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a launch or evidence directory of another user
            or writable by group or others, a ``launch.json`` that is not one, or an
            unreadable log; ``ATTESTATION_TRUST_STORE_CONFIG`` for an operator's trust
            store named but unusable; as :func:`status_from_files`.
    """
    found = operator_trust() if operator is None else operator
    files = read_launch_dir(directory)
    expected, ended = files.expected, files.ended
    asked = now
    if files.ended_at is not None and files.ended_at < now:
        # Its evidence judged as of its end: records valid when written stay valid (the key
        # windows closed when it ended); what happened during it is ecpa audit's question.
        now, save_checkpoints = files.ended_at, False
    if max_abstain is not None:
        expected = replace(expected, max_abstain_s=max_abstain, judges_abstention=True)
    keys: tuple[Reason, ...] = ()
    try:
        judged = files.trusted(found)
        keys = judged.reasons
        judgement = Judgement.under(
            judged,
            expected,
            now,
            history_budget_s=history_budget_s,
            save_checkpoints=save_checkpoints,
            max_idle=max_idle,
        )
        if expected.version == "0.1":
            log = files.directory / "evidence" / log_name(expected.launch_id)
            status = _derive_file(
                log, judgement, proc_root=proc_root, host=host, replay_db=replay_db
            )
            status = replace(status, reasons=(*status.reasons, _V01_NOTE))
        else:
            status = _status_02(
                files, judgement, proc_root=proc_root, host=host, replay_db=replay_db
            )
    except EcpaError as exc:
        if ended is None or exc.code is ErrorCode.REPLAY_STORE:
            raise
        unreadable = Reason(ReasonCode.EVIDENCE_UNREADABLE, f"evidence unreadable: {exc.detail}")
        first = Reason(ReasonCode.LAUNCH_ENDED, ended)
        return RuntimeStatus.unjudged((first, unreadable, *keys), now)
    status = status.with_keys(keys)
    if ended is None:
        return status
    text = ended
    if files.ended_at is not None and files.ended_at <= asked:
        text += (
            f" ({iso_utc(files.ended_at)}, {asked - files.ended_at} s ago); its evidence below "
            f"is judged as of that end; when it was effective: ecpa audit --launch {directory}"
        )
    first = Reason(ReasonCode.LAUNCH_ENDED, text)
    return replace(status, effective=False, reasons=(first, *status.reasons), now=asked)


_V01_NOTE = Reason(
    ReasonCode.V01_LAUNCH,
    "0.1 launch: one shared launch key, no supervisor identity, no enrollment; not checked: "
    "that the key was enrolled for the process a record names, that the process descends "
    "from the supervisor, that the supervisor is alive",
)


def _status_02(
    files: LaunchDir,
    judgement: Judgement,
    *,
    proc_root: Path,
    host: str | None,
    replay_db: ReplayDb,
) -> RuntimeStatus:
    """A 0.2 launch directory's status under ``judgement``: its process logs judged
    (:func:`~ecpa.runtime.host.logs.judge_logs`, the fence ``replay_db`` names opened after
    them), liveness and descent from the supervisor asked of ``proc_root``."""
    expected = judgement.expected
    boss = expected.supervisor
    assert boss is not None
    alive = partial(check_alive, proc_root=proc_root, host=host)
    membership = expected.membership
    assert membership is not None  # a 0.2 launch has a supervisor

    def descends(identity: ProcessIdentity) -> bool:
        return membership.includes(identity.pid, proc_root=proc_root)

    supervisor = alive(boss)
    if files.ended is not None:  # its end was recorded: no need for it to be alive
        supervisor = Liveness(True, "recorded the launch's end")
    logs = open_process_logs(files.directory / "evidence" / expected.launch_id)
    try:
        with ExitStack() as stack:
            streams, notes = judge_logs(logs, judgement.fenced(open_fence(replay_db, stack)))
    finally:
        logs.close()
    return verdict_launch(
        streams.values(),
        judgement,
        liveness=alive,
        descends=descends if supervisor.alive else None,
        supervisor=supervisor,
        skipped=[*logs.skipped, *notes],
    )
