"""A model of vLLM-HUST's typed preemption policy host, API 1.0 (DLA.md "Host contract"), for
the tests, the driver and the simulator. It models the facts of the host's
``vllm/v1/core/sched/preemption.py`` and of the scheduler's ``_select_preemption_victim``;
none of the host's code is copied.

- The policy is configured as ``scheduler_config.preemption_policy``: a dotted qualname
  (split on the last ``.``), a class or an object; a ``from_vllm_config`` factory is used
  when callable, else a class is instantiated; the result must have ``select_victim``
  (:func:`load_policy`; a bad configuration fails the engine's start with ``TypeError``).
- The engine always has a victim of its own (the builtin one). It asks the policy; on
  ``None`` (abstention) the builtin victim stands. An exception, or an id that is not a
  candidate, disables the policy for the rest of the process (``failures``, and
  ``invalid_selections`` for the id): from then on the builtin victim is used without
  asking. With no policy, nothing is counted.
- The host's counters are exactly ``policy_name``, ``enabled``, ``calls``, ``selections``,
  ``abstentions``, ``failures``, ``invalid_selections`` (:meth:`export_stats`).
- Candidates are the host's ``PreemptionCandidate``: eight fields, no prediction
  (:class:`HostCandidate`). Cores with the prediction change also pass ``predicted_length``
  (:class:`dla_plugin.contract.Candidate`). Older hosts pass no ``builtin_victim_id``.
- The policy must be called from the thread that built the controller.
- Evidence (the host's ``preemption.py`` with evidence, modelled in
  :mod:`dla_plugin.host_evidence`): when a sink is configured, a controller with a policy
  captures its scope (role ``engine-core-scheduler``), allocates its controller id and
  delivers one ``resolved`` event (``scheduler_resolution``, detail
  ``engine-core.scheduler:protocol-validated``, occurrence ``controller:<id>``); then one
  ``invoked`` event per call of the policy (``scheduler_dispatch``, detail
  ``engine-core.scheduler:<selected|abstained|invalid|exception>``, occurrence the
  process-wide dispatch number). A scope inherited across a fork is captured again. Any
  failure of the evidence path is swallowed: it never changes the scheduler's decision.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol, runtime_checkable

from dla_plugin import host_evidence
from dla_plugin.contract import Candidate, PreemptionContext

__all__ = [
    "ControllerStats",
    "HostCandidate",
    "HostPath",
    "PreemptionController",
    "VictimPolicy",
    "builtin_victim",
    "load_policy",
]


@runtime_checkable
class VictimPolicy(Protocol):
    """What the host requires of a policy: one method (checked at load time)."""

    def select_victim(self, context: PreemptionContext) -> str | None: ...


class HostPath(Protocol):
    """What the engine needs of a way into the host: this module's controller, or the
    ``VictimSelector`` scheduler of :mod:`dla_plugin.sim.host.victim_selector`."""

    def victim(
        self,
        running: list[Any],
        requesting: Any,
        scheduling_policy: str,
        kv_cache_usage: float,
        now: float,
    ) -> Any:
        """The request of ``running`` to preempt so that ``requesting`` can grow."""
        ...

    def end_step(self, preempted: bool) -> None:
        """Called at the end of every engine step."""
        ...

    def summary(self) -> dict[str, Any]:
        """The host's counters, for reports."""
        ...


@dataclass(frozen=True, slots=True)
class HostCandidate:
    """The current host's candidate: the eight fields of ``PreemptionCandidate``, and no
    prediction."""

    request_id: str
    priority: int
    arrival_time: float
    num_prompt_tokens: int
    num_output_tokens: int
    num_computed_tokens: int
    num_preemptions: int
    max_tokens: int


def builtin_victim(candidates: Sequence[Any], scheduling_policy: str) -> Any:
    """The engine's own victim: the last running request under FCFS, the one with the largest
    ``(priority, arrival_time)`` under priority scheduling (on an exact tie the first in
    running order, as the engine's ``max()`` picks it).

    Raises:
        ValueError: when there is no candidate (the engine never asks then).
    """
    if not candidates:
        raise ValueError("expected at least one running request, found none")
    if scheduling_policy == "priority":
        best = candidates[0]
        for cand in candidates[1:]:
            if (cand.priority, cand.arrival_time) > (best.priority, best.arrival_time):
                best = cand
        return best
    return candidates[-1]


def _resolve_qualname(name: str) -> Any:
    module, _, attribute = name.rpartition(".")
    if not module or not attribute:
        raise ValueError(f"expected a dotted qualname 'package.module.Name', found {name!r}")
    return getattr(importlib.import_module(module), attribute)


def load_policy(vllm_config: object) -> VictimPolicy | None:
    """The policy the host builds from ``vllm_config.scheduler_config.preemption_policy``:
    ``None`` (no policy), a dotted qualname, a class or an object;
    ``from_vllm_config(vllm_config)`` when the resolved object offers it, else a class's
    instance, else the object itself.

    Raises:
        TypeError: when the result lacks ``select_victim`` (the host refuses to start).
        Exception: whatever resolving the name or building the policy raises (the same).
    """
    configured = getattr(getattr(vllm_config, "scheduler_config", None), "preemption_policy", None)
    if configured is None:
        return None
    implementation = _resolve_qualname(configured) if isinstance(configured, str) else configured
    factory = getattr(implementation, "from_vllm_config", None)
    if callable(factory):
        policy = factory(vllm_config)
    elif isinstance(implementation, type):
        policy = implementation()
    else:
        policy = implementation
    if not isinstance(policy, VictimPolicy):
        raise TypeError("preemption_policy must resolve to an object implementing PreemptionPolicy")
    return policy


@dataclass
class ControllerStats:
    """The host's policy counters (``export_stats``), exactly these members."""

    policy_name: str = "builtin"
    enabled: bool = False
    calls: int = 0
    selections: int = 0
    abstentions: int = 0
    failures: int = 0
    invalid_selections: int = 0


class PreemptionController:
    """Chooses a victim for the engine, asking ``policy`` first (``None``: builtin only).

    Args:
        policy: the policy object (see :func:`load_policy`), or None.
        builtin_victim_id: whether the host fills ``context.builtin_victim_id`` (newer hosts)
            before asking the policy; older API 1.0 hosts do not.
        predictions: whether candidates carry ``predicted_length`` (cores with the prediction
            change); the current host's candidates do not (:class:`HostCandidate`).
    """

    def __init__(
        self,
        policy: VictimPolicy | None,
        *,
        builtin_victim_id: bool = True,
        predictions: bool = True,
    ) -> None:
        self.policy = policy
        name = "builtin"
        if policy is not None:
            kind = type(policy)
            name = f"{kind.__module__}.{kind.__qualname__}"
        self.stats = ControllerStats(policy_name=name, enabled=policy is not None)
        self.fill_builtin_id = builtin_victim_id
        self.predictions = predictions
        self.disabled_reason: str | None = None
        #: Calls answered by the builtin victim alone (no policy, or after it was disabled).
        self.builtin_only = 0
        #: Policy selections that differ from the builtin victim.
        self.changed = 0
        self._thread = threading.get_ident()
        self._scope: dict[str, Any] | None = None
        self._controller_id: str | None = None
        if policy is not None:
            self._capture_scope()

    def _deliver(self, event: str, outcome: str, occurrence: int | str) -> None:
        assert self._scope is not None
        assert self._controller_id is not None
        try:
            host_evidence.emit_host_event(
                event,
                "vllm.preemption_policy",
                self.stats.policy_name,
                self.stats.policy_name,
                detail=f"engine-core.scheduler:{outcome}",
                scope=self._scope,
                occurrence_id=occurrence,
                controller_instance_id=self._controller_id,
                observation_kind=(
                    "scheduler_dispatch" if event == "invoked" else "scheduler_resolution"
                ),
            )
        except Exception:  # evidence is observational: never the scheduler's concern
            return

    def _capture_scope(self) -> None:
        try:
            if not host_evidence.observer_configured():
                return
            scope = host_evidence.capture_scope(expected_role="engine-core-scheduler")
            controller_id = host_evidence.allocate_controller_instance(scope)
        except Exception:  # no identity or binding: the controller runs without evidence
            return
        self._scope, self._controller_id = scope, controller_id
        self._deliver("resolved", "protocol-validated", f"controller:{controller_id}")

    def _dispatched(self, outcome: str) -> None:
        """One ``invoked`` event for the call just answered (a scope from before a fork is
        captured anew first)."""
        if self._scope is not None:
            try:
                current = host_evidence.scope_is_current(self._scope)
            except Exception:
                current = False
            if not current:
                self._scope = self._controller_id = None
                self._capture_scope()
        if self._scope is None:
            return
        try:
            seq = host_evidence.allocate_invocation_sequence(self._scope)
        except Exception:
            return
        self._deliver("invoked", outcome, seq)

    @property
    def disabled(self) -> bool:
        """True once the policy misbehaved; the builtin victim is then used for good."""
        return self.disabled_reason is not None

    def export_stats(self) -> dict[str, str | int | bool]:
        """The host's counters, as its ``export_stats()`` gives them."""
        return asdict(self.stats)

    def _disable(self, reason: str) -> None:
        self.stats.failures += 1
        self.stats.enabled = False
        self.disabled_reason = reason
        self.policy = None

    def choose(self, context: PreemptionContext) -> str:
        """The victim's request id for ``context``: the policy's choice, or the builtin one.

        ``context.builtin_victim_id`` is filled in (when the host does) before the policy is
        asked. Never raises for a policy's misbehaviour.

        Raises:
            ValueError: when ``context`` has no candidates.
            RuntimeError: when called from another thread than the one that built it.
        """
        if threading.get_ident() != self._thread:
            raise RuntimeError("PreemptionController must be used by its scheduler thread")
        given = context.builtin_victim_id
        if given is not None and any(c.request_id == given for c in context.candidates):
            builtin: str = given  # the host takes a given id that names a candidate
        else:
            builtin = builtin_victim(context.candidates, context.scheduling_policy).request_id
        if self.policy is None:
            self.builtin_only += 1
            return builtin
        if self.fill_builtin_id and context.builtin_victim_id is None:
            context = replace(context, builtin_victim_id=builtin)
        self.stats.calls += 1
        try:
            choice = self.policy.select_victim(context)
        except Exception as exc:  # the host's rule: a raising policy is disabled
            self._dispatched("exception")
            self._disable(f"raised an exception: {type(exc).__name__}: {exc}")
            return builtin
        if choice is None:
            self.stats.abstentions += 1
            self._dispatched("abstained")
            return builtin
        if not any(c.request_id == choice for c in context.candidates):
            self.stats.invalid_selections += 1
            self._dispatched("invalid")
            self._disable(f"returned unknown request ID {choice!r}")
            return builtin
        self.stats.selections += 1
        self._dispatched("selected")
        if choice != builtin:
            self.changed += 1
        return choice

    def candidates(self, running: Sequence[Any]) -> tuple[Any, ...]:
        """The candidates the host builds from its running requests, in running order (with
        ``predicted_length`` on a core with the prediction change)."""
        out: list[Any] = []
        for r in running:
            fields = (
                r.request_id,
                r.priority,
                r.arrival_time,
                r.num_prompt_tokens,
                r.num_output_tokens,
                r.num_computed_tokens,
                r.num_preemptions,
                r.max_tokens,
            )
            if self.predictions:
                out.append(Candidate(*fields, r.predicted_length))
            else:
                out.append(HostCandidate(*fields))
        return tuple(out)

    def victim(
        self,
        running: list[Any],
        requesting: Any,
        scheduling_policy: str,
        kv_cache_usage: float,
        now: float,
    ) -> Any:
        """The scheduler's ``_select_preemption_victim``: a context from ``running`` (the
        requester included), the controller's answer, and the request with that id."""
        context = PreemptionContext(
            candidates=self.candidates(running),
            scheduling_policy=scheduling_policy,
            requesting_request_id=requesting.request_id,
            kv_cache_usage=kv_cache_usage,
            now=now,
        )
        victim_id = self.choose(context)
        return next(r for r in running if r.request_id == victim_id)

    def end_step(self, preempted: bool) -> None:
        """The end of a scheduler step (nothing to do on this path)."""
        del preempted

    def summary(self) -> dict[str, Any]:
        """The host's view for reports: its counters, and the selections that changed the
        builtin decision."""
        return {**self.export_stats(), "changed": self.changed}
