"""The DLA plugin in models of the real vLLM-HUST host, on its three paths (DLA.md "Host
contract: three ways in"): the typed preemption policy (API 1.0), the typed component and the
legacy entry point (both ``VictimSelector`` API 1). The models
(:mod:`dla_plugin.sim.host.preemption`, :mod:`dla_plugin.sim.host.victim_selector`,
:mod:`dla_plugin.sim.host.bundles`) follow the facts of the host's files; the plugin is
loaded through the installed metadata, as the host loads it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ecpa.observer
from dla_plugin.contract import Candidate, PreemptionContext
from dla_plugin.selector import DlaVictimSelector
from dla_plugin.sim.drive import host_path, requests
from dla_plugin.sim.engine import BlockPoolEngine
from dla_plugin.sim.host.bundles import BundleError, resolve_startup
from dla_plugin.sim.host.preemption import HostCandidate, PreemptionController, load_policy
from dla_plugin.sim.host.victim_selector import (
    NoOpVictimSelector,
    SchedulingPolicy,
    SelectorScheduler,
    VictimSelector,
    VictimSelectorMaterializationError,
    get_victim_selector,
)

SEL, ABS, FAIL, CHG = (
    ecpa.observer.SELECTION,
    ecpa.observer.ABSTENTION,
    ecpa.observer.FAILURE,
    ecpa.observer.CHANGED,
)
BUNDLE = "org.vllm-hust.dla"
COMPONENT = "org.vllm-hust.dla/victim-selector"
QUALNAME = "dla_plugin.selector.DlaVictimSelector"
DECISIONS = 10_000


class Counting:
    """An observer that counts outcomes as ecpa's does (the fields of the signed counters)."""

    def __init__(self) -> None:
        self.calls = self.selections = self.changed = self.abstentions = self.failures = 0

    def count(self, outcome: int) -> None:
        self.calls += 1
        if outcome in (SEL, CHG):
            self.selections += 1
            self.changed += outcome == CHG
        elif outcome == ABS:
            self.abstentions += 1
        else:
            self.failures += 1


@dataclass(eq=False)
class HostRequest:
    """The shape of the host's ``Request`` the scheduler passes in ``running``: identity
    equality, ``num_output_tokens`` a property over the output tokens, and
    ``predicted_length`` only on cores with the prediction change."""

    request_id: str
    priority: int
    arrival_time: float
    num_prompt_tokens: int
    output_token_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0
    num_preemptions: int = 0
    max_tokens: int = 4096

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)


@dataclass(eq=False)
class PredictedRequest(HostRequest):
    predicted_length: int | None = None


def _config(policy: object = None, **additional: object) -> SimpleNamespace:
    """The parts of the engine's configuration the host paths read."""
    return SimpleNamespace(
        additional_config=dict(additional),
        scheduler_config=SimpleNamespace(preemption_policy=policy),
    )


def _running(rng: random.Random, predictions: bool) -> list[HostRequest]:
    out: list[HostRequest] = []
    for i in range(rng.randint(1, 12)):
        args: dict[str, Any] = {
            "request_id": f"req-{i}",
            "priority": rng.randint(0, 2),
            "arrival_time": float(rng.randint(0, 5)),
            "num_prompt_tokens": rng.randint(1, 500),
            "output_token_ids": [0] * rng.randint(0, 60),
        }
        if predictions:
            value = rng.choice([None, rng.randint(0, 80), float(rng.randint(0, 80))])
            out.append(PredictedRequest(**args, predicted_length=value))  # type: ignore[arg-type]
        else:
            out.append(HostRequest(**args))
    return out


def _rule(running: list[Any], by_priority: bool) -> Any:
    """DLA.md's rule the slow way: (victim or None, builtin)."""
    builtin = (
        max(running, key=lambda r: (r.priority, r.arrival_time)) if by_priority else running[-1]
    )
    if getattr(builtin, "predicted_length", None) is None:
        return None, builtin
    ranked = [
        (max(int(r.predicted_length) - r.num_output_tokens, 0), r.arrival_time, i)
        for i, r in enumerate(running)
        if getattr(r, "predicted_length", None) is not None
    ]
    return running[max(ranked)[2]], builtin


# -- the legacy entry point and the typed component: VictimSelector API 1 ----------------------


def _legacy(**extra: object) -> Any:
    return get_victim_selector(_config(victim_selector_plugin="dla", **extra))


def _component(**extra: object) -> Any:
    config = _config(victim_selector_component=COMPONENT, **extra)
    return get_victim_selector(config, components=resolve_startup([BUNDLE]))


@pytest.mark.parametrize("load", [_legacy, _component], ids=["legacy", "component"])
def test_the_host_loads_the_plugin_as_a_victim_selector(load: Any) -> None:
    """Both victim-selector paths load the plugin, never ending in "declares victim-selector
    API version None"."""
    selector = load()
    assert type(selector) is DlaVictimSelector
    assert isinstance(selector, VictimSelector)
    assert DlaVictimSelector.vllm_victim_selector_api_version == 1


@pytest.mark.parametrize("load", [_legacy, _component], ids=["legacy", "component"])
@pytest.mark.parametrize("predictions", [False, True], ids=["no-predictions", "predictions"])
def test_ten_thousand_fuzzed_decisions(load: Any, predictions: bool) -> None:
    selector = load()
    counting = Counting()
    selector._observer, selector._bound = counting, False  # count into a fake, as a launch would
    scheduler = SelectorScheduler(selector)
    rng = random.Random(f"{load.__name__}-{predictions}")
    for _ in range(DECISIONS):
        running = _running(rng, predictions)
        policy = rng.choice(list(SchedulingPolicy))
        expected, builtin = _rule(running, policy is SchedulingPolicy.PRIORITY)
        victim = scheduler.victim(running, running[-1], policy.value, 0.99, 1.0)
        running.remove(victim)  # what the scheduler does next; raises if it is not there
        assert victim is (expected if expected is not None else builtin)
    metrics = selector.export_metrics()
    assert metrics["failures"] == counting.failures == 0
    assert metrics["calls"] == scheduler.calls == counting.calls == DECISIONS
    assert metrics["changed"] == scheduler.changed == counting.changed
    assert (metrics["selections"], metrics["abstentions"]) == (
        counting.selections,
        counting.abstentions,
    )
    if predictions:
        assert 0 < metrics["changed"] < metrics["selections"]  # the rule chose, often another
    else:
        assert metrics["abstentions"] == DECISIONS  # the builtin's choice, every time


@pytest.mark.parametrize("load", [_legacy, _component], ids=["legacy", "component"])
def test_the_bypass_gives_the_hosts_own_selector(load: Any) -> None:
    selector = load(victim_selector_plugin_disabled=True)
    assert type(selector) is NoOpVictimSelector


def test_the_component_path_fails_closed_as_the_host_does() -> None:
    with pytest.raises(VictimSelectorMaterializationError, match="selects no admitted"):
        get_victim_selector(
            _config(victim_selector_component=f"{BUNDLE}/other"),
            components=resolve_startup([BUNDLE]),
        )
    with pytest.raises(BundleError, match="requires host API"):
        resolve_startup([BUNDLE], host_api_version="2.0")
    with pytest.raises(BundleError, match="no configured manifest"):
        resolve_startup(["org.example.none"])


def test_the_legacy_path_refuses_what_the_host_refuses() -> None:
    with pytest.raises(ValueError, match="is not installed"):
        get_victim_selector(_config(victim_selector_plugin="nope"))
    with pytest.raises(ValueError, match="non-empty string"):
        get_victim_selector(_config(victim_selector_plugin=""))
    assert type(get_victim_selector(_config())) is NoOpVictimSelector  # nothing asked: builtin


# -- the typed preemption policy, API 1.0 ------------------------------------------------------


def _context(
    rng: random.Random, predictions: bool, builtin_id: bool
) -> tuple[PreemptionContext, list[Any]]:
    running = _running(rng, predictions)
    policy = rng.choice(["fcfs", "priority"])
    cands = PreemptionController(None, predictions=predictions).candidates(running)
    assert all(type(c) is (Candidate if predictions else HostCandidate) for c in cands)
    given = _rule(running, policy == "priority")[1].request_id if builtin_id else None
    return PreemptionContext(cands, policy, running[-1].request_id, 0.99, 1.0, given), running


@pytest.mark.parametrize("builtin_id", [False, True], ids=["api-1.0", "builtin-id"])
@pytest.mark.parametrize("predictions", [False, True], ids=["current-host", "predictions"])
def test_typed_policy_ten_thousand_fuzzed_decisions(builtin_id: bool, predictions: bool) -> None:
    """The typed preemption policy: the controller loads the class by qualname; its counters
    equal the observer's, and nothing fails."""
    policy = load_policy(_config(QUALNAME))
    assert type(policy) is DlaVictimSelector
    counting = Counting()
    policy._observer, policy._bound = counting, False
    controller = PreemptionController(policy, builtin_victim_id=builtin_id, predictions=predictions)
    rng = random.Random(f"typed-{builtin_id}-{predictions}")
    for _ in range(DECISIONS):
        context, running = _context(rng, predictions, builtin_id)
        expected, builtin = _rule(running, context.scheduling_policy == "priority")
        want = (expected if expected is not None else builtin).request_id
        assert controller.choose(context) == want
    stats = controller.export_stats()
    assert stats["enabled"] is True
    assert stats["failures"] == stats["invalid_selections"] == counting.failures == 0
    assert (stats["calls"], stats["selections"], stats["abstentions"]) == (
        counting.calls,
        counting.selections,
        counting.abstentions,
    )
    assert controller.changed == counting.changed
    if not predictions:
        assert stats["abstentions"] == DECISIONS


def test_typed_policy_bypass_abstains() -> None:
    policy = load_policy(_config(QUALNAME, victim_selector_plugin_disabled=True))
    assert isinstance(policy, DlaVictimSelector)
    assert policy.disabled


# -- one rule, whatever the path -----------------------------------------------------------------


def _engine_run(path: str, *, bypass: bool = False, name: str = "dla") -> tuple[Any, ...]:
    controller = host_path(path, name, bypass=bypass)
    if isinstance(controller, SelectorScheduler) and isinstance(
        controller.selector, DlaVictimSelector
    ):
        controller.selector._observer = None
    if isinstance(controller, PreemptionController) and controller.policy is not None:
        controller.policy._observer = None  # type: ignore[attr-defined]
    engine = BlockPoolEngine(controller, total_blocks=384)
    stream = requests(3)
    arrival, pending = next(stream)
    for _ in range(2000):
        while arrival <= engine.stats.steps:
            engine.add(pending)
            arrival, pending = next(stream)
        engine.step()
    stats = engine.stats
    finished = tuple((r.request_id, r.finished_step) for r in stats.finished)
    return stats.preemptions, stats.wasted_tokens, finished


def test_the_three_paths_make_the_same_decisions() -> None:
    runs = {path: _engine_run(path) for path in ("legacy", "component", "policy")}
    assert runs["legacy"] == runs["component"] == runs["policy"]
    builtin = _engine_run("legacy", name="builtin")
    assert runs["legacy"] != builtin  # the rule changed something
    assert runs["legacy"][0] > 0


@pytest.mark.parametrize("path", ["legacy", "component", "policy"])
def test_the_bypass_is_the_builtin_run_on_every_path(path: str) -> None:
    assert _engine_run(path, bypass=True) == _engine_run("policy", name="builtin")


# -- properties: any running, any policy, every path ---------------------------------------------

JUNK = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=2))


@st.composite
def running_lists(draw: st.DrawFn) -> list[Any]:
    """Running requests, most of them well formed (ids shared now and then, predictions as
    ints, integral floats or absent), some with junk in one attribute."""
    n = draw(st.integers(1, 8))
    out: list[Any] = []
    for i in range(n):
        fields: dict[str, Any] = {
            "request_id": draw(st.sampled_from([f"r{i}", "dup"])),
            "priority": draw(st.integers(-2, 2)),
            "arrival_time": draw(st.floats(0, 5)),
            "num_output_tokens": draw(st.integers(0, 50)),
        }
        if draw(st.booleans()):
            fields["predicted_length"] = draw(st.integers(0, 80) | st.integers(0, 80).map(float))
        if draw(st.integers(0, 9)) == 0:  # one request in ten: junk in one attribute
            fields[draw(st.sampled_from(sorted(fields)))] = draw(JUNK)
        out.append(SimpleNamespace(**fields))
    return out


@settings(deadline=None, max_examples=300)
@given(running=running_lists(), policy=st.sampled_from([*SchedulingPolicy, "lifo", None]))
def test_pick_victim_always_returns_one_of_running(running: list[Any], policy: Any) -> None:
    selector = DlaVictimSelector(observer=None)
    victim = selector.pick_victim(running, policy)
    assert any(victim is r for r in running)
    assert selector.calls == 1
    assert selector.selections + selector.abstentions + selector.failures == 1


@settings(deadline=None, max_examples=300)
@given(running=running_lists(), policy=st.sampled_from(["fcfs", "priority"]))
def test_the_typed_controller_is_never_disabled(running: list[Any], policy: str) -> None:
    selector = DlaVictimSelector(observer=None)
    controller = PreemptionController(selector)
    context = PreemptionContext(tuple(running), policy, "r0", 0.5, 1.0, None)
    try:
        victim = controller.choose(context)
    except (TypeError, ValueError):
        return  # the host's own builtin rule cannot order this junk: not the plugin's doing
    assert not controller.disabled
    assert controller.export_stats()["failures"] == 0
    assert victim in [getattr(r, "request_id", None) for r in running]


def test_the_properties_exercise_every_outcome() -> None:
    """Guard for the two properties above: their inputs select, change, abstain and fail."""
    seen = Counting()

    @settings(deadline=None, max_examples=300, database=None)
    @given(running=running_lists(), policy=st.sampled_from(list(SchedulingPolicy)))
    def sample(running: list[Any], policy: Any) -> None:
        selector = DlaVictimSelector(observer=seen)
        selector.pick_victim(running, policy)

    sample()
    assert seen.selections > 30
    assert seen.changed > 10
    assert seen.abstentions > 30
    assert seen.failures > 10


def test_docs_name_each_paths_configuration_and_it_works() -> None:
    """docs/dla.md "Three ways into the host" names each path's configuration, and each
    one, taken from the page, loads the plugin in the host model."""
    from tests.support import ROOT

    page = (ROOT / "docs" / "dla.md").read_text(encoding="utf-8")
    assert f"--preemption-policy {QUALNAME}" in page
    assert "--extension org.vllm-hust.dla" in page
    assert f'"victim_selector_component": "{COMPONENT}"' in page
    assert '"victim_selector_plugin": "dla"' in page
    assert type(load_policy(_config(QUALNAME))) is DlaVictimSelector
    assert type(_component()) is DlaVictimSelector
    assert type(_legacy()) is DlaVictimSelector
