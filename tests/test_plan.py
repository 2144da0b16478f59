"""The repair plan's row changes: what it rewrites and what it copies."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionfix import Settings
from sessionfix.repair.apply import plan_repair
from sessionfix.repair.plan import RepairPlan

from .conftest import FIXTURES

CLONES = FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl"


def test_a_row_whose_references_resolve_as_before_is_copied(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The child of the dropped clones is a candidate for rewriting; when its parent
    resolves to the same name, its line is neither re-serialised nor reported."""
    monkeypatch.setattr(RepairPlan, "remap", lambda self, value, role, owner: value)
    planned = plan_repair(CLONES, Settings(quiescence=0.0))
    try:
        plan = planned.plan
        dropped_rows = sorted(plan.view.rows[index] for index in plan.dropped)
        assert len(dropped_rows) == 2
        assert len(plan.changed_rows()) == 3
        assert [change.row for change in plan.changes()] == dropped_rows
        lines = CLONES.read_bytes().split(b"\n")
        kept = [line for row, line in enumerate(lines, 1) if row not in dropped_rows]
        assert b"".join(plan.chunks()) == b"\n".join(kept)
    finally:
        planned.close()
