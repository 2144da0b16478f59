"""Equality of records some of whose fields are only carried along: closures, excerpts,
caches. They take no part in `==` and `hash`, as `compare=False` fields of the
dataclasses these records once were did not."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import ClassVar

import msgspec
import pytest

from sessionfix.diagnostics import (
    Applicability,
    Diagnostic,
    DropRecord,
    Edit,
    EditOp,
    Fix,
    InsertRecord,
    RewriteRecord,
    Severity,
    WrittenLine,
)
from sessionfix.model.tracking import FileEvents
from sessionfix.rules import RULES
from sessionfix.structs import PartlyCompared


def _finding(**changes: object) -> Diagnostic:
    found = Diagnostic("SF001", "glued-records", Severity.ERROR, "two records", "s.jsonl", 3)
    return msgspec.structs.replace(found, **changes)


def test_a_finding_is_equal_whatever_its_excerpt_span_and_source() -> None:
    shown = _finding(span=(10, 20), source=Path("a.jsonl"), excerpt='{"type"')
    bare = _finding()
    assert shown == bare
    assert hash(shown) == hash(bare)
    assert len({shown, bare}) == 1


@pytest.mark.parametrize(
    "changes",
    [
        {"row": 4},
        {"column": 2},
        {"code": "SF002"},
        {"message": "other"},
        {"entry_id": "e1"},
        {"session_id": "s"},
        {"record_key": 7},
        {"key_noun": "seq"},
        {"format": "pi"},
        {"fix": Fix(Applicability.SAFE, "split")},
    ],
)
def test_a_finding_differs_by_any_compared_field(changes: dict[str, object]) -> None:
    assert _finding(**changes) != _finding()


def test_edits_are_equal_whatever_their_closures() -> None:
    def one() -> str:
        return "a"

    def other() -> str:
        return "b"

    assert Edit(1, produce=one) == Edit(1, produce=other)
    assert hash(Edit(1, produce=one)) == hash(Edit(1, produce=other))
    assert RewriteRecord(1, record=0, transform=one) == RewriteRecord(
        1, record=0, transform=other, changed=lambda: (0, 1, "x")
    )
    assert InsertRecord(1, record=0, build=dict, new_id="a") == InsertRecord(
        1, record=0, build=list, new_id="b"
    )
    written = WrittenLine(1, placement=EditOp.REPLACE, raw=bytes, end="\n")
    assert written == WrittenLine(1, placement=EditOp.REPLACE, raw=bytearray, end="")
    assert RewriteRecord(1, record=0, transform=one) != RewriteRecord(1, record=1, transform=one)


def test_records_of_different_kinds_are_never_equal() -> None:
    assert DropRecord(1, record=0) != RewriteRecord(1, record=0, transform=str)
    assert Edit(1) != DropRecord(1, record=0)


def test_a_rule_is_equal_whatever_its_check() -> None:
    rule = RULES[0]
    assert msgspec.structs.replace(rule, check=lambda context: ()) == rule
    assert msgspec.structs.replace(rule, summary="other") != rule


def test_file_events_compare_by_their_events_and_stay_unhashable() -> None:
    held = FileEvents(paths=["a"], _held={"a": "a"})
    assert held == FileEvents(paths=["a"])
    assert held != FileEvents(paths=["b"])
    with pytest.raises(TypeError, match="unhashable"):
        hash(held)


class _Mutable(PartlyCompared, msgspec.Struct):
    count: int
    cache: int = 0
    uncompared: ClassVar[frozenset[str]] = frozenset({"cache"})


def test_a_mutable_record_is_unhashable_even_with_hashable_fields() -> None:
    assert _Mutable(1, cache=2) == _Mutable(1)
    with pytest.raises(TypeError, match="unhashable type: '_Mutable'"):
        hash(_Mutable(1))


def test_records_survive_pickling_whole() -> None:
    found = _finding(span=(1, 2), excerpt="x", fix=Fix(Applicability.SAFE, "split", (Edit(3),)))
    back = pickle.loads(pickle.dumps(found))
    assert back == found
    assert (back.span, back.excerpt) == ((1, 2), "x")
