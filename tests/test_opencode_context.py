"""What `formats.opencode.context` says opencode sends the model, held session by session
to what opencode 1.18.33 itself sends (`tests/opencode_loader.py`), on the described
sessions and on copies damaged as sessions are found in the field (spec
formats/opencode.md §6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessionfix.formats.opencode.context import SentMessage, model_messages
from sessionfix.formats.opencode.database import OpencodeDatabase
from sessionfix.formats.opencode.decode import decode_session
from sessionfix.model.loaded import LoadRefused, Sent

from .opencode_loader import load_with_opencode, require_opencode_at_collection
from .opencode_sessions import built_database, damaged

require_opencode_at_collection()

PLAIN = "ses_19b7a2c00000PlainExchange1"
TOOL = "ses_19b7a3000000ToolCallResult"
COMPACTION = "ses_19b7a3400000CompactionChain"
STEPS = "ses_19b7a3800000StepsAndErrors"
SESSIONS = (PLAIN, TOOL, COMPACTION, STEPS)
READ_PART = "prt_19b7a3000003ToolReadPartxx"
COMPACTION_PART = "prt_19b7a3400009CompactionPart"
COMPACTION_USER = "msg_19b7a3400009CompPromptxxxx"
SUMMARY = "msg_19b7a340000aCompSummaryxxx"
STEPS_REPLY = "msg_19b7a3800002StepsReply1xxx"


def set_part(part: str, path: str, value: Any) -> tuple[str, list[Any]]:
    return (
        "UPDATE part SET data = json_set(data, ?, json(?)) WHERE id = ?",
        [path, json.dumps(value), part],
    )


def set_message(message: str, path: str, value: Any) -> tuple[str, list[Any]]:
    return (
        "UPDATE message SET data = json_set(data, ?, json(?)) WHERE id = ?",
        [path, json.dumps(value), message],
    )


def shift_message(message: str, by: int) -> tuple[str, list[Any]]:
    return ("UPDATE message SET time_created = time_created + ? WHERE id = ?", [by, message])


DAMAGES: dict[str, tuple[str, list[tuple[str, list[Any]]]]] = {
    "compacted-read": (TOOL, [set_part(READ_PART, "$.state.time.compacted", 1767229300000)]),
    "pending-read": (
        TOOL,
        [set_part(READ_PART, "$.state", {"status": "pending", "input": {}, "raw": ""})],
    ),
    "running-read": (
        TOOL,
        [
            set_part(
                READ_PART,
                "$.state",
                {"status": "running", "input": {"filePath": "/w/a"}, "time": {"start": 1}},
            )
        ],
    ),
    "interrupted-error": (
        TOOL,
        [
            set_part(
                READ_PART,
                "$.state",
                {
                    "status": "error",
                    "input": {"filePath": "/work/project/notes.txt"},
                    "error": "Tool execution aborted",
                    "metadata": {"interrupted": True, "output": "partial output"},
                    "time": {"start": 1767229202100, "end": 1767229202200},
                },
            )
        ],
    ),
    "tail-kept": (
        COMPACTION,
        [set_part(COMPACTION_PART, "$.tail_start_id", "msg_19b7a3400005CompUser2xxxxx")],
    ),
    "tail-missing": (
        COMPACTION,
        [set_part(COMPACTION_PART, "$.tail_start_id", "msg_19b7a3400004Gonexxxxxxxxx")],
    ),
    "summary-parent-missing": (
        COMPACTION,
        [set_message(SUMMARY, "$.parentID", "msg_19b7a3400008Gonexxxxxxxxx")],
    ),
    "summary-errored": (
        COMPACTION,
        [
            set_message(
                SUMMARY, "$.error", {"name": "ContextOverflowError", "data": {"message": "x"}}
            )
        ],
    ),
    "summary-before-its-prompt": (COMPACTION, [shift_message(SUMMARY, -2500)]),
    "compaction-part-gone": (COMPACTION, [("DELETE FROM part WHERE id = ?", [COMPACTION_PART])]),
    "reply-before-prompt": (PLAIN, [shift_message("msg_19b7a2c00002PlainReplyMsg1", -1500)]),
    "user-without-parts": (
        PLAIN,
        [("DELETE FROM part WHERE message_id = ?", ["msg_19b7a2c00001PlainUserMsg1x"])],
    ),
    "assistant-without-parts": (
        STEPS,
        [("DELETE FROM part WHERE message_id = ?", ["msg_19b7a3800008StepsReply4xxx"])],
    ),
    "only-step-starts": (
        STEPS,
        [
            (
                "DELETE FROM part WHERE message_id = ? AND json_extract(data, '$.type') != ?",
                ["msg_19b7a3800008StepsReply4xxx", "step-start"],
            )
        ],
    ),
    "user-all-ignored": (
        STEPS,
        [
            set_part("prt_19b7a3800010StepsUserTextx", "$.ignored", True),
            set_part("prt_19b7a3800011StepsSynthetic", "$.ignored", True),
        ],
    ),
    "abort-with-only-step-start": (
        STEPS,
        [("DELETE FROM part WHERE id = ?", ["prt_19b7a3800041StepsPartialxx"])],
    ),
    "tool-part-without-state": (
        TOOL,
        [("UPDATE part SET data = json_remove(data, '$.state') WHERE id = ?", [READ_PART])],
    ),
    "part-not-json": (
        TOOL,
        [
            (
                'UPDATE part SET data = \'{"type":"text","text":\' WHERE id = ?',
                ["prt_19b7a3000006ToolReplyTextx"],
            )
        ],
    ),
    "message-not-json": (
        TOOL,
        [("UPDATE message SET data = '[1]' WHERE id = ?", ["msg_19b7a3000005ToolReplyMsgxx"])],
    ),
    "summary-unfinished": (
        COMPACTION,
        [("UPDATE message SET data = json_remove(data, '$.finish') WHERE id = ?", [SUMMARY])],
    ),
    "empty-reply-text": (PLAIN, [set_part("prt_19b7a2c00003PlainReplyText", "$.text", "")]),
    "same-time-by-id": (
        STEPS,
        [
            (
                "UPDATE message SET time_created = ? WHERE id IN (?, ?)",
                [1767236407000, "msg_19b7a3800007StepsUser4xxxx", "msg_19b7a3800008StepsReply4xxx"],
            )
        ],
    ),
}
"""Copies of a described session with rows changed as field reports show them: session
and the SQL that damages it, by name."""


@pytest.fixture(scope="module")
def database() -> Path:
    return built_database(["plain", "tool", "compaction", "steps"])


def as_chat(message: SentMessage) -> dict[str, Any]:
    """A sent message as the chat message of opencode's OpenAI-compatible request."""
    if message.sent is Sent.TOOL_RESULT:
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.texts[0]}
    if message.sent is Sent.USER:
        if len(message.texts) == 1 and not message.files:
            return {"role": "user", "content": message.texts[0]}
        return {
            "role": "user",
            "content": [{"type": "text", "text": text} for text in message.texts],
        }
    chat: dict[str, Any] = {"role": "assistant", "content": "".join(message.texts)}
    if message.reasoning:
        chat["reasoning_content"] = "".join(message.reasoning)
    if message.tool_calls:
        chat["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {
                    "name": call.tool,
                    "arguments": json.dumps(call.input, separators=(",", ":")),
                },
            }
            for call in message.tool_calls
        ]
    return chat


REFUSED = "refused"


def predicted(database: Path, session: str) -> list[dict[str, Any]] | str:
    """What `context` says opencode sends for the session: the chat messages, or
    `REFUSED` where it says opencode sends nothing."""
    with OpencodeDatabase(database) as db:
        try:
            return [
                as_chat(message) for message in model_messages(decode_session(db.messages(session)))
            ]
        except LoadRefused:
            return REFUSED


def test_context_is_what_opencode_sends(database: Path, tmp_path: Path) -> None:
    """Session by session, the described ones and each damaged copy, the messages
    `context` derives from the rows are the ones opencode sends (all loaded by one
    server)."""
    cases = [(database, session) for session in SESSIONS]
    for name, (session, statements) in DAMAGES.items():
        cases.append((damaged(database, tmp_path / f"{name}.db", *statements), session))
    loads = load_with_opencode(cases)
    mismatches = []
    for case in cases:
        sent = loads[case]
        actual: list[dict[str, Any]] | str = list(sent.messages)
        if sent.error is not None:
            actual = REFUSED if sent.error.startswith("HTTP 500: ") else sent.error
        expected = predicted(*case)
        if actual != expected:
            mismatches.append((case[0].name, case[1], expected, actual))
    assert not mismatches, "\n\n".join(
        f"{name} {session}:\n context: {expected}\n opencode: {actual}"
        for name, session, expected, actual in mismatches
    )
