"""opencode databases attacked through the CLI: files that are no opencode database or
a damaged one, rows opencode wrote and then damaged in hostile ways. Bad input is one
line and exit 2 with no file changed; a finding is true on what opencode itself does
(checked with opencode 1.18.33 where it decides); a repair changes only the rows its
fixes own and leaves no fixable finding.

Databases are written by opencode itself (`tests/opencode_sessions.py`), built once for
the module and damaged in copies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import apsw
import pytest
from typer.testing import CliRunner

from sessionfix.cli import app
from sessionfix.read.sqlite import quoted, read_only_uri

from .opencode_damages import DESCRIPTIONS, PLAIN, READ_PART
from .opencode_loader import require_opencode_at_collection
from .opencode_sessions import built_database, copy_database, damaged

require_opencode_at_collection()

ENV: Final = {"NO_COLOR": "1", "COLUMNS": "200"}
STALE: Final = "ses_19b7a3c00000StaleReadWrite"
STALE_READ: Final = "prt_19b7a3c0002R1xxxxxxxxxxxxx"
Statement = tuple[str, Sequence[Any]]
Rows = dict[tuple[str, str], tuple[Any, ...]]
"""Every row of `session`, `message` and `part` by table and id: each value by its type
and its bytes (hex)."""


@pytest.fixture(scope="module")
def database() -> Path:
    """The described sessions and the stale read, written by opencode; only copied."""
    return built_database([*DESCRIPTIONS, "stale"])


def files(folder: Path) -> dict[str, bytes]:
    """Every file under a folder, less what SQLite's WAL mode makes for any reader
    (`sqlite3 -readonly` too): the `-shm` index and an empty `-wal`."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
        and not path.name.endswith("-shm")
        and not (path.name.endswith("-wal") and path.stat().st_size == 0)
    }


def run(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV)


def rows(path: Path) -> Rows:
    db = apsw.Connection(
        read_only_uri(path), flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    try:
        found: Rows = {}
        for table in ("session", "message", "part"):
            columns = [str(row[1]) for row in db.execute(f"PRAGMA table_info({table})")]
            values = ", ".join(f"typeof({quoted(c)}), hex({quoted(c)})" for c in columns)
            for row in db.execute(f"SELECT hex(id), {values} FROM {table}"):
                found[table, str(row[0])] = tuple(row[1:])
        return found
    finally:
        db.close()


def folder(root: Path, name: str) -> Path:
    """Where a database of its own goes: `opencode.db` in a new folder `name`."""
    (root / name).mkdir()
    return root / name / "opencode.db"


def refused(result: Any, said: str) -> str:
    """The one error line of a command that could not do its work (exit 2)."""
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr
    assert said in errors[0], errors[0]
    return str(errors[0])


# ---- a database that fails SQLite's own checks ------------------------------------------------


def corrupt_index(path: Path, index: str) -> Path:
    """Overwrite the pages of `index`, one no session is read through: every read of a
    session succeeds, and `PRAGMA integrity_check` fails."""
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        pages = [
            int(n) for (n,) in db.execute("SELECT pageno FROM dbstat WHERE name = ?", (index,))
        ]
        size = int(db.execute("PRAGMA page_size").fetchone()[0])
    finally:
        db.close()
    assert pages
    with open(path, "r+b") as handle:
        for page in pages:
            handle.seek((page - 1) * size + 8)
            handle.write(b"A" * (size - 8))
    return path


def delete_messages(path: Path, session: str) -> Path:
    """Delete a session's messages as the sqlite3 shell does, enforcing no foreign key:
    their parts stay."""
    db = apsw.Connection(str(path))
    try:
        db.execute("DELETE FROM message WHERE session_id = ?", (session,))
    finally:
        db.close()
    return path


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (
            lambda path: corrupt_index(path, "session_workspace_idx"),
            "the database fails SQLite's checks (",
        ),
        (
            lambda path: delete_messages(path, PLAIN),
            "the database fails SQLite's checks (a row of part refers to no row of message)",
        ),
    ],
    ids=["corrupt-page", "parts-without-their-message"],
)
def test_a_database_failing_sqlites_checks_is_not_written(
    database: Path, tmp_path: Path, damage: Any, said: str
) -> None:
    """A database whose pages are damaged elsewhere (opencode's "failed to run data
    migrations", #30157), or whose parts outlive their message (a session deleted with
    the sqlite3 shell, which enforces no foreign key): read as it is, but neither
    repaired nor restored (spec §6: integrity_check not ok, no writes), rather than
    written and then found broken."""
    fresh, restorable = (copy_database(database, folder(tmp_path, name)) for name in ("a", "b"))
    assert run("repair", "--in-place", "--no-progress", restorable).exit_code == 0
    for path in (damage(fresh), damage(restorable)):
        check = run("check", "--no-progress", "--output-format", "json", path)
        assert check.exit_code == 0, check.stderr
        assert "SF301" in check.stdout or path == restorable
    for path, command in (
        (fresh, ("repair", "--in-place", "--no-progress", fresh)),
        (restorable, ("restore", "--session", STALE, restorable)),
    ):
        before, stored = files(path.parent), rows(path)
        error = refused(run(*command), said)
        assert error.endswith("nothing changed"), error
        assert files(path.parent) == before
        assert rows(path) == stored


# ---- row text only JSON.parse reads ---------------------------------------------------------

WRITE_END: Final = 1767229403200
"""The end of the write that supersedes the stale read: what its mark is set to."""
MARK: Final = b',"compacted":1767229403200'
LONE_SURROGATE: Final[Statement] = (
    "UPDATE part SET data = replace(data, 'old line 7 of notes', ?) WHERE id = ?",
    ["old line 7 of notes \\ud83d", STALE_READ],
)
"""Half an emoji at the end of a line of the read's output, as `JSON.stringify` writes a
string cut between the two UTF-16 units of a character (opencode cuts long outputs so)."""


def data_of(path: Path, table: str, row: str) -> bytes:
    db = apsw.Connection(
        read_only_uri(path), flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    try:
        (data,) = db.execute(
            f"SELECT CAST(data AS BLOB) FROM {quoted(table)} WHERE id = ?", (row,)
        ).fetchone()
        return bytes(data)
    finally:
        db.close()


def findings(path: Path, *args: str) -> list[dict[str, Any]]:
    result = run("check", "--no-progress", "--output-format", "json", *args, path)
    assert result.exit_code in (0, 1), result.stderr
    found: list[dict[str, Any]] = json.loads(result.stdout)
    return found


def changed_rows(before: Rows, after: Rows) -> set[tuple[str, str]]:
    """The rows a change touched: by table and id (hex), changed or gone or new."""
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def key(table: str, row: str) -> tuple[str, str]:
    return table, row.encode().hex().upper()


def test_a_lone_surrogate_is_read_as_opencode_reads_it(database: Path, tmp_path: Path) -> None:
    """A row holding a lone surrogate escape is JSON to opencode (`JSON.parse` keeps it;
    opencode loads such a row: "lone-surrogate-output" in `tests/opencode_damages.py`):
    sessionfix does not say opencode fails the session on it, finds the stale read in
    it, and its mark leaves every other byte of the row as it was, the escape too."""
    path = damaged(database, folder(tmp_path, "a"), LONE_SURROGATE)
    original = data_of(path, "part", STALE_READ)
    context = run("context", "--output-format", "json", "--session", STALE, path)
    assert context.exit_code == 0, context.stderr
    assert json.loads(context.stdout)[0]["refused"] is None
    assert [(d["code"], d["record"]["record_key"]) for d in findings(path)] == [
        ("SF301", STALE_READ)
    ]
    before = rows(path)
    result = run("repair", "--in-place", "--no-progress", path)
    assert result.exit_code == 0, result.stderr
    assert changed_rows(before, rows(path)) == {key("part", STALE_READ)}
    repaired = data_of(path, "part", STALE_READ)
    assert MARK in repaired
    assert repaired.replace(MARK, b"") == original
    assert not [d for d in findings(path) if d["fix"]]


# ---- tool parts opencode sends no call for ----------------------------------------------------

TOOL: Final = "ses_19b7a3000000ToolCallResult"


@pytest.mark.parametrize("status", ["weird", 5, None])
def test_a_tool_part_of_no_known_status_is_no_call(
    database: Path, tmp_path: Path, status: object
) -> None:
    """A tool part whose status is none of opencode's is no call to opencode: it sends
    neither the call nor a result for it ("unknown-tool-status" in
    `tests/opencode_damages.py`). It is not a call left without its result, and no
    repair makes it the interrupted call opencode would then send."""
    path = damaged(
        database,
        folder(tmp_path, "a"),
        (
            "UPDATE part SET data = json_set(data, '$.state.status', json(?)) WHERE id = ?",
            [json.dumps(status), READ_PART],
        ),
    )
    assert findings(path, "--session", TOOL) == []
    before = rows(path)
    result = run("repair", "--in-place", "--no-progress", "--session", TOOL, path)
    assert result.exit_code == 0, result.stderr
    assert rows(path) == before


# ---- message times that are no integer --------------------------------------------------------

STALE_READS: Final = "msg_19b7a3c00002StaleReadsxxxx"
STALE_WRITE: Final = "msg_19b7a3c00003StaleWritexxxx"


def test_a_fractional_time_orders_as_opencode_orders_it(database: Path, tmp_path: Path) -> None:
    """A `time_created` with a fraction (a row written by a script with float
    milliseconds; SQLite keeps it a REAL) orders the message among the others by its
    value, as opencode's `ORDER BY time_created` does ("fractional-time" in
    `tests/opencode_damages.py`): not as time 0, before the prompt it answers, and no
    repair stamps it anew."""
    path = damaged(
        database,
        folder(tmp_path, "a"),
        ("UPDATE message SET time_created = 1767229402999.5 WHERE id = ?", [STALE_WRITE]),
        ("UPDATE message SET time_created = 1767229402999.25 WHERE id = ?", [STALE_READS]),
    )
    assert [(d["code"], d["record"]["record_key"]) for d in findings(path, "--session", STALE)] == [
        ("SF301", STALE_READ)
    ]
    before = rows(path)
    result = run("repair", "--in-place", "--no-progress", "--session", STALE, path)
    assert result.exit_code == 0, result.stderr
    assert changed_rows(before, rows(path)) == {key("part", STALE_READ)}
    assert not [d for d in findings(path) if d["fix"]]


@pytest.mark.parametrize(
    ("value", "said"), [("'abc'", "text"), ("X'00'", "a blob")], ids=["text", "blob"]
)
def test_a_time_that_is_no_number_is_one_clear_error(
    database: Path, tmp_path: Path, value: str, said: str
) -> None:
    """A `time_created` that is no number sorts after every number in SQLite: opencode
    loads the message after every other one, even those it writes later (a new prompt
    then gets no answer). sessionfix cannot place it by time: the session is refused
    with one line naming the message; the other sessions are checked, nothing is
    written."""
    path = damaged(
        database,
        folder(tmp_path, "a"),
        (f"UPDATE message SET time_created = {value} WHERE id = ?", [STALE_READS]),
    )
    before = files(path.parent)
    for command in (
        ("check", "--no-progress", path),
        ("context", path),
        ("repair", "--diff", "--no-progress", path),
        ("repair", "--in-place", "--no-progress", path),
    ):
        error = refused(run(*command), f"message {STALE_READS}")
        assert f"time_created is {said}" in error, error
        assert STALE in error
    assert files(path.parent) == before
    context = run("context", "--output-format", "json", "--session", PLAIN, path)
    assert context.exit_code == 0, context.stderr


# ---- fixes that need a time the rows do not hold ----------------------------------------------

STALE_WRITE_PART: Final = "prt_19b7a3c0003W1xxxxxxxxxxxxx"
TOOL_CALL: Final = "msg_19b7a3000002ToolCallMsgxxx"
TOOL_CALL_CREATED: Final = 1767229202000


@pytest.mark.parametrize("removed", ["$.state.time.end", "$.state.time"])
def test_a_write_without_its_end_leaves_the_stale_read_unmarked(
    database: Path, tmp_path: Path, removed: str
) -> None:
    """A stale read's mark is dated by the end of the write that supersedes it; a write
    that records no end (opencode loads it all the same) leaves no date to mark it by:
    the stale read is reported without a fix, and the session and the others are
    checked and repaired as ever (it was one error without a file name, and nothing of
    the session was checked)."""
    path = damaged(
        database,
        folder(tmp_path, "a"),
        ("UPDATE part SET data = json_remove(data, ?) WHERE id = ?", [removed, STALE_WRITE_PART]),
    )
    found = [(d["code"], d["record"]["record_key"], d["fix"]) for d in findings(path)]
    assert found == [("SF301", STALE_READ, None)]
    before = rows(path)
    for command in (("repair", "--diff", path), ("repair", "--in-place", path)):
        result = run(*command, "--no-progress")
        assert result.exit_code == 0, result.stderr
    assert rows(path) == before


def test_an_interrupted_call_is_dated_by_its_message_row(database: Path, tmp_path: Path) -> None:
    """A call left running whose state and message info record no time (a row written
    by another tool): the interrupted call's record is dated by the message's
    `time_created`, the time opencode orders it by (it was one error without a file
    name, and nothing of the session was checked)."""
    path = damaged(
        database,
        folder(tmp_path, "a"),
        (
            "UPDATE part SET data = json_set(data, '$.state', json(?)) WHERE id = ?",
            ['{"status":"running","input":{"filePath":"/w/a"}}', READ_PART],
        ),
        ("UPDATE message SET data = json_remove(data, '$.time') WHERE id = ?", [TOOL_CALL]),
    )
    found = [(d["code"], d["record"]["record_key"]) for d in findings(path, "--session", TOOL)]
    assert found == [("SF402", READ_PART)]
    before = rows(path)
    result = run("repair", "--in-place", "--no-progress", "--session", TOOL, path)
    assert result.exit_code == 0, result.stderr
    assert changed_rows(before, rows(path)) == {key("part", READ_PART)}
    state = json.loads(data_of(path, "part", READ_PART))["state"]
    assert state["status"] == "error"
    assert state["time"] == {"start": TOOL_CALL_CREATED, "end": TOOL_CALL_CREATED}
    assert not [d for d in findings(path, "--session", TOOL) if d["fix"]]


# ---- session text in annotations --------------------------------------------------------------

CONTROL_CHARACTERS: Final = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e]")
"""What a terminal or a CI log acts on rather than shows (a newline ends each line)."""


def test_annotations_escape_the_session_text_they_name(database: Path, tmp_path: Path) -> None:
    """A store's findings name the session and the row by their ids, text of the
    database: GitHub annotations carry them as every human format does, with control
    characters, terminal escapes and bidi overrides escaped (a CI log renders colours
    and moves the cursor), one annotation per line."""
    sneaky = "ses_\x1b[31mred\x07\x00\u202eeno\rx"
    path = damaged(
        database,
        folder(tmp_path, "a"),
        ("UPDATE message SET session_id = ? WHERE session_id = ?", [sneaky, STALE]),
        ("UPDATE part SET session_id = ? WHERE session_id = ?", [sneaky, STALE]),
        ("UPDATE session SET id = ? WHERE id = ?", [sneaky, STALE]),
    )
    for output_format in ("github", "full", "concise"):
        result = run("check", "--no-progress", "--output-format", output_format, path)
        assert result.exit_code == 0, result.stderr
        assert "\\u001b[31mred\\u0007\\u0000\\u202eeno" in result.stdout, output_format
        assert not CONTROL_CHARACTERS.search(result.stdout), (output_format, result.stdout)
    github = run("check", "--no-progress", "--output-format", "github", path).stdout
    assert [line[:9] for line in github.splitlines()] == ["::notice "]


# ---- opencode 1.1's JSON files beside the database --------------------------------------------


def test_legacy_sessions_whose_file_is_damaged_are_listed(database: Path, tmp_path: Path) -> None:
    """Sessions kept only in opencode 1.1's `storage/` tree are reported (SF113), those
    whose own file a crash left empty or filled with NUL bytes (#7607, #10904) too,
    with what is wrong with it: opencode 1.2 and later show none of them, and 1.1
    itself could not list them. A damaged file of a session the database holds is no
    lost session. Nothing of the tree or the database is written."""
    path = copy_database(database, folder(tmp_path, "data"))
    sessions = path.parent / "storage" / "session" / "global"
    sessions.mkdir(parents=True)
    info = {"id": "ses_intact", "title": "kept", "directory": "/w", "time": {"created": 1}}
    (sessions / "ses_intact.json").write_text(json.dumps(info, indent=2))
    (sessions / "ses_empty.json").write_bytes(b"")
    (sessions / "ses_nul.json").write_bytes(b"\0" * 64)
    (sessions / "ses_list.json").write_bytes(b"[1, 2]")
    (sessions / f"{PLAIN}.json").write_bytes(b"\0" * 64)
    before = files(path.parent)
    unread = {d["record"]["session"]: d["message"] for d in findings(path) if d["code"] == "SF113"}
    assert sorted(unread) == ["ses_empty", "ses_intact", "ses_list", "ses_nul"]
    assert "global/ses_list.json: not a JSON object" in unread["ses_list"]
    assert "global/ses_empty.json: empty" in unread["ses_empty"]
    assert "global/ses_nul.json: filled with NUL bytes" in unread["ses_nul"]
    assert "ses_intact.json" not in unread["ses_intact"]
    result = run("repair", "--in-place", "--no-progress", "--session", "ses_nul", path)
    assert result.exit_code == 0, result.stderr
    assert files(path.parent) == before


@pytest.mark.parametrize("state", ['"completed"', "[1]", "5"])
def test_a_tool_state_that_is_no_object_is_no_call(
    database: Path, tmp_path: Path, state: str
) -> None:
    """A tool part whose `state` is a string, an array or a number: opencode reads its
    `status` as undefined and sends nothing of the part ("tool-state-not-an-object" in
    `tests/opencode_damages.py`), as for a status it does not know; it does not fail the
    session, as it does for a part without a state. sessionfix says so, finds no call
    left without its result, and repairs nothing."""
    path = damaged(
        database,
        folder(tmp_path, "a"),
        (
            "UPDATE part SET data = json_set(data, '$.state', json(?)) WHERE id = ?",
            [state, READ_PART],
        ),
    )
    context = run("context", "--output-format", "json", "--session", TOOL, path)
    assert context.exit_code == 0, context.stderr
    assert json.loads(context.stdout)[0]["refused"] is None
    assert findings(path, "--session", TOOL) == []
    before = rows(path)
    result = run("repair", "--in-place", "--no-progress", "--session", TOOL, path)
    assert result.exit_code == 0, result.stderr
    assert rows(path) == before


PLAIN_REPLY_TEXT: Final = "prt_19b7a2c00003PlainReplyText"


@pytest.mark.parametrize("data", ["null", "[1, 2, 3]", '"hello"', "5"])
def test_a_part_whose_data_is_no_object_is_a_part_of_nothing(
    database: Path, tmp_path: Path, data: str
) -> None:
    """A part whose data is JSON but no object: opencode spreads it into the part
    (`{...data, id, sessionID, messageID}`), a part of no type it sends nothing of
    ("part-data-not-an-object" in `tests/opencode_damages.py`); it does not fail the
    session, as data that is no JSON does."""
    path = damaged(
        database,
        folder(tmp_path, "a"),
        ("UPDATE part SET data = ? WHERE id = ?", [data, PLAIN_REPLY_TEXT]),
    )
    context = run("context", "--output-format", "json", "--session", PLAIN, path)
    assert context.exit_code == 0, context.stderr
    measured = json.loads(context.stdout)[0]
    assert (measured["refused"], measured["by_role"]) == (None, {"user": 1})
    assert findings(path, "--session", PLAIN) == []
