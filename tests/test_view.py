"""The linear view's shortcuts agree with the plain structures they stand in for."""

from __future__ import annotations

import math
from array import array
from itertools import chain, pairwise
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sessionfix.model.view import (
    _BUCKET_FLOORS,
    NO_ID_KEY,
    SessionView,
    Shifted,
    all_distinct,
    as_doubles,
)


def _reference(count: int, start: int, shift: int, below: int) -> list[int]:
    return [index + shift if index >= start else below for index in range(count)]


shapes = st.tuples(
    st.integers(0, 40), st.integers(0, 45), st.integers(-45, 5), st.sampled_from([-1, -2])
)


@given(shape=shapes)
def test_reads_like_its_list(shape: tuple[int, int, int, int]) -> None:
    expected = _reference(*shape)
    shifted = Shifted(*shape)
    assert len(shifted) == len(expected)
    assert list(shifted) == expected
    assert [shifted[i] for i in range(-len(expected), len(expected))] == expected + expected
    assert shifted[3:-2] == expected[3:-2]
    assert shifted[::3] == expected[::3]


@given(shape=shapes, value=st.integers(-3, 50), start=st.integers(-50, 50))
def test_index_finds_what_list_index_finds(
    shape: tuple[int, int, int, int], value: int, start: int
) -> None:
    count, first, shift, below = shape
    # In a linear session `below` is never one of the shifted values.
    assume(not first + shift <= below < count + shift)
    expected = _reference(*shape)
    shifted = Shifted(*shape)
    try:
        found: int | None = expected.index(value, start)
    except ValueError:
        found = None
    if found is None:
        with pytest.raises(ValueError, match="is not in"):
            shifted.index(value, start)
    else:
        assert shifted.index(value, start) == found


def test_out_of_range_is_an_index_error() -> None:
    with pytest.raises(IndexError, match="out of range"):
        Shifted(3, 1, -1, -1)[3]


# Keys made of a two-byte alphabet make misaligned matches of the packed column common.
small_keys = st.lists(
    st.binary(min_size=8, max_size=8).map(
        lambda raw: int.from_bytes(bytes(b & 1 for b in raw), "little", signed=True)
    ),
    unique=True,
    min_size=1,
    max_size=40,
)


@given(keys=small_keys, data=st.data())
def test_chain_search_finds_each_key_at_its_record(keys: list[int], data: st.DataObject) -> None:
    view = SessionView(path=Path("s.jsonl"), format="pi")
    view.id_keys = array("q", keys)
    target = data.draw(st.integers(0, len(keys) - 1))
    near = data.draw(st.integers(0, len(keys)))
    assert view._search_chain(keys[target], near) == target
    missing = data.draw(st.integers(-(2**63), 2**63 - 1).filter(lambda k: k not in keys))
    assert view._search_chain(missing, near) is None


def test_chain_search_skips_matches_that_straddle_two_keys() -> None:
    first, second = array("q", [0x1111111122222222, 0x3333333344444444])
    packed = array("q", [first, second]).tobytes()
    straddling = packed[4:12]
    (wanted,) = array("q", straddling)
    for keys, near, expected in (([wanted, first, second], 2, 0), ([first, second, wanted], 0, 2)):
        view = SessionView(path=Path("s.jsonl"), format="pi")
        view.id_keys = array("q", keys)
        assert view._search_chain(wanted, near) == expected


int64 = st.integers(-(2**63), 2**63 - 1)
# Keys that differ only in a few high bits land in neighbouring buckets, with signs mixed.
near_bucket_edges = st.builds(
    lambda top, low: ((top << 56) | low) - (1 << 63) if top >= 0x80 else (top << 56) | low,
    st.integers(0, 255),
    st.sampled_from([0, 1, (1 << 56) - 1, (1 << 55)]),
)
keys_with_repeats = st.builds(
    lambda keys, repeats, cuts: ([*keys, *(keys[k % len(keys)] for k in repeats)], cuts),
    st.lists(st.one_of(int64, near_bucket_edges), min_size=1, max_size=60),
    st.lists(st.integers(0, 100), max_size=2),
    st.lists(st.integers(0, 10), min_size=1, max_size=4),
)


@given(keys=st.lists(st.one_of(int64, near_bucket_edges), max_size=60))
def test_doubles_keep_equal_keys_equal_and_are_never_nan(keys: list[int]) -> None:
    doubles = as_doubles(array("q", keys))
    assert all(math.isfinite(value) for value in doubles)
    for key, double in zip(keys, doubles, strict=True):
        assert as_doubles(array("q", [key]))[0] == double


def _partitioned(keys: list[int], cuts: list[int]) -> list[array[float]]:
    """Buckets of several byte ranges' keys, joined the way parallel reading joins them."""
    merged = SessionView(path=Path("s.jsonl"), format="pi")
    bounds = sorted({0, len(keys), *(min(cut * 7, len(keys)) for cut in cuts)})
    for start, end in pairwise(bounds):
        part = SessionView(path=Path("s.jsonl"), format="pi")
        part.id_keys = array("q", keys[start:end])
        part.kinds.extend(bytes(end - start))
        part.partition_keys()
        merged.extend(part, 0)
    assert merged.key_buckets is not None
    return merged.key_buckets


@given(case=keys_with_repeats)
def test_bucketed_keys_decide_distinctness(case: tuple[list[int], list[int]]) -> None:
    keys, cuts = case
    buckets = _partitioned(keys, cuts)
    assert sorted(chain.from_iterable(buckets)) == sorted(as_doubles(array("q", keys)))
    for floor, bucket in zip(_BUCKET_FLOORS, buckets, strict=True):
        assert all(value >= floor for value in bucket)
    for ceiling, bucket in zip(_BUCKET_FLOORS[1:], buckets, strict=False):
        assert all(value < ceiling for value in bucket)
    distinct = all_distinct(buckets)
    if len(set(keys)) != len(keys) or NO_ID_KEY in keys:
        assert not distinct
    elif len(set(as_doubles(array("q", keys)))) == len(keys):
        assert distinct


def test_a_key_repeated_in_another_range_is_found() -> None:
    keys = [1 << 60, -(1 << 60), 5, -5, 1 << 61, 0]
    assert all_distinct(_partitioned(keys, [1]))
    assert not all_distinct(_partitioned([*keys, -(1 << 60)], [1]))
    assert not all_distinct(_partitioned([*keys, NO_ID_KEY], [1]))
