"""The DLA victim rule behind the host contract's ``select_victim`` (DLA.md "Victim rule").

The engine calls :meth:`DlaVictimSelector.select_victim` when the KV block pool is full. The
policy returns a candidate's ``request_id`` or ``None`` ("abstain: the engine's builtin victim
stands"). An exception, or an id that is not a candidate, disables the policy in that engine
process (DLA.md "Host contract"), so the policy never raises: anything it cannot read makes it
abstain and count a failure.

The rule reads only these attributes, and checks each one it reads:

- context: ``scheduling_policy`` (``"fcfs"`` | ``"priority"``), ``candidates`` (any iterable,
  in running order, not empty), ``builtin_victim_id`` (optional; ``None`` = absent);
- candidate: ``request_id`` (a non-empty ``str``), ``arrival_time`` (a finite ``float`` or an
  ``int``), ``num_output_tokens`` (an ``int`` >= 0), ``predicted_length`` (optional; ``None``
  = no prediction, else an ``int`` >= 0), and ``priority`` (an ``int``) only when the builtin
  victim must be found under the priority policy.

Integers must be exactly ``int`` (``bool`` and other subclasses are malformed) and fit in a
signed 64-bit integer, as the engine's own counters do. Duplicate request ids are not detected:
that would cost a set per call, and the engine's ids are unique.

Importing this module has no side effects and does not import ``ecpa``: the observer is looked
up on the first call, once (RUNTIME.md "Hot-path budget").
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["BYPASS_KEY", "DlaVictimSelector"]

#: The emergency bypass (DLA.md "Identity"): ``{BYPASS_KEY: True}`` makes the policy abstain.
BYPASS_KEY = "victim_selector_plugin_disabled"

_INT_MIN = -(1 << 63)
_INT_MAX = (1 << 63) - 1
_INF = float("inf")


class _OutcomeSink(Protocol):
    """What the selector needs of an observer: ``ecpa.observer.Observer.count``."""

    def count(self, outcome: int) -> None: ...


class _Default(enum.Enum):
    """Sentinel: no observer given, look up the process observer on the first call."""

    RESOLVE = "resolve"


class _Malformed(Exception):
    """A context or candidate outside the host contract (internal; never escapes)."""


def _decide(context: Any) -> str | None:
    """The victim rule in one pass over the candidates (DLA.md "Victim rule").

    Returns the chosen request id, or None when the builtin victim has no prediction.
    Raises ``_Malformed`` (or whatever a foreign attribute access raises) on a context outside
    the host contract; the caller turns any of these into an abstention and a failure.
    """
    policy = context.scheduling_policy
    if not isinstance(policy, str):
        raise _Malformed
    if policy == "fcfs":
        by_priority = False
    elif policy == "priority":
        by_priority = True
    else:
        raise _Malformed
    builtin_id = getattr(context, "builtin_victim_id", None)
    if builtin_id is not None and (not isinstance(builtin_id, str) or not builtin_id):
        raise _Malformed

    best_id: str | None = None  # the predicted candidate with the most remaining output
    best_remaining = -1
    best_arrival: Any = 0
    builtin_found = False
    builtin_predicted = False
    top_priority: Any = 0  # the builtin victim's key under "priority" without builtin_id
    top_arrival: Any = 0

    for cand in context.candidates:
        rid = cand.request_id
        if not isinstance(rid, str) or not rid:
            raise _Malformed
        arrival = cand.arrival_time
        kind = type(arrival)
        if kind is float:
            if not -_INF < arrival < _INF:  # NaN fails both comparisons
                raise _Malformed
        elif kind is not int or not _INT_MIN <= arrival <= _INT_MAX:
            raise _Malformed
        out = cand.num_output_tokens
        if type(out) is not int or not 0 <= out <= _INT_MAX:
            raise _Malformed
        predicted = getattr(cand, "predicted_length", None)
        if predicted is not None:
            if type(predicted) is not int or not 0 <= predicted <= _INT_MAX:
                raise _Malformed
            remaining = predicted - out
            if remaining < 0:
                remaining = 0  # past its prediction: nothing predicted left
            # Ties go to the later arrival; on equal arrival, to the later in running order.
            if remaining > best_remaining or (
                remaining == best_remaining and arrival >= best_arrival
            ):
                best_id, best_remaining, best_arrival = rid, remaining, arrival

        # The builtin victim: given by the engine, or the engine's own choice (DLA.md).
        if builtin_id is not None:
            if not builtin_found and rid == builtin_id:
                builtin_found = True
                builtin_predicted = predicted is not None
        elif by_priority:
            priority = cand.priority
            if type(priority) is not int or not _INT_MIN <= priority <= _INT_MAX:
                raise _Malformed
            # max((priority, arrival_time)); on a tie the first in running order, as max() does.
            if (
                not builtin_found
                or priority > top_priority
                or (priority == top_priority and arrival > top_arrival)
            ):
                builtin_found = True
                top_priority, top_arrival = priority, arrival
                builtin_predicted = predicted is not None
        else:  # fcfs: the last candidate
            builtin_found = True
            builtin_predicted = predicted is not None

    if not builtin_found:  # no candidates, or builtin_victim_id is not among them
        raise _Malformed
    if not builtin_predicted:
        return None  # the engine treats unpredicted requests its own way
    return best_id  # not None: the builtin victim itself has a prediction


def _find_plugin_config(source: object) -> Mapping[str, object] | None:
    """The first mapping holding the bypass key: ``source`` itself when it is a mapping, its
    ``"additional_config"`` member, or its ``additional_config`` attribute. Never raises."""
    try:
        places: list[object] = []
        if isinstance(source, Mapping):
            places += [source, source.get("additional_config")]
        places.append(getattr(source, "additional_config", None))
        for place in places:
            if isinstance(place, Mapping) and BYPASS_KEY in place:
                return place
    except Exception:  # noqa: S110 - any shape is tolerated; no bypass found
        pass
    return None


def _bypass_requested(config: object) -> bool:
    """True only for ``{BYPASS_KEY: True}`` (exactly ``True``). Never raises."""
    try:
        return isinstance(config, Mapping) and config.get(BYPASS_KEY) is True
    except Exception:
        return False


class DlaVictimSelector:
    """The DLA victim-selection policy (host contract: vLLM-HUST typed preemption policy 1.0).

    One instance serves one engine process from the scheduler's thread; it is not meant to be
    shared between threads (the counters are plain integers).

    Attributes:
        failures: calls that abstained because of an internal error (a malformed context),
            counted with or without an observer.
        observer_errors: calls whose report to the observer raised (the call's result stands).
    """

    __slots__ = (
        "_abstention",
        "_bound",
        "_disabled",
        "_failure",
        "_guarded",
        "_observer",
        "_selection",
        "failures",
        "observer_errors",
    )

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        *,
        observer: _OutcomeSink | _Default | None = _Default.RESOLVE,
    ) -> None:
        """Build the policy. Never raises.

        Args:
            config: the plugin's configuration; ``{"victim_selector_plugin_disabled": True}``
                makes every call abstain. Any other value (or a non-mapping) leaves it active.
            observer: where each call's outcome is counted. By default the process observer
                (``ecpa.observer.process_observer()``), looked up once, on the first call;
                ``None`` counts nothing; tests pass a fake with ``count(outcome)``.
        """
        self._disabled = _bypass_requested(config)
        self._observer: Any = observer
        self._guarded = True
        self._bound = False
        # Outcome codes, read from ecpa.observer on the first call (unused without observer).
        self._selection = self._abstention = self._failure = -1
        self.failures = 0
        self.observer_errors = 0

    @classmethod
    def from_vllm_config(
        cls,
        vllm_config: object,
        *,
        observer: _OutcomeSink | _Default | None = _Default.RESOLVE,
    ) -> DlaVictimSelector:
        """Build the policy from the engine's configuration. Never raises.

        The bypass is looked up in ``vllm_config`` itself when it is a mapping, in its
        ``"additional_config"`` member, or in its ``additional_config`` attribute; any other
        shape (``None`` included) gives an active policy.
        """
        return cls(_find_plugin_config(vllm_config), observer=observer)

    @property
    def disabled(self) -> bool:
        """Whether the emergency bypass is set (every call abstains)."""
        return self._disabled

    def _bind(self) -> None:
        """Look up the outcome codes and, unless one was given, the process observer, once.
        Never raises: if the lookup fails, nothing is counted."""
        self._bound = True
        if self._observer is None:
            return
        try:
            from ecpa import observer as observer_module  # lazy: ecpa costs ~0.2 s to import
        except ImportError:  # ecpa not installed: nothing to count into
            self._observer = None
            return
        self._selection = observer_module.SELECTION
        self._abstention = observer_module.ABSTENTION
        self._failure = observer_module.FAILURE
        if self._observer is _Default.RESOLVE:
            # process_observer() raises nothing of its own: whatever comes out of it is the
            # host's (a signal handler's stop, say) and must reach the host.
            self._observer = observer_module.process_observer()
            self._guarded = False

    def select_victim(self, context: object) -> str | None:
        """The request id to preempt, or ``None`` to let the engine's builtin victim stand.

        Abstains when the bypass is set, when the builtin victim has no prediction, and when
        the context is outside the host contract (then ``failures`` grows by one). Otherwise
        returns, among the candidates with a prediction, the one with the most predicted
        remaining output ``max(predicted_length - num_output_tokens, 0)``; ties go to the
        later ``arrival_time``, then to the later in running order. A returned id is always a
        candidate's ``request_id``.

        Each call reports exactly one outcome to the observer, when there is one: SELECTION
        (an id returned), ABSTENTION (``None``, the bypass included) or FAILURE.

        Never raises (an ``Exception``); the first call may be slower (observer lookup).
        """
        if not self._bound:
            self._bind()
        if self._disabled:
            victim = None
            outcome = self._abstention
        else:
            try:
                victim = _decide(context)
            except Exception:
                self.failures += 1
                victim = None
                outcome = self._failure
            else:
                outcome = self._abstention if victim is None else self._selection
        observer = self._observer
        if observer is not None:
            if self._guarded:  # an observer the caller gave: its failures are counted
                try:
                    observer.count(outcome)
                except Exception:
                    self.observer_errors += 1
            else:  # ecpa's process observer never raises: nothing of the host is caught
                observer.count(outcome)
        return victim
