"""One evidence log as a derivation walks it (RUNTIME.md "Deriving runtime_effective"
condition 5): what was accepted and refused, gaps, torn lines, and the newest record."""

from __future__ import annotations

from dataclasses import dataclass, field

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.fence import ReplayFence, record_nonce
from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.judge.records import Accepted
from ecpa.runtime.model.launch import Slot

__all__ = ["MAX_LISTED", "Stream"]

#: Refused records named one by one in ``reasons``; the rest are only counted.
MAX_LISTED = 20


@dataclass
class Stream:
    """What the walk over one log has seen (its full history, or a part of it: a status
    checkpoint keeps these facts between calls, see :mod:`ecpa.runtime.judge.history`)."""

    name: str | None = None
    #: The slot its log's key id names (None: not a process log), parsed where it was read.
    slot: Slot | None = None
    accepted: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    listed: list[str] = field(default_factory=list)
    unlisted: int = 0
    expired: int = 0
    torn: int = 0
    gaps: list[tuple[int, int]] = field(default_factory=list)
    #: The highest seq accepted so far (kept across checkpoints, unlike ``newest``).
    last_seq: int | None = None
    newest: Accepted | None = None
    #: Why the record that decides for this log is unknown (then its slot is not covered).
    undecided: str | None = None

    def refuse(self, number: int, exc: EcpaError) -> None:
        """Count a refused line (``number``: its line number)."""
        where = f"{self.name} line {number}" if self.name else f"line {number}"
        self.refuse_at(where, exc)

    def refuse_at(self, where: str, exc: EcpaError) -> None:
        """Count a refused line, listed as ``where`` while fewer than MAX_LISTED are."""
        code = exc.code.value
        self.refused[code] = self.refused.get(code, 0) + 1
        if exc.code is ErrorCode.EXPIRED:  # old history in a long log: summarized, not listed
            self.expired += 1
        elif len(self.listed) < MAX_LISTED:
            self.listed.append(f"{where}: {code}: {exc.detail}")
        else:
            self.unlisted += 1

    def accept(self, rec: Accepted, fence: ReplayFence) -> None:
        """Condition 5: sequence numbers only grow within a log (a record seen before, or
        an older one copied after newer ones, is a replay); each nonce passes the fence once,
        last."""
        last = self.last_seq
        if last is not None and rec.seq <= last:
            raise EcpaError(
                ErrorCode.REPLAYED_NONCE,
                f"expected seq > {last} (sequence numbers only grow; a record seen before "
                f"is a replay), found {rec.seq}",
            )
        st = rec.statement
        record_nonce(
            fence, st.challenge_nonce, expires_at=st.expires_at, fingerprint=rec.fingerprint
        )
        if last is not None and rec.seq > last + 1:
            self.gaps.append((last + 1, rec.seq - 1))
        self.last_seq = rec.seq
        self.accepted += 1
        self.newest = rec

    def notes(self) -> list[Reason]:
        """Gaps, torn lines, expired and refused records, for ``reasons``."""
        where = f"{self.name}: " if self.name else ""
        notes = [Reason(ReasonCode.GAP, f"{where}gap: seq {a}..{b} missing") for a, b in self.gaps]
        if self.torn:
            text = f"{where}torn: {self.torn} line(s) cut short by a crash, skipped"
            notes.append(Reason(ReasonCode.TORN, text))
        if self.expired:
            text = f"{where}expired: {self.expired} older record(s) past expires_at, skipped"
            notes.append(Reason(ReasonCode.EXPIRED, text))
        notes.extend(Reason(ReasonCode.REFUSED, text) for text in self.listed)
        if self.unlisted:
            text = f"{where}... and {self.unlisted} more refused record(s)"
            notes.append(Reason(ReasonCode.REFUSED, text))
        return notes
