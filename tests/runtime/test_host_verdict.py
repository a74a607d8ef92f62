"""The host's witness in the verdict (docs/host-evidence.md): under ``host_evidence:
"required"`` a slot is covered only on the host's own counts of its process, never on the
plugin's reports; a policy the host disabled is never effective; each slot says which source
backs it, and ``ecpa status --json`` shows what the host witnessed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ecpa.launcher.lifecycle import status_document
from ecpa.runtime.model.counters import HostCounts
from tests.runtime.test_verdict import EXPECTED, NOW, S0, Launch, proc, slot_codes

POLICY = "dla_plugin.selector.DlaVictimSelector"
REQUIRED = replace(EXPECTED, slots=(S0,), host_evidence="required", host_policy=POLICY)
OFF = replace(EXPECTED, slots=(S0,))
DIGEST = "sha256:" + "12" * 32


def witnessed(
    *,
    selected: int = 3,
    abstained: int = 1,
    invalid: int = 0,
    exception: int = 0,
    resolutions: int = 1,
    policy: str | None = POLICY,
    lost: int = 0,
    last: int = NOW - 1,
    last_selection: int | None = None,
    refused_scheduler: int = 0,
) -> HostCounts:
    """What a host journal of these events accounts for."""
    dispatches = selected + abstained + invalid + exception
    lines = resolutions + dispatches
    return HostCounts(
        journal_lines=lines,
        journal_chain=DIGEST,
        newest_event_digest=DIGEST if lines else None,
        policy=policy if resolutions else None,
        resolutions=resolutions,
        selected=selected,
        abstained=abstained,
        invalid=invalid,
        exception=exception,
        lifecycle=0,
        last_dispatch_at=last if dispatches else None,
        last_selection_at=(last if last_selection is None else last_selection)
        if selected
        else None,
        refused=refused_scheduler,
        refused_scheduler=refused_scheduler,
        lost=lost,
        final=False,
    )


def judged(host: HostCounts | None, expected: object = REQUIRED, **write: object) -> Launch:
    launch = Launch()
    launch.write(S0, proc(11), 1, host=host, **write)  # type: ignore[arg-type]
    return launch


def test_plugin_reports_alone_never_give_true_when_the_host_is_required() -> None:
    status = judged(None).derive(expected=REQUIRED)
    assert not status.effective
    assert "host_evidence_missing" in slot_codes(status, "scheduler.0")
    assert "selections" not in slot_codes(status, "scheduler.0")  # the plugin's word unused
    assert status.slots[0].source == "host"
    # the same record, host evidence off: the plugin's reports back it
    off = judged(None).derive(expected=OFF)
    assert off.effective
    assert off.slots[0].source == "plugin"


def test_a_host_that_witnessed_no_event_is_missing_evidence() -> None:
    nothing = witnessed(selected=0, abstained=0, resolutions=0)
    status = judged(nothing).derive(expected=REQUIRED)
    assert not status.effective
    assert "host_evidence_missing" in slot_codes(status, "scheduler.0")


def test_the_host_witness_backs_the_slot() -> None:
    status = judged(witnessed()).derive(expected=REQUIRED)
    assert status.effective, status.reasons
    codes = slot_codes(status, "scheduler.0")
    assert "host_selections" in codes
    assert "selecting" in codes
    assert status.slots[0].source == "host"
    # the host's word, not the plugin's: a plugin that says it never selected does not matter
    plugin_silent = judged(witnessed(), selections=0).derive(expected=REQUIRED)
    assert plugin_silent.effective


def test_dispatches_without_a_selection_are_not_effective() -> None:
    status = judged(witnessed(selected=0, abstained=4)).derive(expected=REQUIRED)
    assert not status.effective
    assert "host_no_selections" in slot_codes(status, "scheduler.0")
    resolved_only = judged(witnessed(selected=0, abstained=0)).derive(expected=REQUIRED)
    assert "host_no_selections" in slot_codes(resolved_only, "scheduler.0")


@pytest.mark.parametrize("expected", [REQUIRED, OFF], ids=["required", "off"])
@pytest.mark.parametrize("failure", ["invalid", "exception"])
def test_a_policy_the_host_disabled_is_never_effective(expected: object, failure: str) -> None:
    host = witnessed(**{failure: 1})  # type: ignore[arg-type]
    status = judged(host).derive(expected=expected)
    assert not status.effective
    assert "host_policy_disabled" in slot_codes(status, "scheduler.0")


def test_another_policy_than_the_plans_is_a_mismatch() -> None:
    status = judged(witnessed(policy="other.Policy")).derive(expected=REQUIRED)
    assert not status.effective
    assert "host_policy_mismatch" in slot_codes(status, "scheduler.0")
    # a launch that names no policy takes any
    anyone = replace(REQUIRED, host_policy=None)
    assert judged(witnessed(policy="other.Policy")).derive(expected=anyone).effective


def test_a_sink_that_could_not_record_is_not_effective() -> None:
    status = judged(witnessed(lost=1)).derive(expected=REQUIRED)
    assert not status.effective
    assert "host_sink_failed" in slot_codes(status, "scheduler.0")


def test_resolutions_or_dispatches_the_sink_refused_leave_the_witness_partial() -> None:
    """The host switched the process to another policy: its resolution and dispatches were
    refused, so the counts of the first policy must not keep the slot covered."""
    status = judged(witnessed(refused_scheduler=3)).derive(expected=REQUIRED)
    assert not status.effective
    assert "host_events_refused" in slot_codes(status, "scheduler.0")
    off = judged(witnessed(refused_scheduler=3)).derive(expected=OFF)
    assert off.effective  # off: the plugin's reports back the slot


def test_max_idle_reads_the_newest_dispatch_from_the_slots_source() -> None:
    host_idle = witnessed(last=NOW - 3600)
    required = judged(host_idle, last=NOW - 1).derive(expected=REQUIRED, max_idle=60)
    assert not required.effective
    assert "idle" in slot_codes(required, "scheduler.0")  # the host's: an hour ago
    silent = {"selections": 0, "calls": 0, "last": None}  # the plugin: never called, it says
    busy = judged(witnessed(last=NOW - 1), **silent).derive(expected=REQUIRED, max_idle=60)
    assert "busy" in slot_codes(busy, "scheduler.0")  # the plugin's silence does not matter


def test_abstaining_is_judged_on_the_host_times() -> None:
    host = witnessed(last=NOW - 1, last_selection=NOW - 41)
    status = judged(host).derive(expected=REQUIRED)
    assert not status.effective
    assert "abstaining" in slot_codes(status, "scheduler.0")


def test_status_json_shows_the_host_witness_per_slot() -> None:
    status = judged(witnessed(selected=3, abstained=1)).derive(expected=REQUIRED)
    [slot] = status_document(status, None)["slots"]
    assert slot["source"] == "host"
    assert slot["host"] == {
        "resolved": True,
        "policy": POLICY,
        "dispatches": {"selected": 3, "abstained": 1, "invalid": 0, "exception": 0},
        "newest_event_digest": DIGEST,
    }
    [none] = status_document(judged(None).derive(expected=REQUIRED), None)["slots"]
    assert none["host"] == {
        "resolved": False,
        "policy": None,
        "dispatches": {"selected": 0, "abstained": 0, "invalid": 0, "exception": 0},
        "newest_event_digest": None,
    }
    [empty] = status_document(Launch().derive(expected=REQUIRED), None)["slots"]
    assert empty["host"]["resolved"] is False
    assert empty["source"] == "host"
