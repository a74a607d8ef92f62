"""A model of vLLM-HUST's ``VictimSelector`` host, API 1 (DLA.md "Host contract: three ways
in"), for the tests and the driver. It models the facts of the host's
``vllm/v1/core/sched/victim_selector.py`` and of the scheduler that calls it; none of the
host's code is copied.

:func:`get_victim_selector` decides, in the host's order:

1. a truthy ``additional_config["victim_selector_plugin_disabled"]``: the no-op selector
   (the emergency bypass; nothing is loaded);
2. an admitted typed scheduler-policy component (:mod:`dla_plugin.sim.host.bundles`), chosen by
   ``additional_config["victim_selector_component"]`` (required when several are admitted):
   its ``implementation_ref`` (``module:attribute``) is imported and materialized; any
   failure is fatal, with no fallback to the legacy path;
3. the legacy entry point named by ``additional_config["victim_selector_plugin"]`` in group
   ``vllm.victim_selector``; nothing named: the no-op selector (installed entry points are
   never loaded unasked).

A loaded class must declare ``vllm_victim_selector_api_version = 1``, offer a callable
``from_vllm_config``, and build an object with the protocol's four members; otherwise the
engine does not start. The scheduler calls ``pick_victim(self.running, self.policy,
kv_utilization=..., now_s=...)`` and removes the returned object from ``running``
(:class:`SelectorScheduler`).
"""

from __future__ import annotations

import enum
import importlib
import importlib.metadata
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from dla_plugin.sim.host.bundles import ResolvedComponent

__all__ = [
    "API_VERSION",
    "COMPONENT_KEY",
    "DISABLED_KEY",
    "PLUGINS_GROUP",
    "PLUGIN_KEY",
    "NoOpVictimSelector",
    "SchedulingPolicy",
    "SelectorScheduler",
    "VictimSelector",
    "VictimSelectorMaterializationError",
    "get_victim_selector",
]

PLUGINS_GROUP = "vllm.victim_selector"
PLUGIN_KEY = "victim_selector_plugin"
COMPONENT_KEY = "victim_selector_component"
DISABLED_KEY = "victim_selector_plugin_disabled"
API_VERSION = 1
SCHEDULER_POLICY_CONTRACT = "vllm.scheduler.policy.v1"

_LOG = logging.getLogger("dla_plugin.sim.host.victim_selector")


class SchedulingPolicy(enum.Enum):
    """The host's scheduling policy enum (a plain ``Enum``, not a ``str``)."""

    FCFS = "fcfs"
    PRIORITY = "priority"


@runtime_checkable
class VictimSelector(Protocol):
    """The host's runtime-checkable protocol: the four members must exist (their
    signatures are not checked by ``isinstance``)."""

    @classmethod
    def from_vllm_config(cls, vllm_config: Any) -> VictimSelector:
        """Build the selector."""
        ...

    def pick_victim(
        self,
        running: Sequence[Any],
        policy: SchedulingPolicy,
        *,
        kv_utilization: float | None = None,
        now_s: float | None = None,
    ) -> Any:
        """One of ``running``: the request to preempt."""
        ...

    def emit_observability_log(self, logger: Any, scheduler_name: str) -> None:
        """Log what the selector did."""
        ...

    def export_metrics(self) -> dict[str, Any]:
        """A flat dict of the selector's own metrics."""
        ...


class NoOpVictimSelector:
    """The host's builtin selector: the last request under FCFS, the largest
    ``(priority, arrival_time)`` under priority."""

    @classmethod
    def from_vllm_config(cls, vllm_config: Any) -> NoOpVictimSelector:
        """A no-op selector, whatever the configuration."""
        del vllm_config
        return cls()

    def pick_victim(
        self,
        running: Sequence[Any],
        policy: SchedulingPolicy,
        *,
        kv_utilization: float | None = None,
        now_s: float | None = None,
    ) -> Any:
        """The builtin victim.

        Raises:
            ValueError: when ``running`` is empty.
        """
        del kv_utilization, now_s
        if not running:
            raise ValueError("running is empty, cannot pick victim")
        if policy == SchedulingPolicy.PRIORITY:
            return max(running, key=lambda r: (r.priority, r.arrival_time))
        return running[-1]

    def emit_observability_log(self, logger: Any, scheduler_name: str) -> None:
        """Nothing to log."""

    def export_metrics(self) -> dict[str, Any]:
        """No metrics."""
        return {}


class VictimSelectorMaterializationError(RuntimeError):
    """An admitted typed component could not be made into a selector (fatal, no fallback)."""


def _additional(vllm_config: Any) -> Any:
    if isinstance(vllm_config, dict):
        return vllm_config.get("additional_config") or {}
    return getattr(vllm_config, "additional_config", None) or {}


def _select_component(
    components: Sequence[ResolvedComponent], additional: Any
) -> ResolvedComponent | None:
    providers = [
        c
        for c in components
        if SCHEDULER_POLICY_CONTRACT in c.contracts and "scheduler" in c.execution_planes
    ]
    selected = additional.get(COMPONENT_KEY)
    ids = sorted(c.qualified_id for c in providers)
    if selected is not None:
        for provider in providers:
            if provider.qualified_id == selected:
                return provider
        raise VictimSelectorMaterializationError(
            f"{COMPONENT_KEY} selects no admitted scheduler-policy provider: {selected!r}; "
            f"available providers: {ids}"
        )
    if len(providers) > 1:
        raise VictimSelectorMaterializationError(
            f"multiple admitted scheduler-policy providers require an explicit {COMPONENT_KEY}: "
            f"{ids}"
        )
    return providers[0] if providers else None


def load_implementation(reference: str) -> Any:
    """The object a ``module:attribute`` reference names (dotted attributes walked).

    Raises:
        VictimSelectorMaterializationError: for another syntax, or when importing fails.
    """
    module, sep, path = reference.partition(":")
    if not sep or not module or not path:
        raise VictimSelectorMaterializationError(
            f"scheduler-policy implementation_ref must use module:attribute syntax: {reference!r}"
        )
    try:
        target: Any = importlib.import_module(module)
        for part in path.split("."):
            if not part:
                raise AttributeError("empty attribute segment")
            target = getattr(target, part)
    except Exception as exc:
        raise VictimSelectorMaterializationError(
            f"failed to import scheduler-policy implementation {reference!r}"
        ) from exc
    return target


def _materialize(component: ResolvedComponent, vllm_config: Any) -> VictimSelector:
    name = component.qualified_id
    implementation = load_implementation(component.implementation_ref)
    version = getattr(implementation, "vllm_victim_selector_api_version", None)
    if version != API_VERSION:
        raise VictimSelectorMaterializationError(
            f"scheduler-policy component {name!r} declares API version {version!r}; expected 1"
        )
    factory = getattr(implementation, "from_vllm_config", None)
    if not callable(factory):
        raise VictimSelectorMaterializationError(
            f"scheduler-policy component {name!r} does not expose a callable from_vllm_config "
            "factory"
        )
    try:
        selector = factory(vllm_config)
    except Exception as exc:
        raise VictimSelectorMaterializationError(
            f"scheduler-policy component {name!r} failed to initialize"
        ) from exc
    if not isinstance(selector, VictimSelector):
        raise VictimSelectorMaterializationError(
            f"scheduler-policy component {name!r} returned an object that does not implement "
            "VictimSelector"
        )
    return selector


def _legacy(
    additional: Any, vllm_config: Any, entry_points: Callable[..., Iterable[Any]]
) -> VictimSelector:
    requested = additional.get(PLUGIN_KEY)
    if requested is None:
        return NoOpVictimSelector()
    if not isinstance(requested, str) or not requested.strip():
        raise ValueError(f"additional_config.{PLUGIN_KEY} must be a non-empty string")
    requested = requested.strip()
    try:
        found = [ep for ep in entry_points(group=PLUGINS_GROUP) if ep.name == requested]
    except Exception as exc:
        raise RuntimeError(
            f"Failed to discover requested victim selector plugin {requested!r}"
        ) from exc
    if not found:
        names = sorted(ep.name for ep in entry_points(group=PLUGINS_GROUP))
        raise ValueError(
            f"Requested victim selector plugin {requested!r} is not installed; available "
            f"plugins: {', '.join(names) or 'none'}"
        )
    if len(found) > 1:
        raise RuntimeError(
            f"Multiple victim selector entry points are registered as {requested!r}; "
            "uninstall duplicate distributions"
        )
    selected = found[0]
    try:
        cls = selected.load()
        version = getattr(cls, "vllm_victim_selector_api_version", None)
        if version != API_VERSION:
            raise TypeError(
                f"plugin declares victim-selector API version {version!r}; expected {API_VERSION}"
            )
        factory = getattr(cls, "from_vllm_config", None)
        if not callable(factory):
            raise TypeError("plugin does not define from_vllm_config()")
        selector = factory(vllm_config)
        if not isinstance(selector, VictimSelector):
            raise TypeError("plugin does not implement the VictimSelector protocol")
    except Exception as exc:
        raise RuntimeError(
            f"Failed to load requested victim selector plugin {selected.name!r}: {exc}"
        ) from exc
    return selector


def get_victim_selector(
    vllm_config: Any,
    *,
    components: Sequence[ResolvedComponent] = (),
    entry_points: Callable[..., Iterable[Any]] = importlib.metadata.entry_points,
) -> VictimSelector:
    """The selector the host's scheduler would use (see the module's text).

    ``vllm_config`` is an object with ``additional_config`` (or a dict with that member);
    ``components`` are the admitted components of the extension startup
    (:func:`dla_plugin.sim.host.bundles.resolve_startup`).

    Raises:
        VictimSelectorMaterializationError: on the typed component path.
        ValueError, RuntimeError: on the legacy path, as the host raises them.
    """
    additional = _additional(vllm_config)
    if additional.get(DISABLED_KEY):
        return NoOpVictimSelector()
    component = _select_component(components, additional)
    if component is not None:
        selector = _materialize(component, vllm_config)
        _LOG.info("Loaded typed victim selector component=%s", component.qualified_id)
        return selector
    return _legacy(additional, vllm_config, entry_points)


class SelectorScheduler:
    """The scheduler's side of the ``VictimSelector`` path: asks ``selector`` for a victim
    among ``running`` and removes exactly that object (the scheduler's
    ``running.remove(victim)``), and logs through the selector after every step that
    preempted.

    It also counts, as an observer outside the plugin would: ``calls``, and ``changed``
    (victims other than the one the host's no-op selector would have chosen).
    """

    def __init__(self, selector: VictimSelector, *, scheduler_name: str = "Scheduler") -> None:
        self.selector = selector
        self.scheduler_name = scheduler_name
        self.calls = 0
        self.changed = 0
        self._builtin = NoOpVictimSelector()

    def victim(
        self,
        running: list[Any],
        requesting: Any,
        scheduling_policy: str,
        kv_cache_usage: float,
        now: float,
    ) -> Any:
        """``selector.pick_victim(running, policy, ...)``, checked as the scheduler uses it.

        Raises:
            ValueError: when the answer is not one of ``running`` (``running.remove`` fails
                in the real scheduler, which stops).
        """
        del requesting
        policy = SchedulingPolicy(scheduling_policy)
        if isinstance(self.selector, NoOpVictimSelector):
            return self.selector.pick_victim(running, policy)
        self.calls += 1
        builtin = self._builtin.pick_victim(running, policy)
        victim = self.selector.pick_victim(
            running, policy, kv_utilization=kv_cache_usage, now_s=now
        )
        if not any(r is victim for r in running):
            raise ValueError(f"victim selector returned {victim!r}, not one of running")
        if victim is not builtin:
            self.changed += 1
        return victim

    def end_step(self, preempted: bool) -> None:
        """The scheduler asks the selector to log after a step that preempted."""
        if preempted:
            self.selector.emit_observability_log(_LOG, self.scheduler_name)

    def summary(self) -> dict[str, Any]:
        """What the host saw: ``calls``, ``changed``, and the selector's metrics."""
        return {
            "selector": type(self.selector).__name__,
            "calls": self.calls,
            "changed": self.changed,
            "metrics": self.selector.export_metrics(),
        }
