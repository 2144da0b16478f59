"""Records rewritten by forked workers ahead of the writer: the output, the rewritten ids
and the causes of every row are those of rewriting them in one process."""

from __future__ import annotations

import os
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest

from sessionfix import Settings
from sessionfix.repair import plan as plan_module
from sessionfix.repair.plan import RepairPlan
from sessionfix.repair.planned import PlannedRepair, plan_repair

from .conftest import FIXTURES
from .robustness import children

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="worker processes are forked"
)

REWRITING = sorted(
    path
    for path in FIXTURES.glob("*/input.jsonl")
    if (path.parent / "repaired.jsonl").exists()
    and path.read_bytes() != (path.parent / "repaired.jsonl").read_bytes()
)


def _written(
    planned: PlannedRepair, ahead: bool
) -> tuple[bytes, set[str], list[tuple[int, int, frozenset[int]]]]:
    """The output of the plan's `chunks()`, the ids it rewrote, and each row it changed
    with its count of lines and its causes."""
    plan = planned.plan
    plan.map_rows = True
    before = children()
    with planned.rewriting_ahead() if ahead else nullcontext():
        data = b"".join(plan.chunks())
        assert children() <= before, "the workers outlived the writing"
    rows = plan.row_map
    assert rows is not None
    changed = [(rows.rows[k], rows.counts[k], rows.causes[k]) for k in range(len(rows.rows))]
    return data, plan.rewritten_ids(), changed


@pytest.mark.parametrize("batch_bytes", [1, 600])
@pytest.mark.parametrize("path", REWRITING, ids=lambda path: path.parent.name)
def test_rewritten_ahead_is_rewritten_alike(
    path: Path, batch_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of one record each, and of a few records."""
    monkeypatch.setattr(plan_module, "REWRITES_AHEAD_BYTES", 0)
    monkeypatch.setattr(plan_module, "REWRITE_BATCH_BYTES", batch_bytes)
    parent = os.getpid()
    here: list[int] = []
    rewrite = RepairPlan._rewrite

    def counted(self: RepairPlan, index: int) -> tuple[bytes, frozenset[int] | None]:
        if os.getpid() == parent:
            here.append(index)
        return rewrite(self, index)

    monkeypatch.setattr(RepairPlan, "_rewrite", counted)
    planned = plan_repair(path, Settings(jobs=2, quiescence=0.0))
    try:
        alone = _written(planned, ahead=False)
        done_here = len(here)
        here.clear()
        apart = _written(planned, ahead=True)
    finally:
        planned.close()
    assert apart == alone
    if done_here:
        assert here == [], "the workers rewrote none of the records"


def test_records_the_workers_could_not_rewrite_are_rewritten_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker's failure (here every batch) leaves the rewriting to the writer, which
    meets any error of its own where it would have anyway."""
    monkeypatch.setattr(plan_module, "REWRITES_AHEAD_BYTES", 0)

    def failing(self: RepairPlan, indexes: list[int]) -> object:
        raise RuntimeError("a worker's failure")

    monkeypatch.setattr(RepairPlan, "_rewrite_batch", failing)
    path = FIXTURES / "SF301-read-then-full-write" / "input.jsonl"
    planned = plan_repair(path, Settings(jobs=2, quiescence=0.0))
    try:
        assert planned.plan._rewrites
        alone = _written(planned, ahead=False)
        assert _written(planned, ahead=True) == alone
    finally:
        planned.close()
