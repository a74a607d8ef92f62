"""The I/O edge of the derivation (RUNTIME.md "Deriving runtime_effective"): read a launch's
files, ask ``/proc``, and call the pure :mod:`ecpa.runtime.judge.derive`.

Everything is read as the writer writes it: no symlink followed, nothing but regular files
(``ecpa._files.open_regular``), and a launch directory or evidence directory that another
user owns or that group or others may write is refused, naming the path and its mode (like
ssh's StrictModes): whoever can write there can write the trust store too.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from ecpa._files import check_private_dir, open_regular
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.fence import ReplayFence, fence_or_memory
from ecpa.profile.trust import TrustStore
from ecpa.profile.verify import DEFAULT_POLICY
from ecpa.runtime.host.logs import judge_logs, open_process_logs
from ecpa.runtime.judge.derive import derive, verdict_launch
from ecpa.runtime.judge.history import HISTORY_BUDGET_S
from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.judge.verdict import RuntimeStatus
from ecpa.runtime.model.evidence import read_log
from ecpa.runtime.model.launch import ExpectedLaunch, launch_ended, launch_from_file
from ecpa.runtime.model.process import PROC, Liveness, ProcessIdentity, check_alive
from ecpa.runtime.stores.replay import ReplayDb, open_fence

__all__ = ["status_from_files", "status_from_launch_dir"]


def _bad(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.INVALID_INPUT, detail)


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
    store = TrustStore.load(trust)

    def alive(identity: ProcessIdentity) -> Liveness:
        return check_alive(identity, proc_root=proc_root, host=host)

    with ExitStack() as stack:
        stream = stack.enter_context(open_regular(evidence_log, ErrorCode.INVALID_INPUT))
        fence = open_fence(replay_db, stack)
        return derive(
            read_log(stream),
            store,
            expected,
            now=now,
            liveness=alive,
            replay=fence,
            max_idle=max_idle,
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
) -> RuntimeStatus:
    """The status of a launch directory written by ``ecpa run``; ``max_abstain`` (seconds)
    replaces the launch's ``max_abstain_s``. With ``save_checkpoints`` False (a ``now`` that
    is not the clock) the history checkpoints are read but not replaced: history judged as of
    a past time (records then not yet valid) must not stand in for the present.

    0.2 (``launch.json`` with slots and the supervisor): ``trust.json`` and one log per
    process in ``evidence/<launch_id>/``, each slot decided by :func:`derive_launch`, with
    the supervisor's liveness and each process's descent from it. 0.1: the one log
    ``evidence/<launch_id>.jsonl`` by the 0.1 rules, and reasons that say which 0.2 checks
    could not be made. Once the launch has ended (``exit.json``) the status is false,
    whatever the evidence says (even none), and the first reason says how it ended.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a launch or evidence directory of another user
            or writable by group or others, a ``launch.json`` that is not one, or an
            unreadable log; as :func:`status_from_files`.
    """
    check_private_dir(directory, ErrorCode.INVALID_INPUT, what="launch directory")
    expected = launch_from_file(directory / "launch.json")
    if max_abstain is not None:
        expected = replace(expected, max_abstain_s=max_abstain, judges_abstention=True)
    ended = launch_ended(directory / "exit.json")
    evidence = directory / "evidence"
    if os.path.lexists(evidence):
        check_private_dir(evidence, ErrorCode.INVALID_INPUT, what="evidence directory")
    try:
        if expected.version == "0.1":
            status = _status_01(directory, expected, now, proc_root, host, replay_db, max_idle)
        else:
            status = _status_02(
                directory,
                expected,
                now,
                proc_root,
                host,
                replay_db,
                max_idle,
                ended,
                history_budget_s,
                save_checkpoints,
            )
    except EcpaError as exc:
        if ended is None or exc.code is ErrorCode.REPLAY_STORE:
            raise
        unreadable = Reason(ReasonCode.EVIDENCE_UNREADABLE, f"evidence unreadable: {exc.detail}")
        return RuntimeStatus(
            False,
            (Reason(ReasonCode.LAUNCH_ENDED, ended), unreadable),
            None,
            None,
            0,
            {},
            0,
            None,
            (),
            now,
        )
    if ended is None:
        return status
    first = Reason(ReasonCode.LAUNCH_ENDED, ended)
    return replace(status, effective=False, reasons=(first, *status.reasons))


_V01_NOTE = Reason(
    ReasonCode.V01_LAUNCH,
    "0.1 launch: one shared launch key, no supervisor identity, no enrollment; not checked: "
    "that the key was enrolled for the process a record names, that the process descends "
    "from the supervisor, that the supervisor is alive",
)


def _status_01(
    directory: Path,
    expected: ExpectedLaunch,
    now: int,
    proc_root: Path,
    host: str | None,
    replay_db: ReplayDb,
    max_idle: int | None,
) -> RuntimeStatus:
    log = directory / "evidence" / f"{expected.launch_id}.jsonl"
    status = status_from_files(
        log,
        directory / "trust.json",
        expected,
        now=now,
        proc_root=proc_root,
        host=host,
        replay_db=replay_db,
        max_idle=max_idle,
    )
    return replace(status, reasons=(*status.reasons, _V01_NOTE))


def _status_02(
    directory: Path,
    expected: ExpectedLaunch,
    now: int,
    proc_root: Path,
    host: str | None,
    replay_db: ReplayDb,
    max_idle: int | None,
    ended: str | None,
    history_budget_s: float | None,
    save_checkpoints: bool = True,
) -> RuntimeStatus:
    store = TrustStore.load(directory / "trust.json")
    boss = expected.supervisor
    assert boss is not None

    def alive(identity: ProcessIdentity) -> Liveness:
        return check_alive(identity, proc_root=proc_root, host=host)

    membership = expected.membership
    assert membership is not None  # a 0.2 launch has a supervisor

    def descends(identity: ProcessIdentity) -> bool:
        return membership.includes(identity.pid, proc_root=proc_root)

    supervisor = alive(boss)
    if ended is not None:  # its end was recorded: no need for it to be alive
        supervisor = Liveness(True, "recorded the launch's end")
    logs = open_process_logs(directory / "evidence" / expected.launch_id)
    try:
        with ExitStack() as stack:
            durable = open_fence(replay_db, stack)  # (a fence has __len__: no `or`)
            fence: ReplayFence = fence_or_memory(durable)
            streams, notes = judge_logs(
                logs,
                store,
                expected,
                now=now,
                fence=fence,
                policy=DEFAULT_POLICY,
                budget_s=history_budget_s,
                save=save_checkpoints,
            )
    finally:
        logs.close()
    return verdict_launch(
        streams.values(),
        expected,
        now=now,
        liveness=alive,
        descends=descends if supervisor.alive else None,
        supervisor=supervisor,
        max_idle=max_idle,
        skipped=[*logs.skipped, *notes],
    )
