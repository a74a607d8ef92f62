"""The DLA victim rule (DLA.md "Victim rule"), one pass over the running requests, shared by
every way the host calls the plugin (:mod:`dla_plugin.selector`).

:func:`decide` reads only these attributes, and checks each one it reads:

- ``policy``: the scheduling policy, ``"fcfs"`` or ``"priority"``, as a ``str`` (the typed
  preemption policy's context) or as the host's ``SchedulingPolicy`` enum, whose ``.value``
  is that string (the ``VictimSelector`` API);
- each candidate (a typed ``PreemptionCandidate``, or one of the host's ``Request`` objects):
  ``request_id`` (a non-empty ``str``), ``arrival_time`` (a finite ``float`` or an ``int``),
  ``num_output_tokens`` (an ``int`` >= 0), ``predicted_length`` (optional; absent or ``None``
  = no prediction, else an integral value >= 0), and ``priority`` (an ``int``) only when the
  builtin victim must be found under the priority policy.

A prediction is integral when it is an ``int`` (``bool`` excluded), any other
``numbers.Integral`` (a numpy integer, say), or a finite real with no fractional part
(``500.0``, what a JSON client sends; a numpy float of any width). Every other integer must
be exactly ``int`` (``bool`` and other subclasses are malformed). All of them must fit in a
signed 64-bit integer, as the engine's own counters do. A ``builtin_victim_id`` that is not
a ``str`` naming a candidate is taken as absent, as the host takes it. Duplicate request ids
are not detected: that would cost a set per call, and the engine's ids are unique.

Importing this module has no side effects and does not import ``ecpa``.
"""

from __future__ import annotations

import numbers
import operator
from typing import Any

__all__ = ["Decision", "Malformed", "builtin_victim", "decide", "policy_value"]

_INT_MIN = -(1 << 63)
_INT_MAX = (1 << 63) - 1
_INF = float("inf")
_TWO_63 = float(1 << 63)  # the first float past the int range (2**63 - 1 is no float)


#: What :func:`decide` found: ``(chosen, chosen_id, builtin, builtin_id)``, the chosen
#: candidate (None: abstain) and the builtin one, each with the ``request_id`` it had when
#: it was checked (read once, never again). A plain tuple: built on every call.
Decision = tuple[Any, str, Any, str]


class Malformed(Exception):
    """A call outside the host contract (internal: the selector turns it into an abstention
    and a failure; it never reaches the host)."""


def policy_value(policy: object) -> bool:
    """True for the priority policy, False for FCFS: ``policy`` is ``"fcfs"``/``"priority"``
    or an enum whose ``.value`` is one of them (the host's ``SchedulingPolicy``).

    Raises:
        Malformed: for anything else.
    """
    if type(policy) is not str:
        policy = getattr(policy, "value", None)  # the host's SchedulingPolicy enum
        if type(policy) is not str:
            raise Malformed
    if policy == "fcfs":
        return False
    if policy == "priority":
        return True
    raise Malformed


def _prediction(value: object) -> int:
    """An integral prediction as an ``int`` in [0, 2**63 - 1] (the slow path: ``value`` is
    neither exactly an ``int`` nor exactly a ``float``).

    The value is taken through the base type's own conversion (``operator.index`` for an
    integral, ``float.__float__`` for a float subclass), never through a method a subclass
    could override to pass a check with one value and be read as another.

    Raises:
        Malformed: for a ``bool``, a non-integral or non-finite real, or anything else.
    """
    if isinstance(value, bool):
        raise Malformed
    try:
        if isinstance(value, numbers.Integral):  # int subclasses, numpy integers, ...
            number = operator.index(value)
            if type(number) is not int:
                number = int.__index__(number)  # an int subclass returned by __index__
        elif isinstance(value, float):  # a float subclass (numpy.float64): its base value
            number = _whole_float(float.__float__(value))
        elif isinstance(value, numbers.Real):  # numpy.float32, float16, longdouble, ...
            number = _whole_float(float(value))
        else:
            raise Malformed
    except Malformed:
        raise
    except Exception:
        raise Malformed from None
    if not 0 <= number <= _INT_MAX:
        raise Malformed
    return number


def _whole_float(raw: float) -> int:
    """``raw`` (exactly a ``float``) as an ``int`` when it is finite and whole."""
    if not -_INF < raw < _INF or not raw.is_integer():  # NaN fails the comparison
        raise Malformed
    return int(raw)


def decide(candidates: Any, by_priority: bool, builtin_id: Any) -> Decision:
    """The victim rule in one pass (a second only when ``builtin_id`` names no candidate).

    The chosen victim is None when the builtin victim has no prediction (abstain: the engine
    treats unpredicted requests its own way); otherwise it is, among the candidates with a
    prediction, the one with the most predicted remaining output
    ``max(predicted_length - num_output_tokens, 0)``, ties to the later ``arrival_time``,
    then to the later in running order. The builtin victim is the engine's own: the first
    candidate whose id is ``builtin_id`` when that is a ``str`` naming one (as the host
    takes it), else the last under FCFS, else the largest ``(priority, arrival_time)`` (on
    an exact tie the first in running order, as the engine's ``max()`` picks it).

    Raises:
        Malformed: (or whatever a foreign attribute access raises) on input outside the host
            contract: no candidates, or a candidate attribute that breaks the module's rules.
    """
    given = builtin_id if type(builtin_id) is str else None
    best: Any = None  # the predicted candidate with the most remaining output
    best_id = ""
    best_remaining = -1
    best_arrival: Any = 0
    builtin: Any = None
    builtin_rid = ""
    builtin_predicted = False
    top_priority: Any = 0  # the builtin victim's key under "priority" without builtin_id
    top_arrival: Any = 0

    for cand in candidates:
        rid = cand.request_id
        if type(rid) is not str or not rid:
            raise Malformed
        arrival = cand.arrival_time
        kind = type(arrival)
        if kind is float:
            if not -_INF < arrival < _INF:  # NaN fails both comparisons
                raise Malformed
        elif kind is not int or not _INT_MIN <= arrival <= _INT_MAX:
            raise Malformed
        out = cand.num_output_tokens
        if type(out) is not int or not 0 <= out <= _INT_MAX:
            raise Malformed
        predicted = getattr(cand, "predicted_length", None)
        if predicted is not None:
            kind = type(predicted)
            if kind is int:
                if not 0 <= predicted <= _INT_MAX:
                    raise Malformed
            elif kind is float:  # a JSON client's 500.0: the common case after int
                if not 0.0 <= predicted < _TWO_63 or not predicted.is_integer():
                    raise Malformed  # NaN fails the comparison
                predicted = int(predicted)
            else:
                predicted = _prediction(predicted)
            remaining = predicted - out
            if remaining < 0:
                remaining = 0  # past its prediction: nothing predicted left
            # Ties go to the later arrival; on equal arrival, to the later in running order.
            if remaining > best_remaining or (
                remaining == best_remaining and arrival >= best_arrival
            ):
                best, best_id, best_remaining, best_arrival = cand, rid, remaining, arrival

        # The builtin victim: given by the engine, or the engine's own choice (DLA.md).
        if given is not None:
            if builtin is None and rid == given:
                builtin, builtin_rid = cand, rid
                builtin_predicted = predicted is not None
        elif by_priority:
            priority = cand.priority
            if type(priority) is not int or not _INT_MIN <= priority <= _INT_MAX:
                raise Malformed
            # max((priority, arrival_time)); on a tie the first in running order, as max() does.
            if (
                builtin is None
                or priority > top_priority
                or (priority == top_priority and arrival > top_arrival)
            ):
                builtin, builtin_rid = cand, rid
                top_priority, top_arrival = priority, arrival
                builtin_predicted = predicted is not None
        else:  # fcfs: the last candidate
            builtin, builtin_rid = cand, rid
            builtin_predicted = predicted is not None

    if builtin is None:
        if given is None:  # no candidates
            raise Malformed
        # The given id names no candidate: the host then takes its own rule, and so do we.
        return decide(candidates, by_priority, None)
    if not builtin_predicted:
        return None, "", builtin, builtin_rid
    return best, best_id, builtin, builtin_rid


def builtin_victim(running: Any, by_priority: bool) -> Any:
    """The engine's own victim among ``running`` (a non-empty sequence), read as leniently
    as the engine reads it: the last one under FCFS; under priority the largest
    ``(priority, arrival_time)``, or the last one when those cannot be compared.

    Raises:
        ValueError: when ``running`` is empty (the engine's builtin selector raises then too:
            there is no victim to give).
        Exception: whatever indexing ``running`` raises when it is not a sequence.
    """
    if not len(running):
        raise ValueError("running is empty, cannot pick a victim")
    if by_priority:
        try:
            return max(running, key=lambda r: (r.priority, r.arrival_time))
        except Exception:  # noqa: S110 - an incomparable key: fall back to the FCFS victim
            pass
    return running[-1]
