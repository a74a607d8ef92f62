"""A host journal and the accounts of its process's signed records (docs/host-evidence.md):
the chain over each line's exact bytes and the counts they add up to, so that a line removed,
altered, inserted or moved disagrees with the accounts; lines after the newest account are a
mismatch after a final record, and unaccounted (never counted) before one."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest

from dla_plugin.host_evidence import Occurrence, host_event
from ecpa.runtime import (
    HostBook,
    HostCounts,
    HostEventCode,
    HostEventRefused,
    check_journal,
    epoch_of,
    host_line,
    parse_host_line,
)
from ecpa.runtime.host.audit import bounded_lines
from ecpa.runtime.model.host_journal import CHAIN_START, chain_step

START = "pid:4242:start_ticks:9001"
IDENTITY = {
    "host": "host-a",
    "role": "engine-core-scheduler",
    "ordinal": 0,
    "pid": 4242,
    "start_identity": START,
    "process_epoch": epoch_of(START),
    "assignment_source": "host",
}
POLICY = "dla_plugin.selector.DlaVictimSelector"
NS = 1_800_000_000 * 10**9


def event(n: int, detail: str, occurrence: Any, kind: str, attempt: int) -> bytes:
    what = Occurrence(
        "resolved" if kind == "scheduler_resolution" else "invoked",
        "vllm.preemption_policy",
        POLICY,
        POLICY,
        detail,
        occurrence,
        kind,
        "controller-1",
        "plan-1",
        "launch-1",
        "bound",
    )
    return host_line(host_event(IDENTITY, what, delivery_attempt=attempt, observed_at_ns=NS + n))


def journal(outcomes: list[str]) -> list[bytes]:
    """A resolution, then one dispatch per outcome: the lines, without their newlines."""
    lines = [
        event(
            0,
            "engine-core.scheduler:protocol-validated",
            "controller:controller-1",
            "scheduler_resolution",
            1,
        )
    ]
    for seq, outcome in enumerate(outcomes, 1):
        lines.append(
            event(seq, f"engine-core.scheduler:{outcome}", seq, "scheduler_dispatch", seq + 1)
        )
    return lines


def accounts(lines: list[bytes], at: list[int], *, final: bool = False) -> list[HostCounts]:
    """The accounts records would have given after ``at`` lines each."""
    book, out = HostBook(), []
    for n, line in enumerate(lines, 1):
        parsed = parse_host_line(line)
        book.check(parsed)
        book.add(parsed)
        if n in at:
            out.append(book.counts(refused=0, lost=0, final=final and n == at[-1]))
    return out


def stream(lines: list[bytes]) -> Iterator[bytes]:
    return iter(line + b"\n" for line in lines)


LINES = journal(["selected", "abstained", "selected", "selected"])
SIGNED = accounts(LINES, [1, 3, 5])


def test_the_journal_as_written_agrees_with_every_account() -> None:
    check = check_journal(stream(LINES), SIGNED)
    assert check.mismatches == ()
    assert (check.lines, check.accounted, check.unaccounted) == (5, 5, 0)
    newest = SIGNED[-1]
    assert (newest.selected, newest.abstained, newest.resolutions) == (3, 1, 1)
    head = CHAIN_START
    for line in LINES:
        head = chain_step(head, line)
    assert newest.journal_chain == "sha256:" + head.hex()


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda ls: ls[:2] + ls[3:], id="removed"),
        pytest.param(lambda ls: [ls[0], ls[1].replace(b"selected", b"abstained"), *ls[2:]],
                     id="altered"),
        pytest.param(lambda ls: [*ls[:3], ls[2], *ls[3:]], id="inserted-copy"),
        pytest.param(lambda ls: [ls[0], ls[2], ls[1], *ls[3:]], id="reordered"),
        pytest.param(lambda ls: ls[:4], id="truncated"),
        pytest.param(lambda ls: [*ls[:2], b"{}", *ls[2:]], id="inserted-junk"),
    ],
)  # fmt: skip
def test_a_line_removed_altered_inserted_or_moved_disagrees(tamper: Any) -> None:
    check = check_journal(stream(tamper(list(LINES))), SIGNED)
    assert check.mismatches


def test_a_consistent_forgery_still_disagrees_with_the_chain() -> None:
    """A line rewritten as a valid event of another outcome (every digest recomputed) parses and
    keeps the order: the chain, the counts and the newest digest still give it away."""
    forged = journal(["selected", "selected", "selected", "selected"])
    check = check_journal(stream(forged), SIGNED)
    assert any("journal_chain" in m for m in check.mismatches)


def test_lines_after_the_newest_account() -> None:
    not_final = check_journal(stream(LINES), accounts(LINES, [1, 3]))
    assert not_final.mismatches == ()
    assert not_final.unaccounted == 2  # the process died before signing them
    final = check_journal(stream(LINES), accounts(LINES, [1, 3], final=True))
    assert final.mismatches == ("2 line(s) after the process's final record",)
    assert final.unaccounted == 0


def test_a_torn_last_line() -> None:
    torn = [line + b"\n" for line in LINES[:3]] + [LINES[3][:40]]
    check = check_journal(iter(torn), accounts(LINES, [3]))
    assert check.mismatches == ()
    assert check.unaccounted == 1
    assert check_journal(iter(torn), accounts(LINES, [3], final=True)).mismatches


def test_no_account_and_no_line_agree() -> None:
    assert check_journal(iter([]), []).mismatches == ()
    assert check_journal(iter([]), accounts(LINES, [2])).mismatches


def test_an_endless_line_is_read_in_bounded_pieces() -> None:
    data = io.BytesIO(LINES[0] + b"\n" + b"x" * (3 << 20) + b"\n" + LINES[1] + b"\n")
    lines = list(bounded_lines(data))
    assert len(lines) == 3
    assert max(len(line) for line in lines) < 10_000
    assert check_journal(iter(lines), accounts(LINES, [1])).mismatches


def test_the_book_refuses_what_the_sink_would() -> None:
    book = HostBook()
    lines = journal(["selected", "selected"])
    dispatch = parse_host_line(lines[1])
    with pytest.raises(HostEventRefused) as refused:
        book.check(dispatch)  # no resolution yet
    assert refused.value.reason is HostEventCode.UNRESOLVED
    for line in lines:
        parsed = parse_host_line(line)
        book.check(parsed)
        book.add(parsed)
    with pytest.raises(HostEventRefused) as refused:
        book.check(dispatch)
    assert refused.value.reason is HostEventCode.REPLAYED
    other = parse_host_line(
        host_line(
            host_event(
                IDENTITY,
                Occurrence(
                    "resolved",
                    "vllm.preemption_policy",
                    "other.Policy",
                    "other.Policy",
                    "engine-core.scheduler:protocol-validated",
                    "controller:controller-2",
                    "scheduler_resolution",
                    "controller-2",
                    "plan-1",
                    "launch-1",
                    "bound",
                ),
                delivery_attempt=10,
                observed_at_ns=NS,
            )
        )
    )
    with pytest.raises(HostEventRefused) as refused:
        book.check(other)
    assert refused.value.reason is HostEventCode.POLICY_CHANGED


def test_accounts_carry_consistent_counts() -> None:
    from ecpa.shapes.shape import ShapeError

    doc: dict[str, Any] = SIGNED[-1].to_dict()
    HostCounts.from_dict(doc, "host")
    for change in (
        {"selected": doc["selected"] + 1},
        {"newest_event_digest": None},
        {"policy": None},
        {"last_selection_at": doc["last_dispatch_at"] + 1},
        {"last_dispatch_at": None},
    ):
        with pytest.raises(ShapeError):
            HostCounts.from_dict({**doc, **change}, "host")
