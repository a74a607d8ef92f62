"""A stored checkpoint read again (``ecpa.runtime.stores.stored_log``): its document is
parsed and checked once while remembered (by its exact text and its log), and each read
gets a checkpoint of its own, the one a fresh parse gives, whatever the one before became."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ecpa.runtime.judge import history
from ecpa.runtime.judge.memo import forget
from ecpa.runtime.judge.stream import Stream
from ecpa.runtime.stores import stored_log


def _doc(**changes: Any) -> str:
    stream = Stream(name="x", accepted=3, refused={"ECPA_EXPIRED": 2}, listed=["a: b"],
                    unlisted=1, expired=2, torn=1, gaps=[(4, 5)], last_seq=9)  # fmt: skip
    ck = history.Checkpoint("launch-1", 0, 0, 120, "ab" * 32, 3, stream, 80, 1_800_000_000,
                            basis="keys:" + "0" * 64)  # fmt: skip
    return json.dumps({**ck.to_dict(), **changes}, separators=(",", ":"))


def _afresh(doc: str, name: str) -> history.Checkpoint:
    return history.checkpoint_from_dict(json.loads(doc), name)


def test_a_stored_checkpoint_is_parsed_once_and_each_read_gets_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forget()
    doc = _doc()
    parsed: list[str] = []
    real = stored_log._parsed

    def counted(text: str) -> object:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(stored_log, "_parsed", counted)
    first = stored_log._saved(doc, "x.jsonl")
    assert first == _afresh(doc, "x.jsonl")
    first.stream.accepted += 1  # a walk goes on from it: the next read is not changed
    first.stream.refused["ECPA_EXPIRED"] += 1
    first.stream.listed.append("c: d")
    first.stream.gaps.append((7, 8))
    first.offset, first.saved = 999, True
    again = stored_log._saved(doc, "x.jsonl")
    assert again == _afresh(doc, "x.jsonl")
    assert again is not first
    assert parsed == [doc]
    other = stored_log._saved(doc, "y.jsonl")  # another log: its own name in its stream
    assert other == _afresh(doc, "y.jsonl")
    assert parsed == [doc, doc]


@pytest.mark.parametrize(
    "doc",
    [
        "{",
        "[]",
        "null",
        _doc(schema="other"),
        _doc(dev="1"),
        _doc(refused={"a": "b"}),
        _doc(last_seq=None),
        _doc(gaps=[[1]]),
    ],
)
def test_an_unusable_checkpoint_is_none_each_time_and_never_remembered(doc: str) -> None:
    forget()
    for _ in range(2):
        assert stored_log._saved(doc, "x.jsonl") is None
    assert len(stored_log._SAVED) == 0


@given(st.integers(0, 2**40), st.integers(0, 50), st.sampled_from(["", "keys:1", "keys:2"]))
def test_a_remembered_checkpoint_is_a_fresh_parse(offset: int, accepted: int, basis: str) -> None:
    doc = _doc(offset=offset, accepted=accepted, basis=basis)
    stored_log._saved(doc, "x.jsonl")
    assert stored_log._saved(doc, "x.jsonl") == _afresh(doc, "x.jsonl")


def test_a_launchs_listing_reads_the_remembered_checkpoint_and_a_walk_gets_a_copy() -> None:
    """Where each walk starts is read from the remembered checkpoint itself (no copy a log a
    refresh); the checkpoint a walk goes on from is a copy, equal to it, and changing that
    copy changes neither the remembered one nor a later read."""
    forget()
    doc = _doc()
    shared = stored_log._remembered(doc, "x.jsonl")
    assert shared is not None
    assert stored_log._remembered(doc, "x.jsonl") is shared
    own = stored_log._saved(doc, "x.jsonl")
    assert own is not None
    assert own == shared
    assert own is not shared
    assert own.stream is not shared.stream
    own.offset, own.stream.accepted = 999, 99
    own.stream.listed.append("e: f")
    assert stored_log._remembered(doc, "x.jsonl") == _afresh(doc, "x.jsonl")
    assert stored_log._remembered("{", "x.jsonl") is None
