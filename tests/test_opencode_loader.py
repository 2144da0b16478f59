"""The opencode harness (`tests/opencode_loader.py`) on sessions opencode itself wrote
(`tests/opencode_sessions.py`), damaged with SQL as sessions are found in the field.

What opencode 1.18.33 sends the model, as observed with this harness (chat messages of
its OpenAI-compatible request, after the system prompt and before the new prompt):

- a user text part is a user message with its text; an assistant's text parts are an
  assistant message with its text; `step-start` and `step-finish` parts send nothing;
- a completed tool part is an assistant message with a `tool_calls` entry (the part's
  `callID`, its tool, its input as JSON text) followed by a `tool` message with its
  output; each assistant message of the session (one per model step) is one message;
- a completed tool part whose `state.time.compacted` is set keeps its call and sends
  "[Old tool result content cleared]" in place of its output;
- a tool part left `pending` or `running` is sent as if it had failed: its call (with
  the input stored, `{}` for a pending one) and the result
  "[Tool execution was interrupted]"; opencode refuses nothing;
- after a summary (an assistant with `summary`, `finish` and no error, whose `parentID`
  is a user message with a `compaction` part) the context starts with that compaction
  prompt, sent as "What did we do so far?", and the summary; what came before is not
  sent, unless the compaction part's `tail_start_id` names an earlier message: then
  the messages from it up to the compaction follow the summary;
- a summary whose `parentID` names no message, or a `tail_start_id` naming no message,
  makes no boundary: the whole history is sent, compaction prompt and summary included;
- messages are sent by `message.time_created`: a reply whose time lies before its
  prompt's is sent before it; a message without parts is left out;
- a row opencode cannot parse or use (data that is not JSON, a tool part without a
  state) fails the prompt with HTTP 500 before any request: the session cannot be
  continued at all.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from .opencode_loader import (
    LOAD_SECONDS,
    OpencodeLoad,
    load_with_opencode,
    require_opencode_at_collection,
    session_rows,
)
from .opencode_sessions import built_database, damaged

require_opencode_at_collection()

PLAIN = "ses_19b7a2c00000PlainExchange1"
TOOL = "ses_19b7a3000000ToolCallResult"
COMPACTION = "ses_19b7a3400000CompactionChain"
READ_PART = "prt_19b7a3000003ToolReadPartxx"
COMPACTION_PART = "prt_19b7a3400009CompactionPart"
SUMMARY = "msg_19b7a340000aCompSummaryxxx"
NOTES = "<file>\n00001| alpha\n00002| beta\n</file>"


@pytest.fixture(scope="module")
def database() -> Path:
    """The three described sessions, imported by opencode (built once per run)."""
    return built_database(["plain", "tool", "compaction"])


def load(database: Path, session: str) -> OpencodeLoad:
    loaded = load_with_opencode([(database, session)])[database, session]
    assert loaded.error is None, loaded.error
    return loaded


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def read_call(arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_read_notes_1",
                "type": "function",
                "function": {
                    "name": "read",
                    "arguments": json.dumps(arguments, separators=(",", ":")),
                },
            }
        ],
    }


def read_result(content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "call_read_notes_1", "content": content}


def tool_session(result: str, arguments: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """What the tool session sends with `result` as the read's result."""
    return [
        user("What is in notes.txt?"),
        read_call({"filePath": "/work/project/notes.txt"} if arguments is None else arguments),
        read_result(result),
        assistant("It lists alpha and beta."),
    ]


WHOLE_COMPACTION = [
    user("Plan the release."),
    assistant("Step one: tag it."),
    user("And then?"),
    assistant("Step two: publish it."),
    user("What did we do so far?"),
    assistant("We planned the release: tag, then publish."),
    user("Who publishes?"),
    assistant("The release manager."),
]
"""The compaction session sent whole."""


def set_part_json(part: str, path: str, value: Any) -> tuple[str, list[Any]]:
    """SQL setting one field of a part's data to a JSON value."""
    return (
        "UPDATE part SET data = json_set(data, ?, json(?)) WHERE id = ?",
        [path, json.dumps(value), part],
    )


def test_plain_exchange(database: Path) -> None:
    """A user text and its reply are sent as one user and one assistant message."""
    assert list(load(database, PLAIN).messages) == [
        user("Hello there"),
        assistant("General Kenobi"),
    ]


def test_tool_call_with_its_result(database: Path) -> None:
    """A completed tool part is sent as the call, in the assistant message of its step,
    and a tool message with its output; the step after it is a message of its own."""
    assert list(load(database, TOOL).messages) == tool_session(NOTES)


def test_compacted_output_is_sent_as_opencode_placeholder(database: Path, tmp_path: Path) -> None:
    """A tool part whose `state.time.compacted` is set (opencode's own prune marker) is
    sent with "[Old tool result content cleared]" in place of its output: the call and
    everything else stay as they were."""
    marked = damaged(
        database,
        tmp_path / "compacted.db",
        set_part_json(READ_PART, "$.state.time.compacted", 1767229300000),
    )
    assert list(load(marked, TOOL).messages) == tool_session("[Old tool result content cleared]")


@pytest.mark.parametrize(
    ("state", "arguments"),
    [
        ({"status": "pending", "input": {}, "raw": ""}, {}),
        (
            {
                "status": "running",
                "input": {"filePath": "/work/project/notes.txt"},
                "time": {"start": 1767229302100},
            },
            {"filePath": "/work/project/notes.txt"},
        ),
    ],
    ids=["pending", "running"],
)
def test_unfinished_tool_call_is_sent_as_interrupted(
    database: Path, tmp_path: Path, state: dict[str, Any], arguments: dict[str, Any]
) -> None:
    """A tool part left `pending` or `running` is not refused: opencode sends its call
    (with the input stored) and the result "[Tool execution was interrupted]"."""
    unfinished = damaged(
        database, tmp_path / "unfinished.db", set_part_json(READ_PART, "$.state", state)
    )
    assert list(load(unfinished, TOOL).messages) == tool_session(
        "[Tool execution was interrupted]", arguments
    )


def test_summary_starts_the_context(database: Path) -> None:
    """After a summary, opencode sends the compaction prompt as "What did we do so
    far?", the summary, and what came after them; nothing before."""
    assert list(load(database, COMPACTION).messages) == WHOLE_COMPACTION[4:]


def test_compaction_tail_follows_the_summary(database: Path, tmp_path: Path) -> None:
    """A compaction part whose `tail_start_id` names an earlier message keeps the
    messages from it to the compaction, sent after the summary."""
    tail = damaged(
        database,
        tmp_path / "tail.db",
        set_part_json(COMPACTION_PART, "$.tail_start_id", "msg_19b7a3400005CompUser2xxxxx"),
    )
    sent = WHOLE_COMPACTION
    assert list(load(tail, COMPACTION).messages) == sent[4:6] + sent[2:4] + sent[6:]


@pytest.mark.parametrize(
    "damage",
    [
        (
            "UPDATE message SET data = json_set(data, '$.parentID', ?) WHERE id = ?",
            ["msg_19b7a3400008Gonexxxxxxxxx", SUMMARY],
        ),
        set_part_json(COMPACTION_PART, "$.tail_start_id", "msg_19b7a3400004Gonexxxxxxxxx"),
    ],
    ids=["summary-parent-missing", "tail-start-missing"],
)
def test_broken_compaction_chain_sends_everything(
    database: Path, tmp_path: Path, damage: tuple[str, list[Any]]
) -> None:
    """A summary whose `parentID`, or a compaction whose `tail_start_id`, names no
    message is no boundary: opencode sends the whole history, silently."""
    broken = damaged(database, tmp_path / "broken.db", damage)
    assert list(load(broken, COMPACTION).messages) == WHOLE_COMPACTION


def test_reply_sorted_before_its_prompt_is_sent_first(database: Path, tmp_path: Path) -> None:
    """Messages go by `message.time_created`: a reply whose time lies before its
    prompt's is sent before the prompt."""
    early = damaged(
        database,
        tmp_path / "early.db",
        (
            "UPDATE message SET time_created = time_created - 1500 WHERE id = ?",
            ["msg_19b7a2c00002PlainReplyMsg1"],
        ),
    )
    assert list(load(early, PLAIN).messages) == [assistant("General Kenobi"), user("Hello there")]


def test_message_without_parts_is_left_out(database: Path, tmp_path: Path) -> None:
    """A message row without parts sends nothing; its reply is sent all the same."""
    empty = damaged(
        database,
        tmp_path / "empty.db",
        ("DELETE FROM part WHERE message_id = ?", ["msg_19b7a2c00001PlainUserMsg1x"]),
    )
    assert list(load(empty, PLAIN).messages) == [assistant("General Kenobi")]


def test_loads_leave_the_database_alone_and_batch(database: Path, tmp_path: Path) -> None:
    """Loading sessions writes nothing to their database (the probe turn goes to the
    server's own copy), a load of the same session is the same however often it is
    asked for, and sessions with the same rows are loaded once."""
    before = hashlib.sha256(database.read_bytes()).hexdigest()
    rows = {session: session_rows(database, session) for session in (PLAIN, TOOL)}
    same = damaged(
        database,
        tmp_path / "same.db",
        ("UPDATE session SET title = 'renamed' WHERE id = ?", [PLAIN]),
    )
    loads_before = len(LOAD_SECONDS)
    first = load_with_opencode([(database, PLAIN), (database, TOOL), (same, PLAIN)])
    second = load_with_opencode([(database, PLAIN)])
    assert first[database, PLAIN] == first[same, PLAIN] == second[database, PLAIN]
    assert len(LOAD_SECONDS) - loads_before <= 2
    assert hashlib.sha256(database.read_bytes()).hexdigest() == before
    assert {session: session_rows(database, session) for session in (PLAIN, TOOL)} == rows


@pytest.mark.parametrize(
    "damage",
    [
        ("UPDATE part SET data = json_remove(data, '$.state') WHERE id = ?", [READ_PART]),
        (
            'UPDATE part SET data = \'{"type":"text","text":\' WHERE id = ?',
            ["prt_19b7a3000006ToolReplyTextx"],
        ),
        ("UPDATE message SET data = '{' WHERE id = ?", ["msg_19b7a3000005ToolReplyMsgxx"]),
    ],
    ids=["tool-part-without-state", "part-not-json", "message-not-json"],
)
def test_row_opencode_cannot_read_fails_the_session(
    database: Path, tmp_path: Path, damage: tuple[str, list[Any]]
) -> None:
    """A row whose data opencode cannot parse or use makes it answer the prompt with
    HTTP 500 and send nothing: the whole session is lost to it, not the row. The
    session loads again once its rows are whole."""
    unreadable = damaged(database, tmp_path / "unreadable.db", damage)
    failed = load_with_opencode([(unreadable, TOOL)])[unreadable, TOOL]
    assert failed.error is not None
    assert failed.error.startswith("HTTP 500: ")
    assert failed.messages == ()
    whole = damaged(
        database,
        tmp_path / "whole.db",
        (
            "UPDATE part SET data = json_set(data, '$.text', 'It lists both.') WHERE id = ?",
            ["prt_19b7a3000006ToolReplyTextx"],
        ),
    )
    assert list(load(whole, TOOL).messages) == [
        *tool_session(NOTES)[:3],
        assistant("It lists both."),
    ]
