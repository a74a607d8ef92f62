"""Which judging process judges which launch (``ecpa.serve.shares``): sticky, and even by
work."""

from __future__ import annotations

import secrets

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ecpa.serve.shares import Shares


def _names(count: int) -> list[str]:
    return sorted(f"launch-{secrets.token_hex(8)}" for _ in range(count))


def test_new_launches_are_shared_evenly_whatever_their_ids() -> None:
    """100 launches never judged, in 2 parts: 50 and 50, where a hash of random ids splits
    them unevenly (by 4 launches on average); in 3 parts, 34, 33, 33."""
    for parts, sizes in ((2, [50, 50]), (3, [34, 33, 33])):
        found = Shares(parts).split(_names(100))
        assert [len(p) for p in found] == sizes


def test_a_launch_stays_in_its_part_and_new_ones_go_where_the_work_is_least() -> None:
    """A launch judged stays in its part from one refresh to the next, whatever launches
    come and go; a new one goes to the part whose launches took least to judge."""
    shares = Shares(2)
    names = _names(10)
    first = shares.split(names)
    again = shares.split(names)
    assert again == first
    heavy, light = first
    shares.judged([(n, 1.0) for n in heavy] + [(n, 0.1) for n in light])
    new = "launch-new"
    later = shares.split(sorted([*names, new]))
    assert [[n for n in p if n != new] for p in later] == first  # none moved
    assert new in later[1]  # the light part
    # A launch gone is forgotten: back, it is new again (its part by the work then).
    gone = heavy[0]
    shares.split([n for n in sorted([*names, new]) if n != gone])
    back = shares.split(sorted([*names, new]))
    assert gone in back[1]


def test_the_work_of_a_launch_is_what_its_judging_took() -> None:
    """New launches go to the part whose launches took least to judge, each new one counted
    as the mean of the times known: a launch that took 9 s weighs as much as nine that took
    1 s. A time for a launch not listed, or a negative one, is ignored."""
    shares = Shares(2)
    big, small = "launch-a-big", "launch-b-small"
    assert shares.split([big, small]) == [[big], [small]]
    shares.judged([(big, 9.0), (small, 1.0), ("launch-not-listed", 50.0), (big, -1.0)])
    new = [f"launch-c{i}" for i in range(4)]
    # Work 9 against 1, each new one counted as 5 (the mean): 3 of them to the small's part
    # before the big's part has the least work.
    found = shares.split([big, small, *new])
    assert found == [[big, new[2]], [small, new[0], new[1], new[3]]]
    shares.judged([(n, 1.0) for n in [small, *new]] + [(big, 9.0)])
    # 10 against 4, a new one counted as 14/6: the second part until it has more work.
    later = [f"launch-d{i}" for i in range(4)]
    found = shares.split([big, small, *new, *later])
    assert found == [[big, new[2], later[3]], [small, new[0], new[1], new[3], *later[:3]]]


@given(
    st.lists(st.lists(st.sampled_from([f"launch-{i:02d}" for i in range(30)]), unique=True)),
    st.integers(1, 5),
)
def test_each_name_listed_is_in_exactly_one_part_in_listing_order(
    listings: list[list[str]], parts: int
) -> None:
    shares = Shares(parts)
    for listing in listings:
        found = shares.split(listing)
        assert len(found) == parts
        assert sorted(n for p in found for n in p) == sorted(listing)
        order = {n: i for i, n in enumerate(listing)}
        assert all([order[n] for n in p] == sorted(order[n] for n in p) for p in found)
        shares.judged((n, float(len(n))) for n in listing)


def test_at_least_one_part() -> None:
    with pytest.raises(ValueError, match="at least one part"):
        Shares(0)
