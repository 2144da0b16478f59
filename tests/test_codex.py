"""Codex rollouts: calls and outputs paired by call id in file order, carried histories,
ordinals, and the properties every repair keeps (rules.md §6, §7.4, §9)."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionfix import Settings, check_file, read_session
from sessionfix.model.tracking import CallIdTracker, PathTracker
from sessionfix.model.view import ToolCall
from sessionfix.repair.targets import repair_to
from sessionfix.report.render import diagnostic_json
from sessionfix.scan import scanner as scanner_module

from .sessions import rollouts

META = {"id": "019f3a1c-5e2b-7d40-9c11-6a0b2f1e8d37", "cwd": "/home/me/app"}


def _line(line_type: str, payload: dict[str, Any], **extra: Any) -> str:
    return json.dumps(
        {"timestamp": "2026-09-14T08:00:00.000Z", **extra, "type": line_type, "payload": payload},
        separators=(",", ":"),
    )


def _call(call_id: str, name: str = "exec_command") -> str:
    payload = {"type": "function_call", "name": name, "arguments": "{}", "call_id": call_id}
    return _line("response_item", payload)


def _output(call_id: str) -> str:
    payload = {"type": "function_call_output", "call_id": call_id, "output": "ok"}
    return _line("response_item", payload)


def _message(role: str) -> str:
    content = [{"type": "input_text" if role == "user" else "output_text", "text": "hi"}]
    return _line("response_item", {"type": "message", "role": role, "content": content})


def _rollout(tmp_path: Path, *lines: str, name: str = "rollout.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join([_line("session_meta", META), *lines]) + "\n")
    return path


def _found(path: Path, **options: Any) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for diagnostic in check_file(path, Settings(quiescence=0.0, **options)):
        found.setdefault(diagnostic.code, []).append(diagnostic.row)
    return found


def test_outputs_of_parallel_calls_pair_in_any_order(tmp_path: Path) -> None:
    path = _rollout(
        tmp_path, _call("a"), _call("b"), _output("b"), _output("a"), _message("assistant")
    )
    assert _found(path) == {}


def test_an_output_after_a_compaction_answers_the_call_its_history_carries(
    tmp_path: Path,
) -> None:
    carried = {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c"}
    compacted = _line("compacted", {"message": "", "replacement_history": [carried]})
    assert _found(_rollout(tmp_path, compacted, _output("c"))) == {}
    assert _found(_rollout(tmp_path, compacted, _output("c"), _output("c"))) == {"SF403": [4]}


def test_a_call_answered_inside_a_later_history_is_answered(tmp_path: Path) -> None:
    history = [
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c"},
        {"type": "function_call_output", "call_id": "c", "output": "ok"},
    ]
    compacted = _line("compacted", {"message": "", "replacement_history": history})
    assert _found(_rollout(tmp_path, _call("c"), compacted, _message("user"))) == {}


def test_a_call_cut_off_by_the_conversation_is_an_error_and_a_last_call_is_info(
    tmp_path: Path,
) -> None:
    cut = _rollout(tmp_path, _message("user"), _call("a"), _message("assistant"), name="cut")
    [diagnostic] = check_file(cut, Settings(quiescence=0.0))
    assert (diagnostic.code, diagnostic.row, diagnostic.severity.label) == ("SF402", 3, "error")
    assert diagnostic.fix is None
    last = _rollout(tmp_path, _message("user"), _call("a"), name="last")
    [diagnostic] = check_file(last, Settings(quiescence=0.0))
    assert (diagnostic.code, diagnostic.severity.label) == ("SF402", "info")


def test_identical_apply_patch_calls_with_their_own_ids_are_no_duplicates(
    tmp_path: Path,
) -> None:
    patch = {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch"}
    lines = []
    for call_id in ("p1", "p2"):
        lines.append(_line("response_item", {**patch, "call_id": call_id}))
        output = {"type": "custom_tool_call_output", "call_id": call_id, "output": "Done"}
        lines.append(_line("response_item", output))
    assert _found(_rollout(tmp_path, *lines)) == {}


def test_event_messages_naming_a_call_take_no_part_in_pairing(tmp_path: Path) -> None:
    event = _line("event_msg", {"type": "exec_command_end", "call_id": "a", "stdout": "ok"})
    assert _found(_rollout(tmp_path, _call("a"), _output("a"), event, event)) == {}


def test_orphans_are_dropped_only_with_unsafe_fixes(tmp_path: Path) -> None:
    path = _rollout(tmp_path, _message("user"), _output(""), _message("assistant"))
    [diagnostic] = check_file(path, Settings(quiescence=0.0))
    assert diagnostic.code == "SF401"
    assert diagnostic.fix is not None
    assert diagnostic.fix.applicability.value == "unsafe"
    out = tmp_path / "out.jsonl"
    repair_to(path, out, Settings(quiescence=0.0, unsafe_fixes=True))
    assert out.read_text().splitlines() == [
        line for number, line in enumerate(path.read_text().splitlines(), 1) if number != 3
    ]


def test_ordinals_missing_or_reused_after_numbering_began(tmp_path: Path) -> None:
    numbered = [_line("event_msg", {"type": "token_count"}, ordinal=n) for n in (1, 2)]
    path = _rollout(
        tmp_path, *numbered, _message("user"), _line("event_msg", {"type": "x"}, ordinal=2)
    )
    assert _found(path) == {"SF109": [4, 5]}
    plain = _rollout(tmp_path, _message("user"), _message("assistant"), name="plain")
    assert _found(plain) == {}


def test_superseded_histories_shrink_and_the_newest_stays(tmp_path: Path) -> None:
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}
    first = _line(
        "compacted",
        {
            "message": "one",
            "replacement_history": [item],
            "replacement_history_metadata": [{"client_authored": True}],
        },
    )
    second = _line("compacted", {"message": "two", "replacement_history": [item, item]})
    path = _rollout(tmp_path, _message("user"), first, _message("user"), second)
    assert _found(path) == {"SF504": [3]}
    out = tmp_path / "out.jsonl"
    repair_to(path, out, Settings(quiescence=0.0, unsafe_fixes=True))
    lines = out.read_text().splitlines()
    assert lines[2] == _line("compacted", {"message": "one"})
    assert (
        lines[:2] + lines[3:]
        == path.read_text().splitlines()[:2] + path.read_text().splitlines()[3:]
    )


def test_a_rollback_after_a_superseded_history_keeps_it(tmp_path: Path) -> None:
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}
    first = _line("compacted", {"message": "", "replacement_history": [item]})
    rollback = _line("event_msg", {"type": "thread_rolled_back", "num_turns": 3})
    path = _rollout(tmp_path, first, first, rollback)
    [diagnostic] = check_file(path, Settings(quiescence=0.0))
    assert diagnostic.code == "SF504"
    assert diagnostic.fix is None


def test_a_missing_session_meta_is_reported_without_a_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text(_message("user") + "\n")
    [diagnostic] = check_file(path, Settings(quiescence=0.0, cwd="/home/me"))
    assert diagnostic.code == "SF101"
    assert diagnostic.fix is None
    assert "session_meta" in diagnostic.message


def test_nul_in_a_tool_name_is_refused_but_codex_names_are_not(tmp_path: Path) -> None:
    path = _rollout(
        tmp_path,
        _call("a", "exec\x00command"),
        _output("a"),
        _call("b", "container.exec"),
        _output("b"),
        _call("c", "mcp__github__search"),
        _output("c"),
    )
    assert _found(path) == {"SF602": [2]}


def _events(tracker: PathTracker) -> tuple[Any, ...]:
    found = tracker.finish()
    return (
        [(g.assistant, g.answers, g.ended_by) for g in found.unanswered],
        [(e.index, e.call_id) for e in found.orphans],
        [(e.index, first) for e, first in found.duplicates],
        found.repeated_calls,
    )


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["call", "result", "context", "carry"]),
        st.sampled_from(["a", "b", "c", "d"]),
    ),
    max_size=30,
)


def _feed(tracker: CallIdTracker, events: list[tuple[str, str]], base: int) -> None:
    for offset, (event, call_id) in enumerate(events):
        index = base + offset
        if event == "call":
            tracker.assistant(index, (ToolCall(call_id, "shell"),), False, None)
        elif event == "result":
            tracker.result(index, call_id, 0)
        elif event == "context":
            tracker.context(index)
        else:
            tracker.boundary(index)
            tracker.carry(index, [call_id], ["a"] if call_id == "b" else [])


@given(events=EVENTS, cuts=st.lists(st.integers(0, 30), max_size=3))
def test_ranges_read_apart_pair_as_one_pass_does(
    events: list[tuple[str, str]], cuts: list[int]
) -> None:
    whole = CallIdTracker()
    _feed(whole, events, 0)
    bounds = sorted({0, len(events), *(min(c, len(events)) for c in cuts)})
    first = CallIdTracker()
    _feed(first, events[: bounds[1]] if len(bounds) > 1 else events, 0)
    for start, end in pairwise(bounds[1:]):
        part = CallIdTracker(head=True)
        _feed(part, events[start:end], 0)
        first.absorb(part, start)
    assert _events(first) == _events(whole)


def _diagnostics(path: Path, **options: Any) -> list[dict[str, Any]]:
    found = check_file(path, Settings(quiescence=0.0, **options))
    return [{k: v for k, v in diagnostic_json(d).items() if k != "url"} for d in found]


@given(data=rollouts(), task_bytes=st.sampled_from([64, 300, 2000]))
def test_parallel_byte_ranges_of_a_rollout_agree_with_one_pass(
    tmp_path: Path, data: bytes, task_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(data)
    sequential = _diagnostics(path, jobs=1)
    with monkeypatch.context() as patch:
        patch.setattr(scanner_module, "TASK_BYTES", task_bytes)
        patch.setattr(scanner_module, "WORKER_MIN_BYTES", 1)
        assert _diagnostics(path, jobs=2) == sequential


@given(data=rollouts(), unsafe=st.booleans())
def test_repairing_a_rollout_twice_changes_nothing_more(
    tmp_path: Path, data: bytes, unsafe: bool
) -> None:
    """A fixed point, with no fixable finding left; no line is reordered, and a line is
    removed only as an orphan output (SF401) or a line-level fix."""
    source = tmp_path / "rollout.jsonl"
    source.write_bytes(data)
    settings = Settings(quiescence=0.0, unsafe_fixes=unsafe)
    once, twice = tmp_path / "once.jsonl", tmp_path / "twice.jsonl"
    repair_to(source, once, settings, replace=True)
    repair_to(once, twice, settings, replace=True)
    assert twice.read_bytes() == once.read_bytes()
    left = check_file(once, settings)
    assert not [
        d for d in left if d.fix is not None and (unsafe or d.fix.applicability.value == "safe")
    ]
    assert read_session(once).view.format == "codex" or not data.strip()


@given(data=rollouts(corrupt=False))
def test_repair_of_a_clean_rollout_is_a_copy(tmp_path: Path, data: bytes) -> None:
    source = tmp_path / "rollout.jsonl"
    source.write_bytes(data)
    out = tmp_path / "out.jsonl"
    repair_to(source, out, Settings(quiescence=0.0), replace=True)
    assert out.read_bytes() == data
