"""A host event's line (docs/host-evidence.md): written as the host's consumer writes it,
parsed at least as strictly as its ``parse_host_event`` (exact members, types, identities
that must agree, ``event_id`` and ``dispatch_id`` recomputed), and bound to this launch and
this process before it counts. Any bytes give a host event or a refusal with its code."""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecpa.errors import ErrorCode
from ecpa.runtime import (
    HostEventCode,
    HostEventRefused,
    ProcessClaim,
    check_binding,
    check_host_event,
    dispatch_id_of,
    epoch_of,
    event_id_of,
    host_line,
    parse_host_line,
)

MALFORMED = HostEventCode.MALFORMED
DATA = Path(__file__).resolve().parents[1] / "data" / "upstream-host-events"


def published(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / name).read_bytes())
    return doc


DISPATCH = published("host-preemption-dispatch.json")
LIFECYCLE = published("host-plugin-invoked.json")


def rehashed(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with its digests recomputed, as the host would give them for its members."""
    out = copy.deepcopy(doc)
    if out["observation_kind"] == "scheduler_dispatch":
        out["dispatch_id"] = dispatch_id_of(out)
    out["event_id"] = event_id_of(out)
    return out


def refusal(doc: object) -> HostEventCode:
    with pytest.raises(HostEventRefused) as caught:
        parse_host_line(doc if isinstance(doc, bytes) else host_line(doc))
    assert caught.value.code is ErrorCode.INVALID_RECORD
    return caught.value.reason


def test_the_published_vectors_parse_and_their_digests_recompute() -> None:
    for doc in (DISPATCH, LIFECYCLE):
        assert event_id_of(doc) == doc["event_id"]
        event = parse_host_line(host_line(doc))
        assert event.event_id == doc["event_id"]
    assert dispatch_id_of(DISPATCH) == DISPATCH["dispatch_id"]
    event = parse_host_line(host_line(DISPATCH))
    assert (event.kind, event.outcome, event.seq, event.policy) == (
        "scheduler_dispatch",
        "selected",
        1,
        "demo.plugin.Policy",
    )
    assert (event.pid, event.start_ticks, event.process_epoch) == (4242, 9001, 7)
    assert event.observed_at_ns == 1_800_000_000_000_000_000  # beyond 2**53: the host's clock


def test_the_line_is_the_consumers_form() -> None:
    line = host_line(DISPATCH)
    assert line == json.dumps(DISPATCH, sort_keys=True, separators=(",", ":")).encode()
    assert line.isascii()
    assert b"\n" not in line


def test_an_event_older_than_assignment_source_still_parses() -> None:
    older = copy.deepcopy(DISPATCH)
    del older["process"]["assignment_source"]
    event = parse_host_line(host_line(rehashed(older)))
    assert event.assignment_source is None


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (lambda d: d.update(event_id="0" * 64), HostEventCode.EVENT_ID),
        (lambda d: d.update(dispatch_id="0" * 64), HostEventCode.DISPATCH_ID),
        (lambda d: d.update(event="effective"), HostEventCode.UNKNOWN_KIND),
        (lambda d: d.update(observation_kind="scheduler_effect"), HostEventCode.UNKNOWN_KIND),
        (lambda d: d.update(schema="vllm-hust-plugin-evidence/0.2"), HostEventCode.MALFORMED),
        (lambda d: d.update(extra=1), HostEventCode.MALFORMED),
        (lambda d: d.pop("detail"), HostEventCode.MALFORMED),
        (lambda d: d["process"].update(pid=True), HostEventCode.MALFORMED),
        (lambda d: d["process"].update(ordinal=-1), HostEventCode.MALFORMED),
        (lambda d: d["process"].update(ordinal=1.0), HostEventCode.MALFORMED),
        (lambda d: d["process"].update(extra="x"), HostEventCode.MALFORMED),
        (lambda d: d["process"].update(assignment_source="config"), HostEventCode.MALFORMED),
        (
            lambda d: d["process"].update(start_identity="pid:1:start_ticks:9"),
            HostEventCode.MALFORMED,
        ),
        (
            lambda d: d["process"].update(start_identity="pid:4242:start_ticks:+9"),
            HostEventCode.MALFORMED,
        ),
        (lambda d: d["process"].update(host=""), HostEventCode.MALFORMED),
        (lambda d: d["entry_point"].update(more="x"), HostEventCode.MALFORMED),
        (lambda d: d.update(delivery_attempt=0), HostEventCode.MALFORMED),
        (lambda d: d.update(plan_id=None), HostEventCode.MALFORMED),
        (lambda d: d.update(plan_id=None, launch_id=None), HostEventCode.MALFORMED),
        (lambda d: d.update(binding_status="loose"), HostEventCode.MALFORMED),
        (lambda d: d.update(detail=""), HostEventCode.MALFORMED),
        (lambda d: d.update(occurrence_id=0, invocation_seq=0), HostEventCode.MALFORMED),
        (lambda d: d.update(invocation_seq=2), HostEventCode.MALFORMED),
        (lambda d: d.update(event="resolved"), HostEventCode.MALFORMED),
        (lambda d: d.update(controller_instance_id=None), HostEventCode.MALFORMED),
        (lambda d: d.update(dispatch_id="A" * 64), HostEventCode.MALFORMED),
        (lambda d: d.update(plugin_id="org.vllm-hust.dla"), HostEventCode.MALFORMED),
        (lambda d: d.update(artifact_digest="sha256:" + "0" * 64), HostEventCode.MALFORMED),
        (lambda d: d.update(detail="\ud800"), HostEventCode.MALFORMED),
        (lambda d: d.update(observation_kind="loader_lifecycle"), HostEventCode.MALFORMED),
    ],
)
def test_each_check_refuses_with_its_code(change: Any, code: HostEventCode) -> None:
    doc = copy.deepcopy(DISPATCH)
    change(doc)
    if code not in (HostEventCode.EVENT_ID, HostEventCode.DISPATCH_ID):
        with contextlib.suppress(KeyError, TypeError):  # only the change is wrong
            doc["event_id"] = event_id_of(doc)
    assert refusal(doc) is code


def test_a_resolution_names_its_controller() -> None:
    doc = rehashed(
        {
            **DISPATCH,
            "event": "resolved",
            "observation_kind": "scheduler_resolution",
            "occurrence_id": "controller:controller-1",
            "invocation_seq": None,
            "dispatch_id": None,
            "detail": "engine-core.scheduler:protocol-validated",
        }
    )
    assert parse_host_line(host_line(doc)).kind == "scheduler_resolution"
    assert (
        refusal(rehashed({**doc, "occurrence_id": "controller:other"})) is HostEventCode.MALFORMED
    )


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"", HostEventCode.MALFORMED),
        (b"[]", HostEventCode.MALFORMED),
        (b"\xff{}", HostEventCode.MALFORMED),
        (b'{"a":1,"a":2}', HostEventCode.MALFORMED),
        (b'{"a":NaN}', HostEventCode.NOT_JSON),
        (b'{"a":Infinity}', HostEventCode.NOT_JSON),
        (b"[" * 4000 + b"]" * 4000, HostEventCode.MALFORMED),
        (b'{"a":"' + b"x" * 9000 + b'"}', HostEventCode.TOO_LARGE),
    ],
)
def test_bytes_that_are_not_an_event(raw: bytes, code: HostEventCode) -> None:
    assert refusal(raw) is code


def test_what_json_cannot_carry_is_not_json() -> None:
    for bad in ({"a": float("nan")}, {"a": {1, 2}}, {("a",): 1}):
        with pytest.raises(HostEventRefused) as caught:
            host_line(bad)
        assert caught.value.reason is HostEventCode.NOT_JSON


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_give_an_event_or_a_refusal(raw: bytes) -> None:
    with contextlib.suppress(HostEventRefused):  # anything else fails the test
        parse_host_line(raw)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=20,
    )
)
def test_any_value_handed_in_gives_an_event_or_a_refusal(value: Any) -> None:
    with contextlib.suppress(HostEventRefused):  # anything else fails the test
        parse_host_line(host_line(value))


CLAIM = ProcessClaim("plan-1", "launch-1", "host-a", 4242, 9001)


def bound_dispatch(**process: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DISPATCH)
    doc.update(plan_id="plan-1", launch_id="launch-1")
    doc["process"]["process_epoch"] = epoch_of("pid:4242:start_ticks:9001")
    doc["process"].update(process)
    return rehashed(doc)


def test_an_event_of_this_launch_and_process_is_bound() -> None:
    check_binding(parse_host_line(host_line(bound_dispatch())), CLAIM)


@pytest.mark.parametrize(
    ("doc", "code"),
    [
        (rehashed({**DISPATCH, "plan_id": None, "launch_id": None, "binding_status": "unbound"}),
         HostEventCode.UNBOUND),
        (rehashed({**bound_dispatch(), "launch_id": "launch-2"}), HostEventCode.OTHER_LAUNCH),
        (rehashed({**bound_dispatch(), "plan_id": "plan-2"}), HostEventCode.OTHER_LAUNCH),
        (bound_dispatch(assignment_source="environment"), HostEventCode.ENVIRONMENT_ASSIGNED),
        (bound_dispatch(pid=4243, start_identity="pid:4243:start_ticks:9001"),
         HostEventCode.OTHER_PROCESS),
        (bound_dispatch(host="host-b"), HostEventCode.OTHER_PROCESS),
        (bound_dispatch(process_epoch=7), HostEventCode.OTHER_PROCESS),
        (bound_dispatch(role="worker"), HostEventCode.NOT_SCHEDULER),
    ],
)  # fmt: skip
def test_an_event_of_another_launch_or_process_does_not_count(
    doc: dict[str, Any], code: HostEventCode
) -> None:
    with pytest.raises(HostEventRefused) as caught:
        check_binding(parse_host_line(host_line(doc)), CLAIM)
    assert caught.value.reason is code
    unassigned = copy.deepcopy(bound_dispatch())
    del unassigned["process"]["assignment_source"]
    with pytest.raises(HostEventRefused) as caught:
        check_binding(parse_host_line(host_line(rehashed(unassigned))), CLAIM)
    assert caught.value.reason is HostEventCode.ENVIRONMENT_ASSIGNED


def outcome(check: Any, *args: Any) -> object:
    try:
        return check(*args)
    except HostEventRefused as exc:
        return exc.reason


_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=12)
_values = _scalars | st.dictionaries(st.text(max_size=6), _scalars)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(DISPATCH)), _values), max_size=4), st.booleans())
def test_the_sinks_check_of_the_dict_agrees_with_parsing_its_line(
    changes: list[Any], digests: bool
) -> None:
    """The sink checks the dict it was handed (check_host_event) instead of parsing the line it
    wrote from it: the same event, or the same refusal, for anything JSON's own types hold."""
    doc = copy.deepcopy(DISPATCH)
    for name, value in changes:
        doc[name] = value
    if digests:  # the digests of the changed members, when they can be computed
        with contextlib.suppress(KeyError, TypeError):
            doc = rehashed(doc)
    raw = host_line(doc)
    assert outcome(check_host_event, doc, raw) == outcome(parse_host_line, raw)


class _Anything(str):
    """A str that says it equals anything (never what JSON gives back)."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


@pytest.mark.parametrize("member", ["schema", "binding_status"])
def test_a_string_that_only_claims_to_be_the_value_is_refused(member: str) -> None:
    doc = copy.deepcopy(DISPATCH)
    doc[member] = _Anything("bogus")
    assert outcome(check_host_event, doc, host_line(doc)) is MALFORMED
    process = copy.deepcopy(DISPATCH)
    process["process"]["assignment_source"] = _Anything("environment")
    assert outcome(check_host_event, process, host_line(process)) is MALFORMED


def test_nesting_too_deep_for_python_is_refused_not_raised() -> None:
    """A lone surrogate twenty thousand lists deep: refused, never a RecursionError."""
    deep: Any = "\ud800"
    for _ in range(20_000):  # deeper than any stack: the walk keeps its own
        deep = [deep]
    doc = {**copy.deepcopy(DISPATCH), "identity_status": deep}
    raw = b'{"identity_status":[[["\\ud800"]]]}'  # the line escapes the surrogate
    assert outcome(check_host_event, doc, raw) is MALFORMED


def test_integers_beyond_64_bits_and_ticks_the_host_never_writes_are_refused() -> None:
    huge = rehashed({**DISPATCH, "observed_at_ns": 2**53 * 10**9})
    assert refusal(huge) is MALFORMED  # its second would not fit a record
    zeros = copy.deepcopy(DISPATCH)
    zeros["process"]["start_identity"] = "pid:4242:start_ticks:0009001"
    assert refusal(rehashed(zeros)) is MALFORMED
