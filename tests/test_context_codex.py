"""What `sessionfix context` counts for a Codex rollout, on small rollouts written here
(`tests/test_codex_loader.py` checks the same against Codex itself)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sessionfix.context import context_of
from sessionfix.formats.codex import loaded_messages
from sessionfix.formats.codex.context import DEFAULT_INSTRUCTIONS_BYTES
from sessionfix.model.loaded import MADE_BY_LOADER, Loaded, LoadRefused, Sent
from sessionfix.read.reader import RecordSource
from sessionfix.scan.scanner import read_session

from .sessions import IMAGE_URL, _rollout_line

INSTRUCTIONS = "You are Codex, a coding agent."
META = {
    "id": "019f3a1c-5e2b-7d40-9c11-6a0b2f1e8d37",
    "timestamp": "2026-09-14T08:00:00.000Z",
    "cwd": "/home/me/app",
    "originator": "codex_cli_rs",
    "cli_version": "0.169.0",
    "base_instructions": {"text": INSTRUCTIONS},
}


def _user(text: str, *, image: bool = False) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "input_text", "text": text}]
    if image:
        content.append({"type": "input_image", "image_url": IMAGE_URL})
    return {"type": "message", "role": "user", "content": content}


def _assistant(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def _call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": call_id}


def _output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "ok"}


def _turn(n: int) -> list[tuple[str, dict[str, Any]]]:
    """Five lines: turn context, user message, call, its output, assistant message."""
    return [
        ("turn_context", {"turn_id": f"t{n}", "cwd": "/home/me/app"}),
        ("response_item", _user(f"step {n}")),
        ("response_item", _call(f"call_{n}")),
        ("response_item", _output(f"call_{n}")),
        ("response_item", _assistant(f"step {n} done")),
    ]


def _text(records: list[tuple[str, dict[str, Any]]], meta: dict[str, Any] = META) -> bytes:
    lines = [("session_meta", meta), *records]
    return "".join(
        _rollout_line(step, kind, payload, None) + "\n"
        for step, (kind, payload) in enumerate(lines)
    ).encode()


def _loaded(tmp_path: Path, data: bytes) -> list[Loaded]:
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(data)
    scanned = read_session(path)
    with RecordSource(path) as source:
        try:
            return list(loaded_messages(scanned.view, source, scanned.lines))
        except LoadRefused:
            return []


def _size(payload: dict[str, Any]) -> int:
    return len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode())


def test_a_clean_rollout_sends_its_items_after_the_instructions(tmp_path: Path) -> None:
    records = [*_turn(1), ("response_item", _user("look", image=True))]
    records.append(("response_item", {"type": "ghost_snapshot", "ghost_commit": {}}))
    records.append(("response_item", {"type": "reasoning", "summary": []}))
    loaded = _loaded(tmp_path, _text(records))
    assert loaded[0] == Loaded(0, Sent.SYSTEM, len(INSTRUCTIONS))
    assert [m.record for m in loaded[1:]] == [2, 3, 4, 5, 6, 8]
    assert [m.sent for m in loaded[1:]] == [
        Sent.USER,
        Sent.TOOL_CALL,
        Sent.TOOL_RESULT,
        Sent.ASSISTANT,
        Sent.USER,
        Sent.REASONING,
    ]
    assert [m.size for m in loaded[1:]] == [_size(records[m.record - 1][1]) for m in loaded[1:]]
    assert (loaded[5].images, loaded[5].image_bytes) == (1, len(IMAGE_URL))


def test_without_base_instructions_codex_sends_its_own(tmp_path: Path) -> None:
    meta = {k: v for k, v in META.items() if k != "base_instructions"}
    loaded = _loaded(tmp_path, _text(_turn(1), meta))
    assert loaded[0] == Loaded(0, Sent.SYSTEM, DEFAULT_INSTRUCTIONS_BYTES)


def test_a_replacement_history_replaces_what_came_before(tmp_path: Path) -> None:
    carried = [_user("step 1"), _assistant("summary so far"), _call("call_c")]
    compacted = {"message": "", "replacement_history": carried}
    loaded = _loaded(tmp_path, _text([*_turn(1), ("compacted", compacted), *_turn(2)]))
    # base; the three carried items, the carried call answered "aborted"; the second turn
    assert len(loaded) == 1 + 3 + 1 + 4
    assert [m.record for m in loaded[1:4]] == [6, 6, 6]
    assert [m.size for m in loaded[1:4]] == list(map(_size, carried))
    assert loaded[4].record == MADE_BY_LOADER
    assert loaded[4].sent is Sent.TOOL_RESULT
    assert [m.record for m in loaded[5:]] == [8, 9, 10, 11]


def test_a_compaction_without_history_keeps_user_messages_and_its_summary(
    tmp_path: Path,
) -> None:
    data = _text([*_turn(1), ("compacted", {"message": "did step 1"}), *_turn(2)])
    loaded = _loaded(tmp_path, data)
    assert [(m.record, m.sent) for m in loaded[1:3]] == [(2, Sent.USER), (6, Sent.SUMMARY)]
    summary = _size(
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "did step 1"}],
        }
    )
    assert loaded[2].size == summary
    assert len(loaded) == 1 + 2 + 4


def test_an_unanswered_call_gets_one_aborted_output(tmp_path: Path) -> None:
    records = _turn(1)
    del records[3]
    loaded = _loaded(tmp_path, _text(records))
    assert [m.sent for m in loaded] == [
        Sent.SYSTEM,
        Sent.USER,
        Sent.TOOL_CALL,
        Sent.TOOL_RESULT,
        Sent.ASSISTANT,
    ]
    assert loaded[3].record == MADE_BY_LOADER
    aborted = {"type": "function_call_output", "call_id": "call_1", "output": "aborted"}
    assert loaded[3].size == _size(aborted)
    assert context_of(tmp_path / "rollout.jsonl").by_sent[Sent.TOOL_RESULT] == 1


def test_an_output_without_a_call_before_it_is_dropped(tmp_path: Path) -> None:
    records = [("response_item", _output("call_1")), *_turn(1)]
    loaded = _loaded(tmp_path, _text(records))
    assert [m.record for m in loaded] == [0, 3, 4, 5, 6]


def test_a_rollback_drops_a_turn_and_every_replacement_history(tmp_path: Path) -> None:
    rollback = ("event_msg", {"type": "thread_rolled_back", "num_turns": 1})
    loaded = _loaded(tmp_path, _text([*_turn(1), *_turn(2), rollback]))
    assert [m.record for m in loaded] == [0, 2, 3, 4, 5]
    compacted = ("compacted", {"message": "", "replacement_history": [_user("gone")]})
    loaded = _loaded(tmp_path, _text([*_turn(1), compacted, *_turn(2), *_turn(3), rollback]))
    assert [m.record for m in loaded] == [0, 2, 3, 4, 5, 8, 9, 10, 11]


def test_codex_refuses_a_rollout_without_its_session_meta(tmp_path: Path) -> None:
    assert _loaded(tmp_path, _text(_turn(1), {**META, "id": "not-a-uuid"})) == []
    assert _loaded(tmp_path, _text(_turn(1), {**META, "cwd": None})) == []
    data = _text(_turn(1))
    first, rest = data.split(b"\n", 1)
    assert _loaded(tmp_path, b"\xef\xbb\xbf" + data) == []
    assert _loaded(tmp_path, rest + first + b"\n") == []
    assert len(_loaded(tmp_path, b"\n  \n" + data)) == 5
    path = tmp_path / "refused.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + data)
    context = context_of(path)
    assert context.messages == 0
    assert context.refused is not None
    assert context.refused.startswith("Codex refuses")


def test_lines_codex_cannot_parse_are_not_sent(tmp_path: Path) -> None:
    lines = _text(_turn(1)).split(b"\n")
    # 0 meta, 1 context, 2 user, 3 call, 4 output, 5 assistant
    glued = b"\n".join([*lines[:3], lines[3] + lines[4], *lines[5:]])
    assert [m.record for m in _loaded(tmp_path, glued)] == [0, 2, 5]
    bom = b"\n".join([*lines[:5], b"\xef\xbb\xbf" + lines[5], *lines[6:]])
    assert [m.record for m in _loaded(tmp_path, bom)] == [0, 2, 3, 4]
    nul = b"\n".join([*lines[:4], lines[4] + b"\x00\x00", *lines[5:]])
    assert [m.record for m in _loaded(tmp_path, nul)][:4] == [0, 2, 3, MADE_BY_LOADER]
    spaced = b"\n".join([*lines[:2], b"  " + lines[2] + b" \r", *lines[3:]])
    assert [m.record for m in _loaded(tmp_path, spaced)] == [0, 2, 3, 4, 5]


def test_a_compaction_codex_cannot_read_is_passed_by(tmp_path: Path) -> None:
    """An item of a replacement history that is no item, or a replacement history that
    is no list, fails the whole `compacted` line (observed with Codex 0.169)."""
    for carried in ([_user("kept"), {"type": "function_call", "name": "x"}], {"a": 1}):
        compacted = ("compacted", {"message": "", "replacement_history": carried})
        loaded = _loaded(tmp_path, _text([*_turn(1), compacted, *_turn(2)]))
        assert [m.record for m in loaded] == [0, 2, 3, 4, 5, 8, 9, 10, 11]
    ghost = {"type": "ghost_snapshot", "ghost_commit": {}}
    compacted = ("compacted", {"message": "", "replacement_history": [ghost, _user("kept")]})
    loaded = _loaded(tmp_path, _text([*_turn(1), compacted]))
    assert [(m.record, m.sent) for m in loaded] == [(0, Sent.SYSTEM), (6, Sent.USER)]


def test_base_instructions_codex_cannot_read_refuse_the_rollout(tmp_path: Path) -> None:
    for instructions in ("plain text", {}, {"text": 5}):
        meta = {**META, "base_instructions": instructions}
        assert _loaded(tmp_path, _text(_turn(1), meta)) == []
    meta = {**META, "base_instructions": None}
    assert _loaded(tmp_path, _text(_turn(1), meta))[0].size == DEFAULT_INSTRUCTIONS_BYTES
