"""Deriving ``runtime_effective`` (RUNTIME.md "Deriving runtime_effective", "Slots").

Pure: the log lines, the trust store, the expected launch, the time ``now``, and what the
manager knows of processes (liveness, descent from the supervisor) are all parameters, so
every withdrawal rule can be tested without a clock or a real ``/proc``; :func:`derive` and
:func:`derive_launch` take them one by one, the functions the statuses share
(:func:`walk`, :func:`derive_log`, :func:`verdict_launch`) as one
:class:`~ecpa.runtime.judge.context.Judgement`. The I/O edge that reads files and asks
``/proc`` is :mod:`ecpa.runtime.host.status`.

Each log is one *stream*: its complete lines are checked one by one
(:func:`ecpa.runtime.judge.records.check_record`), sequence numbers only grow within it, and each
nonce passes a replay fence last. :func:`derive` decides from one stream (a 0.1 launch's
log); :func:`derive_launch` from one stream per process (0.2), slot by slot: a slot is
covered when exactly one live process of the launch bound to it has fresh evidence showing
selections, and ``runtime_effective`` holds when every obligated slot is covered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.fence import ReplayFence
from ecpa.profile.trust import TrustStore
from ecpa.profile.verify import DEFAULT_POLICY, Policy
from ecpa.runtime.judge.context import Judgement
from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.judge.records import check_line, check_record
from ecpa.runtime.judge.stream import Stream
from ecpa.runtime.judge.verdict import Judge, RuntimeStatus, SlotStatus
from ecpa.runtime.model.counters import COUNTERS_SCHEMA
from ecpa.runtime.model.enroll import kid_of_log, parse_kid
from ecpa.runtime.model.evidence import LogLine, issued_at_of
from ecpa.runtime.model.launch import ExpectedLaunch
from ecpa.runtime.model.process import Liveness, ProcessIdentity

__all__ = [
    "COUNTERS_SCHEMA",
    "FUTURE_GRACE_S",
    "ExpectedLaunch",
    "Paused",
    "Reason",
    "ReasonCode",
    "RuntimeStatus",
    "SlotStatus",
    "Stream",
    "derive",
    "derive_launch",
    "derive_log",
    "just_ahead",
    "verdict_launch",
    "walk",
]


#: A record dated at most this many seconds after ``now`` is a race (written while the
#: status ran, in the next second), not a clock ahead.
FUTURE_GRACE_S = 2


class Paused(Exception):
    """A walk that stopped before a record dated in the next second or two: the next
    derivation judges it (:func:`walk`'s ``pause_on_recent``)."""


def just_ahead(evidence: object, exc: EcpaError, now: int) -> bool:
    """Whether ``exc`` refused a record only for being dated at most :data:`FUTURE_GRACE_S`
    after ``now``: written after ``now`` was taken, by a synced clock."""
    if exc.code is not ErrorCode.NOT_YET_VALID:
        return False
    issued = issued_at_of(getattr(evidence, "payload", b""))
    return issued is not None and issued - now <= FUTURE_GRACE_S


def walk(
    lines: Iterable[LogLine],
    judgement: Judgement,
    *,
    name: str | None = None,
    file_kid: str | None = None,
    stream: Stream | None = None,
    pause_on_recent: bool = False,
) -> Stream:
    """Check every line of one log (see the module's text) with the ``judgement``'s trust
    store, expected launch, ``now`` and policy, each accepted nonce through its fence;
    refused records, torn lines and gaps are counted in the returned :class:`Stream`
    (``stream`` when given: a walk that resumes where a checkpoint stopped), never raised.
    ``pause_on_recent``: a record dated just after ``now`` (:func:`just_ahead`) is not
    refused: the walk stops before it (:class:`Paused`), for a later derivation to judge it.

    Raises:
        EcpaError: ``ECPA_REPLAY_STORE`` when the fence's store fails: no record can then be
            judged, so the derivation stops.
        Paused: with ``pause_on_recent``, before such a record (``stream`` holds the rest).
    """
    stream = stream if stream is not None else Stream(name=name)
    fence, now = judgement.fence, judgement.now
    for line in lines:
        if line.torn:
            stream.torn += 1
            continue
        if line.evidence is None and line.error is None:
            continue  # a mark in a run of blank lines (read_log's ``marks``)
        try:
            if line.evidence is None:
                assert line.error is not None
                raise line.error
            if line.raw is None:
                rec = check_record(line.evidence, judgement, file_kid=file_kid)
            else:  # (its newest line is checked again by its bytes: found remembered)
                rec = check_line(line.raw, judgement, file_kid=file_kid, parsed=line.evidence)
            stream.accept(rec, fence)
        except EcpaError as exc:
            if exc.code is ErrorCode.REPLAY_STORE:
                raise
            if pause_on_recent and just_ahead(line.evidence, exc, now):
                raise Paused(line.number) from None
            stream.refuse(line.number, exc)
    return stream


def derive(
    lines: Iterable[LogLine],
    trust_store: TrustStore,
    expected: ExpectedLaunch,
    *,
    now: int,
    liveness: Callable[[ProcessIdentity], Liveness],
    replay: ReplayFence | None = None,
    policy: Policy = DEFAULT_POLICY,
    max_idle: int | None = None,
) -> RuntimeStatus:
    """Derive ``runtime_effective`` at ``now`` from one evidence log (RUNTIME.md): the
    newest accepted statement decides, for the launch's first slot.

    ``liveness`` answers whether a process is alive now (``check_alive`` bound to a
    ``/proc``); ``replay`` defaults to a fresh in-memory fence. A durable fence remembers
    nonces across calls; re-reading the very same records is not a replay, another record
    with an accepted nonce is. ``max_idle`` (seconds) also requires the newest dispatch to
    be that recent.

    Refused records, torn lines and gaps are reported, never raised, and an ``EcpaError``
    from ``liveness`` makes the status false with its detail.

    Raises:
        EcpaError: ``ECPA_REPLAY_STORE`` when the fence's store fails.
    """
    judgement = Judgement(trust_store, expected, now, policy=policy, max_idle=max_idle)
    return derive_log(lines, judgement.fenced(replay), liveness=liveness)


def derive_log(
    lines: Iterable[LogLine],
    judgement: Judgement,
    *,
    liveness: Callable[[ProcessIdentity], Liveness],
) -> RuntimeStatus:
    """:func:`derive` under a ``judgement`` already made (its fence, ``now`` and
    ``max_idle`` included).

    Raises:
        EcpaError: ``ECPA_REPLAY_STORE`` when the fence's store fails.
    """
    stream = walk(lines, judgement)
    judge = Judge(judgement.expected, judgement.now, liveness, max_idle=judgement.max_idle)
    return judge.single(stream)


def derive_launch(
    streams: Mapping[str, Iterable[LogLine]],
    trust_store: TrustStore,
    expected: ExpectedLaunch,
    *,
    now: int,
    liveness: Callable[[ProcessIdentity], Liveness],
    descends: Callable[[ProcessIdentity], bool] | None = None,
    supervisor: Liveness | None = None,
    replay: ReplayFence | None = None,
    policy: Policy = DEFAULT_POLICY,
    max_idle: int | None = None,
    skipped: Iterable[Reason] = (),
) -> RuntimeStatus:
    """Derive ``runtime_effective`` at ``now`` for a 0.2 launch from one log per process,
    keyed by file name (``<kid>.jsonl``); ``runtime_effective`` holds only when every slot
    of ``expected.slots`` is covered (RUNTIME.md "Slots").

    ``descends`` says whether a process still descends from the launch's supervisor;
    ``supervisor`` is the supervisor's own liveness (None: not checked); ``skipped`` are
    reasons about files that could not be read as logs (notes, given as they are).

    Raises:
        EcpaError: ``ECPA_REPLAY_STORE`` when the fence's store fails.
    """
    judgement = Judgement(trust_store, expected, now, policy=policy, max_idle=max_idle)
    judgement = judgement.fenced(replay)
    walked = []
    for name, lines in sorted(streams.items()):
        kid = kid_of_log(name)
        named = parse_kid(kid)
        walked.append(walk(lines, judgement, name=name, file_kid=kid))
        walked[-1].slot = named[0] if named else None
    return verdict_launch(
        walked,
        judgement,
        liveness=liveness,
        descends=descends,
        supervisor=supervisor,
        skipped=skipped,
    )


def verdict_launch(
    streams: Iterable[Stream],
    judgement: Judgement,
    *,
    liveness: Callable[[ProcessIdentity], Liveness],
    descends: Callable[[ProcessIdentity], bool] | None = None,
    supervisor: Liveness | None = None,
    skipped: Iterable[Reason] = (),
) -> RuntimeStatus:
    """The verdict of :func:`derive_launch` over streams already walked (decided from each
    log's end, with the history of its checkpoint: :mod:`ecpa.runtime.host.logs`), by the
    ``judgement``'s expected launch, ``now`` and ``max_idle``."""
    expected, now = judgement.expected, judgement.now
    judge = Judge(expected, now, liveness, descends=descends, max_idle=judgement.max_idle)
    return judge.launch(streams, supervisor=supervisor, skipped=list(skipped))
