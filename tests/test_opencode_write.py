"""Writing repairs into an opencode database (spec formats/opencode.md §9): row changes
made in one transaction on a database held exclusively, refused while opencode (or any
other connection) has it open, a backup of the session's rows first, and the backup put
back byte for byte. Databases are built by opencode itself (`opencode import`)."""

from __future__ import annotations

import copy
import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw
import pytest
import xxhash

from sessionfix.errors import InputError, SessionfixError
from sessionfix.formats.opencode import write
from sessionfix.formats.opencode.database import OpencodeDatabase, StoredMessage
from sessionfix.formats.opencode.liveness import DatabaseBusy, OpencodeRunning, holders
from sessionfix.formats.opencode.write import (
    DeleteMessage,
    IntegrityFailed,
    RowChange,
    SessionChanged,
    UpdateMessage,
    UpdatePart,
    check_integrity,
    list_backups,
    replace_session,
    restore_session,
    session_digest,
)
from sessionfix.read.sqlite import quoted, read_only_uri
from sessionfix.stores import StoreRefused

from .conftest import ROOT
from .opencode_damages import COMPACTION, DESCRIPTIONS, PLAIN, READ_PART, SESSIONS, STEPS, TOOL
from .opencode_loader import _Server, require_opencode_at_collection
from .opencode_sessions import built_database, copy_database, damaged

require_opencode_at_collection()

CALL = "msg_19b7a3000002ToolCallMsgxxx"
REPLY = "msg_19b7a3000005ToolReplyMsgxx"
REPLY_PARTS = (
    "prt_19b7a3000005ToolStepStart2",
    "prt_19b7a3000006ToolReplyTextx",
    "prt_19b7a3000007ToolStepEnd2xx",
)
PLAIN_PART = "prt_19b7a2c00001PlainUserText1"

Snapshot = dict[str, list[dict[str, tuple[str, str]]]]
"""Every row of every table: each value by its type and its bytes (hex), rows sorted."""


@pytest.fixture(scope="module")
def built() -> Path:
    return built_database(list(DESCRIPTIONS))


@pytest.fixture
def database(built: Path, tmp_path: Path) -> Path:
    """A copy of the built database, with event, todo and share rows for the session
    written to (opencode keeps them; `opencode import` writes none)."""
    return damaged(
        built,
        tmp_path / "opencode.db",
        ("INSERT INTO event_sequence (aggregate_id, seq) VALUES (?, 0)", [TOOL]),
        (
            "INSERT INTO event (id, aggregate_id, seq, type, data) "
            "VALUES ('evt_1', ?, 0, 'message.updated.1', '{\"id\":1}')",
            [TOOL],
        ),
        (
            "INSERT INTO todo (session_id, content, status, priority, position, "
            "time_created, time_updated) VALUES (?, 'ship it', 'pending', 'high', 0, 1, 2)",
            [TOOL],
        ),
        (
            "INSERT INTO session_share (session_id, id, secret, url, time_created, "
            "time_updated) VALUES (?, 'shr_1', 's', 'https://example.invalid', 1, 2)",
            [TOOL],
        ),
    )


def stored(path: Path, session: str) -> list[StoredMessage]:
    with OpencodeDatabase(path) as db:
        return list(db.messages(session))


def digest_of(path: Path, session: str) -> str:
    return session_digest(stored(path, session))


def snapshot(path: Path) -> Snapshot:
    db = apsw.Connection(
        read_only_uri(path), flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    try:
        tables = [
            str(name)
            for (name,) in db.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        found: Snapshot = {}
        for table in tables:
            columns = [str(row[1]) for row in db.execute(f"PRAGMA table_info({quoted(table)})")]
            values = ", ".join(f"typeof({quoted(c)}), hex({quoted(c)})" for c in columns)
            rows = [
                {column: (row[2 * k], row[2 * k + 1]) for k, column in enumerate(columns)}
                for row in db.execute(f"SELECT {values} FROM {quoted(table)}")
            ]
            found[table] = sorted(rows, key=lambda row: sorted(row.items()))
        return found
    finally:
        db.close()


def text_value(text: str | bytes) -> tuple[str, str]:
    raw = text.encode() if isinstance(text, str) else text
    return ("text", raw.hex().upper())


def with_changes(before: Snapshot, changes: Sequence[RowChange]) -> Snapshot:
    """What the database should hold after `changes`: `before` with those values set
    and those rows gone, nothing else."""
    after = copy.deepcopy(before)
    for change in changes:
        key = text_value(change.id)
        if isinstance(change, UpdatePart):
            (row,) = [row for row in after["part"] if row["id"] == key]
            row["data"] = text_value(change.data)
        elif isinstance(change, UpdateMessage):
            (row,) = [row for row in after["message"] if row["id"] == key]
            row["data"] = text_value(change.data)
            row["time_created"] = ("integer", str(change.time_created).encode().hex().upper())
        else:
            after["message"] = [row for row in after["message"] if row["id"] != key]
            after["part"] = [row for row in after["part"] if row["message_id"] != key]
    for table, rows in after.items():
        after[table] = sorted(rows, key=lambda row: sorted(row.items()))
    return after


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def repair(path: Path) -> list[RowChange]:
    """Changes of every kind to the tool session: the read's result marked compacted, the
    call's message a millisecond later (column and info), the reply removed."""
    messages = {message.row.id: message for message in stored(path, TOOL)}
    (read,) = [part for part in messages[CALL].parts if part.id == READ_PART]
    part = json.loads(read.data)
    part["state"]["time"]["compacted"] = 1767229300000
    info = json.loads(messages[CALL].row.data)
    info["time"]["created"] += 1
    return [
        UpdatePart(READ_PART, compact(part)),
        UpdateMessage(CALL, compact(info), info["time"]["created"]),
        DeleteMessage(REPLY),
    ]


def backups_beside(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if ".sessionfix-" in p.name)


def one_line(error: BaseException, path: Path) -> str:
    message = str(error)
    assert message.startswith(f"{path}"), message
    assert "\n" not in message, message
    assert "Traceback" not in message, message
    return message


# ---- the write ----------------------------------------------------------------------------


def test_changes_are_made_and_nothing_else_is_touched(database: Path) -> None:
    """Each change sets the columns it names and only those, in the session's rows
    only; a message removed takes its parts along. Every other row of every table
    (other sessions, the session row, `time_updated`, events, todos, shares) keeps its
    bytes; the text written is stored as text; the commit reaches the database file."""
    before = snapshot(database)
    changes = repair(database)
    kept = replace_session(database, TOOL, digest_of(database, TOOL), changes, backup=False)
    assert kept is None
    assert backups_beside(database) == []
    assert snapshot(database) == with_changes(before, changes)
    db = apsw.Connection(str(database))
    try:
        assert db.execute(
            "SELECT typeof(data) FROM part WHERE id = ?", (READ_PART,)
        ).fetchall() == [("text",)]
        gone = db.execute("SELECT count(*) FROM part WHERE id IN (?, ?, ?)", REPLY_PARTS).fetchone()
        assert gone == (0,)
    finally:
        db.close()
    wal = Path(f"{database}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    check_integrity(database, str(database), [])


def test_digest_is_of_the_rows_in_opencode_order(database: Path, tmp_path: Path) -> None:
    """`session_digest` is xxh3-64 over each message's id, `time_created` and `data`,
    then its parts' ids and `data`, in opencode's order; the write reads the rows in the
    same order, so a session whose message order is not its id order is written too."""
    messages = stored(database, PLAIN)
    expected = xxhash.xxh3_64()
    for message in messages:
        row = message.row
        expected.update(b"m" + row.id.encode() + b"\0" + str(row.time_created).encode() + b"\0")
        expected.update(row.data + b"\0")
        for part in message.parts:
            expected.update(b"p" + part.id.encode() + b"\0" + part.data + b"\0")
    assert session_digest(messages) == expected.hexdigest()
    (tmp_path / "early").mkdir()
    early = damaged(
        database,
        tmp_path / "early" / "opencode.db",
        ("UPDATE message SET time_created = time_created - 1500 WHERE id = ?", [REPLY]),
    )
    order = [message.row.id for message in stored(early, TOOL)]
    assert order.index(REPLY) < order.index(CALL)
    changes: list[RowChange] = [DeleteMessage(REPLY)]
    before = snapshot(early)
    replace_session(early, TOOL, digest_of(early, TOOL), changes, backup=False)
    assert snapshot(early) == with_changes(before, changes)


def test_a_session_changed_since_it_was_read_is_not_written(database: Path) -> None:
    """Rows changed between the read and the write (opencode wrote meanwhile): the write
    is refused in its transaction, nothing changes, and no backup is left."""
    expected = digest_of(database, TOOL)
    changes = repair(database)
    db = apsw.Connection(str(database))
    db.execute(
        "UPDATE part SET data = json_set(data, '$.text', 'edited') WHERE id = ?",
        ("prt_19b7a3000001ToolUserTextxx",),
    )
    db.close()
    before = snapshot(database)
    for backup in (True, False):
        with pytest.raises(SessionChanged) as raised:
            replace_session(database, TOOL, expected, changes, backup=backup)
        assert "changed since it was read; nothing changed" in one_line(raised.value, database)
        assert snapshot(database) == before
        assert backups_beside(database) == []


@pytest.mark.parametrize(
    "missing",
    [
        UpdatePart(PLAIN_PART, b'{"type":"text","text":"x"}'),
        UpdatePart("prt_none", b"{}"),
        UpdateMessage("msg_19b7a2c00001PlainUserMsg1x", b"{}", 1),
        DeleteMessage("msg_19b7a2c00002PlainReplyMsg1"),
        DeleteMessage("msg_none"),
        UpdatePart(REPLY_PARTS[1], b'{"type":"text","text":"x"}'),
    ],
    ids=[
        "part-of-another-session",
        "no-such-part",
        "message-of-another-session",
        "delete-of-another-session",
        "no-such-message",
        "part-of-a-removed-message",
    ],
)
def test_a_change_that_misses_its_row_undoes_every_change(
    database: Path, missing: RowChange
) -> None:
    """A statement that changes no row of the session (its row is another session's,
    gone, or removed by an earlier change) rolls back the changes before it too, and
    removes the backup."""
    before = snapshot(database)
    changes = [*repair(database), missing]
    with pytest.raises(SessionfixError) as raised:
        replace_session(database, TOOL, digest_of(database, TOOL), changes, backup=True)
    assert "is not one of the session's; nothing changed" in one_line(raised.value, database)
    assert snapshot(database) == before
    assert backups_beside(database) == []


@pytest.mark.parametrize(
    ("stray", "said"),
    [
        (
            "UPDATE part SET data = '{}' WHERE id = 'prt_19b7a3000001ToolUserTextxx'",
            "the rows written differ from the changes",
        ),
        (
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
            f"VALUES ('prt_stray', 'msg_gone', '{TOOL}', 1, 1, '{{}}')",
            "part prt_stray would be left without its message",
        ),
    ],
    ids=["another-row-changed", "part-without-message"],
)
def test_rows_that_do_not_read_back_as_the_changes_are_not_committed(
    database: Path, monkeypatch: pytest.MonkeyPatch, stray: str, said: str
) -> None:
    """The session's rows are read back before the commit: a row the changes do not
    name that changed, or a part left without its message (foreign keys deferred), rolls
    everything back and removes the backup."""
    made = write._apply

    def and_more(db: apsw.Connection, *args: Any) -> None:
        made(db, *args)
        db.execute("PRAGMA defer_foreign_keys = ON")
        db.execute(stray)

    monkeypatch.setattr(write, "_apply", and_more)
    before = snapshot(database)
    with pytest.raises(SessionfixError) as raised:
        replace_session(database, TOOL, digest_of(database, TOOL), repair(database), backup=True)
    assert said in one_line(raised.value, database)
    assert snapshot(database) == before
    assert backups_beside(database) == []


def test_the_database_is_held_for_the_whole_write(
    database: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the first check to the close no other connection can read or write the
    database (an opencode started meanwhile waits, then fails); after it, one can."""
    seen: list[str] = []

    def probe(name: str) -> None:
        other = apsw.Connection(str(database))
        other.set_busy_timeout(0)
        try:
            other.execute("SELECT count(*) FROM message").fetchall()
            seen.append(f"{name}: read")
        except apsw.BusyError:
            seen.append(f"{name}: locked")
        finally:
            other.close()

    monkeypatch.setattr(write, "kill_point", probe)
    replace_session(database, TOOL, digest_of(database, TOOL), repair(database), backup=True)
    points = [
        "held",
        "backup",
        "backed-up",
        "begun",
        "changed",
        "before-commit",
        "committed",
        "checkpointed",
    ]
    assert seen == [f"{name}: locked" for name in points]
    probe("after")
    assert seen[-1] == "after: read"


# ---- refusals -----------------------------------------------------------------------------


def test_an_open_connection_refuses_the_write(database: Path) -> None:
    """A connection that has read the database and is idle (as opencode is between
    turns), even a read-only one, makes the write refuse: one line, nothing changed. A
    plain `BEGIN IMMEDIATE` would not have seen it."""
    kept = replace_session(database, TOOL, digest_of(database, TOOL), repair(database), backup=True)
    assert kept is not None
    before = snapshot(database)
    expected = digest_of(database, TOOL)
    changes: list[RowChange] = [DeleteMessage(CALL)]
    for uri in (str(database), read_only_uri(database)):
        other = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_URI)
        try:
            other.execute("SELECT count(*) FROM part").fetchall()
            immediate = apsw.Connection(str(database))
            immediate.set_busy_timeout(0)
            immediate.execute("BEGIN IMMEDIATE")
            immediate.execute("ROLLBACK")
            immediate.close()
            with pytest.raises(DatabaseBusy) as raised:
                replace_session(database, TOOL, expected, changes, backup=True)
            assert "the database is in use" in one_line(raised.value, database)
            with pytest.raises(DatabaseBusy):
                restore_session(database, TOOL, None, keep_current=True)
        finally:
            other.close()
    assert snapshot(database) == before
    assert backups_beside(database) == [kept.name]


@pytest.fixture
def holding_process(database: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process with a connection to the database that has read it, idle."""
    script = (
        "import apsw, sys, time\n"
        "db = apsw.Connection(sys.argv[1])\n"
        "db.execute('PRAGMA journal_mode = WAL').fetchall()\n"
        "db.execute('SELECT count(*) FROM message').fetchall()\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(database)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        yield child
    finally:
        child.kill()
        child.wait()


def test_a_process_holding_the_database_is_named(
    database: Path, holding_process: subprocess.Popen[str]
) -> None:
    """The refusal names the processes that have the database open (Linux)."""
    before = snapshot(database)
    assert holders(database) == [holding_process.pid]
    with pytest.raises(OpencodeRunning) as raised:
        replace_session(database, TOOL, digest_of(database, TOOL), repair(database), backup=True)
    message = one_line(raised.value, database)
    assert f"pid {holding_process.pid} (python" in message
    assert message.endswith("quit it and run again; nothing changed")
    assert snapshot(database) == before
    assert backups_beside(database) == []


def test_a_running_opencode_is_refused_by_its_pid(built: Path, tmp_path: Path) -> None:
    """A real `opencode serve`, idle, on the database: the write and the restore are
    refused naming its pid, and its database is left as it was; once it has stopped,
    the same write goes through."""
    server = _Server()
    try:
        server.place(built, TOOL)
        served = server.database
        assert holders(served) == [server.process.pid]
        before = snapshot(served)
        expected = digest_of(served, TOOL)
        changes = repair(served)
        copied = copy_database(served, tmp_path / "opencode.db")
        kept = replace_session(copied, TOOL, expected, changes, backup=True)
        assert kept is not None
        backup = served.with_name(kept.name)
        backup.write_bytes(kept.read_bytes())
        assert [b.status for b in list_backups(served, TOOL)] == ["ok"]
        with pytest.raises(OpencodeRunning) as raised:
            replace_session(served, TOOL, expected, changes, backup=True)
        assert f"pid {server.process.pid} (opencode)" in one_line(raised.value, served)
        with pytest.raises(OpencodeRunning):
            restore_session(served, TOOL, None, keep_current=True)
        assert snapshot(served) == before
        assert backups_beside(served) == [backup.name]
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=10)
        assert holders(served) == []
        replace_session(served, TOOL, expected, changes, backup=True)
        assert snapshot(served) == with_changes(before, changes)
    finally:
        server.close()


def _trigger(path: Path) -> None:
    _run(path, "CREATE TRIGGER part_audit AFTER UPDATE ON part BEGIN SELECT 1; END")


def _no_cascade(path: Path) -> None:
    db = apsw.Connection(str(path))
    try:
        db.execute("PRAGMA writable_schema = ON")
        db.execute(
            "UPDATE sqlite_schema SET sql = replace(sql, 'ON DELETE CASCADE', '') "
            "WHERE name = 'part'"
        )
    finally:
        db.close()


def _other_reference(path: Path) -> None:
    _run(
        path,
        "CREATE TABLE message_note (id text PRIMARY KEY, message_id text "
        "REFERENCES message(id) ON DELETE CASCADE)",
    )


def _newer_schema(path: Path) -> None:
    _run(path, "INSERT INTO migration (id, time_completed) VALUES ('20270101000000_next', 0)")


def _hot_journal(path: Path) -> None:
    """A writer in rollback-journal mode that died mid-transaction."""
    _run(path, "PRAGMA journal_mode = DELETE")
    pid = os.fork()
    if pid == 0:
        try:
            writer = apsw.Connection(str(path))
            writer.execute("PRAGMA cache_size = 1")
            writer.execute("BEGIN IMMEDIATE")
            writer.execute("CREATE TABLE filler (data BLOB)")
            writer.execute("INSERT INTO filler VALUES (zeroblob(4000000))")
            writer.execute("UPDATE part SET time_updated = time_updated + 1")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert Path(f"{path}-journal").stat().st_size > 0


def _run(path: Path, sql: str) -> None:
    db = apsw.Connection(str(path))
    try:
        db.execute(sql).fetchall()
    finally:
        db.close()


@pytest.mark.parametrize(
    ("harm", "said"),
    [
        (_trigger, "trigger part_audit on part is not opencode's"),
        (_no_cascade, "parts do not go with their message"),
        (_other_reference, "table message_note refers to message by a foreign key"),
        (_newer_schema, "schema newer than opencode 1.18.33's"),
        (_hot_journal, "has a hot journal"),
    ],
    ids=["trigger", "no-cascade", "unknown-foreign-key", "newer-schema", "hot-journal"],
)
def test_a_database_a_write_could_harm_is_refused(database: Path, harm: Any, said: str) -> None:
    """A database the reader would not read, or one where a write could change rows
    unseen (a trigger, a foreign key sessionfix does not know, parts that would outlive
    their message), is refused for the whole database: its files stay as they are."""
    expected = digest_of(database, TOOL)
    changes = repair(database)
    harm(database)
    files = {p.name: p.read_bytes() for p in database.parent.iterdir() if p.is_file()}
    with pytest.raises(StoreRefused) as raised:
        replace_session(database, TOOL, expected, changes, backup=True)
    assert said in one_line(raised.value, database)
    after = {p.name: p.read_bytes() for p in database.parent.iterdir() if p.is_file()}
    assert {name: after.get(name) for name in files} == files
    assert set(after) - set(files) <= {"opencode.db-wal", "opencode.db-shm"}
    assert backups_beside(database) == []


def test_opencode_2_session_is_not_written(database: Path) -> None:
    db = apsw.Connection(str(database))
    db.execute(
        "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, "
        "data) VALUES ('smg_1', ?, 'user', 0, 1, 1, '{}')",
        (TOOL,),
    )
    db.close()
    before = snapshot(database)
    with pytest.raises(SessionfixError) as raised:
        replace_session(database, TOOL, digest_of(database, TOOL), repair(database), backup=True)
    assert "opencode 2's own format" in one_line(raised.value, database)
    assert snapshot(database) == before


def test_a_database_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "opencode.db"
    with pytest.raises(SessionfixError) as raised:
        replace_session(missing, TOOL, "0", [DeleteMessage(REPLY)], backup=True)
    assert "cannot read the opencode database" in one_line(raised.value, missing)
    assert not missing.exists()


# ---- backups and restore ------------------------------------------------------------------


def test_backup_holds_the_session_rows_and_restore_puts_them_back(database: Path) -> None:
    """The backup is a new file beside the database, named for the session, holding its
    session row and its message and part rows, every column as stored, in tables of
    the database's own definitions; restoring it makes every row of every table what
    it was before the write (the session row updated in place, its todos and shares
    kept), and the other sessions' rows are not touched."""
    before = snapshot(database)
    expected = digest_of(database, TOOL)
    kept = replace_session(database, TOOL, expected, repair(database), backup=True)
    assert kept == database.with_name(f"opencode.db.sessionfix-{TOOL}-1.bak")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    held = snapshot(kept)
    assert set(held) == {"session", "message", "part", "meta"}
    assert {key: held[key] for key in ("session", "message", "part")} == session_rows_of(
        before, TOOL
    )
    meta = dict(read_meta(kept))
    assert meta["session_id"] == TOOL
    assert meta["digest"] == expected
    assert (meta["sessions"], meta["messages"], meta["parts"]) == ("1", "3", "7")
    assert meta["taken"].endswith("+00:00")
    backup_schema = schema_of(kept)
    assert {table: backup_schema[table] for table in ("session", "message", "part")} == {
        table: schema_of(database)[table] for table in ("session", "message", "part")
    }
    db = apsw.Connection(str(database))
    db.execute("UPDATE session SET title = 'renamed since' WHERE id = ?", (TOOL,))
    db.close()
    assert restore_session(database, TOOL, None, keep_current=False) == kept
    assert snapshot(database) == before
    assert backups_beside(database) == [kept.name]


def session_rows_of(rows: Snapshot, session: str) -> dict[str, list[dict[str, tuple[str, str]]]]:
    ids = {row["id"] for row in rows["message"] if row["session_id"] == text_value(session)}
    return {
        "session": [row for row in rows["session"] if row["id"] == text_value(session)],
        "message": [row for row in rows["message"] if row["id"] in ids],
        "part": [row for row in rows["part"] if row["message_id"] in ids],
    }


def read_meta(path: Path) -> list[tuple[str, str]]:
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [(str(k), str(v)) for k, v in db.execute("SELECT key, value FROM meta")]
    finally:
        db.close()


def schema_of(path: Path) -> dict[str, str]:
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {
            str(name): str(sql)
            for name, sql in db.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'table'")
        }
    finally:
        db.close()


def test_restore_puts_back_a_session_removed_since(database: Path) -> None:
    """A session opencode removed after the write (its row and, by its cascades, its
    messages, parts, todos and shares) gets its row, messages and parts back."""
    before = snapshot(database)
    kept = replace_session(database, TOOL, digest_of(database, TOOL), repair(database), backup=True)
    db = apsw.Connection(str(database))
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("DELETE FROM session WHERE id = ?", (TOOL,))
    db.close()
    assert restore_session(database, TOOL, None, keep_current=True) == kept
    restored = snapshot(database)
    assert session_rows_of(restored, TOOL) == session_rows_of(before, TOOL)
    gone = {"todo", "session_share"}
    assert {t: rows for t, rows in restored.items() if t not in gone} == {
        t: rows for t, rows in before.items() if t not in gone
    }
    assert [b.path.name for b in list_backups(database, TOOL)] == [
        f"opencode.db.sessionfix-{TOOL}-2.bak",
        f"opencode.db.sessionfix-{TOOL}-1.bak",
    ]


def test_restore_keeps_the_current_rows_when_asked(database: Path) -> None:
    """With `keep_current`, the rows a restore replaces are backed up first, as a repair
    backs them up: restoring that backup by name undoes the restore."""
    changes = repair(database)
    first = replace_session(database, TOOL, digest_of(database, TOOL), changes, backup=True)
    assert first is not None
    repaired = snapshot(database)
    assert restore_session(database, TOOL, first.name, keep_current=True) == first
    second = database.with_name(f"opencode.db.sessionfix-{TOOL}-2.bak")
    assert backups_beside(database) == [first.name, second.name]
    assert session_rows_of(snapshot(second), TOOL) == session_rows_of(repaired, TOOL)
    assert restore_session(database, TOOL, None, keep_current=False) == second
    assert snapshot(database) == repaired


def test_backups_are_listed_newest_first_and_checked(database: Path) -> None:
    """`list_backups` lists the backups of a session (or all), newest first, each `ok`
    when it holds the rows it records; a damaged one is never restored, and without a
    name the newest intact one is."""
    first = replace_session(
        database, TOOL, digest_of(database, TOOL), repair(database), backup=True
    )
    plain = replace_session(
        database,
        PLAIN,
        digest_of(database, PLAIN),
        [DeleteMessage("msg_19b7a2c00002PlainReplyMsg1")],
        backup=True,
    )
    changes: list[RowChange] = [UpdatePart(READ_PART, b'{"type":"text","text":"x"}')]
    second = replace_session(database, TOOL, digest_of(database, TOOL), changes, backup=True)
    assert first is not None
    assert plain is not None
    assert second is not None
    listed = list_backups(database, TOOL)
    assert [b.path for b in listed] == [second, first]
    assert [(b.session_id, b.status) for b in listed] == [(TOOL, "ok"), (TOOL, "ok")]
    assert listed[1].rows == 1 + 3 + 7
    assert [b.path for b in list_backups(database, None)] == [second, plain, first]
    db = apsw.Connection(str(second))
    db.execute("UPDATE part SET data = data || ' ' WHERE id = ?", (READ_PART,))
    db.close()
    assert [b.status for b in list_backups(database, TOOL)] == ["damaged", "ok"]
    repaired = snapshot(database)
    with pytest.raises(SessionfixError) as raised:
        restore_session(database, TOOL, second.name, keep_current=False)
    assert "does not hold the rows it records; not restored" in one_line(raised.value, second)
    assert snapshot(database) == repaired
    assert restore_session(database, TOOL, None, keep_current=False) == first
    with pytest.raises(InputError):
        restore_session(database, TOOL, "nothing.bak", keep_current=False)
    with pytest.raises(InputError):
        restore_session(database, COMPACTION, None, keep_current=False)


def test_a_backup_never_takes_the_place_of_a_file(database: Path) -> None:
    """A file already under a backup's name (or a journal left under it) is never
    written over: the backup takes the next number."""
    taken = database.with_name(f"opencode.db.sessionfix-{TOOL}-1.bak")
    taken.write_bytes(b"not a backup")
    journal = database.with_name(f"opencode.db.sessionfix-{TOOL}-2.bak-journal")
    journal.write_bytes(b"left over")
    kept = replace_session(database, TOOL, digest_of(database, TOOL), repair(database), backup=True)
    assert kept == database.with_name(f"opencode.db.sessionfix-{TOOL}-3.bak")
    assert taken.read_bytes() == b"not a backup"
    assert journal.read_bytes() == b"left over"
    assert [(b.path, b.status) for b in list_backups(database, TOOL)] == [
        (kept, "ok"),
        (taken, "damaged"),
    ]


def test_restore_refuses_a_row_now_in_another_session(database: Path) -> None:
    """A backed-up part whose id another session now holds is not put back (ids are
    global): one line, nothing changed."""
    kept = replace_session(database, TOOL, digest_of(database, TOOL), repair(database), backup=True)
    assert kept is not None
    db = apsw.Connection(str(database))
    db.execute(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
        'VALUES (?, \'msg_19b7a2c00001PlainUserMsg1x\', ?, 1, 1, \'{"type":"text","text":""}\')',
        (REPLY_PARTS[1], PLAIN),
    )
    db.close()
    before = snapshot(database)
    with pytest.raises(SessionfixError) as raised:
        restore_session(database, TOOL, None, keep_current=True)
    message = one_line(raised.value, database)
    assert f"part {REPLY_PARTS[1]} of the backup is now in session {PLAIN}" in message
    assert snapshot(database) == before
    assert backups_beside(database) == [kept.name]


def test_check_integrity_names_the_backups(database: Path) -> None:
    """After a run's writes the whole database is checked; a failure says where the
    replaced rows are."""
    check_integrity(database, str(database), [])
    db = apsw.Connection(str(database))
    db.execute("PRAGMA foreign_keys = OFF")
    db.execute("UPDATE part SET message_id = 'msg_gone' WHERE id = ?", (PLAIN_PART,))
    db.close()
    kept = database.with_name("kept.bak")
    with pytest.raises(IntegrityFailed) as raised:
        check_integrity(database, f"{database} (session {PLAIN})", [kept])
    message = one_line(raised.value, database)
    assert "a row of part refers to no row of message" in message
    assert message.endswith(f"; the rows it replaced are in {kept}")


# ---- cut short ----------------------------------------------------------------------------

_CHILD = """
import json, resource, signal, sys
from pathlib import Path
from sessionfix.errors import SessionfixError
from sessionfix.formats.opencode.write import (
    DeleteMessage, UpdateMessage, UpdatePart, replace_session, restore_session)
job = json.loads(sys.stdin.read())
if job["limit"] is not None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (job["limit"], job["limit"]))
kinds = {"UpdatePart": UpdatePart, "UpdateMessage": UpdateMessage,
         "DeleteMessage": DeleteMessage}
path = Path(job["path"])
try:
    if job["changes"] is None:
        restore_session(path, job["session"], None, keep_current=True)
    else:
        changes = [kinds[kind](*[bytes.fromhex(v[1:]) if isinstance(v, str) and v[:1] == "#"
                   else v for v in values]) for kind, values in job["changes"]]
        replace_session(path, job["session"], job["expected"], changes, backup=job["backup"])
except SessionfixError as exc:
    print(exc)
    sys.exit(2)
"""


def in_child(
    path: Path,
    changes: Sequence[RowChange] | None,
    expected: str = "",
    *,
    kill_at: str | None = None,
    limit: int | None = None,
    backup: bool = True,
) -> subprocess.CompletedProcess[str]:
    """`replace_session` of the tool session (`restore_session` when `changes` is None)
    in a process of its own, killed at `kill_at`, its files no larger than `limit`."""
    encoded = None
    if changes is not None:
        encoded = [
            (type(c).__name__, ["#" + v.hex() if isinstance(v, bytes) else v for v in c])
            for c in changes
        ]
    job = {
        "path": str(path),
        "session": TOOL,
        "expected": expected,
        "changes": encoded,
        "limit": limit,
        "backup": backup,
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *sys.path])}
    if kill_at is not None:
        env["SESSIONFIX_KILL_AT"] = kill_at
    return subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


WRITE_POINTS = ("held", "backup", "backed-up", "begun", "changed", "before-commit")
COMMITTED_POINTS = ("committed", "checkpointed")
RESTORE_POINTS = ("restore-begun", "restore-changed")


def sqlite_checks(path: Path) -> list[Any]:
    db = apsw.Connection(str(path))
    try:
        return [
            db.execute("PRAGMA integrity_check").fetchall(),
            db.execute("PRAGMA foreign_key_check").fetchall(),
        ]
    finally:
        db.close()


@pytest.mark.parametrize("point", WRITE_POINTS + COMMITTED_POINTS)
def test_a_killed_write_leaves_the_database_before_or_after(database: Path, point: str) -> None:
    """SIGKILL at each step of a write: the database holds every row as it was (before
    the commit) or every change made (after it), and passes SQLite's checks; a backup
    cut short is listed as damaged; a write cut short can be done again."""
    changes = repair(database)
    expected = digest_of(database, TOOL)
    before = snapshot(database)
    killed = in_child(database, changes, expected, kill_at=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr + killed.stdout
    assert sqlite_checks(database) == [[("ok",)], []]
    listed = [(b.path.name, b.status) for b in list_backups(database, TOOL)]
    first = f"opencode.db.sessionfix-{TOOL}-1.bak"
    if point in COMMITTED_POINTS:
        assert snapshot(database) == with_changes(before, changes)
        assert listed == [(first, "ok")]
        return
    assert snapshot(database) == before
    if point == "held":
        assert listed == []
    else:
        assert listed == [(first, "damaged" if point == "backup" else "ok")]
    again = in_child(database, changes, expected)
    assert again.returncode == 0, again.stderr + again.stdout
    assert snapshot(database) == with_changes(before, changes)


@pytest.mark.parametrize("point", RESTORE_POINTS)
def test_a_killed_restore_leaves_the_database_as_it_was(database: Path, point: str) -> None:
    """SIGKILL in a restore's transaction: the database keeps the rows it had; the
    restore done again puts the backup back."""
    before = snapshot(database)
    replace_session(database, TOOL, digest_of(database, TOOL), repair(database), backup=True)
    repaired = snapshot(database)
    killed = in_child(database, None, kill_at=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr + killed.stdout
    assert snapshot(database) == repaired
    assert sqlite_checks(database) == [[("ok",)], []]
    assert [b.status for b in list_backups(database, TOOL)] == ["ok", "ok"]
    restore_session(database, TOOL, f"opencode.db.sessionfix-{TOOL}-1.bak", keep_current=False)
    assert snapshot(database) == before


def big_repair(path: Path) -> list[RowChange]:
    """The read's result given 200 kB of output: a write larger than a page cache."""
    (message,) = [m for m in stored(path, TOOL) if m.row.id == CALL]
    (read,) = [part for part in message.parts if part.id == READ_PART]
    part = json.loads(read.data)
    part["state"]["output"] = "line\n" * 40_000
    return [UpdatePart(READ_PART, compact(part))]


@pytest.mark.parametrize(
    ("backup", "limits"),
    [(True, (32 << 10, 36 << 10, 40 << 10)), (False, (64 << 10, 160 << 10, 1 << 30))],
    ids=["backup", "write"],
)
def test_a_full_disk_leaves_the_database(
    database: Path, tmp_path: Path, backup: bool, limits: tuple[int, ...]
) -> None:
    """Writes that fail past a file size limit (as a full disk fails them), in the
    backup or in the write itself: the write either completes or changes nothing, and
    says why on one line, never a traceback."""
    changes = repair(database) if backup else big_repair(database)
    expected = digest_of(database, TOOL)
    before = snapshot(database)
    outcomes = []
    for limit in limits:
        target = tmp_path / str(limit)
        target.mkdir()
        copied = copy_database(database, target / "opencode.db")
        done = in_child(copied, changes, expected, limit=limit, backup=backup)
        assert "Traceback" not in done.stderr, done.stderr
        if done.returncode == 0:
            assert snapshot(copied) == with_changes(before, changes)
            outcomes.append("written")
            continue
        assert done.returncode == 2, done.stderr
        lines = done.stdout.strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"{copied} (session {TOOL}): cannot write"), lines
        assert lines[0].endswith("nothing changed"), lines
        assert snapshot(copied) == before
        assert sqlite_checks(copied) == [[("ok",)], []]
        assert backups_beside(copied) == []
        outcomes.append("refused")
    assert outcomes == ["refused", "refused", "written"]


def test_every_session_of_the_database_can_be_written(database: Path) -> None:
    """Each described session takes a write that removes its last message, whatever its
    shape; the digests agree with the reader's for all of them."""
    before = snapshot(database)
    all_changes: list[RowChange] = []
    for session in (PLAIN, COMPACTION, STEPS, TOOL):
        last = stored(database, session)[-1].row.id
        changes: list[RowChange] = [DeleteMessage(last)]
        replace_session(database, session, digest_of(database, session), changes, backup=True)
        all_changes.extend(changes)
    assert snapshot(database) == with_changes(before, all_changes)
    assert len(list_backups(database, None)) == len(SESSIONS)
