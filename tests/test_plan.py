"""The repair plan's row changes: what it rewrites and what it copies."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from sessionfix import Settings
from sessionfix.repair.plan import RepairPlan
from sessionfix.repair.planned import plan_repair

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


@pytest.mark.parametrize(
    ("case", "settings", "kept", "gone"),
    [
        pytest.param(
            "SF001-glued-then-torn-last-line",
            Settings(select=("SF002",)),
            b'"text":"Thanks"}],"timestamp":1784874068000}}\n',
            b'"id":"a0000099"',
            id="torn-tail-of-a-glued-line",
        ),
        pytest.param(
            "SF004-claude-nul-run-before-record",
            Settings(select=("SF103",), unsafe_fixes=True),
            b"\x00" * 96 + b'{"parentUuid":"c40742f7-a2fa-4cf3-b40f-94774e536121"',
            b"\x00" * 96 + b'{"parentUuid":"d',
            id="re-link-behind-nuls",
        ),
    ],
)
def test_a_fix_on_a_line_whose_glue_or_nuls_stay_is_applied_within_it(
    tmp_path: Path, case: str, settings: Settings, kept: bytes, gone: bytes
) -> None:
    """With the split or the NUL strip off, a line's other fixes still apply: its torn
    tail dropped, its record re-linked, the glue or the NULs kept as they are."""
    session = tmp_path / "session.jsonl"
    session.write_bytes((FIXTURES / case / "input.jsonl").read_bytes())
    planned = plan_repair(session, msgspec.structs.replace(settings, quiescence=0.0))
    try:
        written = b"".join(planned.plan.chunks())
    finally:
        planned.close()
    assert kept in written
    assert gone not in written
