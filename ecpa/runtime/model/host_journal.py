"""A process's host journal (docs/host-evidence.md): the host's event lines it accepted, one
per line, and the account its signed records give of them, defined once for the sink that
writes the journal and the audit that checks it.

The account of lines ``L1 .. Ln`` (each line's exact bytes, without its newline) is a hash
chain: ``c0`` is 32 zero bytes and ``ci = SHA-256(c(i-1) || SHA-256(Li))``; a record carries
``n``, ``cn`` and ``SHA-256(Ln)``, so a line removed, altered, inserted or moved changes the
chain at that line and every later one. :class:`HostBook` also applies the rules a
journal's order must keep (one resolution per controller before its dispatches, a policy
that does not change, deliveries and dispatch numbers that only grow) and counts what the
lines say; the sink applies it before a line is written, the audit again to every line read.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from ecpa.runtime.model.counters import HostCounts
from ecpa.runtime.model.host_binding import ProcessClaim, check_binding
from ecpa.runtime.model.host_event import (
    DISPATCH_OUTCOMES,
    RESOLVED_DETAIL,
    HostEvent,
    parse_host_line,
)
from ecpa.runtime.model.host_ids import HostEventCode, HostEventRefused

__all__ = [
    "CHAIN_START",
    "JOURNAL_DIR",
    "JOURNAL_SOURCE",
    "POLICY_GROUP",
    "HostBook",
    "JournalCheck",
    "chain_step",
    "check_journal",
    "digest_text",
]

#: The journals' directory in a launch's process logs' directory: each process's journal is
#: ``<JOURNAL_DIR>/<kid>.jsonl``, beside its log ``<kid>.jsonl``.
JOURNAL_DIR = "host"
#: What an evidence store calls a process's journal: this and the journal's file name.
JOURNAL_SOURCE = JOURNAL_DIR + "/"
#: The chain of no line.
CHAIN_START = bytes(32)
#: The entry point group of the host's preemption controller.
POLICY_GROUP = "vllm.preemption_policy"
_NS = 1_000_000_000


def chain_step(head: bytes, line: bytes) -> bytes:
    """The chain after ``line`` (its bytes without the newline) follows ``head``."""
    return hashlib.sha256(head + hashlib.sha256(line).digest()).digest()


def digest_text(raw: bytes) -> str:
    """``sha256:<hex>`` of 32 bytes already hashed (a chain) or, for other bytes, of them."""
    return "sha256:" + (raw.hex() if len(raw) == 32 else hashlib.sha256(raw).hexdigest())


@dataclass
class HostBook:
    """The running account of one process's journal (see the module's text)."""

    lines: int = 0
    head: bytes = CHAIN_START
    newest: bytes | None = None
    policy: str | None = None
    resolutions: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DISPATCH_OUTCOMES, 0))
    lifecycle: int = 0
    last_dispatch_at: int | None = None
    last_selection_at: int | None = None
    #: Each resolved controller's policy, and the newest dispatch number it was seen with.
    controllers: dict[str, str] = field(default_factory=dict)
    last_seq: dict[str, int] = field(default_factory=dict)
    last_attempt: int = 0

    def check(self, event: HostEvent) -> None:
        """That ``event`` may follow the lines accounted for so far.

        Raises:
            HostEventRefused: ``REPLAYED`` (a delivery not after the previous one, a
                dispatch number already seen, a controller resolved twice),
                ``UNKNOWN_OUTCOME``, ``UNRESOLVED``, ``POLICY_CHANGED``, or ``MALFORMED``
                for a scheduler event of another entry point group.
        """
        if event.delivery_attempt <= self.last_attempt:
            raise HostEventRefused(
                HostEventCode.REPLAYED,
                f"expected a delivery after attempt {self.last_attempt}, found "
                f"{event.delivery_attempt}",
            )
        if event.kind == "loader_lifecycle":
            return
        if event.group != POLICY_GROUP:
            raise HostEventRefused(
                HostEventCode.MALFORMED,
                f"expected a scheduler event of group {POLICY_GROUP!r}, found {event.group!r}"[
                    :200
                ],
            )
        controller = event.controller
        assert controller is not None  # parse_host_line: every scheduler event has one
        known = self.controllers.get(controller)
        if event.kind == "scheduler_resolution":
            if event.detail != RESOLVED_DETAIL:
                raise HostEventRefused(
                    HostEventCode.UNKNOWN_OUTCOME,
                    f"expected detail {RESOLVED_DETAIL!r}, found {event.detail!r}"[:200],
                )
            if known is not None:
                raise HostEventRefused(
                    HostEventCode.REPLAYED, f"controller {controller[:16]} resolved twice"
                )
            self._same_policy(event.policy, self.policy)
            return
        if event.outcome is None:
            raise HostEventRefused(
                HostEventCode.UNKNOWN_OUTCOME,
                f"expected detail engine-core.scheduler:<{'|'.join(DISPATCH_OUTCOMES)}>, "
                f"found {event.detail!r}"[:200],
            )
        if known is None:
            raise HostEventRefused(
                HostEventCode.UNRESOLVED,
                f"expected a resolution of controller {controller[:16]} before its dispatches",
            )
        self._same_policy(event.policy, known)
        assert event.seq is not None
        last = self.last_seq.get(controller, 0)
        if event.seq <= last:
            raise HostEventRefused(
                HostEventCode.REPLAYED,
                f"expected a dispatch after number {last} of its controller, found {event.seq}",
            )

    @staticmethod
    def _same_policy(policy: str, known: str | None) -> None:
        if known is not None and policy != known:
            raise HostEventRefused(
                HostEventCode.POLICY_CHANGED,
                f"expected policy {known!r}, found {policy!r}"[:300],
            )

    def add(self, event: HostEvent) -> None:
        """Account for ``event`` (checked by :meth:`check`), its line just written."""
        self.lines += 1
        self.head = chain_step(self.head, event.raw)
        self.newest = hashlib.sha256(event.raw).digest()
        self.last_attempt = event.delivery_attempt
        if event.kind == "loader_lifecycle":
            self.lifecycle += 1
            return
        assert event.controller is not None
        if event.kind == "scheduler_resolution":
            self.controllers[event.controller] = event.policy
            self.policy = self.policy or event.policy
            self.resolutions += 1
            return
        outcome = event.outcome
        assert outcome is not None, "check() refuses a dispatch without an outcome"
        assert event.seq is not None, "parse_host_line: a dispatch has its number"
        self.outcomes[outcome] += 1
        self.last_seq[event.controller] = event.seq
        at = event.observed_at_ns // _NS  # never backwards: a clock stepped back keeps the last
        self.last_dispatch_at = max(at, self.last_dispatch_at or 0)
        if outcome == "selected":
            self.last_selection_at = max(at, self.last_selection_at or 0)

    def counts(
        self, *, refused: int, lost: int, final: bool, refused_scheduler: int = 0
    ) -> HostCounts:
        """The account a signed record carries."""
        return HostCounts(
            journal_lines=self.lines,
            journal_chain=digest_text(self.head),
            newest_event_digest=None if self.newest is None else digest_text(self.newest),
            policy=self.policy,
            resolutions=self.resolutions,
            selected=self.outcomes["selected"],
            abstained=self.outcomes["abstained"],
            invalid=self.outcomes["invalid"],
            exception=self.outcomes["exception"],
            lifecycle=self.lifecycle,
            last_dispatch_at=self.last_dispatch_at,
            last_selection_at=self.last_selection_at,
            refused=refused,
            refused_scheduler=refused_scheduler,
            lost=lost,
            final=final,
        )


_COMPARED = (
    "journal_chain",
    "newest_event_digest",
    "policy",
    "resolutions",
    "selected",
    "abstained",
    "invalid",
    "exception",
    "lifecycle",
    "last_dispatch_at",
    "last_selection_at",
)


@dataclass(frozen=True)
class JournalCheck:
    """What a journal's lines say against the accounts of its process's signed records."""

    #: Lines in the journal (complete ones), and how many the newest account covers.
    lines: int
    accounted: int
    #: Where the journal and an account disagree (empty: every account holds).
    mismatches: tuple[str, ...]
    #: Lines after the newest account of a process that did not end with its final record
    #: (written, then the process died before signing them): never counted.
    unaccounted: int


def check_journal(
    lines: Iterable[bytes],
    accounts: list[HostCounts],
    *,
    partial: bool = False,
    claim: ProcessClaim | None = None,
) -> JournalCheck:
    """Check a journal, given as its lines (each with its newline; a last one without is cut
    short), against ``accounts``, the host counts of its process's accepted records in log
    order: every line must be a host event the sink would have accepted after the lines
    before it, and each account's lines must chain to its chain and add up to its counts.
    Lines after the newest account are a mismatch when that account is final, else
    ``unaccounted``. ``partial``: the lines may stop short of the newest account (a copy
    still being made, as in an evidence store while the launch runs): the accounts past
    them are not compared. ``claim``: each line must also be bound to that launch and
    process, as the sink requires. Reads the lines once, holding one at a time.
    """
    wanted: dict[int, list[HostCounts]] = {}
    for account in accounts:
        wanted.setdefault(account.journal_lines, []).append(account)
    newest = max((a.journal_lines for a in accounts), default=0)
    final = any(a.final for a in accounts)
    mismatches: list[str] = []
    book = HostBook()

    def compare(n: int) -> None:
        for account in wanted.get(n, []):
            have = book.counts(
                refused=account.refused,
                refused_scheduler=account.refused_scheduler,
                lost=account.lost,
                final=account.final,
            )
            wrong = [name for name in _COMPARED if getattr(have, name) != getattr(account, name)]
            if wrong:
                mismatches.append(
                    f"the record accounting for {n} line(s) disagrees with them on {wrong}"
                )

    compare(0)
    count = torn = 0
    broken = False
    for line in lines:
        if not line.endswith(b"\n"):
            torn += 1  # a last line cut short by a crash
            continue
        count += 1
        if broken:
            continue
        try:
            event = parse_host_line(line[:-1])
            if claim is not None:
                check_binding(event, claim)
            book.check(event)
        except HostEventRefused as exc:
            mismatches.append(f"line {count}: {exc.detail}"[:300])
            broken = True  # the chain breaks here: every later account disagrees for this
            continue
        book.add(event)
        compare(count)
    if count < newest and not partial:
        mismatches.append(f"the records account for {newest} line(s), the journal has {count}")
    extra = max(0, count - newest) + torn
    if extra and final:
        mismatches.append(f"{extra} line(s) after the process's final record")
    return JournalCheck(
        lines=count,
        accounted=newest,
        mismatches=tuple(mismatches),
        unaccounted=0 if final else extra,
    )
