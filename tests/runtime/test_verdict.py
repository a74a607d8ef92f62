"""The pure 0.2 derivation (RUNTIME.md "Slots", "Process keys"): per-slot coverage, process
keys, supervisor, descent, conflicts, superseded processes, --max-idle. Records are signed
with per-process keys as the observer signs them; liveness and descent are parameters."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import ecpa
from ecpa.observer.record import Signer, Window, build_evidence
from ecpa.profile.trust import TrustStore
from ecpa.runtime.judge.derive import Reason, ReasonCode, RuntimeStatus, derive_launch
from ecpa.runtime.model.counters import HostCounts
from ecpa.runtime.model.enroll import kid_for, log_name
from ecpa.runtime.model.evidence import read_log, record_line
from ecpa.runtime.model.launch import ExpectedLaunch, Slot
from ecpa.runtime.model.process import LaunchEnvironment, Liveness, ProcessIdentity
from tests.support import ROOT, check_reasons, codes

NOW = 1_800_000_000
ISSUER = "urn:ecpa:issuer:test"
S0, S1 = Slot("scheduler", 0), Slot("scheduler", 1)
BOSS = ProcessIdentity("host-a", 100, 1, "boot-1")
ENV = LaunchEnvironment(
    plan_id="plan-1",
    launch_id="launch-1",
    challenge="C" * 32,
    plugin_id="plugin:dla",
    artifact_digest="sha256:" + "ab" * 32,
    issuer=ISSUER,
    kid=None,
    signing_key_file=None,
    evidence_dir=Path("/nonexistent"),
    process_epoch=1,
    enroll_socket=Path("/nonexistent/enroll.sock"),
)
EXPECTED = ExpectedLaunch(
    plan_id=ENV.plan_id,
    launch_id=ENV.launch_id,
    plugin_id=ENV.plugin_id,
    artifact_digest=ENV.artifact_digest,
    process_epoch=1,
    challenge=ENV.challenge,
    heartbeat_window_s=3,
    slots=(S0, S1),
    version="0.2",
    supervisor=BOSS,
)


def proc(pid: int, ticks: int = 1000) -> ProcessIdentity:
    return ProcessIdentity("host-a", pid, ticks, "boot-1")


class Launch:
    """A trust store of enrolled process keys, and the logs their processes wrote."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.logs: dict[str, bytes] = {}

    def key(self, slot: Slot, who: ProcessIdentity) -> Signer:
        key = ecpa.SigningKey.from_seed(bytes([who.pid % 251]) * 16 + bytes([slot.ordinal]) * 16)
        kid = kid_for(slot, who)
        if not any(e["kid"] == kid for e in self.entries):
            self.entries.append(
                {
                    "issuer": ISSUER,
                    "kid": kid,
                    "public_key_b64": key.public_key.to_b64(),
                    "subjects": ["host-runtime"],
                    "enabled": True,
                    "not_before": NOW - 100,
                    "not_after": NOW + 100,
                }
            )
        return Signer(key, kid, slot, process_keys=True)

    def write(
        self,
        slot: Slot,
        who: ProcessIdentity,
        seq: int,
        *,
        selections: int = 5,
        calls: int = 10,
        failures: int = 0,
        changed: int = 0,
        issued_at: int = NOW - 1,
        last: int | None = NOW - 1,
        last_selection: int | str | None = "last",
        signer: Signer | None = None,
        named: ProcessIdentity | None = None,
        file: str | None = None,
        host: HostCounts | None = None,
    ) -> None:
        signer = signer if signer is not None else self.key(slot, who)
        abstentions = calls - selections - failures
        window = Window(
            seq,
            calls,
            selections,
            abstentions,
            failures,
            0,
            issued_at - 1,
            issued_at,
            last,
            changed,
            (last if selections else None) if last_selection == "last" else last_selection,  # type: ignore[arg-type]
            host,
        )
        evidence = build_evidence(ENV, named or who, signer, window, issued_at=issued_at)
        name = file if file is not None else log_name(kid_for(slot, who))
        self.logs[name] = self.logs.get(name, b"") + record_line(evidence)

    def derive(
        self,
        *,
        alive: Callable[[ProcessIdentity], bool] = lambda who: True,
        descends: Callable[[ProcessIdentity], bool] | None = lambda who: True,
        supervisor: Liveness | None = None,
        **kwargs: Any,
    ) -> RuntimeStatus:
        store = TrustStore.from_dict({"schema": "ecpa-trust-store/0.1", "keys": self.entries})
        streams = {name: read_log(io.BytesIO(data)) for name, data in self.logs.items()}

        def liveness(who: ProcessIdentity) -> Liveness:
            ok = alive(who)
            return Liveness(ok, f"process {who.pid} {'alive' if ok else 'not alive'}")

        status = derive_launch(
            streams,
            store,
            kwargs.pop("expected", EXPECTED),
            now=NOW,
            liveness=liveness,
            descends=descends,
            supervisor=supervisor if supervisor is not None else Liveness(True, "alive"),
            **kwargs,
        )
        check_reasons(status)  # every status here says what a status must
        return status


def slot_reasons(status: RuntimeStatus, name: str) -> list[Reason]:
    [slot] = [s for s in status.slots if s.slot == name]
    return list(slot.reasons)


def slot_codes(status: RuntimeStatus, name: str) -> list[str]:
    return codes(slot_reasons(status, name))


def about(status: RuntimeStatus) -> set[tuple[str, str | None]]:
    """(code, slot) of each launch-level reason."""
    return {(r.code.value, r.slot) for r in status.reasons}


def test_two_slots_both_covered() -> None:
    launch = Launch()
    launch.write(S0, proc(11), 1)
    launch.write(S1, proc(12), 1)
    status = launch.derive()
    assert status.effective, status.reasons
    assert [s.covered for s in status.slots] == [True, True]
    assert ("coverage_complete", None) in about(status)
    assert {("covered", "scheduler.0"), ("covered", "scheduler.1")} <= about(status)
    assert status.now == NOW
    assert status.version == "0.2"


def test_one_process_for_two_slots_says_which_has_no_evidence() -> None:
    launch = Launch()
    launch.write(S0, proc(11), 1)
    status = launch.derive()
    assert not status.effective
    assert {("no_evidence", "scheduler.1"), ("not_covered", "scheduler.1")} <= about(status)
    assert ("no_evidence", "scheduler.0") not in about(status)
    assert Reason(ReasonCode.COVERAGE_INCOMPLETE, "coverage: 1/2 slots") in status.reasons
    # A slot's reason, at the launch level, names the slot in its text too.
    assert "slot scheduler.1: no evidence" in [r.text for r in status.reasons]


def test_supervisor_not_alive_is_false_whatever_the_evidence() -> None:
    launch = Launch()
    launch.write(S0, proc(11), 1)
    launch.write(S1, proc(12), 1)
    status = launch.derive(supervisor=Liveness(False, "no running process 100"))
    assert not status.effective
    assert status.reasons[0].code is ReasonCode.SUPERVISOR_NOT_ALIVE
    assert status.reasons[0].text == "supervisor not alive: no running process 100"


def test_a_process_that_left_the_supervisors_tree_does_not_cover() -> None:
    launch = Launch()
    launch.write(S0, proc(11), 1)
    launch.write(S1, proc(12), 1)
    status = launch.derive(descends=lambda who: who.pid != 12)
    assert not status.effective
    assert "not_descendant" in slot_codes(status, "scheduler.1")
    assert "descendant" in slot_codes(status, "scheduler.0")


def test_two_live_processes_in_one_slot_is_a_conflict() -> None:
    launch = Launch()
    launch.write(S0, proc(11), 1)
    launch.write(S0, proc(13), 1)
    launch.write(S1, proc(12), 1)
    status = launch.derive()
    assert not status.effective
    assert slot_codes(status, "scheduler.0") == ["conflict"]


def test_a_dead_process_replaced_by_a_live_one_is_superseded_not_a_conflict() -> None:
    launch = Launch()
    launch.write(S0, proc(11), 1, issued_at=NOW - 50)  # died long ago
    launch.write(S0, proc(11, ticks=2000), 1)  # the same pid reused: a new process
    launch.write(S1, proc(12), 1)
    status = launch.derive(alive=lambda who: (who.pid, who.start_ticks) != (11, 1000))
    assert status.effective, status.reasons
    assert "superseded" in slot_codes(status, "scheduler.0")


def test_a_key_speaks_only_for_the_process_it_was_enrolled_for() -> None:
    launch = Launch()
    mine = launch.key(S0, proc(11))
    launch.write(S0, proc(11), 1, signer=mine, named=proc(1))  # names pid 1 with 11's key
    launch.write(S1, proc(12), 1)
    status = launch.derive()
    assert not status.effective
    assert status.refused == {"ATTESTATION_BINDING_MISMATCH": 1}
    # The refusal's detail says which binding failed (its code is in ``refused``).
    assert any(
        r.code is ReasonCode.REFUSED and "was not enrolled for the process it names" in r.text
        for r in status.reasons
    )


def test_a_record_in_another_processs_file_is_refused() -> None:
    launch = Launch()
    launch.write(S0, proc(11), 1, file=log_name(kid_for(S0, proc(99))))
    status = launch.derive()
    assert status.refused == {"ATTESTATION_BINDING_MISMATCH": 1}
    assert any(
        r.code is ReasonCode.REFUSED and "in another process's file" in r.text
        for r in status.reasons
    )


def test_a_record_for_a_slot_the_plan_does_not_name_is_refused() -> None:
    launch = Launch()
    launch.write(Slot("scheduler", 7), proc(11), 1)
    status = launch.derive()
    assert status.refused == {"ATTESTATION_BINDING_MISMATCH": 1}
    assert any(
        r.code is ReasonCode.REFUSED and "which the plan does not name" in r.text
        for r in status.reasons
    )


def test_a_slot_is_looked_up_among_exactly_the_launchs_slots() -> None:
    many = tuple(Slot("scheduler", n) for n in range(1000))
    expected = replace(EXPECTED, slots=many)
    assert expected.slot_set == frozenset(many)
    assert Slot("scheduler", 999) in expected.slot_set
    assert Slot("scheduler", 1000) not in expected.slot_set
    fewer = replace(expected, slots=many[:2])  # a changed launch is looked up afresh
    assert fewer.slot_set == {Slot("scheduler", 0), Slot("scheduler", 1)}
    assert fewer == replace(EXPECTED, slots=many[:2])  # the lookup is not part of equality


@pytest.mark.parametrize(
    ("last", "effective", "code"),
    [
        (NOW - 5, True, "busy"),
        (NOW - 11, False, "idle"),
    ],
)
def test_max_idle(last: int | None, effective: bool, code: str) -> None:
    launch = Launch()
    launch.write(S0, proc(11), 1, last=last)
    expected = replace(EXPECTED, slots=(S0,))
    assert launch.derive(expected=expected).effective  # off by default
    status = launch.derive(expected=expected, max_idle=10)
    assert status.effective is effective
    assert code in slot_codes(status, "scheduler.0")


def test_slot_status_carries_the_process_and_counters() -> None:
    launch = Launch()
    launch.write(S0, proc(11), 1)
    launch.write(S0, proc(11), 2)
    launch.write(S1, proc(12), 1, selections=0)
    status = launch.derive()
    s0, s1 = status.slots
    assert (s0.covered, s0.process, s0.newest_seq, s0.age_s) == (True, proc(11), 2, 1)
    assert s0.kid == kid_for(S0, proc(11))
    assert s0.counters is not None
    assert s0.counters["selections"] == 5
    assert not s1.covered
    assert "no_selections" in codes(s1.reasons)


@pytest.mark.parametrize(
    ("calls", "failures", "reason"),
    [
        (0, 0, "no selections: the plugin was not called (no preemption has happened)"),
        (
            16750,
            0,
            "no selections: the plugin abstained on all 16,750 calls (no builtin victim carried "
            "a prediction, the bypass is set, or the configuration does not select it)",
        ),
        (
            7,
            7,
            "no selections: the plugin failed on all 7 calls (inputs outside the host contract)",
        ),
        (
            9,
            2,
            "no selections in 9 calls: 7 abstentions (no builtin victim carried a prediction, "
            "the bypass is set, or the configuration does not select it), 2 failures (inputs "
            "outside the host contract)",
        ),
    ],
)
def test_a_plugin_that_never_selects_says_its_counts_and_cause(
    calls: int, failures: int, reason: str
) -> None:
    """docs/runtime.md "Coverage: the verdict, slot by slot": with no selections the reason
    gives the counts and the cause (not called, abstained on every call, or failed), never a
    bare "has not chosen a victim yet" that reads as "not loaded"."""
    launch = Launch()
    last = None if calls == 0 else NOW - 1
    launch.write(S0, proc(11), 1, selections=0, calls=calls, failures=failures, last=last)
    status = launch.derive(expected=replace(EXPECTED, slots=(S0,)))
    assert not status.effective
    # The wording is the point here: the counts and the cause.
    assert Reason(ReasonCode.NO_SELECTIONS, reason) in slot_reasons(status, "scheduler.0")


def test_the_changed_decisions_are_shown_per_slot() -> None:
    """RUNTIME.md "Counters 0.3": selections alone count the builtin's own victim
    too; ``changed`` says how many decisions the plugin really changed."""
    launch = Launch()
    launch.write(S0, proc(11), 1, selections=6, changed=4)
    status = launch.derive(expected=replace(EXPECTED, slots=(S0,)))
    assert status.effective
    (slot,) = status.slots
    assert slot.counters is not None
    assert (slot.counters["changed"], slot.counters["last_selection_at"]) == (4, NOW - 1)
    assert slot.counters["schema"] == "ecpa-dispatch-counters/0.4"
    text = "selections 6 of 10 calls (changed 4, abstentions 4, failures 0)"
    assert Reason(ReasonCode.SELECTIONS, text) in slot.reasons


def test_one_process_claiming_two_slots_is_a_conflict() -> None:
    launch = Launch()
    launch.write(S0, proc(11), 1)
    launch.write(S1, proc(11), 1)  # the same process, keys for both slots
    status = launch.derive()
    assert not status.effective
    for name in ("scheduler.0", "scheduler.1"):
        assert slot_codes(status, name)[0] == "conflict"


@pytest.mark.parametrize(
    ("last_call", "last_selection", "covered", "code"),
    [
        # Called for 40 s after its newest selection, abstaining each time: not covered.
        (
            NOW - 1,
            NOW - 41,
            False,
            "abstaining",
        ),
        # Idle since its newest selection (no calls): covered, however long ago.
        (
            NOW - 500,
            NOW - 500,
            True,
            "selecting",
        ),
        # Abstained for 20 s, then idle: covered.
        (
            NOW - 100,
            NOW - 120,
            True,
            "selecting",
        ),
    ],
)
def test_a_plugin_that_only_abstains_stops_covering_its_slot(
    last_call: int, last_selection: int, covered: bool, code: str
) -> None:
    """RUNTIME.md "Counters 0.3": a predictor gone away leaves the plugin called
    and abstaining for good; neither the cumulative counters nor a last_dispatch_at moved by
    abstentions keep the slot covered longer than max_abstain_s after its newest
    selection."""
    launch = Launch()
    launch.write(S0, proc(11), 1, last=last_call, last_selection=last_selection)
    status = launch.derive(expected=replace(EXPECTED, slots=(S0,)))
    (slot,) = status.slots
    assert slot.covered is covered
    assert code in codes(slot.reasons)


def test_max_abstain_comes_from_the_launch_and_can_be_overridden() -> None:
    launch = Launch()
    launch.write(S0, proc(11), 1, last=NOW - 1, last_selection=NOW - 11)
    expected = replace(EXPECTED, slots=(S0,))
    assert launch.derive(expected=expected).effective  # 10 s of abstaining, 30 allowed
    assert not launch.derive(expected=replace(expected, max_abstain_s=5)).effective


def test_a_record_that_cannot_show_abstention_never_covers_a_launch_that_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 0.2 counters record (no ``last_selection_at``) in a launch that names
    ``max_abstain_s``: a plugin that only abstains would go unnoticed, so the slot is not
    covered, and the reason says what was expected and found. In a launch that does not
    name it (an older launch.json) the record still counts, with a note."""
    import json

    from ecpa.observer import record as _record
    from ecpa.profile.json.jcs import canonicalize
    from ecpa.runtime.model.launch import expected_from_dict

    original = _record.counters_record

    def older(plugin_id: str, identity: ProcessIdentity, window: Window) -> bytes:
        doc = json.loads(original(plugin_id, identity, window))
        del doc["changed"], doc["last_selection_at"], doc["host"]
        doc["schema"] = "ecpa-dispatch-counters/0.2"
        return canonicalize(doc)

    monkeypatch.setattr(_record, "counters_record", older)
    launch = Launch()
    launch.write(S0, proc(11), 1)
    expected = replace(EXPECTED, slots=(S0,))
    assert not expected.judges_abstention
    status = launch.derive(expected=expected)
    assert status.effective
    assert "abstention_not_judged" in slot_codes(status, "scheduler.0")
    status = launch.derive(expected=replace(expected, judges_abstention=True))
    assert not status.effective
    assert Reason(
        ReasonCode.ABSTENTION_UNKNOWN,
        "abstention unknown: expected a counters record with last_selection_at "
        "(ecpa-dispatch-counters/0.3), found ecpa-dispatch-counters/0.2 (max_abstain_s 30 s)",
    ) in slot_reasons(status, "scheduler.0")
    doc = {
        "plan_id": "p", "launch_id": "l", "plugin_id": "x", "artifact_digest": "d",
        "process_epoch": 1, "challenge": "c",
    }  # fmt: skip
    assert not expected_from_dict(doc, "launch.json").judges_abstention
    assert expected_from_dict({**doc, "max_abstain_s": 30}, "launch.json").judges_abstention


def test_every_code_a_status_gives_is_defined_and_documented() -> None:
    """STYLE rule 13: programs match a reason's code. Over launches that give most of them,
    every code is a ReasonCode and docs/runtime.md lists it; what fails and what passes are
    told apart by the code alone (``check_reasons``, on every status of this module)."""
    one = replace(EXPECTED, slots=(S0,))
    seen: set[str] = set()

    good = Launch()  # covered: every check passes, a dead process superseded, a gap noted
    good.write(S0, proc(11), 1, issued_at=NOW - 50)
    good.write(S0, proc(11, ticks=2000), 1)
    good.write(S0, proc(11, ticks=2000), 3, last=NOW - 1)
    good.write(S1, proc(12), 1)
    alive = good.derive(alive=lambda who: (who.pid, who.start_ticks) != (11, 1000), max_idle=10)
    assert alive.effective
    seen |= check_reasons(alive)

    bad = Launch()  # stale, dead, left the tree, never selecting, a stray record, a torn line
    bad.write(S0, proc(11), 1, issued_at=NOW - 50)
    bad.write(S1, proc(12), 1, selections=0)
    bad.write(S1, proc(13), 1, file=log_name(kid_for(S1, proc(99))))
    bad.logs[log_name(kid_for(S1, proc(12)))] += b'{"payload_b64":'
    status = bad.derive(
        alive=lambda who: who.pid != 11,
        descends=lambda who: who.pid != 12,
        supervisor=Liveness(False, "no running process 100"),
        skipped=[Reason(ReasonCode.SKIPPED, "file 'x': not a process log, skipped")],
    )
    assert not status.effective
    seen |= check_reasons(status)

    seen |= check_reasons(Launch().derive(expected=one))  # no evidence at all
    idle = Launch()
    idle.write(S0, proc(11), 1, last=NOW - 5)
    seen |= check_reasons(idle.derive(expected=one, max_idle=0))
    abstaining = Launch()
    abstaining.write(S0, proc(11), 1, last=NOW - 1, last_selection=NOW - 41)
    seen |= check_reasons(abstaining.derive(expected=one))
    twice = Launch()  # two live processes in one slot
    twice.write(S0, proc(11), 1)
    twice.write(S0, proc(13), 1)
    seen |= check_reasons(twice.derive(expected=one))
    from tests.runtime.test_host_verdict import REQUIRED, judged, witnessed

    hosts = (witnessed(), witnessed(selected=0), witnessed(exception=1, lost=1), None)
    for host in (*hosts, witnessed(refused_scheduler=1)):
        seen |= check_reasons(judged(host).derive(expected=REQUIRED))
    seen |= check_reasons(judged(witnessed(policy="x.Y")).derive(expected=REQUIRED))

    documented = set(
        re.findall(
            r"^\| `([a-z0-9_]+)` \|",
            (ROOT / "docs" / "runtime.md").read_text(encoding="utf-8"),
            flags=re.MULTILINE,
        )
    )
    defined = {code.value for code in ReasonCode}
    assert seen <= defined <= documented, (seen - defined, defined - documented)
    assert seen >= {
        "accepted", "selections", "no_selections", "selecting", "abstaining", "fresh", "stale",
        "busy", "idle", "alive", "not_alive", "descendant", "not_descendant", "no_evidence",
        "conflict", "superseded", "covered", "not_covered", "coverage_complete",
        "coverage_incomplete", "supervisor_alive", "supervisor_not_alive", "gap", "torn",
        "refused", "skipped", "host_selections", "host_no_selections", "host_policy_disabled",
        "host_evidence_missing", "host_policy_mismatch", "host_sink_failed", "host_events_refused",
    }  # fmt: skip
