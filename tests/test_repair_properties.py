"""Properties of `repair` over generated pi sessions (rules.md §9.7): branches,
compactions, tool calls, repeated texts, corrupted with clones, glued and split lines,
torn tails and dangling parents; and sequences of compactions, copied or not."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sessionfix import Settings, check_file
from sessionfix.jsonutil import canonical, loads, stringify
from sessionfix.model.view import Kind
from sessionfix.repair.planned import plan_repair
from sessionfix.repair.targets import repair_to
from sessionfix.repair.verification import VerificationFailed
from sessionfix.rules.analysis import CLONE_MOMENT_MS

from .conftest import FIXTURES
from .sessions import CompactionSequence, compaction_sequences, sessions

PROVEN_COPIES = {"SF104", "SF201", "SF202"}
"""Drops of a record whose survivor stays: the survivor must be equal where it counts."""
DROPPING_RULES = PROVEN_COPIES | {"SF102", "SF106", "SF108", "SF401", "SF403"}
REFERENCE_FIELDS = ("parentId", "firstKeptEntryId", "targetId", "fromId", "appendParentId")


@st.composite
def broken_sessions(draw: st.DrawFn) -> bytes:
    """A corrupted session, sometimes with a parent link to an entry that is gone."""
    data: bytes = draw(sessions())
    if draw(st.booleans()):
        parents = list(re.finditer(rb'"parentId":"([0-9a-f]{8})"', data))
        if parents:
            chosen = draw(st.sampled_from(parents))
            data = data[: chosen.start(1)] + b"deadbeef" + data[chosen.end(1) :]
    return data


def _records(data: bytes) -> list[Any]:
    """The JSON objects of whole lines (what a strict JSONL reader gets)."""
    found = []
    for line in data.split(b"\n"):
        try:
            value = loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def _dangling(records: list[Any]) -> set[tuple[str, object]]:
    """(field, name) of every reference naming no record."""
    ids = {r.get("id") for r in records if isinstance(r.get("id"), str)}
    found = set()
    for record in records:
        if record.get("type") == "session":
            continue
        for name in REFERENCE_FIELDS:
            value = record.get(name)
            if name == "fromId" and value == "root":
                continue
            if isinstance(value, str) and value not in ids:
                found.add((name, value))
    return found


def _repair(tmp_path: Path, data: bytes, unsafe: bool, name: str) -> tuple[bytes, Any, Any]:
    """The repaired bytes, the plan of the first pass, and the repair's result."""
    source = tmp_path / f"{name}.jsonl"
    source.write_bytes(data)
    settings = Settings(quiescence=0.0, unsafe_fixes=unsafe)
    out = tmp_path / f"{name}.out"
    result = repair_to(source, out, settings, replace=True)
    planned = plan_repair(source, settings)
    planned.close()
    return out.read_bytes(), planned, result


@given(data=broken_sessions(), unsafe=st.booleans())
def test_repair_keeps_what_it_must_and_resolves_what_it_moves(
    tmp_path: Path, data: bytes, unsafe: bool
) -> None:
    refusal = ""
    try:
        repaired, planned, result = _repair(tmp_path, data, unsafe, "once")
    except VerificationFailed as refused:
        refusal = str(refused)
    if refusal:
        # Glued records split apart may close a parent cycle the agent would hang on.
        assert "the agent would not load the repaired session" in refusal, refusal
        assert not (tmp_path / "once.out").exists()
        return
    plan, view = planned.plan, planned.plan.view
    one_pass = len(result.applied) == len(planned.applied)
    later_drops = {
        (d.entry_id, d.code) for d in result.applied[len(planned.applied) :] if d.entry_id
    }

    # Idempotent, byte for byte.
    again, _, _ = _repair(tmp_path, repaired, unsafe, "twice")
    assert again == repaired

    # Untouched lines are copied byte for byte, in order. (When a fix made another
    # apply, e.g. a re-linked entry became a clone, a second pass changes more rows.)
    if one_pass:
        changed = set(plan.changed_rows())
        for finding in plan.lines.findings:  # a change of a run or of a spread record
            if finding.row in changed:
                changed.update(range(finding.row, finding.row + finding.rows))
        untouched = [
            line for row, line in enumerate(data.split(b"\n"), 1) if row not in changed and line
        ]
        out_lines = iter(repaired.split(b"\n"))
        assert all(line in out_lines for line in untouched)

    # With unsafe fixes, every line a strict reader sees parses as one object.
    out_records = _records(repaired)
    if unsafe:
        for line in repaired.split(b"\n")[:-1]:
            assert isinstance(loads(line), dict), line[:80]
        assert repaired.endswith(b"\n")

    # No entry goes unless a listed rule drops it; a copy's survivor stays, equal.
    out_ids = {r.get("id") for r in out_records}
    for index in range(len(view)):
        entry_id = view.entry_id(index)
        if entry_id is None or entry_id in out_ids or view.kinds[index] == 0:
            continue
        codes = {plan.drop_codes.get(index)} | {c for e, c in later_drops if e == entry_id}
        if view.kinds[index] == Kind.LABEL:
            # A label goes with its target when that has no survivor or ancestor (§8),
            # also when a later pass dropped the target.
            label = loads(planned.source.read(*view.span(index)))
            if label.get("targetId") not in out_ids:
                continue
        assert codes & DROPPING_RULES, f"entry {entry_id} lost (not dropped by a rule)"
    for index, code in plan.drop_codes.items():
        if code not in PROVEN_COPIES:
            continue
        # The survivor, or the copy it was itself collapsed into by a later pass.
        survivor = plan.dropped[index]
        dropped = loads(planned.source.read(*view.span(index)))
        kept = loads(planned.source.read(*view.span(survivor)))
        if code == "SF201":
            assert canonical(dropped["message"]) == canonical(kept["message"])
            assert canonical(kept["message"]) in {
                canonical(r["message"]) for r in out_records if "message" in r
            }
        elif code == "SF104":
            assert canonical(dropped) == canonical(kept)
            assert view.entry_id(survivor) in out_ids
        else:
            assert dropped["summary"] == kept["summary"]
            assert dropped.get("tokensBefore") == kept.get("tokensBefore")
            assert any(r.get("summary") == kept["summary"] for r in out_records)

    # No reference dangles that did not dangle before (glued records included).
    before = [loads(planned.source.read(*view.span(i))) for i in range(len(view))]
    assert _dangling(out_records) <= _dangling(before)


@given(data=sessions(corrupt=False))
def test_repair_of_a_clean_session_is_a_copy(tmp_path: Path, data: bytes) -> None:
    """With nothing to fix (stale reads aside, which clean sessions may hold), the
    repair is the input, byte for byte."""
    repaired, planned, _ = _repair(tmp_path, data, False, "clean")
    if not planned.applied:
        assert planned.plan.is_empty()
        assert repaired == data
    else:
        assert {d.code for d in planned.applied} == {"SF301"}
        assert repaired.count(b"\n") == data.count(b"\n")


@given(sequence=compaction_sequences(CLONE_MOMENT_MS), unsafe=st.booleans())
def test_cloned_compactions_are_the_copies_and_their_repair_converges(
    tmp_path: Path, sequence: CompactionSequence, unsafe: bool
) -> None:
    """SF202 finds exactly the compactions that copy the one before them at once (not a
    heartbeat's repeat, not one after a turn or minutes later, not a near-copy), and its
    repair drops exactly those in one pass: no fix creates what it removes, so a second
    repair changes nothing and a check of the result finds no clone."""
    data = sequence.data
    source = tmp_path / "sequence.jsonl"
    source.write_bytes(data)
    settings = Settings(quiescence=0.0, unsafe_fixes=unsafe)
    found = {d.entry_id for d in check_file(source, settings) if d.code == "SF202"}
    assert found == sequence.clones

    repaired, planned, result = _repair(tmp_path, data, unsafe, "once")
    assert len(result.applied) == len(planned.applied)
    compactions = {r["id"] for r in _records(data) if r.get("type") == "compaction"}
    assert compactions - {r.get("id") for r in _records(repaired)} == sequence.clones

    again, _, _ = _repair(tmp_path, repaired, unsafe, "twice")
    assert again == repaired
    source.write_bytes(repaired)
    assert not [d for d in check_file(source, settings) if d.code == "SF202"]


_CLAUDE_TURN = FIXTURES / "SF403-claude-repeat-in-one-record" / "input.jsonl"


@st.composite
def claude_result_records(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """Calls one assistant record makes, and the call ids the user record after it
    answers, in order: each call at least once, some twice or more, some orphans."""
    calls = [f"toolu_call{n}" for n in range(draw(st.integers(1, 3)))]
    extra = draw(st.lists(st.sampled_from([*calls, "toolu_orphan"]), max_size=4))
    return calls, draw(st.permutations([*calls, *extra]))


@given(blocks=claude_result_records())
def test_a_claude_result_record_keeps_each_calls_first_result(
    tmp_path: Path, blocks: tuple[list[str], list[str]]
) -> None:
    """However a user record's results repeat a call or answer none, the repair keeps
    each call's first result, in place and in order, and never an empty record."""
    calls, answers = blocks
    prompt, assistant, results, reply = (loads(line) for line in _CLAUDE_TURN.open("rb"))
    assistant["message"]["content"] = [
        {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": call}}
        for call in calls
    ]
    results["message"]["content"] = [
        {"tool_use_id": call, "type": "tool_result", "content": f"result {place}"}
        for place, call in enumerate(answers)
    ]
    data = "".join(stringify(r) + "\n" for r in (prompt, assistant, results, reply)).encode()
    repaired, _, _ = _repair(tmp_path, data, False, "claude")
    kept = [r for r in _records(repaired) if r["uuid"] == results["uuid"]]
    first = {call: answers.index(call) for call in calls}
    assert [block["content"] for r in kept for block in r["message"]["content"]] == [
        f"result {place}" for place in sorted(first.values())
    ]
