"""open-webui's database read as a store, without open-webui itself: where it is found,
what a database it cannot read gives, and (hypothesis) that safe fixes of any chat tree
only store what open-webui computes anyway."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Final

import apsw
import msgspec
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sessionfix import Settings, check_file
from sessionfix.cli import app
from sessionfix.diagnostics import Applicability
from sessionfix.formats.openwebui import session_roots
from sessionfix.formats.openwebui.adapter import chat_of, chat_payload, chat_reading
from sessionfix.formats.openwebui.database import MessageRow, StoredChat
from sessionfix.formats.openwebui.history import completed_children, mended_children
from sessionfix.formats.openwebui.store import WebuiStore
from sessionfix.formats.openwebui.transcript import ENVELOPE, lines
from sessionfix.repair.targets import repair_to
from sessionfix.stores import transcript_of

from .openwebui_chats import add_summary

ENV: Final = {"NO_COLOR": "1", "COLUMNS": "200"}
SCHEMA: Final = (
    "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)",
    "CREATE TABLE chat (id VARCHAR NOT NULL PRIMARY KEY, user_id VARCHAR, title TEXT,"
    " created_at BIGINT, updated_at BIGINT, chat JSON, meta JSON DEFAULT '{}' NOT NULL,"
    " current_message_id TEXT)",
    "CREATE TABLE chat_message (id TEXT NOT NULL PRIMARY KEY, chat_id TEXT NOT NULL,"
    " user_id TEXT, role TEXT NOT NULL, parent_id TEXT, content JSON, output JSON,"
    " model_id TEXT, files JSON, usage JSON, created_at BIGINT, updated_at BIGINT,"
    " context_summary TEXT, meta JSON,"
    " FOREIGN KEY(chat_id) REFERENCES chat (id) ON DELETE CASCADE)",
)
"""The columns of open-webui's schema a chat is read from (spec formats/open-webui.md §2)."""


def run(*args: object) -> Any:
    return CliRunner().invoke(app, [str(arg) for arg in args], env=ENV)


def test_the_database_is_found_where_open_webuis_variables_put_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert session_roots({}, home) == []
    assert session_roots({"DATA_DIR": str(tmp_path / "data")}, home) == [
        tmp_path / "data" / "webui.db"
    ]
    url = {"DATABASE_URL": f"sqlite:///{tmp_path}/other.db", "DATA_DIR": str(tmp_path)}
    assert session_roots(url, home) == [tmp_path / "other.db"]
    assert session_roots({"DATABASE_URL": "postgresql://u@h/db"}, home) == []


def _database(path: Path, *chats: tuple[str, bytes | None]) -> Path:
    with sqlite3.connect(path) as db:
        for statement in SCHEMA:
            db.execute(statement)
        db.execute("INSERT INTO alembic_version VALUES ('0bd252b206fb')")
        for number, (chat_id, document) in enumerate(chats):
            db.execute(
                "INSERT INTO chat (id, title, created_at, chat) VALUES (?, ?, ?, ?)",
                (chat_id, chat_id, number, document),
            )
    db.close()
    return path


def test_chats_open_webui_cannot_read_are_one_finding_each(tmp_path: Path) -> None:
    """A document that is not JSON, NULL, a JSON value that is no object, messages that
    are no objects: no traceback, no change; each is said once or read as empty."""
    database = _database(
        tmp_path / "webui.db",
        ("cut", b'{"history": {"messages": {"u1": {"id": "u1"'),
        ("null", None),
        ("number", b"7"),
        (
            "odd",
            json.dumps({"history": {"currentId": 5, "messages": {"u1": 3, "u2": []}}}).encode(),
        ),
    )
    before = database.read_bytes()
    result = run("check", "--output-format", "json", database)
    assert result.exit_code == 0, result.output  # information only
    found = sorted((d["record"]["session"], d["code"]) for d in json.loads(result.stdout))
    assert found == [("cut", "SF113"), ("null", "SF113"), ("number", "SF113")]
    assert run("repair", "--in-place", database).exit_code == 0
    assert database.read_bytes() == before
    assert not [path for path in tmp_path.iterdir() if "sessionfix" in path.name]


def test_text_that_is_not_utf8_makes_a_chat_unread_not_the_database(tmp_path: Path) -> None:
    """A chat id, a row or a current message whose bytes are not UTF-8 (which open-webui's
    own reads fail on) is one finding for that chat, the others read; nothing written."""
    chain = {
        "u1": {"id": "u1", "parentId": None, "childrenIds": [], "role": "user", "content": "hi"}
    }
    document = orjson.dumps({"history": {"currentId": "u1", "messages": chain}})
    database = _database(
        tmp_path / "webui.db",
        ("good", document),
        ("bad-id", document),
        ("bad-row", document),
        ("bad-current", document),
    )
    with sqlite3.connect(database) as db:
        db.execute("UPDATE chat SET id = CAST(X'6261642dff' AS TEXT) WHERE id = 'bad-id'")
        db.execute(
            "UPDATE chat SET current_message_id = CAST(X'75ff' AS TEXT) WHERE id = 'bad-current'"
        )
        db.execute(
            "INSERT INTO chat_message (id, chat_id, role, parent_id, content) VALUES"
            " ('bad-row-u1', 'bad-row', 'user', NULL, CAST(X'2268ff22' AS TEXT))"
        )
    db.close()
    before = database.read_bytes()
    for command in ("check", "context"):
        result = run(command, "--output-format", "json", database)
        assert result.exit_code == 0, result.output
    found = json.loads(run("check", "--output-format", "json", database).stdout)
    assert sorted((d["record"]["session"], d["code"]) for d in found) == [
        ("bad-\\xff", "SF113"),
        ("bad-current", "SF113"),
        ("bad-row", "SF113"),
    ]
    assert all("not UTF-8" in d["message"] for d in found)
    assert run("repair", "--in-place", "--unsafe-fixes", database).exit_code == 0
    assert database.read_bytes() == before


def test_documents_open_webuis_codec_reads_are_read(tmp_path: Path) -> None:
    """open-webui reads a document orjson refuses with Python's `json` (its codec's
    fallback): a `NaN` an older open-webui wrote, a lone surrogate escape (here beside an
    integer beyond 64 bits, which only Python's `json` keeps). Such a chat is read, its
    rows agree with it, its real finding is found (observed with open-webui 0.12.4: both
    load in full); the one whose text is not Unicode is not written."""
    messages = {
        "u1": {"id": "u1", "parentId": None, "childrenIds": [], "role": "user", "content": "hi"},
        "a1": {"id": "a1", "parentId": "u1", "childrenIds": [], "role": "assistant"},
    }
    text = json.dumps({"history": {"currentId": "a1", "messages": messages}})
    nan = text.replace('"role": "assistant"', '"role": "assistant", "usage": {"tps": NaN}')
    surrogate = text.replace(
        '"role": "assistant"',
        '"role": "assistant", "content": "ok \\ud83d", "usage": {"n": 1000000000000000000000}',
    )
    database = _database(
        tmp_path / "webui.db", ("nan", nan.encode()), ("surrogate", surrogate.encode())
    )
    with sqlite3.connect(database) as db:
        for chat in ("nan", "surrogate"):
            for key, content in (
                ("u1", '"hi"'),
                ("a1", '"ok \\ud83d"' if chat == "surrogate" else None),
            ):
                db.execute(
                    "INSERT INTO chat_message (id, chat_id, role, parent_id, content)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (
                        f"{chat}-{key}",
                        chat,
                        messages[key]["role"],
                        messages[key]["parentId"],
                        content,
                    ),
                )
    db.close()
    found = json.loads(run("check", "--output-format", "json", database).stdout)
    assert sorted(
        (d["record"]["session"], d["record"]["record_key"], d["code"]) for d in found
    ) == [
        ("nan", "u1", "SF115"),
        ("surrogate", "u1", "SF115"),
    ]
    before = database.read_bytes()
    result = run("repair", "--in-place", "--session", "surrogate", database)
    assert result.exit_code == 2, result.output
    assert "not valid Unicode" in result.stderr
    assert database.read_bytes() == before
    assert run("repair", "--in-place", "--session", "nan", database).exit_code == 0
    assert (
        json.loads(run("check", "--output-format", "json", database).stdout)[0]["record"]["session"]
        == "surrogate"
    )


def test_a_database_another_program_is_writing_is_said_to_be_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollback-journal database another connection holds for a write cannot be read
    until it lets go: said as such, in one line, exit 2 (not "not an open-webui
    database"), nothing changed."""
    monkeypatch.setattr("sessionfix.read.sqlite.READ_BUSY_MS", 0)
    database = _database(tmp_path / "webui.db", ("chat-1", b"{}"))
    before = database.read_bytes()
    holder = apsw.Connection(str(database))
    try:
        holder.execute("BEGIN EXCLUSIVE; UPDATE chat SET title = 'being written'")
        for command in (("check",), ("repair", "--in-place")):
            result = run(*command, database)
            assert result.exit_code == 2, result.output
            said = [line for line in result.stderr.splitlines() if line.strip()]
            assert len(said) == 1, said
            assert "cannot read the open-webui database (database is locked)" in said[0], said
        holder.execute("ROLLBACK")
    finally:
        holder.close()
    assert database.read_bytes() == before


def test_a_locked_database_is_waited_for_once_not_once_per_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Telling a database's kind asks every format in turn: a writer holding it locked
    must not make each of them wait the full read timeout (it took a minute at 5 s)."""
    monkeypatch.setattr("sessionfix.read.sqlite.READ_BUSY_MS", 2000)
    database = _database(tmp_path / "webui.db", ("chat-1", b"{}"))
    holder = apsw.Connection(str(database))
    try:
        holder.execute("BEGIN EXCLUSIVE; UPDATE chat SET title = 'being written'")
        started = time.monotonic()
        result = run("check", database)
        waited = time.monotonic() - started
        holder.execute("ROLLBACK")
    finally:
        holder.close()
    assert result.exit_code == 2, result.output
    assert "database is locked" in result.stderr
    assert waited < 15, f"{waited:.1f} s: a full wait for each format asked"


def test_a_compression_summary_of_a_chat_not_in_the_database_is_dead_data(tmp_path: Path) -> None:
    """The compression filter's `chat_summary` row of a chat that was deleted (or was a
    temporary chat) is information about that chat id (spec §6); nothing changed."""
    first = {"id": "u1", "role": "user", "parentId": None, "childrenIds": [], "content": "hi"}
    plain = orjson.dumps({"history": {"currentId": "u1", "messages": {"u1": first}}})
    database = _database(tmp_path / "webui.db", ("kept", plain))
    add_summary(database, "kept", 1, "2026-05-28 20:30:00")
    add_summary(database, "deleted", 7, "2026-05-28 20:30:00")
    before = database.read_bytes()
    result = run("check", "--output-format", "json", database)
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert [(d["record"]["session"], d["code"], d["severity"]) for d in found] == [
        ("deleted", "SF113", "info")
    ]
    assert "chat_summary row" in found[0]["message"]
    assert run("repair", "--in-place", "--unsafe-fixes", database).exit_code == 0
    assert database.read_bytes() == before


def test_a_database_that_is_not_open_webuis_is_one_line(tmp_path: Path) -> None:
    named = tmp_path / "webui.db"
    with sqlite3.connect(named) as db:
        db.execute("CREATE TABLE chat (id TEXT)")
    db.close()
    result = run("check", named)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if "error" in line]) == 1


def test_a_schema_newer_than_the_one_sessionfix_knows_is_refused(tmp_path: Path) -> None:
    """A database a newer open-webui migrated (an alembic revision 0.12.4 does not have)
    may keep chats otherwise: every command says so in one line, exits 2 and changes
    nothing; an older revision is read by column name."""
    first = {"id": "u1", "role": "user", "parentId": None, "childrenIds": [], "content": "hi"}
    plain = orjson.dumps({"history": {"currentId": "u1", "messages": {"u1": first}}})
    older = _database(tmp_path / "older.db", ("chat-1", plain))
    with sqlite3.connect(older) as db:
        db.execute("UPDATE alembic_version SET version_num = '8452d01d26d7'")
    db.close()
    assert run("check", older).exit_code == 0
    newer = _database(tmp_path / "webui.db", ("chat-1", plain))
    with sqlite3.connect(newer) as db:
        db.execute("UPDATE alembic_version SET version_num = 'f00dfeed1234'")
    db.close()
    before = newer.read_bytes()
    for command in (("check",), ("repair", "--in-place", "--unsafe-fixes"), ("context",)):
        result = run(*command, newer)
        assert result.exit_code == 2, (command, result.output)
        assert "Traceback" not in result.output
        said = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(said) == 1, said
        assert "alembic revision f00dfeed1234" in said[0], said
    assert newer.read_bytes() == before
    assert not [path for path in tmp_path.iterdir() if "sessionfix" in path.name]


IDS: Final = ("u1", "a1", "u2", "a2", "b2")


ODD_IDS: Final = ({"id": "u2"}, ["u2"], 5, None)
"""What a child list holds that is no id (open-webui skips it when it walks down)."""


@st.composite
def chats(draw: st.DrawFn) -> StoredChat:
    """A chat tree of up to five messages, damaged at will: parents naming anything,
    child lists listing anything, a current message anywhere, rows or none."""
    count = draw(st.integers(1, len(IDS)))
    ids = IDS[:count]
    names = st.sampled_from((*ids, "gone"))
    messages = {}
    for at, key in enumerate(ids):
        message: dict[str, Any] = {
            "id": key,
            "parentId": draw(st.one_of(st.none(), names)),
            "childrenIds": draw(st.lists(st.one_of(names, st.sampled_from(ODD_IDS)), max_size=3)),
            "content": f"text of {key}",
            "timestamp": 1_780_000_000 + at,
        }
        if draw(st.booleans()) or at == 0:
            message["role"] = "user" if key.startswith("u") else "assistant"
        messages[key] = message
    current = draw(st.one_of(st.none(), names))
    document = orjson.dumps({"history": {"currentId": current, "messages": messages}})
    rows: tuple[MessageRow, ...] = ()
    if draw(st.booleans()):
        rows = tuple(
            MessageRow(
                key,
                (
                    message.get("role", "user"),
                    message["parentId"],
                    orjson.dumps(message["content"]).decode(),
                    None,
                    None,
                    None,
                    None,
                    message["timestamp"],
                    None,
                    None,
                ),
            )
            for key, message in messages.items()
        )
    return StoredChat("chat-1", document, current, rows, None)


def _payload(path: Path) -> list[Any]:
    with open(path, "rb") as handle:
        envelopes = [ENVELOPE.decode(line) for line in handle]
    read = chat_reading(chat_of(list(enumerate(envelopes))))
    return [read.current, msgspec.to_builtins(chat_payload(read))]


def _chat(current: str | None, messages: dict[str, dict[str, Any]]) -> StoredChat:
    history = {"currentId": current, "messages": messages}
    return StoredChat("chat-1", orjson.dumps({"history": history}), current, (), None)


LISTS_ITSELF: Final = {"id": "u1", "parentId": None, "childrenIds": ["u1"], "role": "user"}
"""A message listing itself as its child: no leaf to open-webui, which picks the newest
childless message when the current one is not one it keeps."""
A1: Final = {"id": "a1", "parentId": "u1", "childrenIds": [], "role": "assistant", "timestamp": 2}


def test_wide_child_lists_are_read_in_linear_time() -> None:
    """A message with tens of thousands of children (all a chat's messages on one parent,
    as a client writing no parent links leaves it) has its child list completed and
    mended in linear time (a search of the list per child took seconds, then minutes)."""
    count = 40_000
    messages: dict[str, dict[str, Any]] = {"r": {"id": "r", "childrenIds": []}}
    for number in range(count):
        messages[f"m{number}"] = {"id": f"m{number}", "parentId": "r"}
    started = time.perf_counter()
    children = completed_children(messages)["r"]
    mended = mended_children(children[::-2], children)
    assert time.perf_counter() - started < 2.0
    assert len(children) == len(mended) == count


@settings(max_examples=40, database=None)
@given(chats())
@example(_chat(None, {"u1": LISTS_ITSELF}))
@example(_chat("u1", {"u1": {**LISTS_ITSELF, "childrenIds": [{"id": "a1"}, "a1"]}, "a1": A1}))
@example(_chat("a1", {"u1": LISTS_ITSELF, "a1": {"id": "a1", "parentId": None, "timestamp": 2}}))
@example(
    _chat(
        "a1",
        {
            "u1": LISTS_ITSELF,
            "a1": {"id": "a1", "parentId": "a2", "role": "assistant", "timestamp": 2},
            "a2": {"id": "a2", "parentId": "a1", "role": "assistant", "timestamp": 3},
        },
    )
)
def test_safe_fixes_store_what_open_webui_computes(tmp_path_factory: Any, chat: StoredChat) -> None:
    """Safe fixes never change what open-webui sends, nor from which message it reads
    the chat; after them, no safe fix of a stored child list or current message is left
    (but in a loop of parents, which only an unsafe fix breaks), and the rows are as
    they were."""
    folder = tmp_path_factory.mktemp("chat")
    transcript = folder / "chat.jsonl"
    transcript.write_bytes(b"".join(found.line for found in lines(chat)))
    options = Settings(quiescence=0.0)
    before = check_file(transcript, options)
    repaired = folder / "repaired.jsonl"
    repair_to(transcript, repaired, options)
    after = check_file(repaired, options)
    assert _payload(repaired) == _payload(transcript)
    if not {d.code for d in before} & {"SF105"}:
        safe_left = [
            d
            for d in after
            if d.code in ("SF115", "SF116") and d.fix and d.fix.applicability is Applicability.SAFE
        ]
        assert not safe_left, safe_left
    for old, new in zip(
        transcript.read_bytes().splitlines(), repaired.read_bytes().splitlines(), strict=True
    ):
        assert orjson.loads(old).get("row") == orjson.loads(new).get("row")


def _written(folder: Path, chat: StoredChat) -> Path:
    """A database holding `chat` as open-webui stores it: its document and rows."""
    database = _database(folder / "webui.db", (chat.id, chat.document))
    with sqlite3.connect(database) as db:
        db.execute("UPDATE chat SET current_message_id = ?", (chat.current_message_id,))
        for row in chat.rows:
            role, parent, content, *_, created, _, _ = row.values
            db.execute(
                "INSERT INTO chat_message (id, chat_id, role, parent_id, content, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (f"{chat.id}-{row.id}", chat.id, role, parent, content, created),
            )
    db.close()
    return database


@settings(max_examples=15, database=None)
@given(chats())
def test_a_repair_writes_the_chat_the_repaired_transcript_holds(
    tmp_path_factory: Any, chat: StoredChat
) -> None:
    """Whatever the damage, the chat read back after `repair --in-place --unsafe-fixes`
    is the repaired transcript the same fixes make of the chat as read."""
    folder = tmp_path_factory.mktemp("written")
    database = _written(folder, chat)
    with WebuiStore(database) as store:
        session = store.sessions()[0]
        with transcript_of(store, session) as transcript:
            expected = folder / "expected.jsonl"
            repair_to(transcript.path, expected, Settings(quiescence=0.0, unsafe_fixes=True))
            wanted = expected.read_bytes()
    result = run("repair", "--in-place", "--unsafe-fixes", database)
    assert result.exit_code in (0, 1), result.output
    with WebuiStore(database) as store, transcript_of(store, store.sessions()[0]) as transcript:
        assert transcript.path.read_bytes() == wanted
