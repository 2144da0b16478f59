"""Reading opencode's rows: `opencode.db` read-only while opencode may be writing it,
refused with one clear error when it is not a database sessionfix knows, and the legacy
`storage/` tree read as the same rows."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sessionfix.errors import InputError
from sessionfix.formats.opencode.context import model_messages
from sessionfix.formats.opencode.database import KNOWN_MIGRATION, OpencodeDatabase
from sessionfix.formats.opencode.decode import Unreadable, decode_part, decode_session
from sessionfix.formats.opencode.legacy import LegacyStorage

from .opencode_damages import COMPACTION, DESCRIPTIONS, PLAIN, STEPS, TOOL
from .opencode_loader import require_opencode_at_collection
from .opencode_sessions import SESSIONS, built_database, copy_database, damaged

require_opencode_at_collection()


@pytest.fixture(scope="module")
def database() -> Path:
    return built_database(list(DESCRIPTIONS))


def message_ids(database: Path, session: str) -> list[str]:
    with OpencodeDatabase(database) as db:
        return [message.row.id for message in db.messages(session)]


def test_sessions_and_rows_in_opencode_order(database: Path, tmp_path: Path) -> None:
    """Sessions are listed oldest first; a session's messages come by `time_created`,
    then id, whatever their ids say, and each message's parts by id."""
    with OpencodeDatabase(database) as db:
        assert [session.id for session in db.sessions()] == [PLAIN, TOOL, COMPACTION, STEPS]
        parts = [[part.id for part in message.parts] for message in db.messages(TOOL)]
    assert parts == [sorted(ids) for ids in parts]
    assert sum(map(len, parts)) == 7
    early = damaged(
        database,
        tmp_path / "early.db",
        (
            "UPDATE message SET time_created = time_created - 1500 WHERE id = ?",
            ["msg_19b7a2c00002PlainReplyMsg1"],
        ),
    )
    assert message_ids(early, PLAIN) == [
        "msg_19b7a2c00002PlainReplyMsg1",
        "msg_19b7a2c00001PlainUserMsg1x",
    ]


def test_reads_a_live_database_without_writing_it(database: Path, tmp_path: Path) -> None:
    """While another connection holds committed pages in the write-ahead log and a write
    transaction open (opencode at work), a read sees the last commit, waits for nothing,
    and leaves the database and its log byte for byte as they were: no checkpoint."""
    live = copy_database(database, tmp_path / "opencode.db")
    writer = apsw.Connection(str(live))
    writer.execute("PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE session SET title = 'committed' WHERE id = ?", (PLAIN,))
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE session SET title = 'uncommitted' WHERE id = ?", (PLAIN,))
    files = [live, Path(f"{live}-wal")]
    before = [hashlib.sha256(path.read_bytes()).hexdigest() for path in files]
    try:
        with OpencodeDatabase(live) as db:
            titles = {session.id: session.title for session in db.sessions()}
            assert len(list(db.messages(TOOL))) == 3
        assert titles[PLAIN] == "committed"
        assert [hashlib.sha256(path.read_bytes()).hexdigest() for path in files] == before
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_session_reads_as_one_snapshot(database: Path, tmp_path: Path) -> None:
    """A session's rows come from one snapshot: what opencode commits while they are
    read (a reply's parts removed) shows in the next read, not in this one."""
    live = copy_database(database, tmp_path / "opencode.db")
    reply = "msg_19b7a3000005ToolReplyMsgxx"
    with OpencodeDatabase(live) as db:
        reading = db.messages(TOOL)
        first = next(reading)
        writer = apsw.Connection(str(live))
        try:
            writer.execute("PRAGMA journal_mode=WAL")
            writer.execute("DELETE FROM part WHERE message_id = ?", (reply,))
        finally:
            writer.close()
        rest = list(reading)
        assert first.row.id == "msg_19b7a3000001ToolUserMsgxxx"
        assert [len(message.parts) for message in rest] == [3, 3]
        assert [len(message.parts) for message in db.messages(TOOL)] == [1, 3, 0]


def write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def sqlite_file(path: Path, script: str) -> Path:
    db = apsw.Connection(str(path))
    db.execute(script)
    db.close()
    return path


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (
            lambda folder, _: write_bytes(folder / "opencode.db", b"{}\n"),
            "not an opencode database",
        ),
        (
            lambda folder, _: sqlite_file(folder / "opencode.db", "CREATE TABLE t (x)"),
            "not an opencode database (no table session, message, part)",
        ),
        (
            lambda folder, source: sqlite_file(
                copy_database(source, folder / "opencode.db"), "ALTER TABLE part DROP COLUMN data"
            ),
            "table part has no column data",
        ),
        (
            lambda folder, source: damaged(
                source,
                folder / "opencode.db",
                (
                    "INSERT INTO migration (id, time_completed) VALUES (?, 0)",
                    ["20270101000000_a_newer_schema"],
                ),
            ),
            "schema newer than opencode 1.18.33's (migration 20270101000000_a_newer_schema)",
        ),
        (lambda folder, _: folder / "missing.db", "cannot read the opencode database"),
    ],
    ids=["not-sqlite", "other-database", "column-missing", "newer-schema", "missing"],
)
def test_database_it_does_not_know_is_one_clear_error(
    database: Path, tmp_path: Path, make: Any, said: str
) -> None:
    """A file that is not an opencode database, or one whose schema is not the one
    sessionfix reads, is refused with one line naming the file, and left as it was."""
    path = make(tmp_path, database)
    before = path.read_bytes() if path.exists() else None
    with pytest.raises(InputError) as raised:
        OpencodeDatabase(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: ")
    assert said in message
    assert "\n" not in message
    assert (path.read_bytes() if path.exists() else None) == before


def test_known_schema_is_opencode_1_18_33s(database: Path) -> None:
    """The newest migration sessionfix knows is the one opencode 1.18.33 wrote last."""
    db = apsw.Connection(str(database), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert db.execute("SELECT max(id) FROM migration").fetchone() == (KNOWN_MIGRATION,)
    finally:
        db.close()


def test_opencode_2_session_is_told_apart(database: Path, tmp_path: Path) -> None:
    """A session with rows of opencode 2's own tables is V2 (spec §5); the others not."""
    v2 = damaged(
        database,
        tmp_path / "v2.db",
        (
            "INSERT INTO session_message (id, session_id, type, seq, time_created, "
            "time_updated, data) VALUES ('smg_1', ?, 'user', 0, 1, 1, '{}')",
            [TOOL],
        ),
    )
    with OpencodeDatabase(v2) as db:
        assert [db.is_v2(session) for session in (PLAIN, TOOL)] == [False, True]


def legacy_tree(root: Path, names: tuple[str, ...]) -> Path:
    """The described sessions as opencode 1.1 kept them: one pretty-printed file per
    session, message and part, each with its ids."""
    storage = root / "storage"
    for name in names:
        export = json.loads((SESSIONS / f"{name}.json").read_text())
        info = export["info"]
        write_json(storage / "session" / "global" / f"{info['id']}.json", info)
        for message in export["messages"]:
            message_info = message["info"]
            write_json(
                storage / "message" / info["id"] / f"{message_info['id']}.json", message_info
            )
            for part in message["parts"]:
                write_json(storage / "part" / message_info["id"] / f"{part['id']}.json", part)
    return storage


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2))


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_legacy_tree_reads_as_the_database_does(database: Path, tmp_path: Path) -> None:
    """A session of the legacy tree reads as the rows the database holds for it: the
    same messages and parts in the same order, and the same context; the tree is left
    as it was."""
    storage = legacy_tree(tmp_path, DESCRIPTIONS)
    before = tree_digest(storage)
    legacy = LegacyStorage(storage)
    assert [session.id for session in legacy.sessions()] == [PLAIN, TOOL, COMPACTION, STEPS]
    with OpencodeDatabase(database) as db:
        for session in (PLAIN, TOOL, COMPACTION, STEPS):
            stored = list(db.messages(session))
            read = list(legacy.messages(session))
            assert [(m.row.id, [p.id for p in m.parts]) for m in read] == [
                (m.row.id, [p.id for p in m.parts]) for m in stored
            ]
            assert model_messages(decode_session(read)) == model_messages(decode_session(stored))
    assert legacy.problems == []
    assert tree_digest(storage) == before


def test_legacy_files_that_hold_no_record_are_listed_and_left_out(tmp_path: Path) -> None:
    """Empty, NUL-filled and unparsable files (a full disk or a crash while opencode 1.1
    wrote in place) are problems of the tree, not records; the rest still reads."""
    storage = legacy_tree(tmp_path, ("tool",))
    parts = storage / "part" / "msg_19b7a3000005ToolReplyMsgxx"
    empty = parts / "prt_19b7a3000006ToolReplyTextx.json"
    empty.write_bytes(b"")
    nul = parts / "prt_19b7a3000007ToolStepEnd2xx.json"
    nul.write_bytes(b"\x00" * 64)
    broken = storage / "message" / TOOL / "msg_19b7a3000001ToolUserMsgxxx.json"
    broken.write_bytes(b'{"id": "msg_')
    legacy = LegacyStorage(storage)
    messages = list(legacy.messages(TOOL))
    assert [message.row.id for message in messages] == [
        "msg_19b7a3000002ToolCallMsgxxx",
        "msg_19b7a3000005ToolReplyMsgxx",
    ]
    assert [part.id for part in messages[1].parts] == ["prt_19b7a3000005ToolStepStart2"]
    assert sorted(legacy.problems) == sorted(
        [(empty, "empty"), (nul, "filled with NUL bytes"), (broken, "not valid JSON")]
    )


def test_a_folder_that_is_no_legacy_tree_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not opencode's legacy storage"):
        LegacyStorage(tmp_path)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
PART_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["text", "tool", "compaction", "reasoning"]) | JSON,
        "state": JSON,
        "text": JSON,
        "tail_start_id": JSON,
        "callID": JSON,
    },
)


@example(b"0\x00")
@given(st.one_of(PART_FIELDS, JSON).map(lambda value: json.dumps(value).encode()) | st.binary())
def test_any_part_decodes_or_is_unreadable(data: bytes) -> None:
    """Whatever a part row holds, decoding it gives a part or says it is unreadable
    (as opencode finds it): nothing else is raised."""
    assert decoded_key("prt_x", data) == "prt_x"


def decoded_key(key: str, data: bytes) -> str:
    """The key of the part decoded from `data`, or of the row it says is unreadable."""
    try:
        return decode_part(key, data).key
    except Unreadable as unreadable:
        return unreadable.key
