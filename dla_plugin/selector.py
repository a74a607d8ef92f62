"""The DLA victim selector: one policy object, three ways into the vLLM-HUST host (DLA.md
"Host contract: three ways in").

:class:`DlaVictimSelector` is at once

- a typed preemption policy, API 1.0 (``vllm/v1/core/sched/preemption.py``; configured as
  ``--preemption-policy dla_plugin.selector.DlaVictimSelector``): :meth:`select_victim`
  returns a candidate's ``request_id`` or ``None`` ("abstain: the builtin victim stands");
- a ``VictimSelector``, API 1 (``vllm/v1/core/sched/victim_selector.py``), reached through
  the typed component ``org.vllm-hust.dla/victim-selector`` (its ``implementation_ref`` is
  ``dla_plugin.selector:DlaVictimSelector``) or the legacy entry point ``dla`` of group
  ``vllm.victim_selector``: :meth:`pick_victim` returns one of the ``Request`` objects of
  ``running`` (the host's builtin choice whenever the rule abstains), plus
  :meth:`emit_observability_log` and :meth:`export_metrics`.

Both methods apply the one rule of :mod:`dla_plugin.rule` and count one outcome per call, in
the selector's own counters and in the process observer: a selection (``changed`` when it
differs from the host's builtin victim), an abstention, or a failure. The host disables a
typed policy that raises or returns an unknown id, and a ``VictimSelector`` that returns a
request outside ``running`` breaks the scheduler, so neither method lets an exception out:
anything outside the host contract makes the call abstain and count a failure.

Importing this module has no side effects and does not import ``ecpa``: the observer is looked
up on the first call, once (RUNTIME.md "Hot-path budget").
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from dla_plugin.rule import Decision, builtin_victim, decide, policy_value

__all__ = ["BYPASS_KEY", "DlaVictimSelector"]

#: The emergency bypass (DLA.md "Identity"): ``{BYPASS_KEY: true}`` in ``additional_config``.
BYPASS_KEY = "victim_selector_plugin_disabled"

_NONE: Decision = (None, "", None, "")

#: What selects the plugin on each host path (DLA.md "Host contract: three ways in").
PLUGIN_NAME = "dla"
COMPONENT_ID = "org.vllm-hust.dla/victim-selector"
BUNDLE_ID = "org.vllm-hust.dla"
MANIFEST_NAME = "vllm-hust-extension-v1.json"
QUALNAMES = frozenset(
    {"dla_plugin.selector.DlaVictimSelector", "dla_plugin.selector:DlaVictimSelector"}
)

#: At most one observability log line per this many seconds (the host asks after every step
#: that preempted, which can be every step under KV pressure).
LOG_EVERY_S = 10.0


class _OutcomeSink(Protocol):
    """What the selector needs of an observer: ``ecpa.observer.Observer.count``."""

    def count(self, outcome: int) -> None: ...


class _Default(enum.Enum):
    """Sentinel: no observer given, look up the process observer on the first call."""

    RESOLVE = "resolve"


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


def _member(source: object, name: str) -> object:
    """``source[name]`` for a mapping, else the attribute; None when absent."""
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def _own_manifest(paths: str) -> bool:
    """Whether an ``os.pathsep`` list of manifest paths names this package's manifest."""
    mine = os.path.realpath(os.path.join(os.path.dirname(__file__), "manifests", MANIFEST_NAME))
    return any(p and os.path.realpath(p) == mine for p in paths.split(os.pathsep))


def _selects_plugin(vllm_config: object) -> bool:
    """Whether the engine's configuration selects this plugin on one of the host's paths
    (DLA.md "Host contract: three ways in"): ``victim_selector_plugin`` ``"dla"``;
    ``victim_selector_component`` ``"org.vllm-hust.dla/victim-selector"``; the bundle
    enabled by ``--extension`` (``VLLM_EXTENSION_BUNDLES``) or its manifest listed in
    ``VLLM_EXTENSION_MANIFESTS`` (the host then uses a single admitted provider unasked);
    or ``scheduler_config.preemption_policy`` naming this class. Older hosts load the first
    ``vllm.victim_selector`` entry point they find without being asked: installed but not
    selected, the plugin must change nothing. Never raises (an unreadable configuration
    selects nothing)."""
    try:
        additional = _member(vllm_config, "additional_config")
        if isinstance(additional, Mapping):
            plugin = additional.get("victim_selector_plugin")
            if type(plugin) is str and plugin.strip() == PLUGIN_NAME:
                return True
            component = additional.get("victim_selector_component")
            if type(component) is str and component == COMPONENT_ID:
                return True
        bundles = os.environ.get("VLLM_EXTENSION_BUNDLES", "")
        if BUNDLE_ID in (b.strip() for b in bundles.split(",")):
            return True
        if _own_manifest(os.environ.get("VLLM_EXTENSION_MANIFESTS", "")):
            return True
        configured = _member(_member(vllm_config, "scheduler_config"), "preemption_policy")
        if type(configured) is str:
            return configured in QUALNAMES
        return configured is DlaVictimSelector or type(configured) is DlaVictimSelector
    except Exception:
        return False


def _bypass_requested(config: object) -> bool:
    """Whether ``config`` sets the bypass: a truthy ``BYPASS_KEY`` value, as the host's
    ``get_victim_selector`` reads the same key. Never raises (a value whose truth cannot be
    told leaves the policy active)."""
    try:
        return isinstance(config, Mapping) and bool(config.get(BYPASS_KEY))
    except Exception:
        return False


class DlaVictimSelector:
    """The DLA victim-selection policy for every host path (see the module's text).

    One instance serves one engine process from the scheduler's thread; it is not meant to be
    shared between threads (the counters are plain integers).

    Attributes:
        calls: calls of :meth:`select_victim` or :meth:`pick_victim`.
        selections: calls where the rule chose the victim (the builtin one included).
        changed: selections that differ from the host's builtin victim.
        abstentions: calls that left the builtin victim standing (the bypass included).
        failures: calls that abstained because of an input outside the host contract.
        observer_errors: calls whose report to a given observer raised (the result stands).
    """

    #: The host's ``VictimSelector`` API this class implements (checked by the host).
    vllm_victim_selector_api_version: ClassVar[int] = 1

    __slots__ = (
        "_abstention",
        "_bound",
        "_changed",
        "_disabled",
        "_failure",
        "_guarded",
        "_logged_at",
        "_observer",
        "_selected",
        "_selection",
        "abstentions",
        "calls",
        "changed",
        "failures",
        "observer_errors",
        "selections",
    )

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        *,
        observer: _OutcomeSink | _Default | None = _Default.RESOLVE,
        selected: bool = True,
    ) -> None:
        """Build the policy. Never raises.

        Args:
            config: the plugin's configuration; a truthy ``"victim_selector_plugin_disabled"``
                makes every call abstain. Any other value (or a non-mapping) leaves it active.
            selected: whether the configuration selects the plugin; when False every call
                abstains (installed, loaded by a host unasked, and changing nothing).
            observer: where each call's outcome is counted. By default the process observer
                (``ecpa.observer.process_observer()``), looked up once, on the first call;
                ``None`` counts nothing; tests pass a fake with ``count(outcome)``.
        """
        self._selected = bool(selected)
        self._disabled = _bypass_requested(config) or not self._selected
        self._observer: Any = observer
        self._guarded = True
        self._bound = False
        # Outcome codes, read from ecpa.observer on the first call (unused without observer).
        self._selection = self._changed = self._abstention = self._failure = -1
        self._logged_at: float | None = None
        self.calls = self.selections = self.changed = self.abstentions = self.failures = 0
        self.observer_errors = 0

    @classmethod
    def from_vllm_config(
        cls,
        vllm_config: object,
        *,
        observer: _OutcomeSink | _Default | None = _Default.RESOLVE,
    ) -> DlaVictimSelector:
        """Build the policy from the engine's configuration (every host path calls this).
        Never raises.

        The policy is active only when the configuration selects it on one of the host's
        three paths (see :func:`_selects_plugin`); otherwise it abstains on every call. The
        bypass is looked up in ``vllm_config`` itself when it is a mapping, in its
        ``"additional_config"`` member, or in its ``additional_config`` attribute.
        """
        return cls(
            _find_plugin_config(vllm_config),
            observer=observer,
            selected=_selects_plugin(vllm_config),
        )

    @property
    def disabled(self) -> bool:
        """Whether every call abstains: the emergency bypass is set, or the configuration
        does not select the plugin."""
        return self._disabled

    @property
    def selected(self) -> bool:
        """Whether the configuration selects the plugin (always, when built directly)."""
        return self._selected

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
        self._changed = observer_module.CHANGED
        self._abstention = observer_module.ABSTENTION
        self._failure = observer_module.FAILURE
        if self._observer is _Default.RESOLVE:
            # process_observer() raises nothing of its own: whatever comes out of it is the
            # host's (a signal handler's stop, say) and must reach the host.
            self._observer = observer_module.process_observer()
            self._guarded = False

    def _report(self, outcome: int) -> None:
        observer = self._observer
        if observer is not None:
            if self._guarded:  # an observer the caller gave: its failures are counted
                try:
                    observer.count(outcome)
                except Exception:
                    self.observer_errors += 1
            else:  # ecpa's process observer never raises: nothing of the host is caught
                observer.count(outcome)

    def _judge(self, candidates: Any, policy: Any, builtin_id: Any, by_id: bool) -> Decision:
        """Count one call and decide it; reports the outcome. A selection is ``changed`` when
        it is not the builtin victim: by request id on the typed path (``by_id``, as the
        host compares ids), by identity on the ``VictimSelector`` path (the host removes
        that very object). Never raises an ``Exception``."""
        if not self._bound:
            self._bind()
        self.calls += 1
        if self._disabled:
            self.abstentions += 1
            self._report(self._abstention)
            return _NONE
        try:
            decision = decide(candidates, policy_value(policy), builtin_id)
        except Exception:
            self.failures += 1
            self._report(self._failure)
            return _NONE
        chosen, chosen_id, builtin, builtin_id = decision
        if chosen is None:
            self.abstentions += 1
            self._report(self._abstention)
        elif chosen_id == builtin_id if by_id else chosen is builtin:
            self.selections += 1
            self._report(self._selection)
        else:
            self.selections += 1
            self.changed += 1
            self._report(self._changed)
        return decision

    def select_victim(self, context: object) -> str | None:
        """Typed preemption policy (API 1.0): the request id to preempt, or ``None`` to let
        the engine's builtin victim stand.

        Reads ``context.candidates``, ``context.scheduling_policy`` and, on newer hosts,
        ``context.builtin_victim_id`` (when it names no candidate, or is absent, the builtin
        victim is found by the engine's own rule, as the host does). Abstains when the
        bypass is set or the configuration does not select the plugin, when the builtin
        victim has no prediction (candidates without ``predicted_length``, as the current
        host's, always abstain), and when the context is outside the host contract (then
        ``failures`` grows). A returned id is always a candidate's ``request_id``, the very
        string the rule checked.

        Never raises (an ``Exception``); the first call may be slower (observer lookup).
        """
        try:
            candidates = context.candidates  # type: ignore[attr-defined]
            policy = context.scheduling_policy  # type: ignore[attr-defined]
            builtin_id = getattr(context, "builtin_victim_id", None)
        except Exception:
            candidates = policy = builtin_id = None  # decide() refuses it: a failure
        chosen, chosen_id, _, _ = self._judge(candidates, policy, builtin_id, True)
        return None if chosen is None else chosen_id

    def pick_victim(
        self,
        running: Any,
        policy: Any,
        *,
        kv_utilization: float | None = None,
        now_s: float | None = None,
    ) -> Any:
        """``VictimSelector`` API 1: the request to preempt, one of the objects of
        ``running`` (the scheduler then removes that very object from ``running``).

        ``policy`` is the host's ``SchedulingPolicy`` (``.value`` ``"fcfs"`` or
        ``"priority"``); ``kv_utilization`` and ``now_s`` are not read. When the rule
        abstains (bypass, not selected, an unpredicted builtin victim, or an input outside
        the contract, counted as a failure), the host's builtin choice is returned: the last
        request under FCFS, the largest ``(priority, arrival_time)`` under priority (the last
        when those cannot be compared).

        Raises:
            ValueError: when ``running`` is empty, as the host's builtin selector does (there
                is no victim to give; the scheduler never asks then); nothing is counted.
            Exception: when ``running`` is not a sequence at all, what the host's builtin
                selector would raise on it (the scheduler always passes its list).
        """
        del kv_utilization, now_s  # the rule does not read them
        if type(running) is not list:
            running = list(running)  # a tuple, deque or generator: read once, in order
        if not running:
            raise ValueError("running is empty, cannot pick a victim")
        chosen, _, builtin, _ = self._judge(running, policy, None, False)
        if chosen is not None:
            return chosen
        if builtin is not None:
            return builtin
        try:
            by_priority = policy_value(policy)
        except Exception:
            by_priority = False
        return builtin_victim(running, by_priority)

    def emit_observability_log(self, logger: Any, scheduler_name: str) -> None:
        """Log the counters, at most once every :data:`LOG_EVERY_S` seconds (the host calls
        this after every step that preempted). Never raises."""
        try:
            now = time.monotonic()
            if self._logged_at is not None and now - self._logged_at < LOG_EVERY_S:
                return
            self._logged_at = now
            logger.info(
                "%s: DLA victim selector calls=%d selections=%d changed=%d abstentions=%d "
                "failures=%d bypass=%s selected=%s",
                scheduler_name,
                self.calls,
                self.selections,
                self.changed,
                self.abstentions,
                self.failures,
                self._disabled and self._selected,
                self._selected,
            )
        except Exception:  # noqa: S110 - a broken logger must not break scheduling
            pass

    def export_metrics(self) -> dict[str, int]:
        """The counters as a flat dict: ``calls``, ``selections``, ``changed``,
        ``abstentions``, ``failures``, ``observer_errors``, ``bypass`` and ``selected`` (0 or
        1 each)."""
        return {
            "calls": self.calls,
            "selections": self.selections,
            "changed": self.changed,
            "abstentions": self.abstentions,
            "failures": self.failures,
            "observer_errors": self.observer_errors,
            "bypass": int(self._disabled and self._selected),
            "selected": int(self._selected),
        }
