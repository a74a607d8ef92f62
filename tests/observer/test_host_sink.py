"""ecpa as the host's evidence sink (docs/host-evidence.md), in one process: the project's model
of the host delivers its events to a :class:`HostRecorder`, which journals them byte for byte
as the host's consumer writes them and has the observer sign their account; forged events
are refused with a code, recorded, never counted, and never make the sink raise; it raises
only when it cannot record."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dla_plugin import host_evidence
from dla_plugin.sim.host.preemption import PreemptionController
from ecpa.errors import EcpaError, ErrorCode
from ecpa.observer import Observer, host_sink
from ecpa.observer import _process as process_module
from ecpa.observer._host import HostRecorder
from ecpa.profile.b64 import b64u_decode
from ecpa.runtime import (
    HostCounts,
    HostEventCode,
    check_journal,
    host_line,
    parse_host_line,
    read_identity,
)
from ecpa.runtime.model.counters import parse_counters
from ecpa.runtime.model.evidence import read_log
from tests.dla.test_host_evidence_model import Policy as Scripted
from tests.dla.test_host_evidence_model import context
from tests.observer.test_observer import make_launch
from tests.support import KEY_1


@dataclass
class Bench:
    observer: Observer
    recorder: HostRecorder
    delivered: list[dict[str, Any]]

    @property
    def journal(self) -> Path:
        launch = self.observer.launch
        return launch.evidence_dir / launch.launch_id / "host" / f"{self.observer.kid}.jsonl"

    def refusal_lines(self) -> list[dict[str, Any]]:
        directory = self.journal.parent
        return [
            json.loads(line)
            for path in sorted(directory.glob("refused-*.jsonl"))
            for line in path.read_bytes().splitlines()
        ]

    def account(self) -> HostCounts:
        """The host account of the newest record the observer signed (its journal drained
        first, as its thread does every 0.25 s)."""
        self.recorder.drain()
        assert self.observer.emit()
        assert self.observer.flush()
        with open(self.observer.log_path, "rb") as fh:
            lines = [line for line in read_log(fh) if line.evidence is not None]
        assert lines[-1].evidence is not None
        counters = parse_counters(lines[-1].evidence.host_evidence)
        assert counters.host is not None
        return counters.host


BENCH: list[Bench] = []


def forward(event: dict[str, Any]) -> None:
    """The sink the model of the host loads by name: the recorder's hot path."""
    BENCH[0].delivered.append(copy.deepcopy(event))
    BENCH[0].recorder.put(event)


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bench]:
    launch = make_launch(tmp_path)
    (launch.evidence_dir / launch.launch_id).mkdir(mode=0o700)
    identity = read_identity()
    observer = Observer(launch, KEY_1, identity=identity, role="scheduler", ordinal=0, start=False)
    recorder = HostRecorder(launch, identity, lambda slot: observer)
    for name in list(os.environ):
        if name.startswith("VLLM_ECPA_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("VLLM_ECPA_EVIDENCE_SINK", f"{__name__}:forward")
    monkeypatch.setenv("VLLM_ECPA_EVIDENCE_STRICT", "1")
    monkeypatch.setenv("VLLM_ECPA_PLAN_ID", launch.plan_id)
    monkeypatch.setenv("VLLM_ECPA_LAUNCH_ID", launch.launch_id)
    host_evidence.reset_for_tests()
    host_evidence.bind_process_identity("engine-core-scheduler", 0)
    BENCH[:] = [Bench(observer, recorder, [])]
    yield BENCH[0]
    BENCH.clear()
    recorder.close()
    observer.close(timeout=1.0)
    host_evidence.reset_for_tests()


def run(policy: Scripted, calls: int) -> PreemptionController:
    controller = PreemptionController(policy)
    for _ in range(calls):
        controller.choose(context("a", "b", "c"))
    return controller


def test_the_signed_counts_equal_the_host_controllers_own(bench: Bench) -> None:
    controller = run(Scripted("a", None, "b", None, None, "c"), 6)
    stats = controller.export_stats()
    host = bench.account()
    assert (host.selected, host.abstained, host.invalid, host.exception) == (
        stats["selections"],
        stats["abstentions"],
        stats["invalid_selections"],
        stats["failures"] - stats["invalid_selections"],
    )
    assert host.resolutions == 1
    assert host.policy == stats["policy_name"]
    assert (host.refused, host.lost, host.final) == (0, 0, False)


def test_each_journal_line_is_the_hosts_event_as_its_consumer_writes_it(bench: Bench) -> None:
    run(Scripted("a", None, ValueError("boom")), 3)
    host = bench.account()
    lines = bench.journal.read_bytes().splitlines()
    assert lines == [host_line(event) for event in bench.delivered]
    for line in lines:
        parse_host_line(line)
    assert oct(bench.journal.stat().st_mode & 0o777) == "0o600"
    assert host.journal_lines == 4
    assert host.exception == 1
    assert check_journal(iter(line + b"\n" for line in lines), [host]).mismatches == ()
    assert host.newest_event_digest is not None
    assert (
        host.newest_event_digest.removeprefix("sha256:")
        == __import__("hashlib").sha256(lines[-1]).hexdigest()
    )


def forged(bench: Bench, change: Any) -> dict[str, Any]:
    """A dispatch the host gave, changed by ``change``."""
    doc = copy.deepcopy(bench.delivered[-1])
    change(doc)
    return doc


def _set(**members: Any) -> Any:
    return lambda doc: doc.update(members)


def _proc(**members: Any) -> Any:
    return lambda doc: doc["process"].update(members)


MEGABYTE = "x" * (1 << 20)


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (_set(event_id="0" * 64), HostEventCode.EVENT_ID),
        (_set(launch_id="launch-someone-else"), HostEventCode.DISPATCH_ID),
        (_set(plan_id=None, launch_id=None, binding_status="unbound"), HostEventCode.DISPATCH_ID),
        (_proc(assignment_source="environment"), HostEventCode.EVENT_ID),
        (_set(detail=MEGABYTE), HostEventCode.TOO_LARGE),
        (_set(observed_at_ns=float("nan")), HostEventCode.NOT_JSON),
        (_set(event="effective"), HostEventCode.UNKNOWN_KIND),
        (lambda doc: doc.clear(), HostEventCode.MALFORMED),
    ],
)
def test_forged_events_are_refused_recorded_and_never_counted(
    bench: Bench, change: Any, code: HostEventCode
) -> None:
    run(Scripted("a"), 1)
    before = bench.account()
    bench.recorder.put(forged(bench, change))  # never raises for what it is handed
    run(Scripted("b"), 1)  # a valid event after it is not lost
    after = bench.account()
    assert after.selected == before.selected + 1
    assert after.journal_lines == before.journal_lines + 2  # the new resolution and dispatch
    assert after.refused == before.refused + 1
    assert bench.recorder.refusals == {code.value: 1}
    [line] = bench.refusal_lines()
    assert line["code"] == code.value
    assert len(json.dumps(line)) < 1000  # the refusal log holds a digest, never the event


def rehashed(doc: dict[str, Any]) -> dict[str, Any]:
    from ecpa.runtime import dispatch_id_of, event_id_of

    doc["dispatch_id"] = dispatch_id_of(doc) if doc["dispatch_id"] else None
    doc["event_id"] = event_id_of(doc)
    return doc


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (_set(launch_id="launch-someone-else"), HostEventCode.OTHER_LAUNCH),
        (_set(plan_id=None, launch_id=None, binding_status="unbound"), HostEventCode.UNBOUND),
        (_proc(assignment_source="environment"), HostEventCode.ENVIRONMENT_ASSIGNED),
        (_proc(pid=1, start_identity="pid:1:start_ticks:1"), HostEventCode.OTHER_PROCESS),
        (_proc(role="worker"), HostEventCode.NOT_SCHEDULER),
        (_proc(ordinal=1), HostEventCode.SLOT_MISMATCH),
        (_set(detail="engine-core.scheduler:effective"), HostEventCode.UNKNOWN_OUTCOME),
        (_set(controller_instance_id="c" * 64), HostEventCode.UNRESOLVED),
        (lambda doc: None, HostEventCode.REPLAYED),  # the same dispatch again
    ],
)
def test_well_formed_events_of_another_launch_process_or_order_are_refused(
    bench: Bench, change: Any, code: HostEventCode
) -> None:
    run(Scripted("a"), 1)
    before = bench.account()
    doc = forged(bench, change)
    if code is not HostEventCode.REPLAYED:
        doc["delivery_attempt"] += 10  # only the change is wrong
    bench.recorder.put(rehashed(doc))
    after = bench.account()
    assert bench.recorder.refusals == {code.value: 1}
    assert after.journal_lines == before.journal_lines
    assert after.journal_chain == before.journal_chain


def test_anything_handed_in_is_refused_never_raised(bench: Bench) -> None:
    for thing in (
        None,
        7,
        "event",
        [1, 2],
        {"x": {i: i for i in range(100)}},
        dict.fromkeys(range(64), 0),
    ):
        bench.recorder.put(thing)
    host = bench.account()
    assert host.refused == 6
    assert host.journal_lines == 0
    assert set(bench.recorder.refusals) == {"host_event_not_object", "host_event_too_large"}


def next_dispatch(doc: dict[str, Any]) -> None:
    doc["delivery_attempt"] += 1
    doc["occurrence_id"] = doc["invocation_seq"] = doc["invocation_seq"] + 1


def test_the_hot_path_keeps_a_copy(bench: Bench) -> None:
    run(Scripted("a"), 1)
    event = rehashed(forged(bench, next_dispatch))
    bench.recorder.put(event)
    event["process"]["pid"] = 1  # the host changes its dict after the call
    event["detail"] = "changed"
    host = bench.account()
    assert bench.recorder.refusals == {}
    assert host.journal_lines == 3


def test_a_full_queue_raises_and_recording_stops_for_good(bench: Bench) -> None:
    small = HostRecorder(bench.observer.launch, read_identity(), lambda slot: bench.observer,
                         capacity=2)  # fmt: skip
    small.put({})
    small.put({})
    with pytest.raises(EcpaError) as caught:
        small.put({})
    assert caught.value.code is ErrorCode.HOST_SINK
    assert "queue is full" in caught.value.detail
    with pytest.raises(EcpaError):
        small.put({})
    small.drain()
    assert small.account().lost == 2
    small.close()


def test_a_strict_host_fails_closed_when_the_sink_cannot_record(bench: Bench) -> None:
    run(Scripted("a"), 1)
    bench.recorder.close()  # e.g. shutting down: it cannot record any more
    controller = run(Scripted("b", "c"), 2)
    assert controller.export_stats()["selections"] == 2  # the scheduler is untouched
    assert host_evidence.state().status == "failed"  # the host stopped delivering
    assert bench.recorder.lost == 1
    final = bench.recorder.account(final=True)
    assert (final.selected, final.lost, final.final) == (1, 1, True)


def test_an_unwritable_journal_stops_recording(bench: Bench) -> None:
    directory = bench.journal.parent
    directory.mkdir(mode=0o700)
    bench.journal.mkdir()  # a directory where the journal goes
    run(Scripted("a"), 1)
    bench.recorder.drain()
    assert bench.recorder.failed is not None
    with pytest.raises(EcpaError) as caught:
        bench.recorder.put({})
    assert caught.value.code is ErrorCode.HOST_SINK
    assert bench.recorder.account().lost >= 1


def test_the_final_record_closes_the_journal(bench: Bench) -> None:
    run(Scripted("a", None), 2)
    bench.observer.attach_host(bench.recorder)
    assert bench.observer.close(timeout=2.0)
    with open(bench.observer.log_path, "rb") as fh:
        last = [line for line in read_log(fh) if line.evidence is not None][-1]
    assert last.evidence is not None
    host = parse_counters(last.evidence.host_evidence).host
    assert host is not None
    assert host.final
    assert host.journal_lines == 3
    with pytest.raises(EcpaError):
        bench.recorder.put({})


def test_deliver_without_a_launch_binding_cannot_record(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("ECPA_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(host_sink, "_recorder", None)
    monkeypatch.setattr(host_sink, "_refusal", None)
    for _ in range(2):
        with pytest.raises(EcpaError) as caught:
            host_sink.deliver({"schema": "x"})
        assert caught.value.code is ErrorCode.HOST_SINK
        assert "launch binding" in caught.value.detail


def test_the_first_event_tells_the_observer_its_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_module, "_host_slot", None)
    bound = {"role": "engine-core-scheduler", "ordinal": 3}
    process_module.hint_host_slot({"process": {**bound, "assignment_source": "environment"}})
    assert process_module._host_slot is None  # the environment is no host
    process_module.hint_host_slot({"process": {**bound, "assignment_source": "host"}})
    assert process_module._host_slot is not None
    assert process_module._host_slot.name == "scheduler.3"


def test_the_recorder_keeps_nothing_on_the_hosts_thread_but_a_copy() -> None:
    """What the hot path does: a copy of the dict and its dicts, no serialization."""
    from ecpa.observer._host import bounded_copy

    event = {"a": {"b": 1}, "c": "d"}
    copied = bounded_copy(event)
    assert copied == event
    assert isinstance(copied, dict)
    assert copied is not event
    assert copied["a"] is not event["a"]
    assert type(bounded_copy({"detail": MEGABYTE})).__name__ == "_Unfit"
    assert type(bounded_copy(b64u_decode)).__name__ == "_Unfit"


def test_a_check_that_fails_in_an_unforeseen_way_refuses_and_signing_goes_on(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ecpa.observer import _host

    def broken(doc: object, raw: bytes) -> object:
        raise RecursionError("deep")

    monkeypatch.setattr(_host, "check_host_event", broken)
    bench.recorder.put({"schema": "x", "observation_kind": "scheduler_dispatch"})
    host = bench.account()  # the record is still signed
    assert (host.refused, host.refused_scheduler, host.journal_lines) == (1, 1, 0)
    assert bench.recorder.refusals == {"host_event_malformed": 1}


def test_nothing_is_journaled_after_the_final_account(bench: Bench) -> None:
    run(Scripted("a"), 1)
    final = bench.recorder.account(final=True)
    bench.recorder.put(rehashed(forged(bench, next_dispatch)))  # as the process ends
    bench.recorder.drain()
    assert len(bench.journal.read_bytes().splitlines()) == final.journal_lines
    assert bench.recorder.lost == 1
    assert (
        check_journal(
            iter(bench.journal.read_bytes().splitlines(keepends=True)), [final]
        ).mismatches
        == ()
    )


def test_a_write_that_fails_part_way_leaves_no_fragment(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(Scripted("a"), 1)
    bench.recorder.drain()
    before = bench.journal.read_bytes()
    real_write = os.write

    def half(fd: int, data: Any) -> int:
        if len(data) > 200:  # the journal line: half of it, then a full disk
            real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    bench.recorder.put(rehashed(forged(bench, next_dispatch)))
    monkeypatch.setattr(os, "write", half)
    try:
        bench.recorder.drain()
    finally:
        monkeypatch.setattr(os, "write", real_write)
    assert bench.journal.read_bytes() == before  # taken back: no torn line to audit
    host = bench.recorder.account(final=True)
    assert host.lost == 1
    lines = iter(bench.journal.read_bytes().splitlines(keepends=True))
    assert check_journal(lines, [host]).mismatches == ()
