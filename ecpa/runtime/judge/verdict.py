"""The verdict of a derivation (RUNTIME.md "Deriving runtime_effective", "Slots"): from the
streams a walk produced to :class:`RuntimeStatus`, with its reasons, for true and for false.

The newest accepted record of a process decides for it: selections > 0 (condition 2), its
process alive now (condition 3: same host, boot, pid and start ticks) and, in a 0.2 launch,
still a descendant of the supervisor, and fresh (condition 4: issued within the heartbeat
window and not expired); with ``max_idle``, its newest dispatch that recent. A slot is
covered by exactly one live process; two live processes in one slot, or one process in two
slots, is a conflict; a dead process replaced by a live one is superseded, not a conflict.

Every reason carries its code (:mod:`ecpa.runtime.judge.reasons`): ``effective`` is true
exactly when no reason has a failing code, and a slot is covered exactly when none of its
reasons has one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ecpa.errors import EcpaError
from ecpa.profile.statement import Statement
from ecpa.runtime.judge import host as witness
from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.judge.records import Accepted
from ecpa.runtime.judge.stream import Stream
from ecpa.runtime.model.counters import COUNTERS_SCHEMA_01, Counters, HostCounts
from ecpa.runtime.model.launch import ExpectedLaunch, Slot
from ecpa.runtime.model.process import Liveness, ProcessIdentity

__all__ = ["Judge", "RuntimeStatus", "SlotStatus"]


_ABSTAINED = (
    "(no builtin victim carried a prediction, the bypass is set, or the configuration does "
    "not select it)"
)


def no_selection_reason(counters: Counters) -> str:
    """Why a record with ``selections == 0`` does not count, with its counts: the plugin was
    never called (no preemption happened), or it was called and never chose a victim (it
    abstained: no builtin victim carried a prediction, or the bypass is set; or it failed)."""
    calls, abstentions, failures = counters.calls, counters.abstentions, counters.failures
    if calls == 0:
        return "no selections: the plugin was not called (no preemption has happened)"
    if abstentions == calls:
        return f"no selections: the plugin abstained on all {calls:,} calls {_ABSTAINED}"
    if failures == calls:
        return (
            f"no selections: the plugin failed on all {calls:,} calls "
            "(inputs outside the host contract)"
        )
    return (
        f"no selections in {calls:,} calls: {abstentions:,} abstentions {_ABSTAINED}, "
        f"{failures:,} failures (inputs outside the host contract)"
    )


@dataclass(frozen=True)
class SlotStatus:
    """One obligated slot at ``now``: who covers it (or why nobody does)."""

    slot: str
    covered: bool
    process: ProcessIdentity | None
    kid: str | None
    newest_seq: int | None
    age_s: int | None
    last_dispatch_at: int | None
    counters: dict[str, Any] | None
    #: Why it is covered or not, each with its code (``slot`` None: the slot is this one).
    reasons: tuple[Reason, ...]
    #: What backs the verdict: ``"host"`` (the host's witness is required) or ``"plugin"``.
    source: str = "plugin"
    #: What the host witnessed, as the deciding record accounts for it (None: nothing).
    host: HostCounts | None = None

    def host_json(self) -> dict[str, Any]:
        """The slot's ``host`` in ``ecpa status --json`` (docs/host-evidence.md)."""
        return witness.host_view(self.host)


@dataclass(frozen=True)
class RuntimeStatus:
    """The derivation's answer, with its reasons (never empty, for true and for false)."""

    effective: bool
    #: Each with its code; those about one slot name it (``slot``, "slot <name>: ...").
    reasons: tuple[Reason, ...]
    newest: Statement | None
    counters: dict[str, Any] | None
    accepted: int
    refused: dict[str, int]
    torn: int
    last_seq: int | None
    gaps: tuple[tuple[int, int], ...]
    #: The derivation time.
    now: int | None = None
    #: One entry per obligated slot (0.2 launches; a 0.1 log decides for ``scheduler.0``).
    slots: tuple[SlotStatus, ...] = ()
    version: str = "0.1"

    @classmethod
    def unjudged(cls, reasons: Sequence[Reason], now: int) -> RuntimeStatus:
        """False at ``now`` for ``reasons``, with no evidence judged: no record, no
        counts, no slot (an ended launch whose evidence could not be read)."""
        return cls(
            effective=False,
            reasons=tuple(reasons),
            newest=None,
            counters=None,
            accepted=0,
            refused={},
            torn=0,
            last_seq=None,
            gaps=(),
            now=now,
        )

    def with_keys(self, keys: Sequence[Reason]) -> RuntimeStatus:
        """This status with the reasons of the launch's keys (whether its certificates back
        them, :func:`~ecpa.runtime.judge.certified.launch_keys`): a failing one first, and
        false; a passing one last."""
        failing = tuple(r for r in keys if r.fails)  # first: they decide; a pass comes last
        return replace(
            self,
            effective=self.effective and not failing,
            reasons=(*failing, *self.reasons, *(r for r in keys if not r.fails)),
        )


class Judge:
    """Applies the conditions to streams, asking about each process at most once."""

    def __init__(
        self,
        expected: ExpectedLaunch,
        now: int,
        liveness: Callable[[ProcessIdentity], Liveness],
        *,
        descends: Callable[[ProcessIdentity], bool] | None = None,
        max_idle: int | None = None,
    ) -> None:
        self.expected = expected
        self.now = now
        self._liveness = liveness
        self._descends = descends
        self.max_idle = max_idle
        self._alive: dict[ProcessIdentity, Liveness] = {}

    def alive(self, identity: ProcessIdentity) -> Liveness:
        """Condition 3, asked once per process; an ``EcpaError`` is "unknown", so false."""
        if identity not in self._alive:
            try:
                self._alive[identity] = self._liveness(identity)
            except EcpaError as exc:
                self._alive[identity] = Liveness(False, f"process liveness unknown: {exc.detail}")
        return self._alive[identity]

    def checks(self, rec: Accepted, count: int) -> tuple[list[Reason], list[Reason]]:
        """The failed and passed conditions of a process's newest record."""
        failed: list[Reason] = []
        passed = [Reason(ReasonCode.ACCEPTED, f"{count} record(s) accepted, newest seq {rec.seq}")]
        counters, st = rec.counters, rec.statement
        if self.expected.host_evidence == "required":  # condition 2, witnessed by the host
            witness.host_checks(self.expected, counters.host, self.now, failed, passed)
        else:
            self._plugin_reports(counters, failed, passed)  # condition 2, as the plugin says
        age, window = self.now - st.issued_at, self.expected.heartbeat_window_s
        freshness = f"newest statement issued {age} s ago, heartbeat window {window} s"
        if st.issued_at >= self.now - window and st.expires_at >= self.now:  # condition 4
            passed.append(Reason(ReasonCode.FRESH, f"fresh: {freshness}"))
        else:
            failed.append(Reason(ReasonCode.STALE, f"stale: {freshness}"))
        if self.max_idle is not None:
            self._idle(witness.newest_dispatch(self.expected, counters), failed, passed)
        alive = self.alive(rec.identity)  # condition 3
        if alive.alive:
            passed.append(Reason(ReasonCode.ALIVE, alive.reason))
        else:
            failed.append(Reason(ReasonCode.NOT_ALIVE, alive.reason))
        pid = rec.identity.pid
        if alive.alive and self._descends is not None:
            if self._descends(rec.identity):
                text = f"process {pid} descends from the supervisor"
                passed.append(Reason(ReasonCode.DESCENDANT, text))
            else:
                text = f"process {pid} is not a descendant of the launch's supervisor"
                failed.append(Reason(ReasonCode.NOT_DESCENDANT, text))
        if counters.dropped:
            text = f"note: the observer dropped {counters.dropped} record(s)"
            passed.append(Reason(ReasonCode.DROPPED, text))
        return failed, passed

    def _plugin_reports(
        self, counters: Counters, failed: list[Reason], passed: list[Reason]
    ) -> None:
        """Condition 2 from the plugin's own counts; a policy the host witnessed being
        disabled fails whatever the plugin says (docs/host-evidence.md)."""
        if counters.selections > 0:
            self._abstaining(counters, failed, passed)
            changed = counters.changed
            shown = "" if changed is None else f"changed {changed}, "
            text = (
                f"selections {counters.selections} of {counters.calls} calls "
                f"({shown}abstentions {counters.abstentions}, "
                f"failures {counters.failures})"
            )
            passed.append(Reason(ReasonCode.SELECTIONS, text))
        else:
            failed.append(Reason(ReasonCode.NO_SELECTIONS, no_selection_reason(counters)))
        disabled = witness.disabled_reason(counters.host)
        if disabled is not None:
            failed.append(disabled)

    def _abstaining(self, counters: Counters, failed: list[Reason], passed: list[Reason]) -> None:
        """RUNTIME.md "Round 3": a plugin called without selecting for longer than
        ``max_abstain_s`` does not cover its slot (a predictor gone away: every call
        abstains, the counters stay cumulative). Idle (no calls since the newest selection)
        is not abstaining. A record without ``last_selection_at`` (0.1, 0.2) cannot say: it
        does not cover a slot of a launch that names ``max_abstain_s``."""
        last_call = counters.last_dispatch_at
        last_selection = counters.last_selection_at
        limit = self.expected.max_abstain_s
        if counters.schema_ == COUNTERS_SCHEMA_01:
            return  # a 0.1 launch: nothing to say
        if type(last_call) is not int or type(last_selection) is not int:
            if self.expected.judges_abstention:  # a launch that asks, an observer that cannot say
                text = (
                    f"abstention unknown: expected a counters record with last_selection_at "
                    f"(ecpa-dispatch-counters/0.3), found {counters.schema_} "
                    f"(max_abstain_s {limit} s)"
                )
                failed.append(Reason(ReasonCode.ABSTENTION_UNKNOWN, text))
            else:
                text = (
                    f"note: abstention not judged, no last_selection_at in a "
                    f"{counters.schema_} record (max_abstain_s {limit} s)"
                )
                passed.append(Reason(ReasonCode.ABSTENTION_NOT_JUDGED, text))
            return
        span = last_call - last_selection
        if span > limit:
            text = (
                f"abstaining: called for {span} s after its newest selection without selecting "
                f"(max_abstain_s {limit} s; {counters.calls:,} calls, "
                f"{counters.abstentions:,} abstentions, {counters.failures:,} failures "
                "in all)"
            )
            failed.append(Reason(ReasonCode.ABSTAINING, text))
        else:
            text = (
                f"selecting: newest selection {self.now - last_selection} s ago, calls without "
                f"a selection for {max(span, 0)} s at most (max_abstain_s {limit} s)"
            )
            passed.append(Reason(ReasonCode.SELECTING, text))

    def _idle(self, last: object, failed: list[Reason], passed: list[Reason]) -> None:
        assert self.max_idle is not None
        if type(last) is not int:
            text = (
                "idle unknown: no last_dispatch_at in the newest record "
                f"(--max-idle {self.max_idle})"
            )
            failed.append(Reason(ReasonCode.IDLE_UNKNOWN, text))
            return
        idle = self.now - last
        text = f"newest dispatch {idle} s ago, --max-idle {self.max_idle} s"
        if idle > self.max_idle:
            failed.append(Reason(ReasonCode.IDLE, f"idle: {text}"))
        else:
            passed.append(Reason(ReasonCode.BUSY, f"busy: {text}"))

    def single(self, stream: Stream) -> RuntimeStatus:
        """The verdict from one log: its newest accepted statement decides."""
        failed: list[Reason] = []
        passed: list[Reason] = []
        rec = stream.newest
        if rec is None:
            text = "no valid evidence: no record of this launch verified"
            failed.append(Reason(ReasonCode.NO_EVIDENCE, text))
        else:
            failed, passed = self.checks(rec, stream.accepted)
        return RuntimeStatus(
            effective=not failed,
            reasons=tuple(failed + passed + stream.notes()),
            newest=rec.statement if rec else None,
            counters=_counters(rec.counters) if rec else None,
            accepted=stream.accepted,
            refused=dict(stream.refused),
            torn=stream.torn,
            last_seq=rec.seq if rec else None,
            gaps=tuple(stream.gaps),
            now=self.now,
            slots=(self._slot_status(self.expected.slots[0], rec, not failed, failed + passed),),
            version=self.expected.version,
        )

    def _slot_status(
        self, slot: Slot, rec: Accepted | None, covered: bool, reasons: Sequence[Reason]
    ) -> SlotStatus:
        backed = witness.source(self.expected)
        if rec is None:
            return SlotStatus(
                slot.name, False, None, None, None, None, None, None, tuple(reasons), backed
            )
        last = rec.counters.last_dispatch_at
        return SlotStatus(
            slot.name,
            covered,
            rec.identity,
            rec.statement.kid,
            rec.seq,
            self.now - rec.statement.issued_at,
            last if type(last) is int else None,
            _counters(rec.counters),
            tuple(reasons),
            backed,
            rec.counters.host,
        )

    def _slot(
        self, slot: Slot, streams: list[Stream], claims: dict[ProcessIdentity, set[Slot]]
    ) -> SlotStatus:
        if not streams:
            nothing = Reason(ReasonCode.NO_EVIDENCE, "no evidence")
            return self._slot_status(slot, None, False, [nothing])
        live = [s for s in streams if s.newest is not None and self.alive(s.newest.identity).alive]
        dead = [s for s in streams if s not in live and s.newest is not None]
        if len(live) > 1:
            pids = sorted(s.newest.identity.pid for s in live if s.newest is not None)
            text = f"conflict: {len(live)} live processes claim it (pids {pids})"
            reason = Reason(ReasonCode.CONFLICT, text)
            newest = max(live, key=lambda s: s.newest.statement.issued_at if s.newest else 0)
            return self._slot_status(slot, newest.newest, False, [reason])
        if not live:
            newest = max(
                dead,
                key=lambda s: (s.newest.statement.issued_at, s.newest.seq) if s.newest else (0, 0),
            )
            assert newest.newest is not None
            failed, passed = self.checks(newest.newest, newest.accepted)
            return self._slot_status(slot, newest.newest, False, failed + passed)
        stream = live[0]
        rec = stream.newest
        assert rec is not None
        failed, passed = self.checks(rec, stream.accepted)
        other = sorted(s.name for s in claims.get(rec.identity, set()) if s != slot)
        if other:
            text = f"conflict: process {rec.identity.pid} also claims slot(s) {other}"
            failed.insert(0, Reason(ReasonCode.CONFLICT, text))
        passed.extend(
            Reason(
                ReasonCode.SUPERSEDED,
                f"superseded: pid {s.newest.identity.pid} (not alive) "
                f"replaced by pid {rec.identity.pid}",
            )
            for s in dead
            if s.newest is not None
        )
        return self._slot_status(slot, rec, not failed, failed + passed)

    @staticmethod
    def _undecided(slot: SlotStatus, reasons: list[str]) -> SlotStatus:
        """A slot with a log whose deciding record is unknown is not covered (that log's
        process might be a second live claimant: never the more permissive answer)."""
        if not reasons:
            return slot
        first = tuple(Reason(ReasonCode.UNDECIDED, f"undecided: {r}") for r in reasons)
        return replace(slot, covered=False, reasons=(*first, *slot.reasons))

    def launch(
        self, streams: Iterable[Stream], *, supervisor: Liveness | None, skipped: list[Reason]
    ) -> RuntimeStatus:
        """The verdict for a 0.2 launch: every obligated slot covered, supervisor alive."""
        walked = list(streams)
        by_slot: dict[Slot, list[Stream]] = {}
        claims: dict[ProcessIdentity, set[Slot]] = {}
        for stream in walked:
            if stream.newest is not None:
                by_slot.setdefault(stream.newest.slot, []).append(stream)
                claims.setdefault(stream.newest.identity, set()).add(stream.newest.slot)
        undecided: dict[Slot, list[str]] = {}
        for stream in walked:
            if stream.undecided is not None and stream.slot is not None:
                undecided.setdefault(stream.slot, []).append(f"{stream.name}: {stream.undecided}")
        slots = tuple(
            self._undecided(self._slot(s, by_slot.get(s, []), claims), undecided.get(s, []))
            for s in self.expected.slots
        )
        failed: list[Reason] = []
        passed: list[Reason] = []
        if supervisor is not None:
            if supervisor.alive:
                text = f"supervisor: {supervisor.reason}"
                passed.append(Reason(ReasonCode.SUPERVISOR_ALIVE, text))
            else:
                text = f"supervisor not alive: {supervisor.reason}"
                failed.append(Reason(ReasonCode.SUPERVISOR_NOT_ALIVE, text))
        covered = sum(s.covered for s in slots)
        line = f"coverage: {covered}/{len(slots)} slots"
        if covered == len(slots):
            passed.append(Reason(ReasonCode.COVERAGE_COMPLETE, line))
        else:
            failed.append(Reason(ReasonCode.COVERAGE_INCOMPLETE, line))
        for slot in slots:
            if slot.covered:
                target, said = passed, Reason(ReasonCode.COVERED, "covered")
            else:
                target, said = failed, Reason(ReasonCode.NOT_COVERED, "not covered")
            target.append(said.in_slot(slot.slot))
            target.extend(reason.in_slot(slot.slot) for reason in slot.reasons)
        notes = [*skipped]
        for stream in walked:
            notes.extend(stream.notes())
        accepted = [s.newest for s in walked if s.newest is not None]
        newest = max(accepted, key=lambda r: (r.statement.issued_at, r.seq), default=None)
        refused: dict[str, int] = {}
        for stream in walked:
            for code, n in stream.refused.items():
                refused[code] = refused.get(code, 0) + n
        return RuntimeStatus(
            effective=not failed,
            reasons=tuple(failed + passed + notes),
            newest=newest.statement if newest else None,
            counters=_counters(newest.counters) if newest else None,
            accepted=sum(s.accepted for s in walked),
            refused=refused,
            torn=sum(s.torn for s in walked),
            last_seq=newest.seq if newest else None,
            gaps=tuple(gap for s in walked for gap in s.gaps),
            now=self.now,
            slots=slots,
            version="0.2",
        )


def _counters(counters: Counters) -> dict[str, Any]:
    """The record's document (made once: :attr:`Counters.document`) as a status of its own
    holds it: a copy, nested members too, which its reader may change."""
    return {k: dict(v) if type(v) is dict else v for k, v in counters.document.items()}
