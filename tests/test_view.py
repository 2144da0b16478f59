"""The linear view's lazy link and position sequences behave like the arrays they replace."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sessionfix.view import Shifted


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
