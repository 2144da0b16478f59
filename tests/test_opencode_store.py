"""opencode's database as a store of sessions: found by `scan` beside the other agents'
sessions, each session checked as the rows opencode loads, its findings named by the
database, the session and the row's id, and `context` saying what opencode sends.

The databases are written by opencode itself (`tests/opencode_sessions.py`) and damaged
with SQL as the field shapes look (`tests/opencode_damages.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import apsw
import pytest
from typer.testing import CliRunner

from sessionfix import Settings
from sessionfix.cli import app
from sessionfix.engine import check_paths
from sessionfix.stores import open_store, transcript_of

from .conftest import CORPUS
from .opencode_damages import DAMAGES, DESCRIPTIONS, READ_PART, TOOL
from .opencode_loader import require_opencode_at_collection
from .opencode_sessions import built_database, copy_database, damaged

require_opencode_at_collection()

ENV: Final = {"NO_COLOR": "1", "COLUMNS": "200"}
STALE: Final = "ses_19b7a3c00000StaleReadWrite"
STALE_READ: Final = "prt_19b7a3c0002R1xxxxxxxxxxxxx"
TORN: Final = b'{"type":"message","id":"9f8e'
"""A last line cut short: a finding in each agent's session file."""
CODEX_NAME: Final = "rollout-2026-01-01T00-00-00-0199a0b0-0000-7000-8000-000000000001.jsonl"
AGENT_VARIABLES: Final = (
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "PI_CODING_AGENT_DIR",
    "PI_CODING_AGENT_SESSION_DIR",
    "OPENCLAW_STATE_DIR",
    "XDG_DATA_HOME",
    "OPENCODE_DB",
)


def files(folder: Path) -> dict[str, bytes]:
    """A folder's files, less what SQLite's WAL mode makes for any reader (`sqlite3
    -readonly` too): the `-shm` index and an empty `-wal`."""
    return {
        path.name: path.read_bytes()
        for path in folder.iterdir()
        if path.is_file()
        and not path.name.endswith("-shm")
        and not (path.name.endswith("-wal") and path.stat().st_size == 0)
    }


def run(*args: str | Path, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env={**ENV, **(env or {})})


@pytest.fixture(scope="module")
def database() -> Path:
    return built_database([*DESCRIPTIONS, "stale"])


def rows(path: Path) -> list[tuple[Any, ...]]:
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [
            *db.execute("SELECT * FROM message ORDER BY id"),
            *db.execute("SELECT * FROM part ORDER BY id"),
            *db.execute("SELECT * FROM session ORDER BY id"),
        ]
    finally:
        db.close()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    for name in AGENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return folder


def test_scan_without_paths_finds_opencode_databases(
    home: Path, database: Path, tmp_path: Path
) -> None:
    """The default database and a release channel's, in opencode's data folder; rows
    are only read, never written."""
    data = home / ".local" / "share" / "opencode"
    data.mkdir(parents=True)
    damaged(database, data / "opencode.db", *DAMAGES["pending-read"][1])
    copy_database(database, data / "opencode-dev.db")
    (data / "storage").mkdir()
    before = files(data)
    result = run("scan", "--output-format", "json", "--no-progress")
    found = json.loads(result.stdout)
    stale = [d for d in found if d["code"] == "SF301"]
    assert {Path(d["filename"]).name for d in stale} == {"opencode.db", "opencode-dev.db"}
    pending = [d for d in found if d["code"] == "SF402"]
    assert [(Path(d["filename"]).name, d["record"]) for d in pending] == [
        (
            "opencode.db",
            {
                "session": TOOL,
                "record_key": READ_PART,
                "place": f"{data / 'opencode.db'}:{TOOL}:{READ_PART}",
            },
        )
    ]
    assert {d["format"] for d in found} == {"opencode"}
    assert "~/.local/share/opencode" in result.stderr
    assert files(data) == before


def test_scan_without_paths_finds_opencode_beside_the_other_agents(
    home: Path, database: Path
) -> None:
    """One scan of a home where each of the five agents kept a session with a problem
    reads them all."""
    sessions = {
        home / ".claude" / "projects" / "-tmp-x" / "0d4c3a43-1111-4222-8333-444455556666.jsonl": (
            CORPUS
            / "claude"
            / "misc"
            / "kvsankar-agent-history__real_sessions_claude_session-01.jsonl"
        ),
        home / ".codex" / "sessions" / "2026" / "01" / "01" / CODEX_NAME: (
            CORPUS / "codex" / "session-doctor__basic-session.jsonl"
        ),
        home / ".pi" / "agent" / "sessions" / "--tmp--" / "2026-07-24T06-21-03-508Z_pi.jsonl": (
            CORPUS / "openclaw" / "letta-trajectory__pi-tool-calls.v3.jsonl"
        ),
        home / ".openclaw" / "agents" / "main" / "sessions" / "openclaw-session-0001.jsonl": (
            CORPUS / "openclaw" / "letta-trajectory__openclaw-tool-calls.jsonl"
        ),
    }
    for target, source in sessions.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        data = source.read_bytes()
        target.write_bytes(data + (b"" if data.endswith(b"\n") else b"\n") + TORN)
    data = home / ".local" / "share" / "opencode"
    data.mkdir(parents=True)
    copy_database(database, data / "opencode.db")
    result = run("scan", "--output-format", "json", "--no-progress")
    found = json.loads(result.stdout)
    assert {d["format"] for d in found} == {"claude", "codex", "pi", "openclaw", "opencode"}
    assert result.stderr.strip().splitlines()[-1].startswith("Scanned 5 files ")


def test_opencode_db_names_a_database_outside_the_data_folder(
    home: Path, database: Path, tmp_path: Path
) -> None:
    elsewhere = copy_database(database, tmp_path / "elsewhere.db")
    result = run(
        "scan", "--output-format", "json", "--no-progress", env={"OPENCODE_DB": str(elsewhere)}
    )
    assert {Path(d["filename"]).name for d in json.loads(result.stdout)} == {"elsewhere.db"}


def test_findings_are_named_by_database_session_and_row(database: Path, tmp_path: Path) -> None:
    """Text and JSON name a finding's row by its id, and so does a message naming
    another row; no line number of sessionfix's own reading shows."""
    target = copy_database(database, tmp_path / "opencode.db")
    text = run("check", "--output-format", "concise", target)
    assert text.exit_code == 0, text.stdout
    (line,) = [found for found in text.stdout.splitlines() if "SF301" in found]
    assert line.startswith(f"{target}:{STALE}:{STALE_READ}: SF301 [*] ")
    assert "(write call_write_notes_1 at prt_19b7a3c0003W1xxxxxxxxxxxxx)" in line
    assert "line" not in line


def test_context_says_what_opencode_sends(database: Path, tmp_path: Path) -> None:
    target = copy_database(database, tmp_path / "opencode.db")
    result = run("context", "--output-format", "json", target)
    assert result.exit_code == 0, result.stderr
    reports = {
        report["filename"].rpartition(":")[2]: report for report in json.loads(result.stdout)
    }
    assert reports[STALE]["format"] == "opencode"
    assert reports[STALE]["messages"] == 7
    assert reports[STALE]["stale_reads"]["count"] == 1
    assert reports[TOOL]["messages"] == 4


def test_a_damaged_session_reads_as_rows_whatever_their_text(
    database: Path, tmp_path: Path
) -> None:
    """A row opencode cannot read stays one record (its text kept), found by no line
    rule: sessionfix's reading of the rows is never a damaged file."""
    for name in ("part-not-json", "message-not-json", "tool-part-without-state"):
        session, statements = DAMAGES[name]
        target = damaged(database, tmp_path / f"{name}.db", *statements)
        settings = Settings(sessions=(session,))
        (report,) = list(check_paths([target], settings))
        assert report.error is None
        assert not [d for d in report.diagnostics if d.code.startswith("SF00")], name


def test_a_transcript_holds_every_row_once_in_load_order(database: Path) -> None:
    with open_store(database) as store:
        sessions = {session.id: session for session in store.sessions()}
        with transcript_of(store, sessions[STALE]) as transcript:
            lines = transcript.path.read_bytes().splitlines()
            keys = list(transcript.rows)
    db = apsw.Connection(str(database), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        expected = [STALE]
        for (message,) in db.execute(
            "SELECT id FROM message WHERE session_id = ? ORDER BY time_created, id", (STALE,)
        ):
            expected.append(message)
            expected.extend(
                part
                for (part,) in db.execute(
                    "SELECT id FROM part WHERE message_id = ? ORDER BY id", (message,)
                )
            )
    finally:
        db.close()
    assert keys == expected
    assert [json.loads(line)["id"] for line in lines] == expected


def test_the_scan_leaves_every_byte(database: Path, tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    target = copy_database(database, folder / "opencode.db")
    before = rows(target), files(folder)
    assert run("scan", "--no-progress", folder).exit_code == 0
    assert run("context", target).exit_code == 0
    assert (rows(target), files(folder)) == before
