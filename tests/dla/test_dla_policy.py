"""The DLA policy (DLA.md): victim rule, observer outcomes, admission reserve, pick_victim."""

from __future__ import annotations

import decimal
import enum
import math
import numbers
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ecpa.observer
from dla_plugin import (
    Candidate,
    DlaVictimSelector,
    PreemptionContext,
    WaitingRequest,
    admit,
    blocks_needed,
)
from dla_plugin.selector import BYPASS_KEY

SEL, ABS, FAIL = ecpa.observer.SELECTION, ecpa.observer.ABSTENTION, ecpa.observer.FAILURE
CHG = ecpa.observer.CHANGED  # a selection other than the builtin victim


class IntSub(int):
    """An int subclass that is not a bool (an enum-like count, say)."""


class numbers_integral:
    """A numbers.Integral that is not an int (as a numpy integer is)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


numbers.Integral.register(numbers_integral)


class FakeObserver:
    def __init__(self) -> None:
        self.outcomes: list[int] = []

    def count(self, outcome: int) -> None:
        self.outcomes.append(outcome)


def cand(
    rid: str, pred: int | None = None, out: int = 0, arrival: float = 0.0, priority: int = 0
) -> Candidate:
    return Candidate(rid, priority, arrival, 100, out, 100 + out, 0, 4096, pred)


def ctx(
    cands: Sequence[Any], policy: str = "fcfs", builtin: str | None = None
) -> PreemptionContext:
    return PreemptionContext(tuple(cands), policy, "new", 0.97, 1000.0, builtin)


def run(context: object, **config: object) -> tuple[str | None, DlaVictimSelector, list[int]]:
    """One call on a fresh selector with a fake observer: (result, selector, outcomes)."""
    fake = FakeObserver()
    selector = DlaVictimSelector(config or None, observer=fake)
    return selector.select_victim(context), selector, fake.outcomes


def builtin_of(context: PreemptionContext) -> Candidate:
    """The engine's own victim, the slow, obvious way (valid contexts only)."""
    cands = list(context.candidates)
    if context.builtin_victim_id is not None:
        return next(c for c in cands if c.request_id == context.builtin_victim_id)
    if context.scheduling_policy == "fcfs":
        return cands[-1]
    return max(cands, key=lambda c: (c.priority, c.arrival_time))


def reference(context: PreemptionContext) -> str | None:
    """DLA.md's victim rule written the slow, obvious way (valid contexts only)."""
    cands = list(context.candidates)
    if builtin_of(context).predicted_length is None:
        return None
    ranked = [
        (max(c.predicted_length - c.num_output_tokens, 0), c.arrival_time, i, c.request_id)
        for i, c in enumerate(cands)
        if c.predicted_length is not None
    ]
    return max(ranked)[3]


def expected_outcome(context: PreemptionContext, victim: str | None) -> int:
    """ABS, SEL (the builtin victim itself) or CHG (another one) for a valid context."""
    if victim is None:
        return ABS
    return SEL if victim == builtin_of(context).request_id else CHG


# -- the victim rule ---------------------------------------------------------------------------


def test_no_predictions_abstains() -> None:
    victim, selector, outcomes = run(ctx([cand("a", out=5), cand("b"), cand("c")]))
    assert victim is None
    assert outcomes == [ABS]
    assert selector.failures == 0


def test_unpredicted_builtin_victim_abstains_even_if_others_are_predicted() -> None:
    victim, _, outcomes = run(ctx([cand("a", pred=500), cand("b", pred=900), cand("c")]))
    assert victim is None
    assert outcomes == [ABS]


def test_most_predicted_remaining_output_is_chosen() -> None:
    cands = [cand("a", pred=100, out=10), cand("b", pred=50), cand("c", pred=200, out=150)]
    victim, _, outcomes = run(ctx(cands))
    assert victim == "a"  # 90 remaining, against 50 and 50
    assert outcomes == [CHG]  # the builtin victim was "c": the plugin changed the decision


def test_the_builtin_victim_itself_may_be_chosen() -> None:
    victim, selector, outcomes = run(ctx([cand("a", pred=5), cand("b", pred=50)]))
    assert victim == "b"
    assert outcomes == [SEL]  # a selection, and not a changed decision
    assert (selector.selections, selector.changed) == (1, 0)


def test_remaining_output_clamps_at_zero() -> None:
    # Both are past their prediction: 0 remaining each, so the later arrival wins. Without the
    # clamp, "early" (10 - 20 = -10) would beat "late" (10 - 50 = -40).
    cands = [
        cand("early", pred=10, out=20, arrival=1.0),
        cand("late", pred=10, out=50, arrival=2.0),
    ]
    assert run(ctx(cands))[0] == "late"
    cands = [cand("over", pred=10, out=500, arrival=9.0), cand("some", pred=3, arrival=1.0)]
    assert run(ctx(cands))[0] == "some"


def test_ties_go_to_the_later_arrival() -> None:
    cands = [cand("late", pred=40, arrival=2.0), cand("early", pred=40, arrival=1.0)]
    assert run(ctx(cands))[0] == "late"
    cands = [cand("early", pred=40, arrival=1.0), cand("late", pred=40, arrival=2.0)]
    assert run(ctx(cands))[0] == "late"


def test_equal_arrival_ties_go_to_the_later_in_running_order() -> None:
    cands = [cand("first", pred=40, arrival=1.0), cand("second", pred=40, arrival=1.0)]
    assert run(ctx(cands))[0] == "second"


def test_fcfs_and_priority_find_different_builtin_victims() -> None:
    # Under priority the builtin victim is max((priority, arrival_time)): "low" (priority 9).
    cands = [cand("low", priority=9), cand("x", pred=80, priority=1), cand("last", pred=10)]
    assert run(ctx(cands, "fcfs"))[0] == "x"
    assert run(ctx(cands, "priority"))[0] is None
    cands = [cand("low", pred=5, priority=9), cand("x", pred=80, priority=1), cand("last")]
    assert run(ctx(cands, "fcfs"))[0] is None
    assert run(ctx(cands, "priority"))[0] == "x"


def test_priority_builtin_victim_breaks_ties_by_arrival_then_running_order() -> None:
    cands = [cand("old", pred=90, priority=3, arrival=1.0), cand("new", priority=3, arrival=2.0)]
    assert run(ctx(cands, "priority"))[0] is None  # "new" arrived later: it is the victim
    # Equal (priority, arrival_time): the first in running order, as max() picks it.
    cands = [
        cand("first", priority=3, arrival=1.0),
        cand("second", pred=9, priority=3, arrival=1.0),
    ]
    assert run(ctx(cands, "priority"))[0] is None
    assert run(ctx(cands[::-1], "priority"))[0] == "second"


def test_builtin_victim_id_overrides_the_policy_rule() -> None:
    cands = [cand("a", pred=100), cand("mid"), cand("last", pred=10)]
    assert run(ctx(cands))[0] == "a"
    assert run(ctx(cands, builtin="mid"))[0] is None
    assert run(ctx(cands, "priority", builtin="last"))[0] == "a"
    # A context object without the attribute at all: the policy's rule applies.
    bare = SimpleNamespace(candidates=cands, scheduling_policy="fcfs")
    assert run(bare)[0] == "a"


def test_bypass_always_abstains_and_counts_an_abstention() -> None:
    cands = [cand("a", pred=100), cand("b", pred=10)]
    victim, selector, outcomes = run(ctx(cands), **{BYPASS_KEY: True})
    assert victim is None
    assert selector.disabled
    assert outcomes == [ABS]
    assert run(None, **{BYPASS_KEY: True})[2] == [ABS]  # not even looked at: no failure


SELECT = {"victim_selector_plugin": "dla"}  # the legacy path's selection


@pytest.mark.parametrize(
    ("config", "disabled"),
    [
        ({**SELECT, BYPASS_KEY: True}, True),
        ({"additional_config": {**SELECT, BYPASS_KEY: True}}, True),
        (SimpleNamespace(additional_config={**SELECT, BYPASS_KEY: True}), True),
        (SimpleNamespace(additional_config={**SELECT, BYPASS_KEY: False}), False),
        # Truthy, as the host's get_victim_selector reads the same key on its paths.
        (SimpleNamespace(additional_config={**SELECT, BYPASS_KEY: "true"}), True),
        (SimpleNamespace(additional_config={**SELECT, BYPASS_KEY: 1}), True),
        (SimpleNamespace(additional_config={**SELECT, BYPASS_KEY: 0}), False),
        (SimpleNamespace(additional_config={**SELECT, BYPASS_KEY: ""}), False),
        (SimpleNamespace(additional_config={**SELECT, BYPASS_KEY: None}), False),
        (SimpleNamespace(additional_config=SELECT), False),
    ],
)
def test_from_vllm_config_reads_the_bypass(config: object, disabled: bool) -> None:
    selector = DlaVictimSelector.from_vllm_config(config, observer=None)
    assert selector.disabled is disabled
    expected = None if disabled else "a"
    assert selector.select_victim(ctx([cand("a", pred=9), cand("b", pred=1)])) == expected


def _scheduler(policy: object) -> SimpleNamespace:
    return SimpleNamespace(
        additional_config={}, scheduler_config=SimpleNamespace(preemption_policy=policy)
    )


@pytest.mark.parametrize(
    ("config", "selected"),
    [
        (SimpleNamespace(additional_config={"victim_selector_plugin": "dla"}), True),
        (SimpleNamespace(additional_config={"victim_selector_plugin": " dla "}), True),
        (
            SimpleNamespace(
                additional_config={"victim_selector_component": "org.vllm-hust.dla/victim-selector"}
            ),
            True,
        ),
        (_scheduler("dla_plugin.selector.DlaVictimSelector"), True),
        (_scheduler(DlaVictimSelector), True),
        (_scheduler("other.Policy"), False),
        (SimpleNamespace(additional_config={"victim_selector_plugin": "bidkv"}), False),
        (SimpleNamespace(additional_config={"victim_selector_component": "org.x/y"}), False),
        (SimpleNamespace(additional_config={}), False),  # an older host loading it unasked
        (None, False),
        (42, False),
        ("victim_selector_plugin", False),
        (SimpleNamespace(), False),
    ],
)
def test_only_a_configuration_that_selects_it_makes_it_act(
    config: object, selected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DLA.md "Installing it changes no scheduling behaviour": older hosts load the first
    ``vllm.victim_selector`` entry point they find; unselected, the policy only abstains."""
    monkeypatch.delenv("VLLM_EXTENSION_BUNDLES", raising=False)
    monkeypatch.delenv("VLLM_EXTENSION_MANIFESTS", raising=False)
    selector = DlaVictimSelector.from_vllm_config(config, observer=None)
    assert selector.selected is selected
    assert selector.disabled is not selected
    expected = "a" if selected else None
    assert selector.select_victim(ctx([cand("a", pred=9), cand("b", pred=1)])) == expected
    assert selector.export_metrics()["selected"] == int(selected)
    assert selector.export_metrics()["bypass"] == 0


def test_the_extension_selection_selects_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--extension org.vllm-hust.dla`` (the host sets VLLM_EXTENSION_BUNDLES), or its
    manifest in VLLM_EXTENSION_MANIFESTS: the host uses a single admitted provider unasked."""
    from dla_plugin import manifests

    bare = SimpleNamespace(additional_config={})
    monkeypatch.delenv("VLLM_EXTENSION_MANIFESTS", raising=False)
    monkeypatch.setenv("VLLM_EXTENSION_BUNDLES", "org.example.other, org.vllm-hust.dla")
    assert DlaVictimSelector.from_vllm_config(bare, observer=None).selected
    monkeypatch.setenv("VLLM_EXTENSION_BUNDLES", "org.example.other")
    assert not DlaVictimSelector.from_vllm_config(bare, observer=None).selected
    monkeypatch.delenv("VLLM_EXTENSION_BUNDLES")
    manifest = os.path.join(os.path.dirname(manifests.__file__), "vllm-hust-extension-v1.json")
    monkeypatch.setenv("VLLM_EXTENSION_MANIFESTS", os.pathsep.join(["/nonexistent.json", manifest]))
    assert DlaVictimSelector.from_vllm_config(bare, observer=None).selected
    monkeypatch.setenv("VLLM_EXTENSION_MANIFESTS", "/nonexistent.json")
    assert not DlaVictimSelector.from_vllm_config(bare, observer=None).selected


def test_from_vllm_config_tolerates_hostile_objects() -> None:
    class Hostile:
        @property
        def additional_config(self) -> object:
            raise RuntimeError("boom")

    class HostileMapping(dict[str, object]):
        def __contains__(self, key: object) -> bool:
            raise RuntimeError("boom")

        def get(self, key: str, default: object = None) -> object:
            raise RuntimeError("boom")

    for config in (Hostile(), HostileMapping()):
        selector = DlaVictimSelector.from_vllm_config(config, observer=None)
        assert not selector.selected  # unreadable: selects nothing, raises nothing
        assert selector.export_metrics()["bypass"] == 0
    assert not DlaVictimSelector(HostileMapping(), observer=None).disabled


class Exploding:
    """A candidate whose every attribute read raises."""

    def __getattr__(self, name: str) -> object:
        raise RuntimeError(name)


def _valid() -> list[Any]:
    # Selects "a" (fcfs: the builtin "b" is predicted); each case below breaks one thing.
    return [cand("a", pred=100, arrival=1.0), cand("b", pred=10, arrival=2.0)]


def _with(**changes: object) -> PreemptionContext:
    cands = _valid()
    cands[0] = SimpleNamespace(**{**vars(cands[0]), **changes})
    return ctx(cands)


def _without(name: str) -> PreemptionContext:
    cands = _valid()
    fields = vars(cands[0]).copy()
    del fields[name]
    cands[0] = SimpleNamespace(**fields)
    return ctx(cands)


MALFORMED: dict[str, object] = {
    "context None": None,
    "context without candidates": SimpleNamespace(scheduling_policy="fcfs"),
    "empty candidates": ctx([]),
    "candidates not iterable": SimpleNamespace(candidates=5, scheduling_policy="fcfs"),
    "a None candidate": ctx([None, *_valid()]),
    "a candidate that raises": ctx([Exploding(), *_valid()]),
    "missing request_id": _without("request_id"),
    "missing arrival_time": _without("arrival_time"),
    "missing num_output_tokens": _without("num_output_tokens"),
    "request_id int": _with(request_id=7),
    "request_id empty": _with(request_id=""),
    "output tokens str": _with(num_output_tokens="3"),
    "output tokens bool": _with(num_output_tokens=True),
    "output tokens negative": _with(num_output_tokens=-1),
    "output tokens float": _with(num_output_tokens=3.0),
    "output tokens huge": _with(num_output_tokens=1 << 63),
    "prediction str": _with(predicted_length="100"),
    "prediction bool": _with(predicted_length=True),
    "prediction negative": _with(predicted_length=-5),
    "prediction fractional": _with(predicted_length=100.5),
    "prediction negative float": _with(predicted_length=-1.0),
    "prediction inf": _with(predicted_length=math.inf),
    "prediction huge float": _with(predicted_length=1e30),
    "prediction complex": _with(predicted_length=100j),
    "prediction Decimal": _with(predicted_length=decimal.Decimal(100)),
    "prediction NaN": _with(predicted_length=math.nan),
    "prediction huge": _with(predicted_length=10**30),
    "arrival NaN": _with(arrival_time=math.nan),
    "arrival inf": _with(arrival_time=math.inf),
    "arrival str": _with(arrival_time="1.0"),
    "arrival bool": _with(arrival_time=False),
    "arrival huge int": _with(arrival_time=10**40),
    "unknown policy": ctx(_valid(), "lifo"),
    "policy None": ctx(_valid(), None),  # type: ignore[arg-type]
    "priority missing under priority": replace(_without("priority"), scheduling_policy="priority"),
    "priority bool under priority": replace(_with(priority=True), scheduling_policy="priority"),
    "priority str under priority": replace(_with(priority="1"), scheduling_policy="priority"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_context_abstains_and_counts_a_failure(name: str) -> None:
    victim, selector, outcomes = run(MALFORMED[name])
    assert victim is None
    assert selector.failures == 1
    assert outcomes == [FAIL]


@pytest.mark.parametrize("given", ["zzz", "", 1, None, SimpleNamespace()])
def test_a_builtin_id_naming_no_candidate_falls_back_to_the_rule(given: object) -> None:
    """As the host's own ``_builtin_victim_id``: a given id counts only when it names a
    candidate; otherwise the builtin victim is the engine's rule's (here "c", FCFS)."""
    cands = [cand("a", pred=100), cand("b", pred=10), cand("c", pred=50)]
    victim, selector, outcomes = run(ctx(cands, builtin=given))  # type: ignore[arg-type]
    assert (victim, selector.failures, outcomes) == ("a", 0, [CHG])
    cands = [cand("a", pred=100), cand("c")]  # the rule's builtin has no prediction
    assert run(ctx(cands, builtin=given))[0] is None  # type: ignore[arg-type]


def test_changed_compares_request_ids_on_the_typed_path() -> None:
    """The host compares ids: a chosen candidate that shares the builtin victim's id is the
    builtin's choice, not a changed decision (duplicate ids never happen in the engine)."""
    cands = [cand("x", pred=100, arrival=2.0), cand("x", pred=10, arrival=1.0)]
    victim, selector, outcomes = run(ctx(cands))
    assert victim == "x"
    assert (selector.changed, outcomes) == (0, [SEL])


class Rereading:
    """A candidate whose ``request_id`` is a property: a valid id on the first read, then
    another value or an exception."""

    def __init__(self, then: object) -> None:
        self.reads = 0
        self.then = then
        self.arrival_time = 1.0
        self.num_output_tokens = 0
        self.predicted_length = 100

    @property
    def request_id(self) -> str:
        self.reads += 1
        if self.reads == 1:
            return "a"
        if isinstance(self.then, Exception):
            raise self.then
        return self.then  # type: ignore[return-value]


@pytest.mark.parametrize("then", [RuntimeError("second read"), "not-a-candidate"])
def test_the_returned_id_is_the_one_the_rule_checked(then: object) -> None:
    """The candidate's id is read once, inside the guard: a property read a second time
    after the outcome was signed could raise to the host or return another id than the one
    the rule checked."""
    first = Rereading(then)
    victim, selector, outcomes = run(ctx([first, cand("b", pred=10)]))
    assert victim == "a"
    assert first.reads == 1
    assert (selector.failures, outcomes) == (0, [CHG])


def test_the_malformed_cases_select_when_repaired() -> None:
    # Guard for the table above: the base context selects, so each None comes from the check.
    assert run(ctx(_valid()))[0] == "a"
    assert run(_without("predicted_length"))[0] == "b"  # absent = no prediction: not malformed
    assert run(_without("priority"))[0] == "a"  # fcfs does not read priority


def test_failures_are_counted_without_an_observer() -> None:
    selector = DlaVictimSelector(observer=None)
    for context in (None, ctx([]), ctx(_valid()), _with(request_id=3)):
        selector.select_victim(context)
    assert selector.failures == 3


# -- properties --------------------------------------------------------------------------------

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=3),
    st.binary(max_size=2),
)
FIELDS = {
    "request_id": st.one_of(st.sampled_from(["a", "b", "c", "d"]), JUNK),
    "priority": st.one_of(st.integers(-3, 3), JUNK),
    "arrival_time": st.one_of(st.floats(0, 10), st.integers(0, 10), JUNK),
    "num_output_tokens": st.one_of(st.integers(0, 300), JUNK),
    "predicted_length": st.one_of(st.integers(0, 300), JUNK),
}
ANY_CANDIDATE = st.one_of(
    st.fixed_dictionaries({}, optional=FIELDS).map(lambda d: SimpleNamespace(**d)),
    st.builds(
        cand,
        st.sampled_from(["a", "b", "c"]),
        st.none() | st.integers(0, 300),
        st.integers(0, 300),
        st.floats(0, 10),
        st.integers(-3, 3),
    ),
    st.none(),
)
ANY_CONTEXT = st.builds(
    ctx,
    st.lists(ANY_CANDIDATE, max_size=6),
    st.sampled_from(["fcfs", "priority", "lifo"]),
    st.none() | st.sampled_from(["a", "b", "zzz"]),
)


@st.composite
def valid_contexts(draw: st.DrawFn) -> PreemptionContext:
    n = draw(st.integers(1, 12))
    cands = [
        cand(
            f"r{i}",
            draw(st.none() | st.integers(0, 64)),
            draw(st.integers(0, 64)),
            draw(st.sampled_from([0.0, 1.0, 2.5, 3])),
            draw(st.integers(0, 2)),
        )
        for i in range(n)
    ]
    builtin = draw(st.none() | st.sampled_from([c.request_id for c in cands]))
    return ctx(cands, draw(st.sampled_from(["fcfs", "priority"])), builtin)


@settings(deadline=None, max_examples=400)
@given(context=ANY_CONTEXT)
def test_any_candidates_give_none_or_a_candidate_id(context: PreemptionContext) -> None:
    victim, selector, outcomes = run(context)
    ids = [getattr(c, "request_id", None) for c in context.candidates]
    assert victim is None or (isinstance(victim, str) and victim in ids)
    assert outcomes == [
        (SEL, CHG)[selector.changed] if victim is not None else FAIL if selector.failures else ABS
    ]


@settings(deadline=None, max_examples=200)
@given(context=ANY_CONTEXT)
def test_without_predictions_always_abstains(context: PreemptionContext) -> None:
    unpredicted = tuple(_unpredicted(c) for c in context.candidates)
    assert run(replace(context, candidates=unpredicted))[0] is None  # type: ignore[arg-type]


def _unpredicted(candidate: object) -> object:
    if isinstance(candidate, Candidate):
        return replace(candidate, predicted_length=None)
    if isinstance(candidate, SimpleNamespace):
        return SimpleNamespace(
            **{k: v for k, v in vars(candidate).items() if k != "predicted_length"}
        )
    return candidate


@settings(deadline=None, max_examples=400)
@given(context=valid_contexts())
def test_the_single_pass_matches_the_rule_as_written(context: PreemptionContext) -> None:
    victim, selector, outcomes = run(context)
    assert victim == reference(context)
    assert selector.failures == 0
    assert outcomes == [expected_outcome(context, victim)]


# -- observer outcomes -------------------------------------------------------------------------


def test_one_outcome_per_call() -> None:
    fake = FakeObserver()
    selector = DlaVictimSelector(observer=fake)
    assert selector.select_victim(ctx(_valid())) == "a"
    assert selector.select_victim(ctx([cand("a")])) is None
    assert selector.select_victim(ctx([])) is None
    assert selector.select_victim(ctx(_valid(), builtin="b")) == "a"
    assert selector.select_victim(ctx(_valid(), builtin="a")) == "a"
    assert fake.outcomes == [CHG, ABS, FAIL, CHG, SEL]
    assert selector.export_metrics() == {
        "calls": 5,
        "selections": 3,
        "changed": 2,
        "abstentions": 1,
        "failures": 1,
        "observer_errors": 0,
        "bypass": 0,
        "selected": 1,
    }


def test_a_raising_observer_does_not_change_the_result() -> None:
    class Broken:
        def count(self, outcome: int) -> None:
            raise OSError("sink full")

    selector = DlaVictimSelector(observer=Broken())
    assert selector.select_victim(ctx(_valid())) == "a"
    assert selector.select_victim(None) is None
    assert (selector.observer_errors, selector.failures) == (2, 1)


def test_process_observer_is_looked_up_once_on_first_call(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeObserver()
    lookups: list[int] = []

    def lookup() -> FakeObserver:
        lookups.append(1)
        return fake

    monkeypatch.setattr(ecpa.observer, "process_observer", lookup)
    selector = DlaVictimSelector()
    assert lookups == []  # not at construction
    for _ in range(3):
        selector.select_victim(ctx(_valid()))
    assert lookups == [1]
    assert fake.outcomes == [CHG, CHG, CHG]


def test_without_ecpa_installed_nothing_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ecpa.observer", None)  # import ecpa.observer: ImportError
    selector = DlaVictimSelector()
    assert selector.select_victim(ctx(_valid())) == "a"
    assert selector.select_victim(None) is None
    assert selector.failures == 1


class HostStop(Exception):
    """What a host's signal handler raises to stop (the driver's _Stop is one)."""


def test_the_hosts_exception_during_the_observer_lookup_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broad ``except`` around the lookup swallowed the driver's stop."""

    def lookup() -> None:
        raise HostStop("SIGTERM")

    monkeypatch.setattr(ecpa.observer, "process_observer", lookup)
    with pytest.raises(HostStop):
        DlaVictimSelector().select_victim(ctx(_valid()))


def test_the_hosts_exception_during_the_process_observers_count_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Interrupted:
        def count(self, outcome: int) -> None:
            raise HostStop("SIGTERM")  # as if the handler ran during count()

    monkeypatch.setattr(ecpa.observer, "process_observer", Interrupted)
    with pytest.raises(HostStop):
        DlaVictimSelector().select_victim(ctx(_valid()))


def test_observer_none_never_looks_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ecpa.observer, "process_observer", pytest.fail)
    assert DlaVictimSelector(observer=None).select_victim(ctx(_valid())) == "a"


# -- admission reserve -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "predicted", "blocks"),
    [
        (0, None, 0),
        (1, None, 1),
        (16, None, 1),
        (17, None, 2),
        (32, None, 2),
        (10, 6, 1),  # 16 tokens: exactly one block
        (10, 7, 2),  # 17 tokens
        (0, 0, 0),
        (100, 28, 8),  # 128 tokens, no second inflation of the prediction
        (100, 29, 9),
    ],
)
def test_blocks_needed_boundaries(prompt: int, predicted: int | None, blocks: int) -> None:
    request = WaitingRequest("w", prompt, predicted)
    assert blocks_needed(request, 16) == blocks
    assert admit(request, blocks, 16)
    if blocks:
        assert not admit(request, blocks - 1, 16)


def test_without_a_prediction_the_engine_rule_applies() -> None:
    assert blocks_needed(SimpleNamespace(num_prompt_tokens=33), 16) == 3
    assert blocks_needed(WaitingRequest("w", 33, None), 16) == 3
    assert blocks_needed(WaitingRequest("w", 33, 1000), 16) == 65


@settings(deadline=None, max_examples=300)
@given(
    prompt=st.integers(0, 10**6),
    predicted=st.none() | st.integers(0, 10**6),
    block_size=st.integers(1, 512),
    free=st.integers(0, 10**5),
)
def test_blocks_needed_is_the_exact_ceiling(
    prompt: int, predicted: int | None, block_size: int, free: int
) -> None:
    tokens = prompt + (predicted or 0)
    blocks = blocks_needed(WaitingRequest("w", prompt, predicted), block_size)
    assert blocks * block_size >= tokens > (blocks - 1) * block_size or tokens == blocks == 0
    assert admit(WaitingRequest("w", prompt, predicted), free, block_size) == (blocks <= free)


@pytest.mark.parametrize(
    ("request_", "free", "block_size"),
    [
        (WaitingRequest("w", 10), 4, 0),
        (WaitingRequest("w", 10), 4, -16),
        (WaitingRequest("w", 10), 4, True),
        (WaitingRequest("w", 10), 4, 16.0),
        (WaitingRequest("w", -1), 4, 16),
        (WaitingRequest("w", "10"), 4, 16),  # type: ignore[arg-type]
        (WaitingRequest("w", 10, -1), 4, 16),
        (WaitingRequest("w", 10, True), 4, 16),
        (WaitingRequest("w", 10, 2.0), 4, 16),  # type: ignore[arg-type]
        (SimpleNamespace(predicted_length=3), 4, 16),
        (WaitingRequest("w", 10), -1, 16),
        (WaitingRequest("w", 10), False, 16),
    ],
)
def test_admission_refuses_bad_inputs(request_: object, free: Any, block_size: Any) -> None:
    with pytest.raises(ValueError, match="expected"):
        admit(request_, free, block_size)


# -- VictimSelector API 1: pick_victim --------------------------------------------------------


class Policy(enum.Enum):
    """The host's SchedulingPolicy shape: a plain Enum whose value is the policy's name."""

    FCFS = "fcfs"
    PRIORITY = "priority"


def _host_builtin(running: list[Any], policy: str) -> Any:
    if policy == "priority":
        return max(running, key=lambda r: (r.priority, r.arrival_time))
    return running[-1]


@settings(deadline=None, max_examples=300)
@given(
    context=st.one_of(valid_contexts(), ANY_CONTEXT),
    kv=st.none() | st.floats(0, 1),
    now=st.none() | st.floats(0, 1e9),
)
def test_pick_victim_applies_the_same_rule(
    context: PreemptionContext, kv: float | None, now: float | None
) -> None:
    typed, selector = DlaVictimSelector(observer=None), DlaVictimSelector(observer=None)
    running = list(context.candidates)
    expected = typed.select_victim(
        PreemptionContext(tuple(running), context.scheduling_policy, None, 0.5, 1.0)
    )
    policy = Policy(context.scheduling_policy) if context.scheduling_policy != "lifo" else "lifo"
    if not running:
        with pytest.raises(ValueError, match="running is empty"):
            selector.pick_victim(running, policy, kv_utilization=kv, now_s=now)
        return
    victim = selector.pick_victim(running, policy, kv_utilization=kv, now_s=now)
    assert any(victim is r for r in running)  # one of running, by identity
    if expected is not None:
        assert victim.request_id == expected
    elif selector.failures == 0:  # an abstention: the host's builtin choice, the same object
        assert victim is _host_builtin(running, context.scheduling_policy)
    assert (selector.failures, selector.selections) == (typed.failures, typed.selections)
    ids = [repr(getattr(c, "request_id", None)) for c in running]
    if len(set(ids)) == len(ids):  # with shared ids, identity and id comparisons differ
        assert selector.changed == typed.changed


def test_pick_victim_reads_the_hosts_enum_and_returns_the_object() -> None:
    fake = FakeObserver()
    selector = DlaVictimSelector(observer=fake)
    running = _valid()
    assert selector.pick_victim(running, Policy.FCFS) is running[0]
    assert selector.pick_victim(running, Policy.PRIORITY) is running[0]
    assert selector.pick_victim(running, "fcfs") is running[0]  # a plain str is fine too
    unpredicted = [cand("a"), cand("b")]
    assert selector.pick_victim(unpredicted, Policy.FCFS) is unpredicted[1]
    assert fake.outcomes == [CHG, CHG, CHG, ABS]
    assert selector.failures == 0


def test_pick_victim_never_raises_but_for_an_empty_running() -> None:
    fake = FakeObserver()
    selector = DlaVictimSelector(observer=fake)
    running = _valid()
    assert selector.pick_victim(running, "lifo") is running[-1]  # unknown policy: a failure
    assert selector.pick_victim(running, None) is running[-1]
    broken = [*running, Exploding()]
    assert selector.pick_victim(broken, Policy.FCFS) is broken[-1]
    prio = [SimpleNamespace(request_id="x", arrival_time=1.0, num_output_tokens=0)]
    assert selector.pick_victim(prio, Policy.PRIORITY) is prio[0]  # no priority: the last
    assert fake.outcomes == [FAIL, FAIL, FAIL, FAIL]
    with pytest.raises(ValueError, match="running is empty"):
        selector.pick_victim([], Policy.FCFS)  # as the host's builtin selector: no victim


def test_pick_victim_under_the_bypass_is_the_builtin_choice() -> None:
    fake = FakeObserver()
    selector = DlaVictimSelector({BYPASS_KEY: True}, observer=fake)
    running = _valid()
    assert selector.pick_victim(running, Policy.FCFS) is running[-1]
    # Under priority, the host's max((priority, arrival_time)): not the last one.
    ranked = [cand("low", pred=5, priority=9), cand("x", pred=80, priority=1), cand("last")]
    assert selector.pick_victim(ranked, Policy.PRIORITY) is ranked[0]
    assert fake.outcomes == [ABS, ABS]
    assert selector.export_metrics()["bypass"] == 1


def test_pick_victim_after_a_failure_under_priority_is_the_hosts_choice() -> None:
    selector = DlaVictimSelector(observer=None)
    ranked = [
        cand("top", priority=9, arrival=1.0),
        SimpleNamespace(request_id="", priority=1, arrival_time=2.0, num_output_tokens=0),
        cand("last", priority=1, arrival=3.0),
    ]
    assert selector.pick_victim(ranked, Policy.PRIORITY) is ranked[0]  # "" id: a failure
    assert selector.failures == 1
    tied = [cand("first", priority=3, arrival=1.0), cand("second", priority=3, arrival=1.0)]
    tied.append(SimpleNamespace(request_id=7, priority=3, arrival_time=1.0))
    assert selector.pick_victim(tied, Policy.PRIORITY) is tied[0]  # max() keeps the first
    assert selector.failures == 2


def test_emit_observability_log_is_rate_limited_and_never_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    selector = DlaVictimSelector(observer=None)
    selector.pick_victim(_valid(), Policy.FCFS)
    logger = logging.getLogger("test.dla")
    with caplog.at_level(logging.INFO, logger="test.dla"):
        selector.emit_observability_log(logger, "Scheduler")
        selector.emit_observability_log(logger, "Scheduler")
    assert len(caplog.records) == 1
    assert "calls=1 selections=1 changed=1" in caplog.records[0].getMessage()
    selector.emit_observability_log(None, "Scheduler")  # a broken logger: nothing raised


@pytest.mark.parametrize(
    ("value", "victim"),
    [
        (100, "a"),
        (100.0, "a"),  # a JSON client's float
        (IntSub(100), "a"),
        (numbers_integral(100), "a"),
    ],
)
def test_integral_predictions_are_accepted(value: object, victim: str) -> None:
    cands = _valid()
    cands[0] = SimpleNamespace(**{**vars(cands[0]), "predicted_length": value})
    chosen, selector, outcomes = run(ctx(cands))
    assert (chosen, selector.failures, outcomes) == (victim, 0, [CHG])


def test_a_numpy_integer_prediction_is_accepted() -> None:
    """docs/dla.md "What the policy does": a numpy integer or float prediction is
    integral, with the real thing where numpy is installed."""
    np = pytest.importorskip("numpy")
    for value in (np.int64(100), np.int32(100), np.uint16(100), np.float64(100.0)):
        cands = _valid()
        cands[0] = SimpleNamespace(**{**vars(cands[0]), "predicted_length": value})
        chosen, selector, _ = run(ctx(cands))
        assert (chosen, selector.failures) == ("a", 0), type(value)
    cands = _valid()
    cands[0] = SimpleNamespace(**{**vars(cands[0]), "predicted_length": np.float64(100.5)})
    assert run(ctx(cands))[1].failures == 1
