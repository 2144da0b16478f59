"""Repairs proven with the real agent: every pi and OpenClaw session the tests can see
(fixtures, examples, the shared corpus) is repaired, and the original and the repairs
are loaded with pi's own session code (`tests/pi/load.mjs`).

- A repair with unsafe fixes loads in pi with no skipped line, no hang and no error,
  except for lines sessionfix reports and has no fix for.
- Where pi reads the original whole and the applied fixes do not re-link or re-cut
  anything, pi's context of the repair is the original's with exactly the intended
  changes: dropped copies and orphans gone, changed records (stale reads, leaked
  `partialJson`) changed, nothing else.
- A glued line gives pi back every record it lost.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sessionfix import Settings
from sessionfix.diagnostics import Applicability, EditOp
from sessionfix.jsonutil import loads
from sessionfix.reader import LineIssue
from sessionfix.repair import plan_repair, repair_to

from .conftest import CORPUS, FIXTURES
from .pi_loader import PiLoad, load_with_pi
from .test_fixtures import _settings
from .test_pi_loader import SESSIONS, _name

EXACT_CONTEXT_CODES = frozenset(
    {"SF005", "SF006", "SF007", "SF009", "SF102", "SF104", "SF108", "SF201", "SF202"}
    | {"SF301", "SF401", "SF403", "SF601"}
)
"""Fixes whose effect on pi's context is exactly: records dropped or changed in place."""
LINE_CODES_PI_SKIPS = frozenset({"SF001", "SF002", "SF003", "SF004", "SF008", "SF101"})


@dataclass
class Repaired:
    original: Path
    safe: Path
    unsafe: Path
    codes: dict[bool, set[str]] = field(default_factory=dict)
    """Codes of the applied fixes, by `unsafe`."""
    dropped: dict[bool, list[Any]] = field(default_factory=dict)
    """Records dropped from the model's context (on the path, in the window; a repeated
    id's copy is not, pi keeps one entry per id), as parsed from the input."""
    changed: dict[bool, list[tuple[Any, Any]]] = field(default_factory=dict)
    """Records changed in place: before and after the rules' transforms."""
    remaining_rows: dict[bool, set[int]] = field(default_factory=dict)
    """Output rows of line-level findings left without a fix."""
    glued_records: int = 0
    records_on_row: Counter[int] = field(default_factory=Counter)
    net_records: dict[bool, int] = field(default_factory=dict)
    """Inserted minus dropped records."""
    recut: dict[bool, bool] = field(default_factory=dict)
    """An unsafe SF202 fix applied: the kept range changes by design."""
    passes: dict[bool, int] = field(default_factory=dict)
    """1, or 2 when fixes applied to the first result (a re-linked entry became a clone,
    a dropped orphan left a dangling parent a re-link can now fix)."""


def _case_settings(path: Path) -> tuple[Settings, str]:
    spec_file = path.parent / "case.json"
    if path.parent.parent == FIXTURES and spec_file.exists():
        spec = json.loads(spec_file.read_text())
        return _settings(spec), spec.get("filename", path.name)
    return Settings(quiescence=0.0), path.name


def _repair_all(root: Path) -> dict[Path, Repaired]:
    found: dict[Path, Repaired] = {}
    for number, path in enumerate(SESSIONS):
        settings, name = _case_settings(path)
        folder = root / str(number)
        original = folder / name
        original.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, original)
        item = Repaired(original, folder / "safe.jsonl", folder / "unsafe.jsonl")
        for unsafe in (False, True):
            chosen = dataclasses.replace(settings, unsafe_fixes=unsafe)
            target = item.unsafe if unsafe else item.safe
            result = repair_to(original, target, chosen)
            planned = plan_repair(original, chosen)
            try:
                _record_plan(item, planned, unsafe)
            finally:
                planned.close()
            item.passes[unsafe] = 1 + (len(result.applied) > len(planned.applied))
            item.codes[unsafe] |= {d.code for d in result.applied}
            item.remaining_rows[unsafe] = {
                d.row for d in result.remaining if d.code in LINE_CODES_PI_SKIPS
            }
        found[path] = item
    return found


def _leaves_context(view: Any, survivor: int, code: str) -> bool:
    """Whether dropping a record in context takes its message out of the context: not
    when an identical copy takes its place (the survivor, kept from now on)."""
    if code == "SF104":
        return False
    return survivor < 0 or view.in_context(survivor)


def _record_plan(item: Repaired, planned: Any, unsafe: bool) -> None:
    plan = planned.plan
    view = plan.view
    item.codes[unsafe] = {d.code for d in planned.applied}
    item.dropped[unsafe] = [
        loads(planned.source.read(*view.span(index)))
        for index, code in plan.drop_codes.items()
        if view.in_context(index) and _leaves_context(view, plan.dropped[index], code)
    ]
    item.recut[unsafe] = any(
        d.code == "SF202" and d.fix is not None and d.fix.applicability is Applicability.UNSAFE
        for d in planned.applied
    )
    changed = []
    for diagnostic in planned.applied:
        assert diagnostic.fix is not None
        for edit in diagnostic.fix.edits:
            if edit.op is EditOp.REPLACE and edit.transform is not None:
                assert edit.record is not None
                before = loads(planned.source.read(*view.span(edit.record)))
                changed.append((before, edit.transform(loads(json.dumps(before)))))
    item.changed[unsafe] = changed
    item.glued_records = sum(
        len(f.records) for f in planned.scanned.lines.findings if f.issue is LineIssue.GLUED
    )
    item.records_on_row = Counter(view.rows)
    item.net_records[unsafe] = plan.inserted_records - len(plan.dropped)


@pytest.fixture(scope="module")
def repairs(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Repaired]:
    return _repair_all(tmp_path_factory.mktemp("repairs"))


@pytest.fixture(scope="module")
def loads_of(repairs: dict[Path, Repaired]) -> dict[Path, PiLoad]:
    files = [p for item in repairs.values() for p in (item.original, item.safe, item.unsafe)]
    return load_with_pi(files)


def _remove_last(messages: list[Any], message: Any) -> bool:
    for position in range(len(messages) - 1, -1, -1):
        if messages[position] == message:
            del messages[position]
            return True
    return False


def _replace_last(messages: list[Any], old: Any, new: Any) -> bool:
    for position in range(len(messages) - 1, -1, -1):
        if messages[position] == old:
            messages[position] = new
            return True
    return False


@pytest.mark.parametrize("path", SESSIONS, ids=_name)
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_pi_loads_the_repair_whole(
    path: Path, unsafe: bool, repairs: dict[Path, Repaired], loads_of: dict[Path, PiLoad]
) -> None:
    item = repairs[path]
    loaded = loads_of[item.unsafe if unsafe else item.safe]
    original = loads_of[item.original]
    if not unsafe and (original.hang or original.error):
        pytest.skip("only unsafe fixes break parent cycles and drop `null` lines")
    assert not loaded.hang, "pi hangs on the repaired file"
    assert loaded.error is None, loaded.error
    if unsafe:
        assert set(loaded.skipped) <= item.remaining_rows[True]


@pytest.mark.parametrize("path", SESSIONS, ids=_name)
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_pi_context_changes_exactly_as_intended(
    path: Path, unsafe: bool, repairs: dict[Path, Repaired], loads_of: dict[Path, PiLoad]
) -> None:
    item = repairs[path]
    original = loads_of[item.original]
    repaired = loads_of[item.unsafe if unsafe else item.safe]
    codes = item.codes[unsafe]
    exact = codes <= EXACT_CONTEXT_CODES and not item.recut[unsafe] and item.passes[unsafe] == 1
    if original.hang or original.error or original.skipped or not exact:
        pytest.skip("pi does not read the original whole, or a fix re-links or re-cuts")
    expected = [json.loads(json.dumps(m)) for m in original.messages]
    for record in item.dropped[unsafe]:
        if isinstance(record, dict) and "message" in record:
            _remove_last(expected, record["message"])
    for before, after in item.changed[unsafe]:
        if isinstance(before, dict) and "message" in before:
            _replace_last(expected, before["message"], after["message"])
    if "SF202" in codes:
        # The summary message carries its compaction's timestamp (not sent to the model).
        for messages in (expected, repaired.messages):
            for message in messages:
                if message.get("role") == "compactionSummary":
                    message.pop("timestamp", None)
    assert repaired.messages == expected


@pytest.mark.parametrize("path", SESSIONS, ids=_name)
def test_a_glued_line_gives_pi_back_every_record(
    path: Path, repairs: dict[Path, Repaired], loads_of: dict[Path, PiLoad]
) -> None:
    item = repairs[path]
    original = loads_of[item.original]
    if not item.glued_records or "SF001" not in item.codes[False]:
        pytest.skip("no glued line")
    if original.hang or original.error:
        pytest.skip("pi cannot open the original")
    repaired = loads_of[item.safe]
    recovered = sum(item.records_on_row[row] for row in original.skipped)
    assert recovered >= item.glued_records
    assert repaired.parsed == original.parsed + recovered + item.net_records[False]


def test_pi_keeps_a_fraction_of_the_glued_v1_session(
    repairs: dict[Path, Repaired], loads_of: dict[Path, PiLoad]
) -> None:
    """pi-mono__session.v1.glued-line.jsonl line 440 holds two records. pi drops the
    line and, migrating by file order, loses only those two: its context of the
    original keeps 107 of the 109 messages the repaired file gives it (98 %)."""
    item = repairs[CORPUS / "openclaw" / "pi-mono__session.v1.glued-line.jsonl"]
    original, repaired = loads_of[item.original], loads_of[item.safe]
    assert original.skipped == (440,)
    assert repaired.skipped == ()
    assert repaired.parsed == original.parsed + 2
    assert repaired.loaded == original.loaded + 2
    assert (len(original.messages), len(repaired.messages)) == (107, 109)
    restored = [m for m in repaired.messages if m not in original.messages]
    assert len(restored) == 2


def test_a_transcript_rewrite_loses_nothing(
    repairs: dict[Path, Repaired], loads_of: dict[Path, PiLoad]
) -> None:
    """OpenClaw's transcript rewrite re-appends the suffix under new ids on a new
    branch: the copies across branches are not clones, so the repair keeps them all."""
    path = FIXTURES / "SF201-trap-transcript-rewrite-suffix" / "input.jsonl"
    item = repairs[path]
    for unsafe in (False, True):
        assert item.dropped[unsafe] == []
        target = item.unsafe if unsafe else item.safe
        assert target.read_bytes() == path.read_bytes()
        assert loads_of[target].messages == loads_of[item.original].messages


def test_a_moved_cut_keeps_whole_tool_groups(
    repairs: dict[Path, Repaired], loads_of: dict[Path, PiLoad]
) -> None:
    """SF501: a compaction that kept history from a tool result now keeps from the next
    cut point; pi's context after the summary no longer starts with an orphan result."""
    item = repairs[FIXTURES / "SF501-kept-from-a-tool-result" / "input.jsonl"]
    original, repaired = loads_of[item.original], loads_of[item.safe]
    assert original.messages[0]["role"] == repaired.messages[0]["role"] == "compactionSummary"
    assert original.messages[1]["role"] == "toolResult"
    assert repaired.messages[1]["role"] != "toolResult"
    assert (
        repaired.messages[1:]
        == [m for m in original.messages[1:] if m is not original.messages[1]][
            -(len(repaired.messages) - 1) :
        ]
    )
