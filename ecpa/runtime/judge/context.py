"""What one status or one audit judges a launch's records with (RUNTIME.md "Deriving
runtime_effective"): a :class:`Judgement`, made once by the entry point (``ecpa status``'s
:func:`~ecpa.runtime.host.status.status_from_launch_dir`, ``status_from_files``,
:func:`~ecpa.runtime.stores.remote.status_from_store`, the audits of
:mod:`ecpa.runtime.host.audit`, and the pure :func:`~ecpa.runtime.judge.derive.derive`)
once the launch's keys are judged, and handed inward whole: each function reads what it
needs of it, under one name per thing.

What only the local edge knows (where ``/proc`` is, this host's name, where a durable fence
is kept) is not here: a status from the evidence store has none of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ecpa.profile.fence import MemoryReplayFence, ReplayFence
from ecpa.profile.trust import TrustStore
from ecpa.profile.verify import DEFAULT_POLICY, Policy
from ecpa.runtime.judge.certified import LaunchKeys
from ecpa.runtime.model.launch import ExpectedLaunch

__all__ = ["HISTORY_BUDGET_S", "Judgement"]

#: How long one status may spend walking logs' histories forward (the decision itself
#: reads only the logs' ends); the rest of a long history is walked at the next status
#: (:mod:`ecpa.runtime.judge.history`, which names it too).
HISTORY_BUDGET_S = 0.05


@dataclass(frozen=True, slots=True)
class Judgement:
    """The trust store, the launch, the time and the limits one status or audit judges under
    (see the module's text)."""

    #: The keys records are verified with: a launch's ``trust.json`` as far as the manager's
    #: certificates back it (docs/keys.md), or the trust store given (a 0.1 log).
    trust_store: TrustStore
    #: The launch the records must be of: its identities certified, a ``max_abstain`` asked
    #: for already set as its ``max_abstain_s``.
    expected: ExpectedLaunch
    #: The time judged at (Unix seconds): the clock, a time given, or an ended launch's end.
    now: int
    #: The replay fence every accepted nonce passes: a durable one (:meth:`fenced`), else
    #: one in memory, this judgement's own, shared by all its logs.
    fence: ReplayFence = field(default_factory=MemoryReplayFence)
    policy: Policy = DEFAULT_POLICY
    #: Seconds of history walking (RUNTIME.md "Bounded work"; None: each log to its end).
    history_budget_s: float | None = HISTORY_BUDGET_S
    #: Whether the history checkpoints are replaced (False: a ``now`` that is not the clock,
    #: whose history must not stand in for the present's).
    save_checkpoints: bool = True
    #: The newest dispatch must be at most this many seconds old (None: not judged).
    max_idle: int | None = None

    @classmethod
    def under(
        cls,
        keys: LaunchKeys,
        expected: ExpectedLaunch,
        now: int,
        *,
        history_budget_s: float | None = HISTORY_BUDGET_S,
        save_checkpoints: bool = True,
        max_idle: int | None = None,
    ) -> Judgement:
        """The judgement of the launch ``expected`` under its ``keys`` as
        :func:`~ecpa.runtime.judge.certified.launch_keys` judged them: their trust store,
        and ``expected`` with the process each certified key was enrolled for."""
        certified = replace(expected, certified=keys.identities)
        return cls(
            keys.store,
            certified,
            now,
            history_budget_s=history_budget_s,
            save_checkpoints=save_checkpoints,
            max_idle=max_idle,
        )

    def fenced(self, fence: ReplayFence | None) -> Judgement:
        """This judgement with ``fence``, a durable fence opened for it (None: it keeps its
        own in memory). The edge opens the fence last, after the launch's own files, so
        that their errors come first as before."""
        return self if fence is None else replace(self, fence=fence)

    def at(self, now: int) -> Judgement:
        """This judgement at another time (an audit checks each record at its own
        ``issued_at``)."""
        return replace(self, now=now)
