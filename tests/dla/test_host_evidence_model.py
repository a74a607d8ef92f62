"""The project's model of the vLLM-HUST host's evidence delivery (``dla_plugin.host_evidence``)
and of its evidence-emitting preemption controller (``dla_plugin.sim.host.preemption``): the
events the host gives for given facts are the published vectors, its identity binding, dedupe
and strict mode behave as the host's, and the controller delivers one resolution and one event per
dispatch, each with its outcome."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dla_plugin import host_evidence
from dla_plugin.contract import Candidate, PreemptionContext
from dla_plugin.sim.host.preemption import PreemptionController
from ecpa.runtime import epoch_of, host_line, parse_host_line

DATA = Path(__file__).resolve().parents[1] / "data" / "upstream-host-events"
SINK: list[dict[str, Any]] = []


def collect(event: dict[str, Any]) -> None:
    """A sink for the model to load by name (``tests.dla.test_host_evidence_model:collect``)."""
    SINK.append(event)


def refuse(event: dict[str, Any]) -> None:
    raise RuntimeError("the sink cannot record")


@pytest.fixture(autouse=True)
def host(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(__import__("os").environ):
        if name.startswith("VLLM_ECPA_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("VLLM_ECPA_EVIDENCE_SINK", f"{__name__}:collect")
    monkeypatch.setenv("VLLM_ECPA_PLAN_ID", "plan-1")
    monkeypatch.setenv("VLLM_ECPA_LAUNCH_ID", "launch-1")
    host_evidence.reset_for_tests()
    SINK.clear()
    yield
    host_evidence.reset_for_tests()


@pytest.mark.parametrize("name", ["host-preemption-dispatch.json", "host-plugin-invoked.json"])
def test_the_models_event_for_the_published_facts_is_the_published_vector(name: str) -> None:
    published = json.loads((DATA / name).read_bytes())
    entry = published["entry_point"]
    occurrence = host_evidence.Occurrence(
        published["event"],
        entry["group"],
        entry["name"],
        entry["value"],
        published["detail"],
        published["occurrence_id"],
        published["observation_kind"],
        published["controller_instance_id"],
        published["plan_id"],
        published["launch_id"],
        published["binding_status"],
    )
    made = host_evidence.host_event(
        published["process"],
        occurrence,
        delivery_attempt=published["delivery_attempt"],
        observed_at_ns=published["observed_at_ns"],
    )
    assert made == published
    assert host_line(made) == host_line(published)


def test_a_host_bound_identity_overrides_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_ECPA_PROCESS_ROLE", "forged")
    monkeypatch.setenv("VLLM_ECPA_PROCESS_ORDINAL", "9")
    assert host_evidence.capture_scope()["process"]["assignment_source"] == "environment"
    host_evidence.bind_process_identity("engine-core-scheduler", 3)
    scope = host_evidence.capture_scope(expected_role="engine-core-scheduler")
    process = scope["process"]
    assert (process["role"], process["ordinal"], process["assignment_source"]) == (
        "engine-core-scheduler",
        3,
        "host",
    )
    assert process["process_epoch"] == epoch_of(process["start_identity"])
    assert scope["binding_status"] == "bound"
    host_evidence.bind_process_identity("engine-core-scheduler", 3)  # the same again: fine
    with pytest.raises(host_evidence.EvidenceConfigurationError, match="already bound"):
        host_evidence.bind_process_identity("worker", 3)
    for role, ordinal in (("", 0), (" x", 0), ("x", -1), ("x", True)):
        with pytest.raises(host_evidence.EvidenceConfigurationError):
            host_evidence.bind_process_identity(role, ordinal)  # type: ignore[arg-type]


def context(*ids: str) -> PreemptionContext:
    candidates = tuple(Candidate(r, 0, float(i), 10, 1, 11, 0, 64, 40) for i, r in enumerate(ids))
    return PreemptionContext(candidates, "fcfs", ids[-1], 0.99, 1.0)


class Policy:
    """A policy that answers from a script: an id, None (abstain), or an exception."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)

    def select_victim(self, ctx: PreemptionContext) -> str | None:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]


def kinds() -> list[tuple[str, str | None]]:
    return [(e["observation_kind"], e["detail"]) for e in SINK]


def test_the_controller_delivers_a_resolution_then_one_event_per_dispatch() -> None:
    host_evidence.bind_process_identity("engine-core-scheduler", 0)
    controller = PreemptionController(Policy("a", None, "b"))
    for _ in range(3):
        controller.choose(context("a", "b"))
    assert kinds() == [
        ("scheduler_resolution", "engine-core.scheduler:protocol-validated"),
        ("scheduler_dispatch", "engine-core.scheduler:selected"),
        ("scheduler_dispatch", "engine-core.scheduler:abstained"),
        ("scheduler_dispatch", "engine-core.scheduler:selected"),
    ]
    events = [parse_host_line(host_line(e)) for e in SINK]  # each one a valid host event
    assert [e.seq for e in events] == [None, 1, 2, 3]
    assert {e.controller for e in events} == {SINK[0]["controller_instance_id"]}
    assert [e.delivery_attempt for e in events] == [1, 2, 3, 4]
    assert all(e.policy == "tests.dla.test_host_evidence_model.Policy" for e in events)
    stats = controller.export_stats()
    assert (stats["selections"], stats["abstentions"]) == (2, 1)


@pytest.mark.parametrize(
    ("answer", "outcome", "invalid"),
    [(ValueError("boom"), "exception", 0), ("nobody", "invalid", 1)],
)
def test_a_failing_policy_is_reported_then_never_asked_again(
    answer: Any, outcome: str, invalid: int
) -> None:
    host_evidence.bind_process_identity("engine-core-scheduler", 0)
    controller = PreemptionController(Policy(answer, "a"))
    controller.choose(context("a", "b"))
    controller.choose(context("a", "b"))  # disabled: the builtin victim, nothing delivered
    assert kinds()[1:] == [("scheduler_dispatch", f"engine-core.scheduler:{outcome}")]
    stats = controller.export_stats()
    assert (stats["failures"], stats["invalid_selections"], stats["enabled"]) == (1, invalid, False)


def test_no_sink_no_events_and_the_scheduler_decides_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VLLM_ECPA_EVIDENCE_SINK")
    controller = PreemptionController(Policy("a"))
    assert controller.choose(context("a", "b")) == "a"
    assert SINK == []


def test_strict_a_failing_sink_fails_delivery_for_good(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_ECPA_EVIDENCE_SINK", f"{__name__}:refuse")
    monkeypatch.setenv("VLLM_ECPA_EVIDENCE_STRICT", "1")
    host_evidence.bind_process_identity("engine-core-scheduler", 0)
    with pytest.raises(host_evidence.EvidenceConfigurationError, match="write failed"):
        host_evidence.emit_host_event("discovered", "g", "n", "v")
    monkeypatch.setenv("VLLM_ECPA_EVIDENCE_SINK", f"{__name__}:collect")
    with pytest.raises(host_evidence.EvidenceConfigurationError, match="emission failed"):
        host_evidence.emit_host_event("discovered", "g", "n", "v")
    assert SINK == []
    # the controller swallows it: the scheduler's decision never depends on evidence
    assert PreemptionController(Policy("a")).choose(context("a", "b")) == "a"


def test_not_strict_a_failing_sink_drops_and_a_missing_one_is_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VLLM_ECPA_EVIDENCE_SINK", "no_such_module_here:sink")
    assert host_evidence.emit_host_event("discovered", "g", "n", "v") is False
    monkeypatch.setenv("VLLM_ECPA_EVIDENCE_SINK", f"{__name__}:collect")
    assert host_evidence.emit_host_event("discovered", "g", "n", "v") is True
    assert host_evidence.emit_host_event("discovered", "g", "n", "v") is True  # delivered once
    assert len(SINK) == 1
    monkeypatch.setenv("VLLM_ECPA_EVIDENCE_STRICT", "2")
    with pytest.raises(host_evidence.EvidenceConfigurationError, match="must be 0 or 1"):
        host_evidence.emit_host_event("discovered", "g", "n", "other")
