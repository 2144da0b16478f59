"""opencode sessions in the neutral model: every row a record under its row id, in
opencode's load order; tool parts as calls answered by their own results; the
compaction opencode honours as the boundary, and the records in context exactly the
ones opencode sends something of."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessionfix.formats.opencode.context import sends, window
from sessionfix.formats.opencode.database import OpencodeDatabase
from sessionfix.formats.opencode.decode import decode_session
from sessionfix.formats.opencode.view import OpencodeSession, session_view
from sessionfix.model.view import MISSING, FileAction, Flag, Kind, Role

from .opencode_damages import (
    COMPACTION,
    COMPACTION_PART,
    COMPACTION_USER,
    DAMAGES,
    DESCRIPTIONS,
    PLAIN,
    READ_PART,
    SESSIONS,
    STEPS,
    TOOL,
    set_part,
)
from .opencode_loader import require_opencode_at_collection
from .opencode_sessions import built_database, damaged

require_opencode_at_collection()


@pytest.fixture(scope="module")
def database() -> Path:
    return built_database(DESCRIPTIONS)


def decoded(database: Path, session: str) -> OpencodeSession:
    with OpencodeDatabase(database) as db:
        row = next(found for found in db.sessions() if found.id == session)
        return session_view(database, row, db.messages(session))


def row_ids(database: Path, session: str) -> list[str]:
    with OpencodeDatabase(database) as db:
        return [
            key
            for message in db.messages(session)
            for key in (message.row.id, *(part.id for part in message.parts))
        ]


def sent_keys(database: Path, session: str) -> set[str]:
    """The messages `context` says opencode sends something of."""
    with OpencodeDatabase(database) as db:
        kept = window(list(decode_session(db.messages(session))))
    return {message.key for message in kept.messages if sends(message)}


def in_context(found: OpencodeSession) -> set[str]:
    view = found.view
    return {
        found.keys[index]
        for index in range(len(view))
        if view.kind(index) in (Kind.MESSAGE, Kind.COMPACTION)
        and view.has_flag(index, Flag.CONTEXT)
        and view.in_context(index)
        and found.keys[index].startswith("msg_")
    }


def test_every_row_is_a_record_under_its_id(database: Path) -> None:
    """Message rows, each followed by its part rows, in load order; a record names
    itself by its row id, and a reply's parent is the prompt it answers."""
    found = decoded(database, TOOL)
    assert found.keys == row_ids(database, TOOL)
    view = found.view
    assert [view.entry_id(index) for index in range(len(view))] == found.keys
    kinds = [
        (found.keys[index][:4], view.kind(index), view.role(index)) for index in range(len(view))
    ]
    assert kinds[:4] == [
        ("msg_", Kind.MESSAGE, Role.USER),
        ("prt_", Kind.OTHER, Role.NONE),
        ("msg_", Kind.MESSAGE, Role.ASSISTANT),
        ("prt_", Kind.OTHER, Role.NONE),
    ]
    assert kinds[4] == ("prt_", Kind.MESSAGE, Role.ASSISTANT)
    reply = found.keys.index("msg_19b7a3000002ToolCallMsgxxx")
    assert view.parent_keys[reply] == view.id_keys[0]


def test_tool_part_is_a_call_answered_by_itself(database: Path, tmp_path: Path) -> None:
    """A completed tool part is a call and its result; one left pending is a call
    without a result; a completed read not yet compacted reads its file."""
    found = decoded(database, TOOL)
    assert found.tracking.unanswered == []
    assert [
        (found.keys[event.record], event.path, event.base) for event in found.tracking.reads
    ] == [(READ_PART, "/work/project/notes.txt", "/work/project")]
    session, statements = DAMAGES["pending-read"]
    pending = decoded(damaged(database, tmp_path / "pending.db", *statements), session)
    [group] = pending.tracking.unanswered
    assert [pending.keys[group.owner(0)]] == [READ_PART]
    assert (group.calls[0].name, group.calls[0].action) == ("read", FileAction.NONE)
    session, statements = DAMAGES["compacted-read"]
    compacted = decoded(damaged(database, tmp_path / "compacted.db", *statements), session)
    assert list(compacted.tracking.reads) == []


def test_writes_and_failed_calls(database: Path) -> None:
    """A write rewrites its file; a failed call is answered by its error."""
    found = decoded(database, STEPS)
    writes = [(found.keys[event.record], event.path, event.bits) for event in found.tracking.writes]
    assert writes == [("prt_19b7a3800027StepsWritexxxx", "/work/project/notes.txt", 1)]
    assert found.tracking.unanswered == []


@pytest.mark.parametrize("name", [None, *DAMAGES])
def test_context_flags_are_what_opencode_sends(
    database: Path, tmp_path: Path, name: str | None
) -> None:
    """The messages in context (flagged and inside the view's window) are the ones
    `context` sends something of, on every session held to the real client."""
    cases = [(database, session) for session in SESSIONS]
    if name is not None:
        session, statements = DAMAGES[name]
        cases = [(damaged(database, tmp_path / "damaged.db", *statements), session)]
    for path, session in cases:
        found = decoded(path, session)
        if found.view.notes:
            assert found.view.notes[0].startswith("opencode cannot read row ")
            continue
        assert in_context(found) == sent_keys(path, session), session


def boundaries(found: OpencodeSession) -> list[tuple[str, Any, Any]]:
    view = found.view
    return [
        (found.keys[index], view.kind(index), facts.first_kept)
        for index, facts in sorted(view.boundaries.items())
    ]


def test_compaction_opencode_honours_is_the_boundary(database: Path, tmp_path: Path) -> None:
    """The compaction prompt of a sound summary is the boundary, its tail the first
    record kept; a prompt whose summary names no message is a user message, its facts
    kept for the chain rules."""
    found = decoded(database, COMPACTION)
    assert boundaries(found) == [(COMPACTION_USER, Kind.COMPACTION, MISSING)]
    assert found.view.window_start == found.view.path_positions[found.keys.index(COMPACTION_USER)]
    tail = "msg_19b7a3400005CompUser2xxxxx"
    kept = decoded(
        damaged(database, tmp_path / "tail.db", set_part(COMPACTION_PART, "$.tail_start_id", tail)),
        COMPACTION,
    )
    assert boundaries(kept) == [(COMPACTION_USER, Kind.COMPACTION, tail)]
    assert kept.view.window_start == kept.view.path_positions[kept.keys.index(tail)]
    session, statements = DAMAGES["summary-parent-missing"]
    broken = decoded(damaged(database, tmp_path / "broken.db", *statements), session)
    assert boundaries(broken) == [(COMPACTION_USER, Kind.MESSAGE, MISSING)]
    assert broken.view.window_start == 0


def test_prompt_stored_twice_is_one_user_identity(database: Path, tmp_path: Path) -> None:
    """A user message copied under new ids at another time is the same user identity
    (spec §8.4); another prompt is not."""
    copy = damaged(
        database,
        tmp_path / "copy.db",
        (
            "INSERT INTO message (id, session_id, time_created, time_updated, data) "
            "SELECT 'msg_19b7a2c00001PlainUserCopy1', session_id, time_created + 10, "
            "time_updated + 5, json_set(data, '$.time.created', time_created + 10) "
            "FROM message WHERE id = ?",
            ["msg_19b7a2c00001PlainUserMsg1x"],
        ),
        (
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
            "SELECT 'prt_19b7a2c00001PlainUserCopyT', 'msg_19b7a2c00001PlainUserCopy1', "
            "session_id, time_created + 7, time_updated + 7, data FROM part WHERE id = ?",
            ["prt_19b7a2c00001PlainUserText1"],
        ),
    )
    users = decoded(copy, PLAIN).tracking.users
    assert len(users) == 2
    assert users[0].key == users[1].key
    other = decoded(database, TOOL).tracking.users
    assert other[0].key != users[0].key


def test_row_opencode_cannot_read_is_noted(database: Path, tmp_path: Path) -> None:
    session, statements = DAMAGES["message-not-json"]
    found = decoded(damaged(database, tmp_path / "bad.db", *statements), session)
    index = found.keys.index("msg_19b7a3000005ToolReplyMsgxx")
    assert found.view.kind(index) == Kind.OTHER
    assert found.view.notes == [
        "opencode cannot read row msg_19b7a3000005ToolReplyMsgxx: its data is not a JSON object"
    ]
