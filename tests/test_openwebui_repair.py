"""Repairs of open-webui chats, proven with open-webui 0.12.4's own read path: a
database of every field case (`tests/openwebui_cases.py`) repaired in place with
`sessionfix repair --unsafe-fixes`, then loaded by open-webui beside the damaged one
(one oracle process for the run): every repaired chat is read from the current message
stored (no in-memory repair left to make), along the intended branch, with the rows
agreeing with the document; what no fix owns stays byte for byte; `restore` puts a
chat's rows back; `-o` writes a repaired copy; a database another connection holds is
not written.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Final

import apsw
import pytest
from typer.testing import CliRunner

from sessionfix.cli import app
from sessionfix.context import contexts

from .openwebui_cases import CASES, build, random_chats
from .openwebui_chats import add_chat
from .openwebui_loader import created_database, load_with_openwebui, require_openwebui_at_collection

require_openwebui_at_collection()

ENV: Final = {"NO_COLOR": "1", "COLUMNS": "200"}
INTENDED: Final = ["u1", "a1", "u2", "a2"]
UNFIXABLE: Final = (
    ("cycle", "SF105"),
    ("dangling-unlisted", "SF103"),
    ("roleless", "SF118"),
    ("rows-differ", "SF117"),
    ("rows-missing", "SF117"),
    ("tool-images", "SF401"),
    ("tool-images", "SF402"),
    ("tool-output", "SF402"),
    ("tool-unanswered", "SF402"),
)
"""What sessionfix reports and leaves: no fix can tell the right copy, role or place to
break a loop of parents (which settles the child lists and the current message), and
open-webui itself leaves unpaired calls and results out when it sends."""
UNTOUCHED: Final = (
    "clean",
    "cycle",
    "dangling-unlisted",
    "clean-rows",
    "context-summary",
    "regenerated",
    "roleless",
    "roleless-off-branch",
    "rows-differ",
    "rows-missing",
    "summary-fits",
    "tool-output",
    "tool-images",
    "tool-paired",
    "tool-unanswered",
)


def run(*args: object) -> Any:
    return CliRunner().invoke(app, [str(arg) for arg in args], env=ENV)


def rows(database: Path, chat: str) -> dict[str, list[tuple[Any, ...]]]:
    """A chat's rows of every table that holds them, every column as stored."""
    with sqlite3.connect(database) as db:
        found = {
            "chat": db.execute("SELECT * FROM chat WHERE id = ?", (chat,)).fetchall(),
            "chat_message": db.execute(
                "SELECT * FROM chat_message WHERE chat_id = ? ORDER BY id", (chat,)
            ).fetchall(),
        }
        if db.execute("SELECT 1 FROM sqlite_schema WHERE name = 'chat_summary'").fetchone():
            found["chat_summary"] = db.execute(
                "SELECT * FROM chat_summary WHERE chat_id = ?", (chat,)
            ).fetchall()
    db.close()
    return found


@pytest.fixture(scope="module")
def databases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The damaged database, and a copy of it repaired in place."""
    folder = tmp_path_factory.mktemp("open-webui-repair")
    (folder / "damaged").mkdir()
    (folder / "work").mkdir()
    damaged = build(created_database(folder / "damaged" / "webui.db"))
    repaired = folder / "work" / "webui.db"
    shutil.copyfile(damaged, repaired)
    result = run("repair", "--in-place", "--unsafe-fixes", repaired)
    assert result.exit_code == 1, result.output  # what no fix owns is left
    assert f"{len(UNFIXABLE)} remaining" in result.output
    return damaged, repaired


@pytest.fixture(scope="module")
def loads(databases: tuple[Path, Path]) -> dict[Path, dict[str, dict[str, Any]]]:
    return load_with_openwebui([(databases[0], None), (databases[1], None)])


def test_open_webui_reads_each_repaired_chat_as_intended(
    databases: tuple[Path, Path], loads: dict[Path, dict[str, dict[str, Any]]]
) -> None:
    damaged, repaired = databases
    for chat in CASES:
        after = loads[repaired][chat]
        if chat in ("cycle", "dangling-unlisted"):
            assert after == loads[damaged][chat]
            continue
        assert after["current_id"] == after["stored_current_id"] == after["current_message_id"]
        assert after["branch"] == INTENDED, chat
        if chat in UNTOUCHED:
            assert after == loads[damaged][chat], chat


def test_the_fixes_are_made_and_only_the_unfixable_is_left(databases: tuple[Path, Path]) -> None:
    damaged, repaired = databases
    before = json.loads(run("check", "--output-format", "json", damaged).stdout)
    after = json.loads(run("check", "--output-format", "json", repaired).stdout)
    assert {d["record"]["session"] for d in before if d["fix"]} == set(CASES) - set(UNTOUCHED)
    assert sorted((d["record"]["session"], d["code"]) for d in after) == sorted(UNFIXABLE)


def test_only_the_repaired_chats_change(databases: tuple[Path, Path]) -> None:
    """Chats no fix touched keep every row byte for byte; a repaired chat's rows a fix
    does not own too (`updated_at` included), and its filter's row goes only with SF506."""
    damaged, repaired = databases
    for chat in UNTOUCHED:
        assert rows(repaired, chat) == rows(damaged, chat), chat
    for chat in set(CASES) - set(UNTOUCHED):
        before, after = rows(damaged, chat), rows(repaired, chat)
        assert [row[4] for row in after["chat"]] == [row[4] for row in before["chat"]]
        assert len(after["chat_message"]) == len(before["chat_message"])
    assert rows(repaired, "summary-past-branch")["chat_summary"] == []
    assert rows(repaired, "summary-fits")["chat_summary"] != []


def test_restore_puts_a_chats_rows_back(databases: tuple[Path, Path], tmp_path: Path) -> None:
    damaged, repaired = databases
    copy = tmp_path / "webui.db"
    for path in repaired.parent.iterdir():
        shutil.copyfile(path, tmp_path / path.name)
    listed = run("restore", "--list", copy)
    assert "dangling-adoptable" in listed.output, listed.output
    for chat in ("dangling-adoptable", "summary-predates", "current-dangling"):
        result = run("restore", copy, "--session", chat)
        assert result.exit_code == 0, result.output
        assert rows(copy, chat) == rows(damaged, chat)
    assert rows(copy, "cycle") == rows(repaired, "cycle")


def test_o_writes_a_repaired_copy(databases: tuple[Path, Path], tmp_path: Path) -> None:
    damaged, repaired = databases
    source = tmp_path / "source" / "webui.db"
    source.parent.mkdir()
    shutil.copyfile(damaged, source)
    before = source.read_bytes()
    output = tmp_path / "repaired.db"
    result = run("repair", "-o", output, "--session", "current-dangling", source)
    assert result.exit_code == 0, result.output
    assert source.read_bytes() == before
    assert [path.name for path in source.parent.iterdir()] == ["webui.db"]
    assert rows(output, "current-dangling") == rows(repaired, "current-dangling")
    assert rows(output, "cycle") == rows(damaged, "cycle")


def test_a_database_another_connection_holds_is_not_written(
    databases: tuple[Path, Path], tmp_path: Path
) -> None:
    """A running open-webui keeps connections open: the write is refused, one line,
    exit 2, nothing changed and no backup left."""
    damaged, _ = databases
    target = tmp_path / "webui.db"
    shutil.copyfile(damaged, target)
    holder = apsw.Connection(str(target))  # the SQLite sessionfix writes with: one lock table
    holder.execute("PRAGMA journal_mode = WAL").fetchall()  # as open-webui opens it
    before = target.read_bytes()
    try:
        holder.execute("SELECT count(*) FROM chat").fetchall()
        result = run("repair", "--in-place", "--session", "current-dangling", target)
    finally:
        holder.close()
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert target.read_bytes() == before
    assert not [path for path in tmp_path.iterdir() if "sessionfix" in path.name]


RANDOM_SEED: Final = 32
RANDOM_CHATS: Final = 20


def test_random_chat_trees_read_and_repaired_as_open_webui_reads_them(tmp_path: Path) -> None:
    """Twenty chat trees damaged at random, in one database: sessionfix reads each as
    open-webui does (what `context` counts is what it sends); after `repair` with its
    safe fixes, open-webui sends the same messages from the same current message; after
    `repair --unsafe-fixes`, it reads every chat but those with a loop of parents from
    the current message stored, with no repair of its own left to make; no fix is left
    and no message is lost."""
    chats = random_chats(RANDOM_SEED, RANDOM_CHATS)
    damaged = created_database(tmp_path / "webui.db")
    for chat, (messages, current, with_rows) in chats.items():
        add_chat(damaged, chat, messages, current, rows=with_rows)
    repaired = {}
    for name, options in (("safe", ()), ("unsafe", ("--unsafe-fixes",))):
        (tmp_path / name).mkdir()
        repaired[name] = tmp_path / name / "webui.db"
        shutil.copyfile(damaged, repaired[name])
        result = run("repair", "--in-place", *options, repaired[name])
        assert result.exit_code in (0, 1), result.output
    loads = load_with_openwebui([(damaged, None), *((path, None) for path in repaired.values())])
    before, safe, fixed = loads[damaged], loads[repaired["safe"]], loads[repaired["unsafe"]]
    counted = {
        found.filename.rsplit(":", 1)[-1]: found.messages for found, _ in contexts([damaged])
    }
    left = json.loads(run("check", "--output-format", "json", repaired["unsafe"]).stdout)
    assert not [d for d in left if d["fix"]], left
    looped = {d["record"]["session"] for d in left if d["code"] == "SF105"}
    for chat in chats:
        assert counted[chat] == len(before[chat]["payload"]), chat
        assert safe[chat]["payload"] == before[chat]["payload"], chat
        assert safe[chat]["current_id"] == before[chat]["current_id"], chat
        if chat not in looped:
            assert fixed[chat]["stored_current_id"] == fixed[chat]["current_id"], chat
        kept = rows(repaired["unsafe"], chat)["chat_message"]
        assert len(kept) == len(rows(damaged, chat)["chat_message"]), chat
        with sqlite3.connect(repaired["unsafe"]) as db:
            (document,) = db.execute("SELECT chat FROM chat WHERE id = ?", (chat,)).fetchone()
        db.close()
        assert set(json.loads(document)["history"]["messages"]) == set(chats[chat][0]), chat
