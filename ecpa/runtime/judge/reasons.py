"""The reasons of a derivation (RUNTIME.md "Status output always lists the reasons"; STYLE
rule 13): each a stable :class:`ReasonCode` beside its text for people. API consumers,
metrics and tests match the code; the text may be reworded.

A code names one outcome: a check that passed and the same check failed have different
codes (``fresh``/``stale``), and every code in :data:`FAILING` makes what it is about false
(a slot not covered, ``runtime_effective`` false); the others either passed or are notes.
docs/runtime.md lists every code with its meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from ecpa.shapes.shape import frozen_instance

__all__ = ["FAILING", "Reason", "ReasonCode"]


class ReasonCode(str, Enum):
    """Stable reason codes; the value is what ``ecpa status --json`` writes."""

    # A process's newest accepted record (RUNTIME.md conditions 2 to 4, "Round 3").
    #: Passed: records of this process accepted, and the newest seq.
    ACCEPTED = "accepted"
    #: Passed: the newest record shows selections > 0 (with its counts).
    SELECTIONS = "selections"
    #: Failed: the newest record shows no selection; the text gives the counts and the cause.
    NO_SELECTIONS = "no_selections"
    #: Passed: the plugin selected within ``max_abstain_s`` of its newest call.
    SELECTING = "selecting"
    #: Failed: called for longer than ``max_abstain_s`` after its newest selection.
    ABSTAINING = "abstaining"
    #: Failed: the launch judges abstention, the record cannot say (no ``last_selection_at``).
    ABSTENTION_UNKNOWN = "abstention_unknown"
    #: Note: abstention not judged (an older launch, a record without ``last_selection_at``).
    ABSTENTION_NOT_JUDGED = "abstention_not_judged"
    #: Passed: issued within the heartbeat window and not expired.
    FRESH = "fresh"
    #: Failed: issued before the heartbeat window, or expired.
    STALE = "stale"
    #: Passed (``--max-idle``): the newest dispatch is recent enough.
    BUSY = "busy"
    #: Failed (``--max-idle``): the newest dispatch is older than ``--max-idle``.
    IDLE = "idle"
    #: Failed (``--max-idle``): the record has no ``last_dispatch_at``.
    IDLE_UNKNOWN = "idle_unknown"
    #: Passed: the process the record names is alive now.
    ALIVE = "alive"
    #: Failed: that process is not alive now, or its liveness is unknown.
    NOT_ALIVE = "not_alive"
    #: Passed: the process still descends from the launch's supervisor.
    DESCENDANT = "descendant"
    #: Failed: the process is no longer a descendant of the launch's supervisor.
    NOT_DESCENDANT = "not_descendant"
    #: Note: the observer dropped records (its counters say how many).
    DROPPED = "dropped"
    # The host's own witness (docs/host-evidence.md).
    #: Passed: the host witnessed dispatches where the plugin selected a victim.
    HOST_SELECTIONS = "host_selections"
    #: Failed (host evidence required): the host witnessed no selected dispatch.
    HOST_NO_SELECTIONS = "host_no_selections"
    #: Failed: the host witnessed an ``exception`` or ``invalid`` dispatch, so it disabled
    #: the policy in that process.
    HOST_POLICY_DISABLED = "host_policy_disabled"
    #: Failed (host evidence required): no host event for a live slot's process.
    HOST_EVIDENCE_MISSING = "host_evidence_missing"
    #: Failed (host evidence required): the host resolved another policy than the plan's.
    HOST_POLICY_MISMATCH = "host_policy_mismatch"
    #: Failed (host evidence required): the sink could not record events (the host then
    #: delivers no more, so the counts stop).
    HOST_SINK_FAILED = "host_sink_failed"
    #: Failed (host evidence required): the sink refused resolutions or dispatches of the
    #: process (another policy resolved, a dispatch out of order, ...): the witness is partial.
    HOST_EVENTS_REFUSED = "host_events_refused"
    #: Failed (audit): a host journal's lines and its process's signed accounts disagree: a
    #: line removed, altered, inserted or moved.
    HOST_JOURNAL_MISMATCH = "host_journal_mismatch"
    #: Note (audit): journal lines after the newest account of a process that died before
    #: signing them; never counted.
    HOST_JOURNAL_UNACCOUNTED = "host_journal_unaccounted"
    # A slot (RUNTIME.md "Slots").
    #: Failed: no record of this launch verified (for a slot, or for the one 0.1 log).
    NO_EVIDENCE = "no_evidence"
    #: Failed: two live processes claim one slot, or one process claims two slots.
    CONFLICT = "conflict"
    #: Note: a dead process replaced by a live one in its slot.
    SUPERSEDED = "superseded"
    #: Failed: a log of this slot cannot say which record decides for it.
    UNDECIDED = "undecided"
    #: Passed: the slot is covered (launch level, with ``slot``).
    COVERED = "covered"
    #: Failed: the slot is not covered (launch level, with ``slot``; its reasons follow).
    NOT_COVERED = "not_covered"
    # The launch.
    #: Passed: every obligated slot is covered.
    COVERAGE_COMPLETE = "coverage_complete"
    #: Failed: some obligated slot is not covered.
    COVERAGE_INCOMPLETE = "coverage_incomplete"
    #: Passed: the supervisor is alive, or recorded the launch's end.
    SUPERVISOR_ALIVE = "supervisor_alive"
    #: Failed: the supervisor is not alive, or not known to be.
    SUPERVISOR_NOT_ALIVE = "supervisor_not_alive"
    #: Failed: the launch has ended (``exit.json``); the text says how.
    LAUNCH_ENDED = "launch_ended"
    #: Failed: the launch has ended and its evidence could not be read.
    EVIDENCE_UNREADABLE = "evidence_unreadable"
    # Trust rooted outside the launch (docs/keys.md).
    #: Passed: every key of the launch's trust.json is backed by a certificate of a manager
    #: key the operator's trust store lists (0.1: by the operator's store itself).
    CERTIFIED = "certified"
    #: Failed: no operator trust store (``--trust``, ``$ECPA_TRUST_STORE``, or the default
    #: file): no key of the launch can be trusted.
    NO_OPERATOR_TRUST = "no_operator_trust"
    #: Failed: a line of ``enrollments.jsonl`` is not a certificate the operator's trust
    #: store backs (forged, altered, out of order, of another launch).
    ENROLLMENT_REFUSED = "enrollment_refused"
    #: Failed: the launch's ``trust.json`` lists a key no certificate vouches for (added, or
    #: its public key changed, in the launch directory or the store).
    UNCERTIFIED_KEY = "uncertified_key"
    #: Note: a 0.1 launch; the text names the 0.2 checks that could not be made.
    V01_LAUNCH = "v01_launch"
    #: Note (``--db``): judged from an evidence store; what could not be checked from here.
    FROM_STORE = "from_store"
    #: Note (``--db``): the derivation time, and where it came from.
    CLOCK = "clock"
    # The logs.
    #: Note: sequence numbers missing in a log.
    GAP = "gap"
    #: Note: lines cut short by a crash, skipped.
    TORN = "torn"
    #: Note: older records past ``expires_at``, skipped.
    EXPIRED = "expired"
    #: Note: a refused record (where, its error code, why), or how many more were refused.
    REFUSED = "refused"
    #: Note: a file or stored log not read as a process log.
    SKIPPED = "skipped"
    #: Note: the launch has no evidence directory yet.
    NO_EVIDENCE_DIR = "no_evidence_dir"
    #: Note: a log's history not walked to its end yet (the rest at the next status).
    HISTORY_PARTIAL = "history_partial"
    #: Note: a history checkpoint could not be saved.
    CHECKPOINT_NOT_SAVED = "checkpoint_not_saved"


#: The codes that make what they are about false: a slot whose reasons hold one is not
#: covered, a status whose reasons hold one is not effective, and the converse.
FAILING = frozenset(
    {
        ReasonCode.NO_SELECTIONS,
        ReasonCode.ABSTAINING,
        ReasonCode.ABSTENTION_UNKNOWN,
        ReasonCode.STALE,
        ReasonCode.IDLE,
        ReasonCode.IDLE_UNKNOWN,
        ReasonCode.NOT_ALIVE,
        ReasonCode.NOT_DESCENDANT,
        ReasonCode.NO_EVIDENCE,
        ReasonCode.CONFLICT,
        ReasonCode.UNDECIDED,
        ReasonCode.NOT_COVERED,
        ReasonCode.COVERAGE_INCOMPLETE,
        ReasonCode.SUPERVISOR_NOT_ALIVE,
        ReasonCode.LAUNCH_ENDED,
        ReasonCode.EVIDENCE_UNREADABLE,
        ReasonCode.NO_OPERATOR_TRUST,
        ReasonCode.ENROLLMENT_REFUSED,
        ReasonCode.UNCERTIFIED_KEY,
        ReasonCode.HOST_NO_SELECTIONS,
        ReasonCode.HOST_POLICY_DISABLED,
        ReasonCode.HOST_EVIDENCE_MISSING,
        ReasonCode.HOST_POLICY_MISMATCH,
        ReasonCode.HOST_SINK_FAILED,
        ReasonCode.HOST_EVENTS_REFUSED,
        ReasonCode.HOST_JOURNAL_MISMATCH,
    }
)


@dataclass(frozen=True)
class Reason:
    """One reason of a status: its stable ``code``, its ``text`` for people and, at the
    launch level, the ``slot`` it is about (its text then begins ``slot <name>: ``; a
    slot's own reasons leave it None: the slot is theirs)."""

    code: ReasonCode
    text: str
    slot: str | None = None

    def __post_init__(self) -> None:
        # Only defined codes: a plain string is taken for its member, another one raises
        # ValueError (a bug here, never an input).
        if type(self.code) is not ReasonCode:  # (a member already: nothing to look up)
            object.__setattr__(self, "code", ReasonCode(self.code))

    @property
    def fails(self) -> bool:
        """Whether this reason makes what it is about false (its code is in FAILING)."""
        return self.code in FAILING

    def in_slot(self, slot: str) -> Reason:
        """This reason of slot ``slot``, as the launch level states it."""
        # (Its code checked when this one was made: a fleet launch restates thousands.)
        return frozen_instance(Reason, {"code": self.code, "text": f"slot {slot}: {self.text}",
                                        "slot": slot})  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape (``ecpa status --json``): code and text, and slot when set."""
        doc: dict[str, Any] = {"code": self.code.value, "text": self.text}
        if self.slot is not None:
            doc["slot"] = self.slot
        return doc
