"""Repairs proven with the real agent: every pi and OpenClaw session the tests can see
(fixtures, examples, the shared corpus) is repaired, and the original and the repairs
are loaded with pi's own session code (`tests/pi/load.mjs`).

- A repair with unsafe fixes loads in pi with no skipped line, no hang and no error,
  except for lines sessionfix reports and has no fix for; a repair with safe fixes never
  makes pi hang or throw where it did not on the original.
- Where pi reads the original whole and the applied fixes do not re-link or re-cut
  anything, pi's context of the repair is the original's with exactly the intended
  changes: dropped copies and orphans gone, changed records (stale reads, leaked
  `partialJson`) changed, nothing else.
- A glued line gives pi back every record it lost.

Which cases each test takes is decided when the tests are collected, from sessionfix's
own reading and repair of each session (fast and deterministic), so that every
collected test asserts something: pi reads an original whole unless scan finds a line
`JSON.parse` rejects, a `null` line (pi throws) or a parent cycle on the leaf's path
(pi's walk hangs); the first test checks that prediction against pi for every session.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sessionfix import Settings
from sessionfix.diagnostics import RewriteRecord
from sessionfix.jsonutil import loads
from sessionfix.read.reader import LineIssue
from sessionfix.repair.planned import plan_repair
from sessionfix.repair.targets import repair_to
from sessionfix.scan.scanner import read_session

from .conftest import CORPUS, FIXTURES
from .pi_loader import PiLoad, load_with_pi
from .test_fixtures import _settings
from .test_pi_loader import SESSIONS, _name, rows_lost_to_json_parse

EXACT_CONTEXT_CODES = frozenset(
    {"SF005", "SF006", "SF007", "SF009", "SF102", "SF104", "SF108", "SF201", "SF202"}
    | {"SF301", "SF401", "SF403", "SF601", "SF606"}
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
    passes: dict[bool, int] = field(default_factory=dict)
    """1, or 2 when fixes applied to the first result (a re-linked entry became a clone,
    a dropped orphan left a dangling parent a re-link can now fix)."""
    pi_hangs: bool = False
    pi_throws: bool = False
    pi_skips: tuple[int, ...] = ()
    """What pi will do with the original, as sessionfix's scan predicts it: hang (a
    parent cycle on the leaf's path), throw (a `null` line), skip these lines."""

    @property
    def recovers_glued_records(self) -> bool:
        """The file has a glued line, and the safe repair splits it."""
        return self.glued_records > 0 and "SF001" in self.codes[False]

    @property
    def pi_reads_whole(self) -> bool:
        return not (self.pi_hangs or self.pi_throws or self.pi_skips)

    def exact(self, unsafe: bool) -> bool:
        """pi reads the original whole and the applied fixes only drop or change records
        in place: pi's context of the repair can be told exactly."""
        return (
            self.pi_reads_whole
            and self.codes[unsafe] <= EXACT_CONTEXT_CODES
            and self.passes[unsafe] == 1
        )


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
            chosen = msgspec.structs.replace(settings, unsafe_fixes=unsafe)
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
                row
                for d in result.remaining
                if d.code in LINE_CODES_PI_SKIPS
                for row in range(d.row, (d.end_row or d.row) + 1)
            }
        _predict_pi(item, path)
        found[path] = item
    return found


def _predict_pi(item: Repaired, path: Path) -> None:
    scanned = read_session(path)
    findings = scanned.lines.findings
    item.pi_hangs = scanned.view.cycle_on_path
    item.pi_throws = any(f.json_kind == "null" for f in findings)
    item.pi_skips = tuple(rows_lost_to_json_parse(path, findings))


def _repaired_once() -> dict[Path, Repaired]:
    """Every session repaired once per test run, at collection (the cases of each test
    depend on it); the files live until the interpreter exits."""
    if not _REPAIRED:
        root = Path(tempfile.mkdtemp(prefix="sessionfix-repair-pi-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        _REPAIRED.update(_repair_all(root))
    return _REPAIRED


_REPAIRED: dict[Path, Repaired] = {}


def _cases(chosen: Callable[[Repaired, bool], bool]) -> list[Any]:
    """(session, unsafe) pairs whose repair `chosen` takes, with readable ids."""
    repaired = _repaired_once()
    return [
        pytest.param(path, unsafe, id=f"{'unsafe' if unsafe else 'safe'}-{_name(path)}")
        for path in SESSIONS
        for unsafe in (False, True)
        if chosen(repaired[path], unsafe)
    ]


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
    changed = []
    for diagnostic in planned.applied:
        assert diagnostic.fix is not None
        for edit in diagnostic.fix.edits:
            if isinstance(edit, RewriteRecord):
                before = loads(planned.source.read(*view.span(edit.record)))
                changed.append((before, edit.transform(loads(json.dumps(before).encode()))))
    item.changed[unsafe] = changed
    item.glued_records = sum(
        len(f.records) for f in planned.scanned.lines.findings if f.issue is LineIssue.GLUED
    )
    item.records_on_row = Counter(view.rows)
    item.net_records[unsafe] = plan.inserted_records - len(plan.dropped)


@pytest.fixture(scope="module")
def repairs() -> dict[Path, Repaired]:
    return _repaired_once()


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


@pytest.mark.parametrize(("path", "unsafe"), _cases(lambda item, unsafe: True))
def test_pi_loads_the_repair_whole(
    path: Path, unsafe: bool, repairs: dict[Path, Repaired], loads_of: dict[Path, PiLoad]
) -> None:
    """pi opens every repair; only a safe one may still hang or throw, and only where
    the original does (breaking a cycle or dropping a `null` line is unsafe). What pi
    does with the original is what the partition of the other tests predicted."""
    item = repairs[path]
    loaded = loads_of[item.unsafe if unsafe else item.safe]
    original = loads_of[item.original]
    assert (original.hang, original.error is not None) == (item.pi_hangs, item.pi_throws)
    if not (original.hang or original.error):
        assert original.skipped == item.pi_skips
    assert not loaded.hang or (original.hang and not unsafe), "pi hangs on the repaired file"
    if unsafe or original.error is None:
        assert loaded.error is None, loaded.error
    if unsafe:
        assert set(loaded.skipped) <= item.remaining_rows[True]


@pytest.mark.parametrize(("path", "unsafe"), _cases(Repaired.exact))
def test_pi_context_changes_exactly_as_intended(
    path: Path, unsafe: bool, repairs: dict[Path, Repaired], loads_of: dict[Path, PiLoad]
) -> None:
    """Where pi reads the original whole and the fixes only drop or change records in
    place, pi's context of the repair is the original's with exactly those changes."""
    item = repairs[path]
    original = loads_of[item.original]
    repaired = loads_of[item.unsafe if unsafe else item.safe]
    codes = item.codes[unsafe]
    assert (original.hang, original.error, original.skipped) == (False, None, ())
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


@pytest.mark.parametrize(
    "path",
    [path for path in SESSIONS if _repaired_once()[path].recovers_glued_records],
    ids=_name,
)
def test_a_glued_line_gives_pi_back_every_record(
    path: Path, repairs: dict[Path, Repaired], loads_of: dict[Path, PiLoad]
) -> None:
    """Splitting a glued line gives pi back every record of it that it skipped."""
    item = repairs[path]
    original = loads_of[item.original]
    assert (original.hang, original.error) == (False, None)
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


@pytest.mark.parametrize(
    "case", ["SF111-session-info-on-a-stale-branch", "SF111-session-exit-on-a-dead-branch"]
)
def test_a_stale_leaf_resumes_on_the_newest_branch_after_the_repair(
    case: str, repairs: dict[Path, Repaired], loads_of: dict[Path, PiLoad], tmp_path: Path
) -> None:
    """SF111: pi resumes the original from its last entry, on the branch that entry hangs
    on (the SQLite branch, without the newer Postgres work). After the unsafe repair it
    resumes with the context it has at the newest conversation entry, the last entry
    still its leaf; the safe repair changes nothing."""
    path = FIXTURES / case / "input.jsonl"
    item = repairs[path]
    original, repaired = loads_of[item.original], loads_of[item.unsafe]
    lines = path.read_bytes().splitlines(keepends=True)
    last, newest = loads(lines[-1]), loads(lines[-2])
    assert original.leaf == repaired.leaf == last["id"]
    texts = [m["content"][0]["text"] for m in original.messages]
    assert "SQLite is wired in." in texts
    assert "Use Postgres instead." not in texts
    at_newest = tmp_path / "at-newest.jsonl"
    at_newest.write_bytes(b"".join(lines[:-1]))
    expected = load_with_pi([at_newest])[at_newest]
    assert expected.leaf == newest["id"]
    assert repaired.messages == expected.messages
    assert item.safe.read_bytes() == path.read_bytes()
    changed = [
        (old, new)
        for old, new in zip(lines, item.unsafe.read_bytes().splitlines(keepends=True), strict=True)
        if old != new
    ]
    assert [loads(new) for _, new in changed] == [{**last, "parentId": newest["id"]}]


def _signed_thinking(messages: list[Any]) -> list[str]:
    """The signatures of the thinking blocks in pi's context, in order."""
    return [
        block["thinkingSignature"]
        for message in messages
        if message.get("role") == "assistant"
        for block in message["content"]
        if block.get("type") == "thinking" and block.get("thinkingSignature")
    ]


@pytest.mark.parametrize(
    "case", ["SF606-openclaw-signature-cut-short", "SF606-message-of-only-a-broken-thinking-block"]
)
def test_a_broken_thinking_signature_leaves_what_pi_sends(
    case: str, repairs: dict[Path, Repaired], loads_of: dict[Path, PiLoad]
) -> None:
    """SF606: pi's context of the original holds the thinking block whose signature is
    no whole one, for the model it continues with, so pi sends that signature to
    Anthropic as it is; after the unsafe repair it is gone and every other signature and
    message is what it was (`test_pi_context_changes_exactly_as_intended` checks the
    rest of the context)."""
    item = repairs[FIXTURES / case / "input.jsonl"]
    before = _signed_thinking(loads_of[item.original].messages)
    after = _signed_thinking(loads_of[item.unsafe].messages)
    broken = [s for s in before if len(s) < 100 or len(s) % 4]
    assert len(broken) == 1
    assert after == [s for s in before if s not in broken]
    assert _signed_thinking(loads_of[item.safe].messages) == before
