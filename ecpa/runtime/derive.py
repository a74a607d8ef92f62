"""Deriving ``runtime_effective`` (RUNTIME.md "Deriving runtime_effective").

:func:`derive` is pure: the log lines, the trust store, the expected launch, the time ``now``
and the liveness of a process are all parameters, so every withdrawal rule can be tested
without a clock or a real ``/proc``. :func:`status_from_files` and
:func:`status_from_launch_dir` are the thin I/O edge that reads files and asks ``/proc``.

Each complete log line is verified by PROFILE.md (without its exact-nonce binding, since
every statement answers its own ``<challenge>:<seq>``), then bound to the launch, its host
evidence (the raw counters record) checked and parsed strictly, and its nonce passed through
a replay fence last. The newest accepted statement then decides: selections > 0, fresh
within the heartbeat window, and its process alive now. Anything unknown is ``false``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile._json import parse_object
from ecpa.profile.jcs import canonicalize
from ecpa.profile.statement import NonEmptyStr, SafeInt, Statement, describe_validation
from ecpa.profile.trust import TrustStore
from ecpa.profile.verify import DEFAULT_POLICY, Policy, verify
from ecpa.runtime.evidence import LogLine, evidence_digest, read_log
from ecpa.runtime.launch import ExpectedLaunch, launch_ended, launch_from_file
from ecpa.runtime.process import Liveness, ProcessIdentity, check_alive
from ecpa.runtime.replay import MemoryReplayFence, ReplayFence, SqliteReplayFence, replayed

__all__ = [
    "COUNTERS_SCHEMA",
    "ExpectedLaunch",
    "RuntimeStatus",
    "derive",
    "status_from_files",
    "status_from_launch_dir",
]

COUNTERS_SCHEMA = "ecpa-dispatch-counters/0.1"
#: Refused records named one by one in ``reasons``; the rest are only counted.
MAX_LISTED = 20
_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True)


@dataclass(frozen=True)
class RuntimeStatus:
    """The derivation's answer, with its reasons (never empty, for true and for false)."""

    effective: bool
    reasons: tuple[str, ...]
    newest: Statement | None
    counters: dict[str, Any] | None
    accepted: int
    refused: dict[str, int]
    torn: int
    last_seq: int | None
    gaps: tuple[tuple[int, int], ...]


class _CountersProcess(BaseModel):
    model_config = _STRICT
    host: NonEmptyStr
    pid: SafeInt
    start_ticks: SafeInt
    boot_id: NonEmptyStr


class _Counters(BaseModel):
    """The raw counters record (RUNTIME.md "Evidence record"), exactly these members."""

    model_config = _STRICT
    schema_: str  # renamed below: "schema" shadows a pydantic attribute
    plugin_id: NonEmptyStr
    seq: SafeInt
    process: _CountersProcess
    calls: SafeInt
    selections: SafeInt
    abstentions: SafeInt
    failures: SafeInt
    dropped: SafeInt
    window_start: SafeInt
    window_end: SafeInt


def _mismatch(field: str, expected: object, found: object) -> EcpaError:
    return EcpaError(
        ErrorCode.BINDING_MISMATCH,
        f"record for another launch: {field} (expected {expected!r}, found {found!r})",
    )


def _parse_counters(data: bytes) -> tuple[_Counters, dict[str, Any]]:
    """The counters record, strictly: strict JSON, its own JCS form, known members only."""
    obj = parse_object(data, what="host evidence")
    if canonicalize(obj) != data:
        raise EcpaError(
            ErrorCode.INVALID_RECORD,
            "expected host evidence in its RFC 8785 canonical form, found other bytes",
        )
    if obj.get("schema") != COUNTERS_SCHEMA:
        raise EcpaError(
            ErrorCode.INVALID_RECORD,
            f"expected host evidence schema {COUNTERS_SCHEMA!r}, found {obj.get('schema')!r}",
        )
    fields = {("schema_" if k == "schema" else k): v for k, v in obj.items()}
    try:
        return _Counters(**fields), obj
    except ValidationError as exc:
        found = describe_validation(exc, "counters")
        raise EcpaError(ErrorCode.INVALID_RECORD, f"counters record: {found}") from None


def _check_launch(st: Statement, expected: ExpectedLaunch) -> None:
    for field, want, found in (
        ("plan_id", expected.plan_id, st.plan_id),
        ("launch_id", expected.launch_id, st.launch_id),
        ("plugin_id", expected.plugin_id, st.plugin_id),
        ("artifact_digest", expected.artifact_digest, st.artifact_digest),
        ("process.epoch", expected.process_epoch, st.process.epoch),
    ):
        if want != found:
            raise _mismatch(field, want, found)
    prefix = expected.challenge + ":"
    if not st.challenge_nonce.startswith(prefix):
        raise _mismatch("challenge_nonce", prefix + "<seq>", st.challenge_nonce)


@dataclass(frozen=True)
class _Accepted:
    statement: Statement
    counters: dict[str, Any]
    seq: int
    identity: ProcessIdentity


def _check_record(
    line: LogLine,
    trust_store: TrustStore,
    expected: ExpectedLaunch,
    now: int,
    policy: Policy,
) -> _Accepted:
    """Every check but sequence order and replay; raises ``EcpaError`` on the first failure."""
    if line.evidence is None:
        assert line.error is not None
        raise line.error
    ev = line.evidence
    st = verify(ev.payload, ev.detached_jws, trust_store, now=now, policy=policy).statement
    _check_launch(st, expected)  # RUNTIME condition 1: this plan, launch, plugin, epoch
    if ev.host_evidence is None:  # condition 2: without it, its selections are unknown
        raise EcpaError(
            ErrorCode.INVALID_RECORD,
            "expected host_evidence_b64 (the counters record), found none",
        )
    digest = evidence_digest(ev.host_evidence)
    if digest != st.evidence_digest:
        raise EcpaError(
            ErrorCode.EVIDENCE_DIGEST_MISMATCH,
            f"expected host evidence hashing to {st.evidence_digest}, found {digest}",
        )
    counters, raw = _parse_counters(ev.host_evidence)
    if counters.plugin_id != expected.plugin_id:
        raise _mismatch("counters.plugin_id", expected.plugin_id, counters.plugin_id)
    nonce = f"{expected.challenge}:{counters.seq}"
    if st.challenge_nonce != nonce:
        raise _mismatch("challenge_nonce", nonce, st.challenge_nonce)
    try:
        identity = ProcessIdentity.parse(st.process.host, st.process.start_identity)
    except EcpaError as exc:
        raise EcpaError(ErrorCode.INVALID_RECORD, f"statement process: {exc.detail}") from None
    if identity.start_identity != st.process.start_identity:  # leading zeros
        raise EcpaError(
            ErrorCode.INVALID_RECORD,
            f"expected start_identity {identity.start_identity!r}, "
            f"found {st.process.start_identity!r}",
        )
    cp = counters.process
    named = ProcessIdentity(cp.host, cp.pid, cp.start_ticks, cp.boot_id)
    if named != identity:
        raise _mismatch("counters.process", identity.start_identity, named.start_identity)
    return _Accepted(st, raw, counters.seq, identity)


class _Tally:
    """What the walk over the log has seen so far."""

    def __init__(self) -> None:
        self.accepted = 0
        self.refused: dict[str, int] = {}
        self.listed: list[str] = []
        self.unlisted = 0
        self.expired = 0
        self.torn = 0
        self.seqs: set[int] = set()
        self.gaps: list[tuple[int, int]] = []
        self.newest: _Accepted | None = None

    def refuse(self, number: int, exc: EcpaError) -> None:
        code = exc.code.value
        self.refused[code] = self.refused.get(code, 0) + 1
        if exc.code is ErrorCode.EXPIRED:  # old history in a long log: summarized, not listed
            self.expired += 1
        elif len(self.listed) < MAX_LISTED:
            self.listed.append(f"line {number}: {code}: {exc.detail}")
        else:
            self.unlisted += 1

    def accept(self, rec: _Accepted, fence: ReplayFence) -> None:
        """Condition 5: sequence numbers only grow; each nonce is accepted once, last."""
        last = self.newest.seq if self.newest else None
        if last is not None and rec.seq <= last and rec.seq not in self.seqs:
            raise EcpaError(
                ErrorCode.REPLAYED_NONCE,
                f"expected seq > {last} (sequence numbers only grow), found {rec.seq}",
            )
        fence.check_and_record(rec.statement.challenge_nonce, expires_at=rec.statement.expires_at)
        if rec.seq in self.seqs:  # a fence that forgot: still a replay
            raise replayed(rec.statement.challenge_nonce)
        if last is not None and rec.seq > last + 1:
            self.gaps.append((last + 1, rec.seq - 1))
        self.seqs.add(rec.seq)
        self.accepted += 1
        self.newest = rec


def derive(
    lines: Iterable[LogLine],
    trust_store: TrustStore,
    expected: ExpectedLaunch,
    *,
    now: int,
    liveness: Callable[[ProcessIdentity], Liveness],
    replay: ReplayFence | None = None,
    policy: Policy = DEFAULT_POLICY,
) -> RuntimeStatus:
    """Derive ``runtime_effective`` at ``now`` from an evidence log's lines (RUNTIME.md).

    ``liveness`` answers whether a process is alive now (``check_alive`` bound to a
    ``/proc``); ``replay`` defaults to a fresh in-memory fence, so each nonce counts once in
    this log. A durable fence remembers nonces across calls: deriving twice from the same
    log with one then refuses the second time what the first accepted.

    Refused records, torn lines and gaps are reported, never raised: a bad line never hides
    the good ones, and an ``EcpaError`` from ``liveness`` makes the status false with its
    detail. Raises nothing of its own (a fence or ``liveness`` may raise foreign errors).
    """
    fence: ReplayFence = MemoryReplayFence() if replay is None else replay
    tally = _Tally()
    for line in lines:
        if line.torn:
            tally.torn += 1
            continue
        try:
            tally.accept(_check_record(line, trust_store, expected, now, policy), fence)
        except EcpaError as exc:
            tally.refuse(line.number, exc)
    return _conclude(tally, expected, now, liveness)


def _conclude(
    tally: _Tally,
    expected: ExpectedLaunch,
    now: int,
    liveness: Callable[[ProcessIdentity], Liveness],
) -> RuntimeStatus:
    failed: list[str] = []
    passed: list[str] = []
    newest = tally.newest
    if newest is None:
        failed.append("no valid evidence: no record of this launch verified")
    else:
        st, counters = newest.statement, newest.counters
        passed.append(f"{tally.accepted} record(s) accepted, newest seq {newest.seq}")
        if counters["selections"] > 0:  # condition 2
            passed.append(
                f"selections {counters['selections']} of {counters['calls']} calls "
                f"(abstentions {counters['abstentions']}, failures {counters['failures']})"
            )
        else:
            failed.append("no selections: the plugin has not chosen a victim yet")
        age, window = now - st.issued_at, expected.heartbeat_window_s
        if st.issued_at >= now - window and st.expires_at >= now:  # condition 4
            passed.append(
                f"fresh: newest statement issued {age} s ago, heartbeat window {window} s"
            )
        else:
            failed.append(
                f"stale: newest statement issued {age} s ago, heartbeat window {window} s"
            )
        try:  # condition 3
            alive = liveness(newest.identity)
        except EcpaError as exc:
            alive = Liveness(False, f"process liveness unknown: {exc.detail}")
        (passed if alive.alive else failed).append(alive.reason)
        if counters["dropped"]:
            passed.append(f"note: the observer dropped {counters['dropped']} record(s)")
    notes = [f"gap: seq {a}..{b} missing" for a, b in tally.gaps]
    if tally.torn:
        notes.append(f"torn: {tally.torn} line(s) cut short by a crash, skipped")
    if tally.expired:
        notes.append(f"expired: {tally.expired} older record(s) past expires_at, skipped")
    notes.extend(tally.listed)
    if tally.unlisted:
        notes.append(f"... and {tally.unlisted} more refused record(s)")
    return RuntimeStatus(
        effective=not failed,
        reasons=tuple(failed + passed + notes),
        newest=newest.statement if newest else None,
        counters=newest.counters if newest else None,
        accepted=tally.accepted,
        refused=dict(tally.refused),
        torn=tally.torn,
        last_seq=newest.seq if newest else None,
        gaps=tuple(tally.gaps),
    )


def status_from_files(
    evidence_log: Path,
    trust: Path,
    expected: ExpectedLaunch,
    *,
    now: int,
    proc_root: Path = Path("/proc"),
    host: str | None = None,
    replay_db: Path | None = None,
) -> RuntimeStatus:
    """:func:`derive` over the log at ``evidence_log`` with the trust store at ``trust``,
    liveness from ``proc_root`` (``host`` defaults to this host's name).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for an unreadable log; the trust store's codes
            (``ATTESTATION_TRUST_STORE_CONFIG``) for a bad trust store.
    """
    store = TrustStore.load(trust)

    def alive(identity: ProcessIdentity) -> Liveness:
        return check_alive(identity, proc_root=proc_root, host=host)

    try:
        stream = evidence_log.open("rb")
    except OSError as exc:
        raise EcpaError(
            ErrorCode.INVALID_INPUT,
            f"expected a readable evidence log at {evidence_log}, found: {exc.strerror}",
        ) from None
    with stream:
        if replay_db is None:
            return derive(read_log(stream), store, expected, now=now, liveness=alive)
        with SqliteReplayFence(replay_db) as fence:
            return derive(read_log(stream), store, expected, now=now, liveness=alive, replay=fence)


def status_from_launch_dir(
    directory: Path, *, now: int, proc_root: Path = Path("/proc"), host: str | None = None
) -> RuntimeStatus:
    """:func:`status_from_files` for a launch directory written by ``ecpa run``:
    ``launch.json``, ``trust.json`` and ``evidence/<launch_id>.jsonl``. Once the launch has
    ended (``exit.json``, written by ``ecpa run``) the status is false, whatever the
    evidence says, and the first reason says how the command ended.

    Raises:
        EcpaError: as :func:`launch_from_file` and :func:`status_from_files`.
    """
    expected = launch_from_file(directory / "launch.json")
    log = directory / "evidence" / f"{expected.launch_id}.jsonl"
    status = status_from_files(
        log, directory / "trust.json", expected, now=now, proc_root=proc_root, host=host
    )
    ended = launch_ended(directory / "exit.json")
    if ended is None:
        return status
    return replace(status, effective=False, reasons=(ended, *status.reasons))
