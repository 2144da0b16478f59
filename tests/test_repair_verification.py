"""The check every repair passes before its bytes take a path (rules.md §1 step 7):
what it refuses, what it lets through, and that a refusal writes nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sessionfix import Settings
from sessionfix.plan import RepairPlan
from sessionfix.repair import VerificationFailed, repair_in_place, repair_to

from .conftest import FIXTURES
from .sessions import Session

CLONES = FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl"
SETTINGS = Settings(quiescence=0.0)
LONG_AGO = 1_700_000_000


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if "sessionfix-tmp" in p.name)


@pytest.fixture
def dangling_remap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A defect in the plan: every climb past a dropped entry ends on a name nowhere."""
    monkeypatch.setattr(RepairPlan, "_climb", lambda self, index: (None, "zzzzzzzz"))


@pytest.mark.usefixtures("dangling_remap")
def test_a_new_dangling_name_fails_the_repair_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    problem = "parent link 'zzzzzzzz' on its line 7 names no entry"
    with pytest.raises(VerificationFailed, match=problem):
        repair_to(CLONES, out, SETTINGS)
    assert not out.exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.usefixtures("dangling_remap")
def test_a_failed_in_place_repair_leaves_the_original(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session.write_bytes(CLONES.read_bytes())
    os.utime(session, (LONG_AGO, LONG_AGO))
    with pytest.raises(VerificationFailed):
        repair_in_place(session, SETTINGS)
    assert session.read_bytes() == CLONES.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_children_of_a_dropped_entry_inherit_its_gone_parent(tmp_path: Path) -> None:
    """An orphan result whose parent was already gone is dropped; its two children take
    that gone name (§8 up(x)). Nothing new dangles, so the repair passes."""
    session = Session()
    first = session.user("start")
    orphan = session.result("toolu_gone", "bash", "ok", parent="deadbeef")
    session.user("one way", parent=orphan)
    session.user("another way", parent=orphan)
    session.assistant([])
    source = tmp_path / "s.jsonl"
    source.write_text(session.text(), encoding="utf-8")
    result = repair_to(source, tmp_path / "out.jsonl", SETTINGS)
    assert [d.code for d in result.applied] == ["SF401"]
    repaired = (tmp_path / "out.jsonl").read_bytes()
    assert repaired.count(b'"parentId":"deadbeef"') == 2
    assert b'"id":"' + orphan.encode() not in repaired
    assert first.encode() in repaired
