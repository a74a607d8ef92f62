"""A record checked again (ecpa.runtime.judge.records.VERIFIED): remembered by its exact
bytes, its log and what of the judgement its checks read but the clock, it is not verified
again, and the answer is always the one a check with nothing remembered gives: the clock's
checks run again in their order, and anything else changed is checked afresh."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.launchdir import Written, write_launch
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.keys import SigningKey
from ecpa.profile.trust import TrustStore
from ecpa.profile.verify import Policy
from ecpa.runtime.judge import records
from ecpa.runtime.judge.context import Judgement
from ecpa.runtime.judge.memo import Same, forget
from ecpa.runtime.judge.records import VERIFIED, Accepted, check_record
from ecpa.runtime.model.enroll import kid_of_log
from ecpa.runtime.model.evidence import Evidence, parse_record
from ecpa.runtime.model.launch import ExpectedLaunch, Slot
from ecpa.runtime.model.process import ProcessIdentity
from tests.runtime.test_memo import _inputs

NOW = 1_800_000_000


@pytest.fixture
def w(tmp_path: Path) -> Written:
    return write_launch(tmp_path, slots=2, records=3, now=NOW)


def _judgement(w: Written, now: int = NOW) -> Judgement:
    from ecpa.runtime.judge.certified import launch_keys

    inputs = _inputs(w)
    keys = launch_keys(**inputs)
    assert keys.identities, keys.reasons  # certified by the operator: a 0.2 judgement
    return Judgement.under(keys, inputs["expected"], now)


def _newest(w: Written) -> tuple[Evidence, str]:
    """The newest record of the first log, and the key id its file is named after."""
    log = sorted((w.directory / "evidence").rglob("*.jsonl"))[0]
    line = [x for x in log.read_bytes().splitlines() if x.strip()][-1]
    kid = kid_of_log(log.name)
    assert kid is not None
    return parse_record(line), kid


def _outcome(evidence: Evidence, judgement: Judgement, kid: str | None) -> Any:
    try:
        rec = check_record(evidence, judgement, file_kid=kid)
    except EcpaError as exc:
        return exc.code
    return (rec.statement, rec.seq, rec.identity, rec.slot, rec.fingerprint, rec.counters)


def _both(
    evidence: Evidence,
    judgement: Judgement,
    kid: str | None,
    warm: Judgement,
    warm_kid: str | None = None,
) -> Any:
    """The outcome with ``warm``'s acceptance of the record (read from ``warm_kid``'s log,
    by default ``kid``'s) remembered, and with nothing remembered: they must be the same."""
    forget()
    warm_kid = kid if warm_kid is None else warm_kid
    assert isinstance(check_record(evidence, warm, file_kid=warm_kid), Accepted)
    remembered = _outcome(evidence, judgement, kid)
    forget()
    afresh = _outcome(evidence, judgement, kid)
    assert remembered == afresh
    return afresh


def test_a_record_checked_again_is_verified_once(
    w: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    judgement = _judgement(w)
    evidence, kid = _newest(w)
    verified: list[object] = []
    real = records.verify

    def counted(*args: Any, **kwargs: Any) -> Any:
        verified.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(records, "verify", counted)
    first = check_record(evidence, judgement, file_kid=kid)
    again = check_record(parse_record(record_bytes(evidence)), judgement, file_kid=kid)
    assert again is first
    assert len(verified) == 1
    assert VERIFIED.hits == 1


def record_bytes(evidence: Evidence) -> bytes:
    from ecpa.runtime.model.evidence import record_line

    return record_line(evidence).rstrip(b"\n")


@pytest.mark.parametrize(
    "offset",
    [-(10**6), -400, -301, -61, -2, -1, 0, 1, 59, 60, 61, 299, 300, 301, 10**6, 10**9],
)
def test_checked_again_the_clock_is_read_again(w: Written, offset: int) -> None:
    """Accepted at NOW, then checked at another time: the same code (or acceptance) as a
    check at that time with nothing remembered (the statement's window, its observation's
    age, the key's window: whichever fails first)."""
    evidence, kid = _newest(w)
    warm = _judgement(w)
    outcome = _both(evidence, warm.at(NOW + offset), kid, warm)
    if offset == 0:
        assert not isinstance(outcome, ErrorCode), outcome
    if abs(offset) >= 10**6:
        assert isinstance(outcome, ErrorCode), outcome


@pytest.mark.parametrize(
    "policy",
    [Policy(), Policy(clock_skew=30), Policy(max_ttl=10), Policy(max_observation_age=0)],
)
@pytest.mark.parametrize("offset", [-31, 0, 61, 89])
def test_checked_again_under_another_policy_the_policy_is_read_again(
    w: Written, policy: Policy, offset: int
) -> None:
    evidence, kid = _newest(w)
    warm = _judgement(w)
    _both(evidence, replace(warm, policy=policy, now=NOW + offset), kid, warm)


def _other_identity() -> ProcessIdentity:
    return ProcessIdentity("elsewhere", 4242, 99, "boot-other")


_EXPECTED_CHANGES: dict[str, Callable[[ExpectedLaunch], ExpectedLaunch]] = {
    "plan_id": lambda e: replace(e, plan_id="plan-other"),
    "launch_id": lambda e: replace(e, launch_id="launch-other"),
    "plugin_id": lambda e: replace(e, plugin_id="org.example/other"),
    "artifact_digest": lambda e: replace(e, artifact_digest="sha256:" + "1" * 64),
    "process_epoch": lambda e: replace(e, process_epoch=e.process_epoch + 1),
    "challenge": lambda e: replace(e, challenge="another-challenge"),
    "version": lambda e: replace(e, version="0.1"),
    "slots": lambda e: replace(e, slots=(Slot("scheduler", 7),)),
    "certified": lambda e: replace(
        e,
        certified=MappingProxyType(dict.fromkeys(e.certified or {}, _other_identity())),
    ),
}


@pytest.mark.parametrize("field", sorted(_EXPECTED_CHANGES))
def test_a_launch_changed_in_anything_its_checks_read_is_checked_afresh(
    w: Written, field: str
) -> None:
    evidence, kid = _newest(w)
    warm = _judgement(w)
    changed = replace(warm, expected=_EXPECTED_CHANGES[field](warm.expected))
    # Each change alone makes the record another launch's: refused, as afresh.
    assert isinstance(_both(evidence, changed, kid, warm), ErrorCode)


def test_another_log_or_trust_store_is_checked_afresh(w: Written) -> None:
    evidence, kid = _newest(w)
    warm = _judgement(w)
    other_log = kid.replace("-1000-", "-1001-")
    assert isinstance(_both(evidence, warm, other_log, warm, kid), ErrorCode)
    assert not isinstance(_both(evidence, warm, None, warm, kid), ErrorCode)  # no file named
    stranger = SigningKey.generate().public_key.to_b64()
    doc = warm.trust_store.to_dict()  # the same entries, each with another key
    doc["keys"] = [{**entry, "public_key_b64": stranger} for entry in doc["keys"]]
    other = TrustStore.from_dict(doc)
    assert isinstance(_both(evidence, replace(warm, trust_store=other), kid, warm), ErrorCode)
    assert len(VERIFIED) == 0  # (afresh: refused, so nothing remembered)


def test_other_bytes_are_another_record(w: Written) -> None:
    evidence, kid = _newest(w)
    warm = _judgement(w)
    jws = evidence.detached_jws
    forged = replace(evidence, detached_jws=jws[:-2] + ("AA" if jws[-2:] != "AA" else "BA"))
    host = evidence.host_evidence or b""
    swapped = replace(evidence, host_evidence=host.replace(b'"calls":', b'"calls": ', 1))
    for other in (forged, swapped, replace(evidence, host_evidence=None)):
        forget()
        check_record(evidence, warm, file_kid=kid)
        with pytest.raises(EcpaError):
            check_record(other, warm, file_kid=kid)


def test_a_records_name_keeps_its_parts_apart() -> None:
    names = {
        records._exact(Evidence(b"ab", "c", None)),
        records._exact(Evidence(b"a", "bc", None)),
        records._exact(Evidence(b"a", "bc", b"")),
        records._exact(Evidence(b"a", "b", b"c")),
        records._exact(Evidence(b"a", "b\udc80", b"c")),  # a lone surrogate is named too
    }
    assert len(names) == 5


class _Reads:
    """An expected launch that notes each member read of it."""

    def __init__(self, inner: ExpectedLaunch) -> None:
        self._inner, self.read = inner, set[str]()

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        return getattr(self._inner, name)


def test_a_records_own_checks_read_of_the_launch_only_what_its_name_holds(w: Written) -> None:
    """What ``_own_checks`` reads of the launch is in the key (``slot_set`` and ``slots``
    as ``slot_names``): a check that read another member would be remembered past its
    change."""
    judgement = _judgement(w)
    evidence, kid = _newest(w)
    statement = records.verify(evidence.payload, evidence.detached_jws, judgement.trust_store,
                               now=NOW).statement  # fmt: skip
    reads = _Reads(judgement.expected)
    records._own_checks(evidence, statement, reads, kid)  # type: ignore[arg-type]
    keyed = {"plan_id", "launch_id", "plugin_id", "artifact_digest", "process_epoch",
             "challenge", "version", "slot_set", "certified"}  # fmt: skip
    assert reads.read <= keyed, reads.read - keyed
    assert {"challenge", "slot_set", "certified"} <= reads.read


def test_same_names_a_thing_by_its_identity_and_holds_it() -> None:
    a, b = [1], [1]
    assert Same(a) == Same(a)
    assert hash(Same(a)) == hash(Same(a))
    assert Same(a) != Same(b)
    assert Same(a) != a
    held = Same([2])
    assert held.thing == [2]


def test_the_memory_of_records_is_resized_oldest_first(w: Written) -> None:
    before = VERIFIED.size
    try:
        VERIFIED.resize(3)
        for n in range(5):
            VERIFIED.put((n,), (None, None))  # type: ignore[arg-type]
        assert len(VERIFIED) == 3
        assert VERIFIED.get((0,)) is None
        assert VERIFIED.get((4,)) is not None
        VERIFIED.resize(1)
        assert len(VERIFIED) == 1
        assert VERIFIED.get((4,)) is not None
        with pytest.raises(ValueError, match="at least 1"):
            VERIFIED.resize(0)
    finally:
        VERIFIED.resize(before)
        forget()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_record_changed_is_judged_as_afresh(w: Written, data: st.DataObject) -> None:
    """Any byte of the record changed, at any time: the answer with its original
    remembered is the answer with nothing remembered."""
    evidence, kid = _newest(w)
    warm = _judgement(w)
    line = bytearray(record_bytes(evidence))
    at = data.draw(st.integers(0, len(line) - 1))
    line[at] = data.draw(st.integers(0, 255))
    offset = data.draw(st.sampled_from([0, 30, 61, 301, -5]))
    try:
        changed = parse_record(bytes(line))
    except EcpaError:
        return  # not a record at all: never reaches the checks
    _both_any(evidence, changed, warm.at(NOW + offset), kid, warm)


def _both_any(
    original: Evidence, changed: Evidence, judgement: Judgement, kid: str, warm: Judgement
) -> None:
    forget()
    check_record(original, warm, file_kid=kid)
    remembered = _outcome(changed, judgement, kid)
    forget()
    assert remembered == _outcome(changed, judgement, kid)
