"""The counters record defined once (RUNTIME.md "Evidence record"): the observer writes a
``Counters``, a reader parses the same class back, strictly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ecpa.errors import EcpaError, ErrorCode
from ecpa.observer.record import Window, counters_record
from ecpa.profile.json.jcs import canonicalize
from ecpa.runtime.model.counters import COUNTERS_SCHEMA_02, Counters, parse_counters
from ecpa.runtime.model.process import ProcessIdentity

WHO = ProcessIdentity("host-a", 4242, 777, "boot-1")


@given(
    st.integers(0, 1000),
    st.integers(0, 1000),
    st.integers(0, 1000),
    st.integers(0, 10),
    st.integers(1, 2**40),
)
def test_what_the_observer_writes_the_reader_reads_back(
    selections: int, abstentions: int, failures: int, dropped: int, seq: int
) -> None:
    calls = selections + abstentions + failures
    changed = selections // 2
    last = 1_700_000_000 if calls else None
    window = Window(
        seq, calls, selections, abstentions, failures, dropped, 10, 20, last, changed,
        last if selections else None,
    )  # fmt: skip
    data = counters_record("org.example.plugin", WHO, window)
    parsed = parse_counters(data)
    assert parsed.to_bytes() == data
    assert (parsed.calls, parsed.selections, parsed.changed, parsed.seq) == (
        calls,
        selections,
        changed,
        seq,
    )
    assert parsed.process.pid == WHO.pid


def test_a_member_by_its_field_name_is_refused() -> None:
    """``schema_`` is the field's name in Python, never a member of the record."""
    data = counters_record("p", WHO, Window(1, 0, 0, 0, 0, 0, 1, 2, None, 0, None))
    doc = parse_counters(data).to_dict()
    forged = canonicalize({**doc, "schema_": doc["schema"]})
    with pytest.raises(EcpaError) as caught:
        parse_counters(forged)
    assert caught.value.code is ErrorCode.INVALID_RECORD


def test_an_older_record_has_exactly_its_schemas_members() -> None:
    doc = parse_counters(
        counters_record("p", WHO, Window(1, 2, 1, 1, 0, 0, 1, 2, 5, 0, 5))
    ).to_dict()
    for member in ("changed", "last_selection_at", "host"):
        del doc[member]
    older = canonicalize({**doc, "schema": COUNTERS_SCHEMA_02})
    parsed = parse_counters(older)
    assert isinstance(parsed, Counters)
    assert parsed.to_bytes() == older  # no member of 0.3 appears
    with pytest.raises(EcpaError) as caught:
        parse_counters(canonicalize({**doc, "schema": COUNTERS_SCHEMA_02, "changed": 0}))
    assert caught.value.code is ErrorCode.INVALID_RECORD
    assert "without member 'changed'" in caught.value.detail  # the member of 0.3 it holds


def test_a_records_document_is_made_once_and_is_its_to_dict() -> None:
    """A status reports each slot's newest counters as a document: a record remembered is
    reported again every refresh of ``ecpa serve``, from the same document, never changed
    (a status and its slots hold it read-only); equal to the record's members, and not
    part of what the record is (its equality, its bytes)."""
    data = counters_record("p", WHO, Window(1, 2, 1, 1, 0, 0, 1, 2, 5, 0, 5))
    parsed = parse_counters(data)
    doc = parsed.document
    assert parsed.document is doc
    assert doc == parsed.to_dict()
    assert doc is not parsed.to_dict()
    assert parsed == parse_counters(data)
    assert parsed.to_bytes() == data


def test_a_status_holds_a_copy_of_the_records_document(tmp_path: Path) -> None:
    """What a status reports of a remembered record is its own: a reader that changes it
    (nested members too) changes no later status of the same record."""
    from bench.launchdir import write_launch
    from ecpa.runtime.host.status import status_from_launch_dir
    from ecpa.runtime.judge.records import VERIFIED, remember_records

    w = write_launch(tmp_path, slots=2, records=3, now=1_800_000_000)
    size = VERIFIED.size
    remember_records(64)
    try:
        first = status_from_launch_dir(w.directory, now=1_800_000_000, proc_root=w.proc_root,
                                       host="bench-host")  # fmt: skip
        slot = first.slots[0].counters
        assert slot is not None
        kept = json.loads(json.dumps(slot))
        slot["calls"] = -1
        slot["process"]["pid"] = -1
        again = status_from_launch_dir(w.directory, now=1_800_000_000, proc_root=w.proc_root,
                                       host="bench-host")  # fmt: skip
        assert again.slots[0].counters == kept
    finally:
        VERIFIED.resize(size)
