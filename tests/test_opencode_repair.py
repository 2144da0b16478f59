"""Repairs of opencode sessions, proven with opencode itself: each damaged session is
repaired in place, and what opencode 1.18.33 then sends the model (`load_with_opencode`,
one server for the run) is exactly what it sends for the intended session; every other
session keeps its rows byte for byte, and `restore` brings the damaged rows back.

The intended session is the undamaged one, or what opencode itself makes of the damage
(its own prune mark on a stale read, its own interrupted result for a call left running):
a repair never changes what opencode would not.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

import apsw
import pytest
from typer.testing import CliRunner

from sessionfix.cli import app

from .opencode_damages import (
    COMPACTION,
    COMPACTION_PART,
    DAMAGES,
    DESCRIPTIONS,
    PLAIN,
    STEPS,
    TOOL,
    set_part,
)
from .opencode_loader import (
    OpencodeLoad,
    load_with_opencode,
    require_opencode_at_collection,
    session_rows,
)
from .opencode_sessions import built_database, damaged

require_opencode_at_collection()

ENV: Final = {"NO_COLOR": "1", "COLUMNS": "200"}
STALE: Final = "ses_19b7a3c00000StaleReadWrite"
STALE_READ: Final = "prt_19b7a3c0002R1xxxxxxxxxxxxx"
WRITE_END: Final = 1767229403200
"""The superseding write's `state.time.end`: what the stale read's mark is set to."""
SESSIONS: Final = (*DESCRIPTIONS, "stale")
ALL: Final = (PLAIN, TOOL, COMPACTION, STEPS, STALE)
Statement = tuple[str, Sequence[Any]]
COPY_PROMPT: Final[tuple[Statement, ...]] = (
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
    (
        "UPDATE message SET data = json_set(data, '$.parentID', "
        "'msg_19b7a2c00001PlainUserCopy1') WHERE id = ?",
        ["msg_19b7a2c00002PlainReplyMsg1"],
    ),
)
"""A prompt stored again under new ids 10 ms later, its reply naming the copy (#27928)."""


class Case(NamedTuple):
    session: str
    damage: tuple[Statement, ...]
    intended: tuple[Statement, ...]
    """Applied to the undamaged database: the session as the repair must leave it."""
    fixed: str
    """The code whose fix makes it so."""


CASES: Final = {
    "stale-read": Case(
        STALE,
        (),
        (set_part(STALE_READ, "$.state.time.compacted", WRITE_END),),
        "SF301",
    ),
    "pending-call": Case(
        TOOL, tuple(DAMAGES["pending-read"][1]), tuple(DAMAGES["pending-read"][1]), "SF402"
    ),
    "running-call": Case(
        TOOL, tuple(DAMAGES["running-read"][1]), tuple(DAMAGES["running-read"][1]), "SF402"
    ),
    "summary-parent-missing": Case(
        COMPACTION, tuple(DAMAGES["summary-parent-missing"][1]), (), "SF501"
    ),
    "tail-missing": Case(
        COMPACTION,
        tuple(DAMAGES["tail-missing"][1]),
        (set_part(COMPACTION_PART, "$.tail_start_id", "msg_19b7a3400001CompUser1xxxxx"),),
        "SF501",
    ),
    "reply-before-prompt": Case(PLAIN, tuple(DAMAGES["reply-before-prompt"][1]), (), "SF114"),
    "empty-aborted-reply": Case(
        STEPS,
        (("DELETE FROM part WHERE message_id = ?", ["msg_19b7a3800004StepsAbortedxx"]),),
        (("DELETE FROM part WHERE message_id = ?", ["msg_19b7a3800004StepsAbortedxx"]),),
        "SF112",
    ),
    "prompt-stored-twice": Case(PLAIN, COPY_PROMPT, (), "SF201"),
}


def run(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV)


class Repaired(NamedTuple):
    damaged: Path
    """A copy of the damaged database, never repaired."""
    repaired: Path
    intended: Path
    found: list[dict[str, Any]]
    """What a check of the damaged database finds (JSON)."""
    left: list[dict[str, Any]]
    """What a check of the repaired database finds."""


def rows(path: Path) -> list[tuple[Any, ...]]:
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [
            *(("message", *row) for row in db.execute("SELECT * FROM message ORDER BY id")),
            *(("part", *row) for row in db.execute("SELECT * FROM part ORDER BY id")),
            *(("session", *row) for row in db.execute("SELECT * FROM session ORDER BY id")),
            *(("event", *row) for row in db.execute("SELECT * FROM event ORDER BY id")),
        ]
    finally:
        db.close()


@pytest.fixture(scope="module")
def repaired(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Repaired]:
    """Every case, damaged and its session repaired in place with `sessionfix repair`
    (the other sessions are left as they are: the stale read stays in the others)."""
    base = built_database(SESSIONS)
    done = {}
    for name, case in CASES.items():
        folder = tmp_path_factory.mktemp(name)
        source = damaged(base, folder / "damaged.db", *case.damage)
        target = folder / "work" / "opencode.db"
        target.parent.mkdir()
        damaged(source, target)
        intended = damaged(base, folder / "intended.db", *case.intended)
        found = run("check", "--output-format", "json", target)
        result = run("repair", "--in-place", "--session", case.session, target)
        assert result.exit_code == 0, result.output
        left = run("check", "--output-format", "json", target)
        done[name] = Repaired(
            source, target, intended, json.loads(found.stdout), json.loads(left.stdout)
        )
    return done


@pytest.fixture(scope="module")
def loads(repaired: dict[str, Repaired]) -> dict[tuple[Path, str], OpencodeLoad]:
    """What opencode sends for every database of every case, in one batch."""
    asked = [
        (path, session)
        for case in repaired.values()
        for path in (case.damaged, case.repaired, case.intended)
        for session in ALL
    ]
    return load_with_opencode(asked)


@pytest.mark.parametrize("name", CASES)
def test_opencode_sends_exactly_the_intended_messages(
    name: str, repaired: dict[str, Repaired], loads: dict[tuple[Path, str], OpencodeLoad]
) -> None:
    case, done = CASES[name], repaired[name]
    after = loads[done.repaired, case.session]
    intended = loads[done.intended, case.session]
    assert after.error is None, after.error
    assert after.messages == intended.messages
    for session in ALL:
        if session != case.session:
            assert loads[done.repaired, session] == loads[done.damaged, session]


@pytest.mark.parametrize("name", CASES)
def test_the_fix_is_made_and_nothing_fixable_is_left(
    name: str, repaired: dict[str, Repaired]
) -> None:
    case, done = CASES[name], repaired[name]
    fixable = [
        d
        for d in done.found
        if d["code"] == case.fixed and d["record"]["session"] == case.session and d["fix"]
    ]
    assert fixable, done.found
    assert not [d for d in done.left if d["record"]["session"] == case.session and d["fix"]], (
        done.left
    )


@pytest.mark.parametrize("name", CASES)
def test_only_the_repaired_session_changes(name: str, repaired: dict[str, Repaired]) -> None:
    """Every other session's rows stay byte for byte; so do the repaired session's rows a
    fix does not own, their `time_updated` included."""
    case, done = CASES[name], repaired[name]
    for session in ALL:
        if session != case.session:
            assert session_rows(done.repaired, session) == session_rows(done.damaged, session)
    before = session_rows(done.damaged, case.session)
    after = session_rows(done.repaired, case.session)
    assert after["session"] == before["session"]
    for table in ("message", "part"):
        kept = {row["id"]: row for row in after[table]}
        for row in before[table]:
            if row["id"] in kept and kept[row["id"]]["data"] == row["data"]:
                assert kept[row["id"]] == row


@pytest.mark.parametrize("name", CASES)
def test_restore_brings_the_damaged_rows_back(name: str, repaired: dict[str, Repaired]) -> None:
    case, done = CASES[name], repaired[name]
    copy = done.repaired.parent.parent / "restored" / "opencode.db"
    copy.parent.mkdir(exist_ok=True)
    for path in done.repaired.parent.iterdir():
        shutil.copyfile(path, copy.parent / path.name.replace(done.repaired.name, copy.name))
    listed = run("restore", "--list", copy)
    assert case.session in listed.output, listed.output
    result = run("restore", copy, "--session", case.session)
    assert result.exit_code == 0, result.output
    assert rows(copy) == rows(done.damaged)


def files(folder: Path) -> dict[str, bytes]:
    """A folder's files, less what SQLite's WAL mode makes for any reader."""
    return {
        path.name: path.read_bytes()
        for path in folder.iterdir()
        if path.is_file()
        and not path.name.endswith("-shm")
        and not (path.name.endswith("-wal") and path.stat().st_size == 0)
    }


@pytest.mark.parametrize("name", ["stale-read", "prompt-stored-twice"])
def test_o_writes_a_repaired_copy_of_the_database(
    name: str, repaired: dict[str, Repaired], tmp_path: Path
) -> None:
    """`-o` is a new database: the session as an in-place repair leaves it, every other
    row as the source holds it; the source is only read."""
    case, done = CASES[name], repaired[name]
    (tmp_path / "source").mkdir()
    source = damaged(done.damaged, tmp_path / "source" / "opencode.db")
    before = files(source.parent)
    output = tmp_path / "repaired.db"
    result = run("repair", "-o", output, "--session", case.session, source)
    assert result.exit_code == 0, result.output
    assert files(source.parent) == before
    assert rows(output) == rows(done.repaired)
    again = run("repair", "-o", output, "--session", case.session, source)
    assert again.exit_code == 2
    assert again.output.strip().endswith(f"{output}: exists (--force to replace it)")
    assert not [path for path in tmp_path.iterdir() if "sessionfix-tmp" in path.name]


def test_diff_shows_the_changed_rows_and_changes_nothing(
    repaired: dict[str, Repaired], tmp_path: Path
) -> None:
    done = repaired["stale-read"]
    (tmp_path / "source").mkdir()
    source = damaged(done.damaged, tmp_path / "source" / "opencode.db")
    before = files(source.parent)
    result = run("repair", "--diff", source)
    assert result.exit_code == 1, result.output  # a change to show
    removed = [line for line in result.stdout.splitlines() if line.startswith("-{")]
    added = [line for line in result.stdout.splitlines() if line.startswith("+{")]
    assert [json.loads(line[1:])["id"] for line in removed] == [STALE_READ]
    assert [json.loads(line[1:])["id"] for line in added] == [STALE_READ]
    assert json.loads(added[0][1:])["data"]["state"]["time"]["compacted"] == WRITE_END
    assert files(source.parent) == before


def logged(session: str, size: int) -> tuple[Statement, ...]:
    """Event rows of `size` bytes for `session`, as opencode's event log keeps them."""
    return (
        (
            "INSERT INTO event_sequence (aggregate_id, seq) VALUES (?, 0)",
            [session],
        ),
        (
            "INSERT INTO event (id, aggregate_id, seq, type, data) "
            "VALUES ('evt_1', ?, 0, 'message.part.updated.1', zeroblob(?))",
            [session, size],
        ),
    )


def test_a_repair_says_the_event_log_still_holds_the_rows_as_they_were(tmp_path: Path) -> None:
    statements = (*DAMAGES["pending-read"][1], *logged(TOOL, 1 << 10))
    target = damaged(built_database(SESSIONS), tmp_path / "opencode.db", *statements)
    events = [row for row in rows(target) if row[0] == "event"]
    result = run("repair", "--in-place", "--session", TOOL, target)
    assert result.exit_code == 0, result.output
    assert (
        f"{target} (session {TOOL}): the event log still holds the session's rows as they "
        "were before the repair"
    ) in " ".join(result.output.split())
    assert [row for row in rows(target) if row[0] == "event"] == events


def test_a_large_event_log_is_reported_and_left(tmp_path: Path) -> None:
    target = damaged(built_database(SESSIONS), tmp_path / "opencode.db", *logged(TOOL, 65 << 20))
    result = run("check", "--output-format", "json", target)
    (found,) = [d for d in json.loads(result.stdout) if d["code"] == "SF705"]
    assert found["record"]["session"] == TOOL
    assert "65.0 MiB" in found["message"]


def test_what_is_left_after_repairs_of_several_sessions_is_named_by_its_own_rows(
    tmp_path: Path,
) -> None:
    """Each rewritten session's remaining findings name its own rows, whatever session
    was rewritten after it."""
    emptied = {
        PLAIN: "msg_19b7a2c00001PlainUserMsg1x",
        TOOL: "msg_19b7a3000001ToolUserMsgxxx",
    }
    statements = (
        *DAMAGES["reply-before-prompt"][1],
        *DAMAGES["pending-read"][1],
        *(("DELETE FROM part WHERE message_id = ?", [message]) for message in emptied.values()),
    )
    target = damaged(built_database(SESSIONS), tmp_path / "opencode.db", *statements)
    result = run("repair", "--in-place", "--output-format", "json", target)
    assert result.exit_code == 1, result.output
    left = {
        d["record"]["session"]: d["record"]["record_key"]
        for d in json.loads(result.stdout)
        if d["code"] == "SF112"
    }
    assert left == emptied
