"""opencode sessions damaged as they are found in the field (spec formats/opencode.md §6):
the described sessions' ids, and copies of them changed with SQL (`DAMAGES`), for
`opencode_sessions.damaged`."""

from __future__ import annotations

import json
from typing import Any

DESCRIPTIONS = ("plain", "tool", "compaction", "steps")
"""The described sessions the damages apply to, built into one database."""
PLAIN = "ses_19b7a2c00000PlainExchange1"
TOOL = "ses_19b7a3000000ToolCallResult"
COMPACTION = "ses_19b7a3400000CompactionChain"
STEPS = "ses_19b7a3800000StepsAndErrors"
SESSIONS = (PLAIN, TOOL, COMPACTION, STEPS)
READ_PART = "prt_19b7a3000003ToolReadPartxx"
COMPACTION_PART = "prt_19b7a3400009CompactionPart"
COMPACTION_USER = "msg_19b7a3400009CompPromptxxxx"
SUMMARY = "msg_19b7a340000aCompSummaryxxx"


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


def insert_part(part: str, message: str, data: dict[str, Any]) -> tuple[str, list[Any]]:
    """SQL adding a part with `data` to a message (times of the message's own)."""
    return (
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
        "SELECT ?, id, session_id, time_created, time_updated, ? FROM message WHERE id = ?",
        [part, json.dumps(data), message],
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
    "two-texts-in-a-step": (
        PLAIN,
        [
            insert_part(
                "prt_19b7a2c00003PlainReplyTexu",
                "msg_19b7a2c00002PlainReplyMsg1",
                {"type": "text", "text": " And more."},
            )
        ],
    ),
    "plain-text-file": (
        PLAIN,
        [
            insert_part(
                "prt_19b7a2c00001PlainUserTexu",
                "msg_19b7a2c00001PlainUserMsg1x",
                {
                    "type": "file",
                    "mime": "text/plain",
                    "filename": "a.txt",
                    "url": "data:text/plain;base64,aGVsbG8=",
                },
            )
        ],
    ),
    "subtask": (
        PLAIN,
        [
            insert_part(
                "prt_19b7a2c00001PlainUserTexu",
                "msg_19b7a2c00001PlainUserMsg1x",
                {"type": "subtask", "prompt": "do it", "description": "d", "agent": "general"},
            )
        ],
    ),
    "two-reasonings": (
        STEPS,
        [
            insert_part(
                "prt_19b7a3800021StepsThoughu",
                "msg_19b7a3800002StepsReply1xxx",
                {"type": "reasoning", "text": " More thought.", "time": {"start": 1, "end": 2}},
            )
        ],
    ),
    "empty-prompt-text": (
        PLAIN,
        [
            (
                "UPDATE part SET data = json_set(data, '$.text', '') WHERE id = ?",
                ["prt_19b7a2c00001PlainUserText1"],
            )
        ],
    ),
    "lone-surrogate-output": (
        TOOL,
        [
            (
                "UPDATE part SET data = replace(data, '| beta', ?) WHERE id = ?",
                ["| beta \\ud83d", READ_PART],
            ),
            (
                "UPDATE part SET data = replace(data, 'and beta.', ?) WHERE id = ?",
                ["and beta \\udc00.", "prt_19b7a3000006ToolReplyTextx"],
            ),
        ],
    ),
    "unknown-tool-status": (TOOL, [set_part(READ_PART, "$.state.status", "weird")]),
    "tool-state-not-an-object": (TOOL, [set_part(READ_PART, "$.state", "completed")]),
    "part-data-not-an-object": (
        TOOL,
        [
            ("UPDATE part SET data = 'null' WHERE id = ?", [READ_PART]),
            ("UPDATE part SET data = '[1]' WHERE id = ?", ["prt_19b7a3000001ToolUserTextxx"]),
        ],
    ),
    "fractional-time": (
        STEPS,
        [
            (
                "UPDATE message SET time_created = ? WHERE id = ?",
                [1767236404999.5, "msg_19b7a3800005StepsUser3xxxx"],
            ),
            (
                "UPDATE message SET time_created = ? WHERE id = ?",
                [1767236404999.25, "msg_19b7a3800004StepsAbortedxx"],
            ),
        ],
    ),
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
